// What the C handles point at, the registry that makes use-after-destroy an error
// instead of a crash, and the conversion of exceptions into collResult_t.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "coll_config.h"
#include "collective.h"
#include "comm/comm.hpp"
#include "base/error.hpp"
#if COLL_HAVE_CUDA
#include "cuda/stream_ops.hpp"
#include "algorithms/device/ipc_engine.hpp"
#endif

struct collComm {
  std::unique_ptr<coll::Comm> impl;
#if COLL_HAVE_CUDA
  // Where buffers live and the CUDA calls of stream-ordered ops; null when no device is
  // usable (attachCuda, device_ops.hpp). The tests put a simulated runtime here.
  std::shared_ptr<coll::cuda::StreamBackend> cudaBackend;
  // Stream-ordered collectives on device buffers; made at the first one. Declared after
  // impl so that it is gone (its worker joined) before the communicator it drives.
  std::mutex streamsMu;
  // Set once streams exists (under streamsMu): until then a host collective need not take
  // the lock to learn that no device work is queued ahead of it.
  std::atomic<bool> streamsMade{false};
  // Device-buffer collectives over CUDA IPC among the ranks of one host (null when the
  // communicator cannot use them); made with streams. Declared before streams: the
  // executor's jobs use it, so it must outlive the executor's worker.
  std::unique_ptr<coll::cuda::IpcEngine> ipc;
  std::unique_ptr<coll::cuda::StreamExecutor> streams;
#endif
  std::mutex errMu;
  std::string lastError;
  // Set while a thread issues or runs an operation on the communicator (IssueGuard).
  std::atomic<bool> busy{false};
};

struct collRequest {
  std::shared_ptr<coll::Request> req;
  collComm* comm = nullptr;
};

namespace coll {

// Live handles, by kind. A handle not in the registry as that kind (destroyed, never
// created, or a handle of the other kind passed in its place) is rejected with
// collInvalidUsage.
void registerHandle(const collComm* h);
void registerHandle(const collRequest* h);
// True for the one call that removed a live handle: that caller alone may free it.
bool unregisterHandle(const void* h);
bool isLiveHandle(const collComm* h);
bool isLiveHandle(const collRequest* h);
// A live request's state, read under the registry's lock so that another thread's
// collWait or collTest freeing the handle meanwhile cannot pull it away; null when the
// handle is not a live request.
std::shared_ptr<Request> liveRequest(const collRequest* h, collComm** comm);

// The communicator behind a handle; throws collInvalidUsage for a dead or null handle.
// Inside a CommUseScope the handle is also marked as in use by this thread (see there).
collComm& liveComm(collComm_t comm, const char* arg = "comm");

// Marks the span of one API call on this thread. A communicator found live inside it (by
// liveComm or isLiveHandle) stays marked as used by this thread until the scope ends, and
// collCommDestroy/collCommAbort on another thread wait for that mark to go before they free
// the handle's memory. The mark is set before the liveness check, and destroy unregisters
// the handle before it looks at the marks, so one of the two sees the other: either the
// check fails, or destroy waits. (Without it, a thread that had just found the handle live
// could read or write it after another thread freed it.)
class CommUseScope {
 public:
  CommUseScope();
  ~CommUseScope();
  CommUseScope(const CommUseScope&) = delete;
  CommUseScope& operator=(const CommUseScope&) = delete;

 private:
  const void* prev_;
};

// Records the error text for collGetLastError (on the comm when it is live, and always
// for the calling thread).
void recordError(collComm_t comm, collResult_t code, const char* what);
const char* threadLastError();

// Held by a thread while it issues or runs operations on a communicator. Calls on one
// communicator must not overlap (as in NCCL): run one behind the other, two threads'
// calls pair up differently on different ranks (rank 0's first with rank 1's second)
// and return each other's data as success, or wait for each other until COLL_TIMEOUT.
// A thread that arrives while another holds it is refused with collInvalidUsage.
class IssueGuard {
 public:
  explicit IssueGuard(collComm& c) : c_(c) {
    if (c_.busy.exchange(true, std::memory_order_acquire))
      COLL_THROW(collInvalidUsage, "another thread is issuing or running an operation on this communicator; "
                 "calls on one communicator must not overlap (serialize them, or give each thread a "
                 "communicator of its own)");
  }
  ~IssueGuard() { c_.busy.store(false, std::memory_order_release); }
  IssueGuard(const IssueGuard&) = delete;
  IssueGuard& operator=(const IssueGuard&) = delete;

 private:
  collComm& c_;
};

// Before a communicator's memory goes (destroy, abort; after unregisterHandle): waits up to
// `seconds` until no other thread's CommUseScope holds the handle, that is until every
// call that found it live has left. False if one still does (then the caller must leave
// the memory allocated rather than free it under that thread).
bool waitUsersGone(const collComm* c, double seconds);

// Runs body, turning exceptions into result codes and recorded messages.
template <typename F>
collResult_t guarded(collComm_t comm, const char* fn, F&& body) {
  CommUseScope use;  // ends after the handlers below, which may record into the comm
  try {
    body();
    return collSuccess;
  } catch (const Error& e) {
    std::string msg = std::string(fn) + ": " + e.what();
    recordError(comm, e.code(), msg.c_str());
    return e.code();
  } catch (const std::bad_alloc&) {
    recordError(comm, collSystemError, (std::string(fn) + ": out of memory").c_str());
    return collSystemError;
  } catch (const std::exception& e) {
    std::string msg = std::string(fn) + ": internal error: " + e.what();
    recordError(comm, collInternalError, msg.c_str());
    return collInternalError;
  }
}

// An operation deferred inside a group, with its stream; onStream: stream-ordered (device
// buffers or a stream), launched with the group's other ops as one unit at collGroupEnd.
struct GroupedOp {
  OpArgs op;
  void* stream = nullptr;
  bool onStream = false;
};

// Group calls (collGroupStart/End) defer operations; true if the op was deferred.
bool groupDefer(collComm& comm, const GroupedOp& op);
// True between collGroupStart and the matching collGroupEnd on this thread.
bool groupActive();

// Checks one operation's arguments against the communicator (throws collInvalidArgument).
// streamsUsable: a non-null stream is accepted (a CUDA device is usable).
void validateOp(const Comm& comm, const OpArgs& op, const void* stream, bool streamsUsable);

}  // namespace coll
