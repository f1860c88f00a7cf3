// Helpers shared by the bootstrap tests: a root on loopback and ranks as threads.
#pragma once

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/error.hpp"
#include "base/socket.hpp"

namespace coll::test {

inline sockaddr_storage loopback4(int port = 0) {
  sockaddr_storage a{};
  auto& in = reinterpret_cast<sockaddr_in&>(a);
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  in.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

// A fresh job: random secret, root serving nranks on loopback.
inline UniqueIdData startJob(int nranks, double timeoutSec) {
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  id.root = RendezvousRoot::start(loopback4(), nranks, id.secret, timeoutSec);
  return id;
}

// A loopback port nobody listens on (bound, then released).
inline int deadPort() {
  sockaddr_storage a = loopback4();
  Socket s = listenOn(&a);
  return addrPort(a);
}

// Runs fn(rank) on nranks threads; returns each rank's exception text ("" if none) and code.
struct RankOutcome {
  collResult_t code = collSuccess;
  std::string what;
};
inline std::vector<RankOutcome> runRanks(int nranks, const std::function<void(int)>& fn) {
  std::vector<RankOutcome> out(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const Error& e) {
        out[r] = {e.code(), e.what()};
      } catch (const std::exception& e) {
        out[r] = {collInternalError, e.what()};
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace coll::test
