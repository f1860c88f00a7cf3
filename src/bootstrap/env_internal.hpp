// Pieces of environment detection (env.cpp, env_mpi.cpp) that are pure logic, exposed
// for unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "coll_config.h"

namespace coll {

// Expands a Slurm hostlist such as "node[01-04,07],gpu5" or "r[1-2]n[3-4]" into host
// names, keeping zero padding. Throws collInvalidArgument on malformed input or when the
// list names more than maxHosts hosts.
std::vector<std::string> expandHostlist(const std::string& list, size_t maxHosts = 1 << 20);
// Slurm's tasks-per-node form ("2(x3),1") -> the task count of node `node` (0-based).
// Throws collInvalidArgument when malformed or when the node is not listed.
int tasksOnNode(const std::string& spec, int node);
// 64 hex characters -> 32 bytes. Throws collInvalidArgument naming `what`.
void parseHexSecret(const std::string& hex, uint8_t* secret, const char* what);
// The rendezvous port a Slurm step uses when COLL_ROOT_ADDR is not set: the same on
// every task of the step, different between consecutive steps and jobs.
int slurmRootPort(uint64_t jobId, uint64_t stepId);

#if COLL_HAVE_MPI
// Rank, size and id through MPI (env_mpi.cpp). Returns false when MPI reports no job.
bool detectMpiLaunch(EnvLaunch* out, double timeoutSec);
#endif

}  // namespace coll
