// Ranks as processes: one test's ranks on different simulated hosts (each rank's
// communicator is given its host as COLL_HOST_ID), each with its own process-wide state
// (a tuner plugin's environment, the CPU it is pinned to). The parent forks one child per
// rank, then makes the unique id (and with it the rendezvous root) and passes it to each
// over a pipe, and collects each child's exit status and the 64-bit values it reports
// (result hashes) over another.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "../collectives/harness.hpp"
#include "collective.h"

namespace testing_coll {

struct ProcResult {
  int status = -1;              // exit status; 128 + signal if killed
  std::vector<uint64_t> values; // what the rank reported
};

using Env = std::vector<std::pair<std::string, std::string>>;
// body(rank, comm, report) returns the number of failures it found (its exit status).
using ProcBody = std::function<int(int, collComm_t, std::vector<uint64_t>&)>;

// Reads exactly sizeof(id) bytes; false on end of file or error.
inline bool readId(int fd, collUniqueId* id) {
  auto* p = reinterpret_cast<char*>(id);
  size_t got = 0;
  while (got < sizeof *id) {
    ssize_t k = read(fd, p + got, sizeof *id - got);
    if (k <= 0) return false;
    got += static_cast<size_t>(k);
  }
  return true;
}

// `tunables` configure every rank's communicator (collConfig_t::tunables); rankTunables,
// where given, further ones per rank, after them. rankEnv, where given, holds variables
// set in each rank's environment, for what reads nothing else: a tuner plugin's own
// settings (COLL_TUNER_TABLE), TEST_PIN_CPU.
inline std::vector<ProcResult> runProcs(const std::vector<std::string>& hostOfRank, const Env& tunables,
                                        const ProcBody& body, const std::vector<Env>& rankEnv = {},
                                        const std::vector<Env>& rankTunables = {}) {
  const int n = static_cast<int>(hostOfRank.size());
  std::vector<pid_t> pids(n, -1);
  std::vector<int> fds(n, -1), idFds(n, -1);
  // The children are forked before the unique id exists and get it over a pipe: making it
  // starts the rendezvous root's thread here, and a child forked while that thread runs
  // may inherit a lock it holds (a child hung that way under ThreadSanitizer).
  for (int r = 0; r < n; ++r) {
    int p[2], q[2];
    if (pipe(p) != 0) break;
    if (pipe(q) != 0) {
      close(p[0]);
      close(p[1]);
      break;
    }
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      close(q[1]);
      // Earlier children's id pipes: a copy of a write end here would keep them from
      // seeing the end of the file if the parent gives up.
      for (int k = 0; k < r; ++k) close(idFds[k]);
      alarm(120);  // a hung child must not hang the test run
      collUniqueId id;
      if (!readId(q[0], &id)) _exit(100);
      close(q[0]);
      Env mine = {{"COLL_HOST_ID", hostOfRank[r]}};
      mine.insert(mine.end(), tunables.begin(), tunables.end());
      if (static_cast<size_t>(r) < rankTunables.size())
        mine.insert(mine.end(), rankTunables[r].begin(), rankTunables[r].end());
      if (static_cast<size_t>(r) < rankEnv.size())  // the subject here is the environment
        for (const auto& [k, v] : rankEnv[r]) setenv(k.c_str(), v.c_str(), 1);
      // TEST_PIN_CPU=c pins the rank to CPU c (modulo the CPUs there are) before it joins,
      // so that its placement (ring order inside its host, leader choice) follows.
      if (const char* pin = getenv("TEST_PIN_CPU")) {
        cpu_set_t set;
        CPU_ZERO(&set);
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_SET(static_cast<int>(atol(pin) % (ncpu > 0 ? ncpu : 1)), &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) fprintf(stderr, "rank %d: could not pin\n", r);
      }
      collComm_t comm = nullptr;
      int fails = 100;
      if (initRank(&comm, n, id, r, mine) == collSuccess) {
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
    close(q[0]);
    if (pid < 0) {
      close(p[0]);
      close(q[1]);
      break;
    }
    pids[r] = pid;
    fds[r] = p[0];
    idFds[r] = q[1];
  }
  collUniqueId id;
  const bool haveId = collGetUniqueId(&id) == collSuccess;
  for (int r = 0; r < n; ++r) {
    if (idFds[r] < 0) continue;
    if (haveId && write(idFds[r], &id, sizeof id) != static_cast<ssize_t>(sizeof id))
      fprintf(stderr, "rank %d: could not pass the unique id\n", r);
    close(idFds[r]);  // without an id, the child sees the end of the file and exits 100
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
  if (!haveId) return {};
  return out;
}

// Every rank of a runProcs job exited 0 (no wrong values) and reported the same result
// hashes as rank 0, so the ranks got the same bits.
inline void expectPassedWithSameBits(const std::vector<ProcResult>& res, int n) {
  ASSERT_EQ(static_cast<int>(res.size()), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r].status, 0) << "rank " << r << " found wrong values or failed (see stderr)";
    EXPECT_FALSE(res[r].values.empty()) << "rank " << r;
    EXPECT_TRUE(res[r].values == res[0].values) << "rank " << r << " has different bits than rank 0";
  }
}

}  // namespace testing_coll
