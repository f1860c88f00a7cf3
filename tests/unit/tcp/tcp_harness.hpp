// Ranks as threads, each with its own Bootstrap (a real rendezvous root on loopback) and
// TCP links to every other rank.
#pragma once

#include <arpa/inet.h>

#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/wait.hpp"
#include "transport/transport.hpp"

namespace coll {
// Defined in transport/tcp (the registry holds the same declaration); called directly so
// these tests do not depend on other transports being linked.
std::unique_ptr<Transport> makeTcpTransport();
}  // namespace coll

namespace coll::tcptest {

using Links = std::map<int, std::unique_ptr<Link>>;

struct Job {
  int nranks = 0;
  UniqueIdData id;
};

inline Job startJob(int nranks, double timeoutSec = 30) {
  Job j;
  j.nranks = nranks;
  randomSecret(j.id.secret, kSecretBytes);
  sockaddr_storage lo{};
  auto& in = reinterpret_cast<sockaddr_in&>(lo);
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  j.id.root = RendezvousRoot::start(lo, nranks, j.id.secret, timeoutSec);
  j.id.jobNonce = 42;
  return j;
}

struct RankEnv {
  int rank;
  Config cfg;
  std::unique_ptr<Bootstrap> bs;
  TransportContext ctx;
  // A graceful goodbye, so the root does not report this rank as failed.
  ~RankEnv() {
    try {
      if (bs) bs->close();
    } catch (const Error&) {
    }
  }
};

// Everything a rank needs except its links; `bs` may be wrapped by the caller.
inline std::unique_ptr<RankEnv> joinJob(const Job& j, int rank, const Config& cfg,
                                        double timeoutSec = 30) {
  auto env = std::make_unique<RankEnv>();
  env->rank = rank;
  env->cfg = cfg;
  env->bs = Bootstrap::connect(j.id, rank, j.nranks, timeoutSec);
  TransportContext& c = env->ctx;
  c.rank = rank;
  c.nranks = j.nranks;
  c.cfg = &env->cfg;
  c.bootstrap = env->bs.get();
  c.jobTag = "tcptest";
  c.secret = j.id.secret;
  c.timeoutSec = timeoutSec;
  return env;
}

inline std::vector<int> allOthers(int rank, int nranks) {
  std::vector<int> v;
  for (int r = 0; r < nranks; ++r)
    if (r != rank) v.push_back(r);
  return v;
}

// Runs fn(rank) on nranks threads; rethrows the first failure (by rank) in the caller.
inline void runRanks(int nranks, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errs(nranks);
  std::vector<std::thread> ts;
  for (int r = 0; r < nranks; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

// Progresses the links until every Xfer is complete; throws collTimeout after `seconds`.
inline void waitAll(const std::vector<Link*>& links, const std::vector<Xfer*>& xs,
                    double seconds = 30) {
  Deadline dl(seconds);
  Backoff idle(200, 100);
  for (;;) {
    bool moved = false;
    for (Link* l : links) moved |= l->progress();
    bool all = true;
    for (Xfer* x : xs) all &= x->complete;
    if (all) return;
    if (dl.expired()) COLL_THROW(collTimeout, "tcp test: transfers did not complete in ", seconds, " s");
    if (moved) {
      idle.reset();
    } else if (idle.idleCount() > 1000 && links.size() == 1) {
      links[0]->waitActivity(1);
    } else {
      idle.idle();
    }
  }
}

// A byte that depends on who sent it to whom, which message and where in it.
inline uint8_t pattern(int src, int dst, int msg, size_t i) {
  return static_cast<uint8_t>((i * 131u) ^ (i >> 9) ^ (src * 37u) ^ (dst * 11u) ^ (msg * 101u));
}

}  // namespace coll::tcptest
