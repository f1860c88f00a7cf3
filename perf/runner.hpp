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
// The nonblocking form of a call (-z 0 and -z 3 on host buffers): issues the collI* calls
// and leaves their requests (at most kMaxRequests) in reqs, their number in *n.
constexpr int kMaxRequests = 2;
using ICallFn = collResult_t (*)(const CallArgs&, collRequest_t* reqs, int* n);

struct ToolDesc {
  Coll coll;
  CallFn call;
  // --native 1 (gather and scatter): the library's own collective, timed instead of call.
  CallFn nativeCall = nullptr;
  const char* nativeName = nullptr;  // "collGather", for the report's header
  // Null where the call has no nonblocking form (grouped send/recv patterns): -z 0 then
  // issues the blocking calls, and the header says so.
  ICallFn icall = nullptr;
  ICallFn nativeIcall = nullptr;
};

// Runs the tool; returns the process exit status (0 only when every check passed and
// no library call failed).
int runTool(int argc, char** argv, const ToolDesc& tool);

}  // namespace perf
