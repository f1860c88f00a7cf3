// Ranks as processes, each with its own environment: the way to put ranks of one test on
// different simulated hosts (COLL_HOST_ID is read once per process). The parent makes the
// unique id (and with it the rendezvous root), forks one child per rank, and collects each
// child's exit status and the 64-bit values it reports (result hashes) over a pipe.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "collective.h"

namespace testing_coll {

struct ProcResult {
  int status = -1;              // exit status; 128 + signal if killed
  std::vector<uint64_t> values; // what the rank reported
};

using Env = std::vector<std::pair<std::string, std::string>>;
// body(rank, comm, report) returns the number of failures it found (its exit status).
using ProcBody = std::function<int(int, collComm_t, std::vector<uint64_t>&)>;

inline std::vector<ProcResult> runProcs(const std::vector<std::string>& hostOfRank, const Env& env,
                                        const ProcBody& body) {
  const int n = static_cast<int>(hostOfRank.size());
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) return {};
  std::vector<pid_t> pids(n, -1);
  std::vector<int> fds(n, -1);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) break;
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      alarm(120);  // a hung child must not hang the test run
      setenv("COLL_HOST_ID", hostOfRank[r].c_str(), 1);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      collComm_t comm = nullptr;
      int fails = 100;
      if (collCommInitRank(&comm, n, id, r) == collSuccess) {
        std::vector<uint64_t> report;
        fails = body(r, comm, report);
        size_t bytes = report.size() * sizeof(uint64_t);
        if (write(p[1], report.data(), bytes) != static_cast<ssize_t>(bytes)) ++fails;
        collCommDestroy(comm);
      } else {
        fprintf(stderr, "rank %d: init failed: %s\n", r, collGetLastError(nullptr));
      }
      close(p[1]);
      _exit(fails > 99 ? 99 : fails);
    }
    close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  std::vector<ProcResult> out(n);
  for (int r = 0; r < n; ++r) {
    if (fds[r] < 0) continue;
    uint64_t v;
    while (read(fds[r], &v, sizeof v) == static_cast<ssize_t>(sizeof v)) out[r].values.push_back(v);
    close(fds[r]);
    int st = 0;
    if (pids[r] > 0 && waitpid(pids[r], &st, 0) == pids[r])
      out[r].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return out;
}

}  // namespace testing_coll
