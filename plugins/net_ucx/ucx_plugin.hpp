// The UCX network plugin's internal types: the per-init context (one UCP context and
// worker), the endpoints the interface hands out, and their requests. The protocol
// itself is described at the top of ucx_plugin.cpp.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "coll_net.h"
#include "ucx_wire.hpp"

namespace coll::net_ucx {

// Most requests in flight per endpoint; isend/irecv answer NULL beyond it.
constexpr int kMaxRequests = 64;
// Payloads up to this many bytes travel inside the head message (one UCX message, one
// copy on each side); larger ones follow as a data message straight from/to user memory.
constexpr size_t kPackMax = 1024;
// How long close*() and finalize wait for UCX to let go of requests and endpoints.
constexpr double kCloseTimeoutSec = 5.0;
// The same after a failure (requests in flight, or the endpoint failed): the library
// closes then because its own wait timed out or a peer died, so waiting any longer than
// UCX needs to release what it cancels locally would overrun COLL_TIMEOUT; over a cut
// link UCX keeps a matched request until its transport gives up (seconds).
constexpr double kFailedCloseSec = 0.1;
// After an endpoint reports its peer failed, receives still get this long to finish
// with data that already arrived (it may sit on another socket than the error).
constexpr double kFailGraceSec = 0.05;

// UCX tag layout: [63:24] connection id (random, unique among this worker's receive
// endpoints), [23:1] sequence number (wraps; far more than kMaxRequests apart), [0] kind.
constexpr int kSeqBits = 23;
constexpr uint64_t kIdMask = (uint64_t{1} << 40) - 1;
enum : uint64_t { kKindHead = 0, kKindData = 1 };
inline uint64_t ucxTag(uint64_t id, uint32_t seq, uint64_t kind) {
  return (id << 24) | ((uint64_t{seq} & ((1u << kSeqBits) - 1)) << 1) | kind;
}

// What the head message starts with.
struct WireHead {
  uint64_t tag;   // the user's tag, untouched
  uint64_t size;  // the message's true size
};

// Written by UCX's error callback (possibly from its progress inside another thread's
// call), read by the endpoint's own calls. Outlives the endpoint until UCX is done with it.
struct EpState {
  std::atomic<int> status{UCS_OK};
};

struct Comm;

enum class ReqState { Free, Live, Failed };

struct Request {
  ReqState state = ReqState::Free;
  Comm* comm = nullptr;
  void* head = nullptr;  // UCX request of the head message, NULL once released
  void* data = nullptr;  // UCX request of the data message, NULL once released
  ucs_status_t headStatus = UCS_INPROGRESS;
  ucs_status_t dataStatus = UCS_INPROGRESS;
  ucp_tag_recv_info_t headInfo{};
  ucp_tag_recv_info_t dataInfo{};
  void* user = nullptr;   // receive: the user's buffer
  size_t userSize = 0;    // receive: its size
  size_t size = 0;        // send: the message size
  std::string error;      // why it failed (ReqState::Failed)
  alignas(8) unsigned char buf[sizeof(WireHead) + kPackMax];
};

struct Context;

enum class CommKind : uint32_t { Listen = 0x4c495354, Send = 0x53454e44, Recv = 0x52454356, Dead = 0 };

struct Comm {
  CommKind kind;
  Context* ctx;
  uint64_t token = 0;       // the handle's token; its low 40 bits are the connection id
  uint32_t seq = 0;         // next message's sequence number
  ucp_ep_h ep = nullptr;    // send: to the receiver; receive: to the sender (to notice it die)
  std::unique_ptr<EpState> epState;
  int inflight = 0;
  std::array<Request, kMaxRequests> reqs;
  uint64_t id() const { return token & kIdMask; }
};

struct Context {
  std::mutex mu;  // serialises every use of the worker (UCS_THREAD_MODE_SERIALIZED)
  ucp_context_h ucp = nullptr;
  ucp_worker_h worker = nullptr;
  void (*log)(collNetLogLevel_t, const char*) = nullptr;
  std::vector<uint8_t> address;    // this worker's address, as packed into blobs
  std::set<uint64_t> ids;          // connection ids of live listen/receive endpoints
  std::set<Comm*> comms;           // live endpoints, closed by finalize if left over
  struct Closing {
    void* request;                    // UCX's close request
    std::unique_ptr<EpState> state;   // UCX may report on the endpoint until it finishes
  };
  std::vector<Closing> closing;
  std::string transports;          // e.g. "tcp", once an endpoint showed its lanes
  // An endpoint failed or was closed after a failure: finalize then does not wait for
  // the flushing closes of the others, which may need a peer that never answers.
  bool sawFailure = false;
};

// This thread's last failure (printf-style); always returns 1 so callers can `return fail(...)`.
int fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* lastError();
void logf(Context* ctx, collNetLogLevel_t level, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
double nowSec();

// ucx_context.cpp
int contextInit(const collNetInit_t* in, Context** out);
void contextFinalize(Context* ctx);
int randomToken(uint64_t* out);
// Progresses the worker until `released` says yes or kCloseTimeoutSec passes; false on timeout.
template <class F>
bool progressUntil(Context* ctx, F released, double timeoutSec = kCloseTimeoutSec) {
  double deadline = nowSec() + timeoutSec;
  while (!released()) {
    if (nowSec() > deadline) return false;
    ucp_worker_progress(ctx->worker);
  }
  return true;
}
// Creates an endpoint with peer error handling to a worker address; records its lanes.
int createEndpoint(Context* ctx, const uint8_t* address, Comm* comm, const char* what);
// Closes comm's endpoint: with force (or when it failed) at once, UCX cancelling what
// it still sends; otherwise with a flush that completes in the background.
// A forced close waits for UCX until `deadline` (nowSec() time) at most.
int closeEndpoint(Context* ctx, Comm* comm, bool force, double deadline);
// Releases the background closes that have finished.
void reapClosing(Context* ctx);

// ucx_conn.cpp
int listen(Context* ctx, int dev, void* handle, Comm** out);
int connect(Context* ctx, int dev, const void* handle, void* reply, Comm** out);
int accept(Comm* listenComm, const void* reply, Comm** out);

// ucx_msg.cpp
int isend(Comm* comm, const void* data, size_t size, uint64_t tag, Request** out);
int irecv(Comm* comm, void* data, size_t size, Request** out);
int test(Request* req, int* done, size_t* size, uint64_t* tag);
// Drops every request of comm (cancel, wait for UCX to release them) and frees comm.
int closeComm(Comm* comm);

}  // namespace coll::net_ucx
