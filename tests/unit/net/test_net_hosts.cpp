// The net transport between ranks in separate processes on simulated hosts (COLL_HOST_ID),
// over the UCX plugin: with COLL_TRANSPORT=auto ranks of one host meet over shm and ranks
// of different hosts over net; forced net carries every pair. Each rank checks its
// results against a reference and reports a hash, so all ranks must hold the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/handles.hpp"
#include "tests/unit/tuning/proc_job.hpp"

namespace {

using testing_coll::Env;
using testing_coll::runProcs;

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// The transports rank r sees, as "shm,net,..." per peer in rank order.
std::string transportsOf(collComm_t c) {
  coll::Comm& comm = *coll::liveComm(c).impl;
  std::string s;
  for (int p = 0; p < comm.nranks(); ++p) {
    if (!s.empty()) s += ",";
    s += p == comm.rank() ? "self" : comm.link(p).transportName();
  }
  return s;
}

// A few collectives of several sizes, checked element by element.
int exercise(int r, collComm_t c, std::vector<uint64_t>& report) {
  int nr = 0;
  collCommCount(c, &nr);
  int bad = 0;
  for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((r + 1) * (i % 7));
    if (collAllReduce(v.data(), v.data(), count, collFloat32, collSum, c, nullptr) != collSuccess) return 50;
    for (size_t i = 0; i < count; ++i)
      if (v[i] != static_cast<float>(nr * (nr + 1) / 2 * (i % 7))) ++bad;
    report.push_back(fnv(v.data(), count * sizeof(float)));
    std::vector<int32_t> mine(count, r), all(count * nr);
    if (collAllGather(mine.data(), all.data(), count, collInt32, c, nullptr) != collSuccess) return 51;
    for (int p = 0; p < nr; ++p)
      if (all[p * count] != p || all[p * count + count - 1] != p) ++bad;
    std::vector<int64_t> b(count, r == 1 ? 42 : -1);
    if (collBroadcast(b.data(), b.data(), count, collInt64, 1, c, nullptr) != collSuccess) return 52;
    for (int64_t x : b)
      if (x != 42) ++bad;
  }
  if (bad) fprintf(stderr, "rank %d: %d wrong values\n", r, bad);
  return bad ? 1 : 0;
}

TEST(NetHosts, AutoUsesShmWithinAndNetAcrossHosts) {
  auto res = runProcs({"hostA", "hostA", "hostB", "hostB"},
                      Env{{"COLL_NET_PLUGIN", NET_UCX_SO}, {"COLL_TRANSPORT", "auto"}, {"COLL_TIMEOUT", "60"}},
                      [](int r, collComm_t c, std::vector<uint64_t>& report) {
                        const std::string want[4] = {"self,shm,net,net", "shm,self,net,net", "net,net,self,shm",
                                                     "net,net,shm,self"};
                        std::string got = transportsOf(c);
                        if (got != want[r]) {
                          fprintf(stderr, "rank %d: transports %s, expected %s\n", r, got.c_str(), want[r].c_str());
                          return 20;
                        }
                        return exercise(r, c, report);
                      });
  testing_coll::expectPassedWithSameBits(res, 4);
}

TEST(NetHosts, ForcedNetCarriesEveryPair) {
  auto res = runProcs({"hostA", "hostA", "hostB"},
                      Env{{"COLL_NET_PLUGIN", NET_UCX_SO}, {"COLL_TRANSPORT", "net"}, {"COLL_TIMEOUT", "60"}},
                      [](int r, collComm_t c, std::vector<uint64_t>& report) {
                        std::string got = transportsOf(c);
                        if (got.find("shm") != std::string::npos || got.find("tcp") != std::string::npos) {
                          fprintf(stderr, "rank %d: transports %s\n", r, got.c_str());
                          return 20;
                        }
                        return exercise(r, c, report);
                      });
  testing_coll::expectPassedWithSameBits(res, 3);
}

}  // namespace
