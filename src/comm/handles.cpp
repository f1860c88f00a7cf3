#include "comm/handles.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/types.hpp"

namespace coll {
namespace {

// The set of live handles is process-wide by nature: handles are process-wide. Each
// remembers its kind, so that a request passed as a communicator (or a communicator's
// address reused by a request after collCommDestroy) is refused, not used as one.
enum class Kind : uint8_t { Comm, Request };

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, Kind> live;
  // Bumped under mu by every unregistration: a thread's remembered answer for one handle
  // (below) holds while this has not moved.
  std::atomic<uint64_t> removals{0};
};
Registry& registry() {
  static Registry r;
  return r;
}

thread_local std::string tlsLastError = "no error";

void add(const void* h, Kind k) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().live[h] = k;
}

// Per thread: the communicator handle its current API call uses (CommUseScope), and how
// deep it is in such scopes. The list of every thread's slot is what destroy scans; it is
// never freed, as threads may still exit after static destruction.
struct UseSlot {
  std::atomic<const void*> comm{nullptr};
};
struct UseSlots {
  std::mutex mu;
  std::vector<UseSlot*> all;
};
UseSlots& useSlots() {
  static UseSlots* s = new UseSlots;
  return *s;
}

// Everything an API call reads or writes of its thread's state, in one constant-
// initialised, trivially destructible block: every call checks its handle and marks it in
// use, and in a shared library each separately reached thread_local costs a lookup of the
// thread's block (and one with a constructor, a guard check besides). Here a call pays one.
struct ThreadState {
  UseSlot slot;
  int depth = 0;
  bool listed = false;  // slot is in useSlots() (from this thread's first scope on)
  // The handle this thread last found live, its kind, and the removal count at the time:
  // a program calls with the same communicator over and over, so this saves the lock and
  // the hash lookup of nearly every check.
  const void* liveHandle = nullptr;
  Kind liveKind = Kind::Comm;
  uint64_t liveRemovals = 0;
};
thread_local ThreadState tls;

// Takes the slot of an exiting thread off the list (only threads that ever entered a
// scope have one there: this object is reached, and so made, only then).
struct SlotLister {
  UseSlot* slot;
  explicit SlotLister(UseSlot* s) : slot(s) {
    std::lock_guard<std::mutex> lock(useSlots().mu);
    useSlots().all.push_back(slot);
  }
  ~SlotLister() {
    std::lock_guard<std::mutex> lock(useSlots().mu);
    auto& all = useSlots().all;
    all.erase(std::find(all.begin(), all.end(), slot));
  }
};

void listSlot(ThreadState& t) {
  thread_local SlotLister lister(&t.slot);
  t.listed = true;
}

bool isLive(const void* h, Kind k) {
  if (!h) return false;
  Registry& r = registry();
  ThreadState& t = tls;
  // Mark before checking (sequentially consistent, paired with unregisterHandle's count
  // and waitUsersGone's reads): see CommUseScope.
  if (k == Kind::Comm && t.depth > 0) t.slot.comm.store(h, std::memory_order_seq_cst);
  if (h == t.liveHandle && k == t.liveKind && t.liveRemovals == r.removals.load(std::memory_order_seq_cst))
    return true;
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.live.find(h);
  if (it == r.live.end() || it->second != k) return false;
  t.liveHandle = h;
  t.liveKind = k;
  t.liveRemovals = r.removals.load(std::memory_order_relaxed);
  return true;
}

}  // namespace

void registerHandle(const collComm* h) { add(h, Kind::Comm); }
void registerHandle(const collRequest* h) { add(h, Kind::Request); }

bool unregisterHandle(const void* h) {
  std::lock_guard<std::mutex> lock(registry().mu);
  const bool removed = registry().live.erase(h) != 0;
  registry().removals.fetch_add(1, std::memory_order_seq_cst);
  return removed;
}

bool isLiveHandle(const collComm* h) { return isLive(h, Kind::Comm); }
bool isLiveHandle(const collRequest* h) { return isLive(h, Kind::Request); }

std::shared_ptr<Request> liveRequest(const collRequest* h, collComm** comm) {
  if (!h) return nullptr;
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().live.find(h);
  if (it == registry().live.end() || it->second != Kind::Request) return nullptr;
  *comm = h->comm;
  return h->req;
}

collComm& liveComm(collComm_t comm, const char* arg) {
  if (!comm) COLL_THROW(collInvalidArgument, arg, " is NULL");
  if (!isLiveHandle(comm))
    COLL_THROW(collInvalidUsage, arg, " is not a live communicator (destroyed, aborted or never created)");
  return *comm;
}

void recordError(collComm_t comm, collResult_t code, const char* what) {
  tlsLastError = what;
  if (comm && isLiveHandle(comm)) {
    std::lock_guard<std::mutex> lock(comm->errMu);
    comm->lastError = what;
  }
  (void)code;
}

const char* threadLastError() { return tlsLastError.c_str(); }

CommUseScope::CommUseScope() {
  ThreadState& t = tls;
  if (!t.listed) listSlot(t);
  prev_ = t.slot.comm.load(std::memory_order_relaxed);
  ++t.depth;
}

CommUseScope::~CommUseScope() {
  ThreadState& t = tls;
  --t.depth;
  t.slot.comm.store(prev_, std::memory_order_release);
}

bool waitUsersGone(const collComm* c, double seconds) {
  const UseSlot* self = &tls.slot;
  auto used = [&] {
    std::lock_guard<std::mutex> lock(useSlots().mu);
    for (const UseSlot* s : useSlots().all)
      if (s != self && s->comm.load(std::memory_order_seq_cst) == c) return true;
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int i = 0; used(); ++i) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (i < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

namespace {

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return an && bn && pa < pb + bn && pb < pa + an;
}

// Bytes of a buffer of a x b. No buffer is larger than PTRDIFF_MAX bytes (its end would
// lie past the address space): a count beyond that passed the size_t check, and the
// operation then crashed copying from memory that is not there, or failed on the peers.
size_t bytesChecked(size_t a, size_t b, const char* what) {
  if (b != 0 && a > SIZE_MAX / b) COLL_THROW(collInvalidArgument, what, " overflows size_t (", a, " x ", b, ")");
  if (a * b > static_cast<size_t>(PTRDIFF_MAX))
    COLL_THROW(collInvalidArgument, what, " = ", a * b, " bytes is more than any buffer holds (", a, " x ", b, ")");
  return a * b;
}

}  // namespace

void validateOp(const Comm& comm, const OpArgs& op, const void* stream, bool streamsUsable) {
  const int n = comm.nranks(), r = comm.rank();
  COLL_CHECK_ARG(validType(op.dtype), "datatype ", static_cast<int>(op.dtype), " is not a valid collDataType_t");
  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce ||
                       op.kind == OpKind::ReduceScatter;
  if (reduces) COLL_CHECK_ARG(validOp(op.op), "op ", static_cast<int>(op.op), " is not a valid collRedOp_t");
  if (reduces && isBitwiseOp(op.op))
    COLL_CHECK_ARG(!isFloatType(op.dtype), "op ", opName(op.op), " is bitwise: it takes integer types, not ",
                   typeName(op.dtype));
  if (op.isRooted())
    COLL_CHECK_ARG(op.root >= 0 && op.root < n, "root ", op.root, " is out of range [0, ", n, ")");
  if (op.isP2P())
    COLL_CHECK_ARG(op.root >= 0 && op.root < n, "peer ", op.root, " is out of range [0, ", n, ")");
#if COLL_HAVE_CUDA
  if (stream && !streamsUsable)
    COLL_THROW(collInvalidArgument, "stream is not NULL, but no CUDA device is usable in this process "
               "(pass NULL for host buffers)");
#else
  (void)streamsUsable;
  if (stream)
    COLL_THROW(collInvalidArgument, "stream is not NULL, but this build has no CUDA support (pass NULL for host buffers)");
#endif
  const size_t es = typeSize(op.dtype);
  const size_t one = bytesChecked(op.count, es, "count * element size");
  size_t sendBytes = one, recvBytes = one;
  switch (op.kind) {
    case OpKind::AllGather: recvBytes = bytesChecked(one, n, "count * nranks"); break;
    case OpKind::ReduceScatter: sendBytes = bytesChecked(one, n, "count * nranks"); break;
    case OpKind::AllToAll: sendBytes = recvBytes = bytesChecked(one, n, "count * nranks"); break;
    // The root's side of nranks blocks; checked on every rank, so that all of them refuse
    // a call the root cannot make instead of waiting for it.
    case OpKind::Gather: recvBytes = bytesChecked(one, n, "sendcount * nranks"); break;
    case OpKind::Scatter: sendBytes = bytesChecked(one, n, "recvcount * nranks"); break;
    default: break;
  }
  if (op.count == 0) return;
  // Only the root reads a broadcast's or scatter's send buffer, and writes a reduce's or
  // gather's receive buffer.
  const bool rootOnlySends = op.kind == OpKind::Broadcast || op.kind == OpKind::Scatter;
  const bool rootOnlyRecvs = op.kind == OpKind::Reduce || op.kind == OpKind::Gather;
  const bool needSend = op.kind != OpKind::Recv && !(rootOnlySends && r != op.root);
  const bool needRecv = op.kind != OpKind::Send && !(rootOnlyRecvs && r != op.root);
  if (needSend) COLL_CHECK_ARG(op.sendbuf, "sendbuff is NULL with count ", op.count);
  if (needRecv) COLL_CHECK_ARG(op.recvbuf, "recvbuff is NULL with count ", op.count);
  if (!needSend || !needRecv) return;
  // Out of place: the buffers must not overlap, except in the documented in-place forms.
  const char* s = static_cast<const char*>(op.sendbuf);
  const char* d = static_cast<const char*>(op.recvbuf);
  // Gather and scatter (on the root) share only the root's own block.
  if (op.kind == OpKind::Gather || op.kind == OpKind::Scatter) {
    const bool gather = op.kind == OpKind::Gather;
    if (gather ? s == d + r * one : d == s + r * one) return;
    COLL_CHECK_ARG(!overlaps(s, sendBytes, d, recvBytes), "sendbuff and recvbuff overlap on root ", r,
                   gather ? ", but gather is in place only when sendbuff == recvbuff + root * sendcount"
                          : ", but scatter is in place only when recvbuff == sendbuff + root * recvcount");
    return;
  }
  // All-gather and reduce-scatter share only the rank's own block: sendbuff == recvbuff is
  // in place on rank 0 alone, elsewhere it overlaps another rank's block.
  if (op.kind == OpKind::AllGather || op.kind == OpKind::ReduceScatter) {
    const bool gather = op.kind == OpKind::AllGather;
    if (gather ? s == d + r * one : d == s + r * one) return;
    COLL_CHECK_ARG(!overlaps(s, sendBytes, d, recvBytes), "sendbuff and recvbuff overlap on rank ", r,
                   gather ? ", but all-gather is in place only when sendbuff == recvbuff + rank * sendcount"
                          : ", but reduce-scatter is in place only when recvbuff == sendbuff + rank * recvcount");
    return;
  }
  if (s == d) return;
  COLL_CHECK_ARG(!overlaps(s, sendBytes, d, recvBytes),
                 "sendbuff and recvbuff overlap without being the same buffer (in-place)");
}

}  // namespace coll
