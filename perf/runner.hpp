// The shared driver of the *_perf tools: one process is one rank of a communicator made
// by collCommInitFromEnv (collectiverun, mpirun or Slurm). Each tool only names its
// collective and how to call it; sweep, timing, data check and the nccl-tests style
// report live here. Public API only (include/collective.h).
#pragma once

#include <cstddef>

#include "collective.h"
#include "common.hpp"

namespace perf {

struct CallArgs {
  const void* send;
  void* recv;
  size_t count;  // Counts::paramCount
  collDataType_t type;
  collRedOp_t op;
  int root;
  int rank;
  int nranks;
  collComm_t comm;
  void* stream;  // -g 1: the rank's CUDA stream (collStream_t); null for host buffers
};

using CallFn = collResult_t (*)(const CallArgs&);

struct ToolDesc {
  Coll coll;
  CallFn call;
  // --native 1 (gather and scatter): the library's own collective, timed instead of call.
  CallFn nativeCall = nullptr;
  const char* nativeName = nullptr;  // "collGather", for the report's header
};

// Runs the tool; returns the process exit status (0 only when every check passed and
// no library call failed).
int runTool(int argc, char** argv, const ToolDesc& tool);

}  // namespace perf
