// Random sequences of calls, the same on every rank (one seed), each result checked
// against the reference: every collective and send/recv, blocking, nonblocking (waited
// in a random order, or polled with collTest) and inside groups, in place and not, with
// counts from 0 to 300,000 elements, on the communicator and on ones split from it, and
// bad arguments mixed in. A bad argument must be refused on every rank alike and leave
// the communicator working for the calls after it. The matrix test (test_matrix.cpp)
// covers each call alone; this one covers what calls do to the calls around them.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "reference.hpp"

using namespace testing_coll;

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
};

enum class K { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter, SendRecv, Barrier, Count };
const char* const kNames[] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                              "alltoall",  "gather",    "scatter", "sendrecv",  "barrier"};

struct Call {
  K k;
  size_t count;
  collDataType_t dt;
  collRedOp_t op;
  int root;
  bool inPlace;
  uint32_t seed;
};

Call draw(Rng& g, int n, uint32_t seed) {
  static const size_t kCounts[] = {0, 1, 2, 3, 7, 31, 64, 100, 1000, 4097, 33000, 70001, 300000};
  Call c;
  c.k = static_cast<K>(g.below(static_cast<size_t>(K::Count)));
  if (n == 1 && c.k == K::SendRecv) c.k = K::AllReduce;  // nonblocking send/recv with self never completes
  // Mostly small: the large counts take the pipelined, chunked and single-copy paths.
  c.count = kCounts[g.chance(80) ? g.below(9) : g.below(std::size(kCounts))];
  c.dt = kTypes[g.below(std::size(kTypes))];
  c.op = kOps[g.below(std::size(kOps))];
  c.root = static_cast<int>(g.below(static_cast<size_t>(n)));
  c.inPlace = c.k != K::AllToAll && c.k != K::SendRecv && g.chance(35);
  c.seed = seed;
  return c;
}

bool reduces(K k) { return k == K::AllReduce || k == K::Reduce || k == K::ReduceScatter; }

// One rank's buffers for one call. in/out as the rank passes them (in place: pointers
// into one buffer).
struct Bufs {
  std::vector<char> a, b;
  const void* send = nullptr;
  void* recv = nullptr;
};

// Element counts of the input and output buffers.
void sizes(const Call& c, int n, size_t* in, size_t* out) {
  const size_t cn = c.count * n;
  switch (c.k) {
    case K::AllGather: case K::Gather: *in = c.count; *out = cn; break;
    case K::ReduceScatter: case K::Scatter: *in = cn; *out = c.count; break;
    case K::AllToAll: *in = cn; *out = cn; break;
    default: *in = c.count; *out = c.count; break;
  }
}

void prepare(const Call& c, int rank, int n, Bufs& b) {
  const size_t es = collTypeSize(c.dt);
  size_t in, out;
  sizes(c, n, &in, &out);
  const collRedOp_t fillOp = reduces(c.k) ? c.op : collSum;
  b.a.assign(in * es + 1, 0);
  fillInput(b.a, 0, in, c.dt, fillOp, c.seed, rank);
  b.b.assign(out * es + 1, static_cast<char>(0x5a));
  b.send = b.a.data();
  b.recv = b.b.data();
  if (!c.inPlace) return;
  const size_t off = static_cast<size_t>(rank) * c.count * es;
  switch (c.k) {
    case K::AllReduce: case K::Broadcast: case K::Reduce:
      memcpy(b.b.data(), b.a.data(), in * es);
      b.send = b.recv;
      break;
    case K::AllGather:  // own block already in place
      memcpy(b.b.data() + off, b.a.data(), in * es);
      b.send = b.b.data() + off;
      break;
    case K::Gather:  // in place on the root only
      if (rank == c.root) {
        memcpy(b.b.data() + off, b.a.data(), in * es);
        b.send = b.b.data() + off;
      }
      break;
    case K::ReduceScatter:
      b.recv = b.a.data() + off;
      break;
    case K::Scatter:
      if (rank == c.root) b.recv = b.a.data() + off;
      break;
    default: break;
  }
}

// Issues the call: blocking (group == nullptr or inside a group) or nonblocking (req).
collResult_t issue(const Call& c, collComm_t comm, int rank, int n, Bufs& b, collRequest_t* req) {
  const void* s = b.send;
  void* r = b.recv;
  switch (c.k) {
    case K::AllReduce:
      return req ? collIallReduce(s, r, c.count, c.dt, c.op, comm, req) : collAllReduce(s, r, c.count, c.dt, c.op, comm, nullptr);
    case K::Broadcast:
      return req ? collIbroadcast(s, r, c.count, c.dt, c.root, comm, req)
                 : collBroadcast(s, r, c.count, c.dt, c.root, comm, nullptr);
    case K::Reduce:
      return req ? collIreduce(s, r, c.count, c.dt, c.op, c.root, comm, req)
                 : collReduce(s, r, c.count, c.dt, c.op, c.root, comm, nullptr);
    case K::AllGather:
      return req ? collIallGather(s, r, c.count, c.dt, comm, req) : collAllGather(s, r, c.count, c.dt, comm, nullptr);
    case K::ReduceScatter:
      return req ? collIreduceScatter(s, r, c.count, c.dt, c.op, comm, req)
                 : collReduceScatter(s, r, c.count, c.dt, c.op, comm, nullptr);
    case K::AllToAll:
      return req ? collIallToAll(s, r, c.count, c.dt, comm, req) : collAllToAll(s, r, c.count, c.dt, comm, nullptr);
    case K::Gather:
      return req ? collIgather(s, r, c.count, c.dt, c.root, comm, req)
                 : collGather(s, r, c.count, c.dt, c.root, comm, nullptr);
    case K::Scatter:
      return req ? collIscatter(s, r, c.count, c.dt, c.root, comm, req)
                 : collScatter(s, r, c.count, c.dt, c.root, comm, nullptr);
    case K::Barrier:
      return req ? collIbarrier(comm, req) : collBarrier(comm);
    case K::SendRecv: {
      // A ring: to the next rank, from the previous one. Blocking forms need a group
      // (the caller opens one); nonblocking ones are two requests (the caller's req gets
      // the receive, the send's request is waited here after it).
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      if (!req) {
        collResult_t rc = collSend(s, c.count, c.dt, next, comm, nullptr);
        return rc != collSuccess ? rc : collRecv(r, c.count, c.dt, prev, comm, nullptr);
      }
      collRequest_t sreq = nullptr;
      collResult_t rc = collIsend(s, c.count, c.dt, next, comm, &sreq);
      if (rc != collSuccess) return rc;
      rc = collIrecv(r, c.count, c.dt, prev, comm, req);
      collResult_t w = collWait(&sreq);
      return rc != collSuccess ? rc : w;
    }
    default: return collInternalError;
  }
}

// Checks rank `rank`'s output of call c; "" when right.
std::string check(const Call& c, int rank, int n, const Bufs& b) {
  const size_t es = collTypeSize(c.dt);
  const char* got = static_cast<const char*>(b.recv);
  auto theirs = [&](int src, size_t elems) {
    std::vector<char> v(elems * es + 1);
    fillInput(v, 0, elems, c.dt, collSum, c.seed, src);
    return v;
  };
  auto differs = [&](const char* at, const std::vector<char>& want, size_t from, size_t elems) {
    return memcmp(at, want.data() + from * es, elems * es) != 0;
  };
  auto reducedFrom = [&](size_t first, size_t elems) -> std::string {
    std::vector<char> want((first + elems) * es + 1);
    for (size_t i = 0; i < elems; ++i) {
      expectedValue(want.data(), first + i, c.dt, c.op, c.seed, n);
      if (!sameValue(got - first * es, want.data(), first + i, c.dt, c.op))
        return "element " + std::to_string(first + i) + " is " + std::to_string(loadValue(got - first * es, first + i, c.dt)) +
               ", expected " + std::to_string(loadValue(want.data(), first + i, c.dt));
    }
    return "";
  };
  switch (c.k) {
    case K::AllReduce: return reducedFrom(0, c.count);
    case K::Reduce: return rank == c.root ? reducedFrom(0, c.count) : "";
    case K::ReduceScatter: return reducedFrom(static_cast<size_t>(rank) * c.count, c.count);
    case K::Broadcast: return differs(got, theirs(c.root, c.count), 0, c.count) ? "not the root's data" : "";
    case K::AllGather:
    case K::Gather:
      if (c.k == K::Gather && rank != c.root) return "";
      for (int p = 0; p < n; ++p)
        if (differs(got + p * c.count * es, theirs(p, c.count), 0, c.count)) return "block of rank " + std::to_string(p);
      return "";
    case K::Scatter: return differs(got, theirs(c.root, c.count * n), rank * c.count, c.count) ? "not the root's block" : "";
    case K::AllToAll:
      for (int p = 0; p < n; ++p)
        if (differs(got + p * c.count * es, theirs(p, c.count * n), rank * c.count, c.count))
          return "block from rank " + std::to_string(p);
      return "";
    case K::SendRecv:
      return differs(got, theirs((rank + n - 1) % n, c.count), 0, c.count) ? "not the previous rank's data" : "";
    default: return "";
  }
}

std::string describe(const Call& c) {
  return std::string(kNames[static_cast<int>(c.k)]) + " count=" + std::to_string(c.count) + " type=" +
         std::to_string(c.dt) + " op=" + std::to_string(c.op) + " root=" + std::to_string(c.root) +
         (c.inPlace ? " in place" : "");
}

// A bad argument, alike on every rank; the call must fail without touching the peers.
collResult_t badCall(size_t which, collComm_t comm, int rank, int n, std::vector<char>& buf) {
  float* f = reinterpret_cast<float*>(buf.data());
  switch (which % 7) {
    case 0: return collAllReduce(f, f, 4, static_cast<collDataType_t>(77), collSum, comm, nullptr);
    case 1: return collAllReduce(f, f, 4, collFloat32, static_cast<collRedOp_t>(99), comm, nullptr);
    case 2: return collBroadcast(f, f, 4, collFloat32, n, comm, nullptr);
    case 3: return collReduce(f, f, 4, collFloat32, collSum, -1, comm, nullptr);
    case 4: return collAllReduce(f, nullptr, 4, collFloat32, collSum, comm, nullptr);
    case 5: return collAllGather(f, f, SIZE_MAX / 2, collFloat32, comm, nullptr);
    default: return collSend(f, 4, collFloat32, rank, comm, nullptr);  // to self outside a group
  }
}

// Runs `steps` random steps on n ranks (threads) and checks every result on every rank,
// and that every rank's all-reduce output has the same bits.
// COLL_TEST_SEQ_SEED=S runs another sequence (S mixed with the test's own seed), and
// COLL_TEST_SEQ_STEPS=N another length, for exploring; the test prints both.
void runSequence(int n, uint64_t seed, int steps) {
  if (const char* s = getenv("COLL_TEST_SEQ_SEED")) seed = seed * 1000003u + strtoull(s, nullptr, 10);
  if (const char* s = getenv("COLL_TEST_SEQ_STEPS")) steps = atoi(s);
  ScopedEnv timeout("COLL_TIMEOUT", "60");
  Job job(n);
  ASSERT_TRUE(job.ok());
  Failures fails;
  std::vector<uint64_t> stepSeeds(steps);
  Rng top{seed};
  for (auto& s : stepSeeds) s = top.next();
  size_t checked[static_cast<int>(K::Count)] = {}, bytes = 0;
  int groups = 0, nonblocking = 0, splits = 0, refused = 0;
  for (int step = 0; step < steps && fails.count == 0; ++step) {
    // Every rank draws the same step from the same seed.
    Rng g{stepSeeds[step]};
    const int mode = static_cast<int>(g.below(100));
    const bool split = n > 2 && g.chance(8);
    std::vector<std::vector<Call>> callsOf(n);
    std::vector<std::vector<std::unique_ptr<Bufs>>> bufsOf(n);
    std::vector<int> subRank(n, -1), subSize(n, 0);
    job.run([&](int r, collComm_t world) {
      Rng rg = g;  // a copy per rank: all draw the same
      collComm_t comm = world, sub = nullptr;
      int rank = r, size = n;
      if (split) {
        // Even and odd ranks, each in reverse order of rank.
        if (collCommSplit(world, r % 2, -r, &sub) != collSuccess) {
          fails.add("step " + std::to_string(step) + ": split on rank " + std::to_string(r) + ": " + collGetLastError(world));
          return;
        }
        comm = sub;
        collCommUserRank(sub, &rank);
        collCommCount(sub, &size);
      }
      subRank[r] = rank;
      subSize[r] = size;
      const std::string where = "step " + std::to_string(step) + " rank " + std::to_string(r) + (split ? " (split)" : "") + ": ";
      if (mode < 8) {  // a bad argument, then one good call that must work
        std::vector<char> scratch(64);
        collResult_t rc = badCall(rg.below(7), comm, rank, size, scratch);
        if (rc == collSuccess) fails.add(where + "bad argument accepted");
        if (std::string(collGetLastError(comm)).empty()) fails.add(where + "no error message");
      }
      const int ncalls = mode < 8 ? 1 : 1 + static_cast<int>(rg.below(4));
      auto& calls = callsOf[r];
      auto& bufs = bufsOf[r];
      for (int i = 0; i < ncalls; ++i) {
        calls.push_back(draw(rg, size, static_cast<uint32_t>(rg.next())));
        bufs.push_back(std::make_unique<Bufs>());
        prepare(calls.back(), rank, size, *bufs.back());
      }
      const bool grouped = mode >= 8 && mode < 40;
      const bool nonblocking = mode >= 40 && mode < 70;
      if (grouped || (!nonblocking && std::any_of(calls.begin(), calls.end(), [](const Call& c) { return c.k == K::SendRecv; }))) {
        collGroupStart();
        for (int i = 0; i < ncalls; ++i)
          if (collResult_t rc = issue(calls[i], comm, rank, size, *bufs[i], nullptr); rc != collSuccess)
            fails.add(where + describe(calls[i]) + " in a group: " + collGetErrorString(rc) + ": " + collGetLastError(comm));
        if (collResult_t rc = collGroupEnd(); rc != collSuccess)
          fails.add(where + "group end: " + collGetErrorString(rc) + ": " + collGetLastError(comm));
      } else if (nonblocking) {
        std::vector<collRequest_t> reqs(ncalls, nullptr);
        for (int i = 0; i < ncalls; ++i)
          if (collResult_t rc = issue(calls[i], comm, rank, size, *bufs[i], &reqs[i]); rc != collSuccess)
            fails.add(where + describe(calls[i]) + " nonblocking: " + collGetErrorString(rc) + ": " + collGetLastError(comm));
        // Waited in a random order (the same on every rank), or polled to the end.
        std::vector<int> order(ncalls);
        for (int i = 0; i < ncalls; ++i) order[i] = i;
        for (int i = ncalls - 1; i > 0; --i) std::swap(order[i], order[rg.below(i + 1)]);
        const bool poll = rg.chance(50);
        for (int i : order) {
          if (!reqs[i]) continue;
          collResult_t rc;
          if (poll) {
            int done = 0;
            while ((rc = collTest(&reqs[i], &done)) == collInProgress || (rc == collSuccess && !done)) sched_yield();
          } else {
            rc = collWait(&reqs[i]);
          }
          if (rc != collSuccess) fails.add(where + describe(calls[i]) + " wait: " + collGetErrorString(rc) + ": " + collGetLastError(comm));
          if (reqs[i]) fails.add(where + "request not released");
        }
      } else {
        for (int i = 0; i < ncalls; ++i)
          if (collResult_t rc = issue(calls[i], comm, rank, size, *bufs[i], nullptr); rc != collSuccess)
            fails.add(where + describe(calls[i]) + ": " + collGetErrorString(rc) + ": " + collGetLastError(comm));
      }
      if (sub && collCommDestroy(sub) != collSuccess) fails.add(where + "destroying the split communicator");
    });
    for (int r = 0; r < n && fails.count == 0; ++r)
      for (size_t i = 0; i < callsOf[r].size(); ++i) {
        const std::string bad = check(callsOf[r][i], subRank[r], subSize[r], *bufsOf[r][i]);
        ++checked[static_cast<int>(callsOf[r][i].k)];
        bytes += bufsOf[r][i]->b.size();
        if (!bad.empty())
          fails.add("step " + std::to_string(step) + " rank " + std::to_string(r) + (split ? " (split)" : "") + ": " +
                    describe(callsOf[r][i]) + ": " + bad);
      }
    groups += mode >= 8 && mode < 40;
    nonblocking += mode >= 40 && mode < 70;
    splits += split;
    refused += mode < 8;
    // Bit-identical all-reduce results on every rank of a communicator.
    for (int r = 1; r < n && fails.count == 0; ++r) {
      const int first = split ? r % 2 : 0;
      if (first == r) continue;
      for (size_t i = 0; i < callsOf[r].size(); ++i) {
        const Call& c = callsOf[r][i];
        const size_t bytes = c.count * collTypeSize(c.dt);
        if (c.k == K::AllReduce && memcmp(bufsOf[r][i]->recv, bufsOf[first][i]->recv, bytes) != 0)
          fails.add("step " + std::to_string(step) + ": all-reduce bits differ between ranks " + std::to_string(first) +
                    " and " + std::to_string(r) + ": " + describe(c));
      }
    }
  }
  EXPECT_EQ(fails.count, 0);
  std::string kinds;
  for (int k = 0; k < static_cast<int>(K::Count); ++k) kinds += std::string(" ") + kNames[k] + "=" + std::to_string(checked[k]);
  printf("seed %llu, %d ranks, %d steps: %d grouped, %d nonblocking, %d on split communicators, %d bad arguments refused; "
         "results checked (rank-calls):%s; %.1f MB of outputs\n",
         static_cast<unsigned long long>(seed), n, steps, groups, nonblocking, splits, refused, kinds.c_str(), bytes / 1e6);
}

// A rank whose last calls only send (a broadcast's root, a gather's non-root) finishes
// first and destroys its communicator while the others still receive: what it sent must
// still arrive. (The in-memory network backend of the tests once refused a receive posted
// after the sender had closed, although the message was queued; the sequences above
// found it.)
class LeftEarly : public ::testing::TestWithParam<const char*> {};

TEST_P(LeftEarly, WhatTheRankSentBeforeLeavingArrives) {
  ScopedEnv transport("COLL_TRANSPORT", GetParam());
  ScopedEnv timeout("COLL_TIMEOUT", "30");
  Job job(3);
  ASSERT_TRUE(job.ok());
  std::vector<std::vector<int32_t>> got(3, std::vector<int32_t>(64, -1)), gathered(3, std::vector<int32_t>(48, -1));
  std::vector<collResult_t> rc(3, collSuccess);
  job.run([&](int r, collComm_t comm) {
    std::vector<int32_t> mine(64), block(16);
    for (int i = 0; i < 64; ++i) mine[i] = 1000 * r + i;
    for (int i = 0; i < 16; ++i) block[i] = 100 * r + i;
    if (r == 2) {  // sends, then leaves at once
      rc[r] = collBroadcast(mine.data(), got[r].data(), 64, collInt32, 2, comm, nullptr);
      if (rc[r] == collSuccess) rc[r] = collGather(block.data(), nullptr, 16, collInt32, 0, comm, nullptr);
      if (rc[r] == collSuccess) rc[r] = collCommDestroy(comm);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rc[r] = collBroadcast(mine.data(), got[r].data(), 64, collInt32, 2, comm, nullptr);
    if (rc[r] == collSuccess)
      rc[r] = collGather(block.data(), r == 0 ? gathered[r].data() : nullptr, 16, collInt32, 0, comm, nullptr);
  });
  job.forget(2);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(rc[r], collSuccess) << "rank " << r << ": " << collGetLastError(job.comm(r));
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(got[r][i], 2000 + i) << "rank " << r << " element " << i;
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 16; ++i) ASSERT_EQ(gathered[0][16 * p + i], 100 * p + i) << "block " << p;
}

INSTANTIATE_TEST_SUITE_P(Transports, LeftEarly, ::testing::Values("shm", "tcp", "net"));

TEST(Sequences, TwoRanks) { runSequence(2, 1, 500); }
TEST(Sequences, ThreeRanks) { runSequence(3, 2, 500); }
TEST(Sequences, FourRanks) { runSequence(4, 3, 400); }
TEST(Sequences, ThreeRanksOverTcp) {
  ScopedEnv tcp("COLL_TRANSPORT", "tcp");
  runSequence(3, 4, 300);
}
TEST(Sequences, FourRanksOverTheNetworkPlugin) {
  ScopedEnv net("COLL_TRANSPORT", "net");
  runSequence(4, 5, 200);
}

}  // namespace
