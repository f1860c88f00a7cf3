// The C interface of include/collective/hvd.h over the process-wide default engine of the
// C++ free functions. Each call catches everything, keeps the reason per thread and
// returns a code; handles are numbers in a table that owns the C++ Handle (and with it
// any engine-made output) until collHvdRelease.
#include "collective/hvd.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "collective/hvd.hpp"
#include "base/error.hpp"
#include "base/export.hpp"

namespace {

namespace hvd = collective::hvd;

thread_local std::string tlsError;

enum class Kind { Allreduce, Broadcast, Allgather, Alltoall, Reducescatter };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Allreduce: return "allreduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::Allgather: return "allgather";
    case Kind::Alltoall: return "alltoall";
    case Kind::Reducescatter: return "reducescatter";
  }
  return "?";
}

struct Entry {
  hvd::Handle handle;
  Kind kind;
  bool taken = false;  // collHvdOutputTake gave the output's memory away
};

struct HandleTable {
  std::mutex mu;
  std::unordered_map<int64_t, Entry> entries;
  int64_t next = 1;
  // Outputs handed over by collHvdOutputTake, by address, until collHvdOutputFree.
  std::unordered_map<const void*, std::shared_ptr<void>> taken;
};

HandleTable& table() {
  static HandleTable t;
  return t;
}

collResult_t fail(collResult_t code, std::string msg) {
  tlsError = std::move(msg);
  return code;
}

// Runs f, turning every exception into a code and this thread's message.
template <typename F>
collResult_t guarded(const char* call, F&& f) {
  tlsError.clear();
  try {
    f();
    return collSuccess;
  } catch (const hvd::Error& e) {
    return fail(e.code(), e.what());
  } catch (const coll::Error& e) {
    return fail(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(collSystemError, coll::strCat(call, ": out of memory"));
  } catch (const std::exception& e) {
    return fail(collInternalError, coll::strCat(call, ": ", e.what()));
  } catch (...) {
    return fail(collInternalError, coll::strCat(call, ": unknown exception"));
  }
}

#define HVD_CHECK(cond, ...)                                          \
  do {                                                                \
    if (!(cond)) COLL_THROW(collInvalidArgument, __VA_ARGS__);        \
  } while (0)

hvd::Tensor toTensor(const collHvdTensor_t* t, const char* call, const char* what) {
  HVD_CHECK(t, call, ": ", what, " is NULL");
  HVD_CHECK(t->ndim >= 0 && t->ndim <= COLL_HVD_MAX_DIMS, call, ": ", what, " has ndim ", t->ndim,
            " (0..", COLL_HVD_MAX_DIMS, ")");
  HVD_CHECK(t->ndim == 0 || t->shape, call, ": ", what, " has ndim ", t->ndim, " but no shape");
  HVD_CHECK(t->deviceType == collHvdCPU || t->deviceType == collHvdCUDA, call, ": ", what,
            " has device type ", t->deviceType, " (0 CPU, 1 CUDA)");
  hvd::Tensor out;
  out.data = t->data;
  out.dtype = t->dtype;
  for (int i = 0; i < t->ndim; ++i) {
    HVD_CHECK(t->shape[i] >= 0, call, ": ", what, " has a negative dimension ", t->shape[i],
              " at index ", i);
    out.shape.push_back(t->shape[i]);
  }
  out.device = t->deviceType == collHvdCUDA ? hvd::Device::cuda(t->deviceIndex) : hvd::Device::cpu();
  return out;
}

hvd::ReduceOp toOp(int op, const char* call) {
  HVD_CHECK(op >= collHvdSum && op <= collHvdAverageReproducible, call, ": unknown op ", op,
            " (0 Sum, 1 Average, 2 Min, 3 Max, 4 Product, 5 SumReproducible, 6 AverageReproducible)");
  return static_cast<hvd::ReduceOp>(op);
}

hvd::Compression toCompression(const collHvdCompression_t* c, const char* call) {
  hvd::Compression out;
  if (!c) return out;
  HVD_CHECK(c->compressor >= collHvdCompressNone && c->compressor <= collHvdCompressTopK, call,
            ": unknown compressor ", c->compressor, " (0 none, 1 fp16, 2 bf16, 3 int8, 4 topk)");
  out.kind = static_cast<hvd::Compressor>(c->compressor);
  out.block_size = c->blockSize;
  out.rounding = c->stochastic ? hvd::Rounding::Stochastic : hvd::Rounding::Nearest;
  out.density = c->density;
  out.error_feedback = c->errorFeedback != 0;
  return out;
}

// The options every reducing call shares (AllreduceOptions, ReducescatterOptions).
template <typename Options>
Options reduceOptions(int op, double prescale, double postscale, int processSet, const char* call) {
  Options o;
  o.op = toOp(op, call);
  o.prescale_factor = prescale;
  o.postscale_factor = postscale;
  o.process_set = hvd::ProcessSet{processSet};
  return o;
}

std::string toName(const char* name, const char* call) {
  HVD_CHECK(name, call, ": name is NULL");
  return name;
}

void storeHandle(const hvd::Handle& h, Kind kind, collHvdHandle_t* out) {
  auto& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  const int64_t id = t.next++;
  t.entries.emplace(id, Entry{h, kind});
  *out = id;
}

Entry lookup(collHvdHandle_t id, const char* call) {
  auto& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  auto it = t.entries.find(id);
  if (it == t.entries.end())
    COLL_THROW(collInvalidArgument, call, ": unknown handle ", id, " (never issued, or released)");
  return it->second;
}

// The output of a finished, successful allgather / alltoall / reducescatter.
const hvd::Output& finishedOutput(const Entry& e, collHvdHandle_t id, const char* call) {
  if (e.kind == Kind::Allreduce || e.kind == Kind::Broadcast)
    COLL_THROW(collInvalidUsage, call, ": handle ", id, " is a ", kindName(e.kind),
               ", which writes the caller's output tensor and has no output of its own");
  if (!e.handle.poll())
    COLL_THROW(collInvalidUsage, call, ": handle ", id, " (", kindName(e.kind),
               ") has not finished: wait for it first");
  e.handle.wait();  // finished: rethrows the operation's failure, if any
  return e.handle.output();
}

#define HVD_OUT(ptr, call) HVD_CHECK(ptr, call, ": " #ptr " is NULL")

}  // namespace

extern "C" {

COLL_EXPORT const char* collHvdLastError(void) { return tlsError.c_str(); }

COLL_EXPORT collResult_t collHvdInit(void) {
  return guarded("collHvdInit", [] { hvd::init(); });
}

COLL_EXPORT collResult_t collHvdInitComm(collComm_t comm) {
  return guarded("collHvdInitComm", [comm] {
    HVD_CHECK(comm, "collHvdInitComm", ": comm is NULL");
    hvd::init(comm);
  });
}

COLL_EXPORT collResult_t collHvdShutdown(void) {
  return guarded("collHvdShutdown", [] { hvd::shutdown(); });
}

COLL_EXPORT int collHvdIsInitialized(void) {
  try {
    return hvd::is_initialized() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

COLL_EXPORT collResult_t collHvdTopology(int* rank, int* size, int* localRank, int* localSize, int* crossRank,
                             int* crossSize) {
  return guarded("collHvdTopology", [&] {
    hvd::Context& c = hvd::context();
    if (rank) *rank = c.rank();
    if (size) *size = c.size();
    if (localRank) *localRank = c.local_rank();
    if (localSize) *localSize = c.local_size();
    if (crossRank) *crossRank = c.cross_rank();
    if (crossSize) *crossSize = c.cross_size();
  });
}

COLL_EXPORT collResult_t collHvdAddProcessSet(const int* ranks, int nranks, int* id) {
  return guarded("collHvdAddProcessSet", [&] {
    HVD_OUT(id, "collHvdAddProcessSet");
    HVD_CHECK(nranks > 0, "collHvdAddProcessSet: nranks must be positive, got ", nranks);
    HVD_CHECK(ranks, "collHvdAddProcessSet: ranks is NULL");
    *id = hvd::add_process_set(std::vector<int>(ranks, ranks + nranks)).id();
  });
}

COLL_EXPORT collResult_t collHvdRemoveProcessSet(int id) {
  return guarded("collHvdRemoveProcessSet", [&] {
    HVD_CHECK(id != 0, "collHvdRemoveProcessSet: the global process set (0) cannot be removed");
    hvd::remove_process_set(hvd::ProcessSet{id});
  });
}

COLL_EXPORT collResult_t collHvdProcessSetInfo(int id, int* rank, int* size) {
  return guarded("collHvdProcessSetInfo", [&] {
    hvd::Context& c = hvd::context();
    const hvd::ProcessSet ps{id};
    if (rank) *rank = c.process_set_rank(ps);
    if (size) *size = c.process_set_size(ps);
  });
}

COLL_EXPORT collResult_t collHvdAllreduceAsync(const collHvdTensor_t* input, const collHvdTensor_t* output,
                                   const char* name, int op, double prescale, double postscale,
                                   const collHvdCompression_t* compression, int processSet,
                                   collHvdHandle_t* handle) {
  constexpr const char* call = "collHvdAllreduceAsync";
  return guarded(call, [&] {
    HVD_OUT(handle, call);
    auto o = reduceOptions<hvd::AllreduceOptions>(op, prescale, postscale, processSet, call);
    o.compression = toCompression(compression, call);
    const hvd::Tensor in = toTensor(input, call, "input");
    const hvd::Tensor out = toTensor(output, call, "output");
    storeHandle(hvd::allreduce_async(in, out, toName(name, call), o), Kind::Allreduce, handle);
  });
}

COLL_EXPORT collResult_t collHvdGroupedAllreduceAsync(int n, const collHvdTensor_t* inputs,
                                          const collHvdTensor_t* outputs, const char* name,
                                          int op, double prescale, double postscale,
                                          const collHvdCompression_t* compression,
                                          int processSet, collHvdHandle_t* handle) {
  constexpr const char* call = "collHvdGroupedAllreduceAsync";
  return guarded(call, [&] {
    HVD_OUT(handle, call);
    HVD_CHECK(n > 0, call, ": n must be positive, got ", n);
    HVD_CHECK(inputs && outputs, call, ": inputs or outputs is NULL");
    auto o = reduceOptions<hvd::AllreduceOptions>(op, prescale, postscale, processSet, call);
    o.compression = toCompression(compression, call);
    std::vector<hvd::Tensor> in, out;
    for (int i = 0; i < n; ++i) {
      in.push_back(toTensor(&inputs[i], call, "an input"));
      out.push_back(toTensor(&outputs[i], call, "an output"));
    }
    storeHandle(hvd::grouped_allreduce_async(in, out, toName(name, call), o), Kind::Allreduce, handle);
  });
}

COLL_EXPORT collResult_t collHvdBroadcastAsync(const collHvdTensor_t* input, const collHvdTensor_t* output,
                                   int rootRank, const char* name, int processSet,
                                   collHvdHandle_t* handle) {
  constexpr const char* call = "collHvdBroadcastAsync";
  return guarded(call, [&] {
    HVD_OUT(handle, call);
    hvd::CollectiveOptions o;
    o.process_set = hvd::ProcessSet{processSet};
    const hvd::Tensor in = toTensor(input, call, "input");
    const hvd::Tensor out = toTensor(output, call, "output");
    storeHandle(hvd::broadcast_async(in, out, rootRank, toName(name, call), o), Kind::Broadcast,
                handle);
  });
}

COLL_EXPORT collResult_t collHvdAllgatherAsync(const collHvdTensor_t* input, const char* name, int processSet,
                                   collHvdHandle_t* handle) {
  constexpr const char* call = "collHvdAllgatherAsync";
  return guarded(call, [&] {
    HVD_OUT(handle, call);
    hvd::CollectiveOptions o;
    o.process_set = hvd::ProcessSet{processSet};
    storeHandle(hvd::allgather_async(toTensor(input, call, "input"), toName(name, call), o),
                Kind::Allgather, handle);
  });
}

COLL_EXPORT collResult_t collHvdAlltoallAsync(const collHvdTensor_t* input, const int64_t* splits, int nsplits,
                                  const char* name, int processSet, collHvdHandle_t* handle) {
  constexpr const char* call = "collHvdAlltoallAsync";
  return guarded(call, [&] {
    HVD_OUT(handle, call);
    HVD_CHECK(nsplits >= 0, call, ": nsplits must not be negative, got ", nsplits);
    HVD_CHECK(nsplits == 0 || splits, call, ": nsplits is ", nsplits, " but splits is NULL");
    hvd::CollectiveOptions o;
    o.process_set = hvd::ProcessSet{processSet};
    std::vector<int64_t> s(splits, splits + nsplits);
    storeHandle(hvd::alltoall_async(toTensor(input, call, "input"), s, toName(name, call), o),
                Kind::Alltoall, handle);
  });
}

COLL_EXPORT collResult_t collHvdReducescatterAsync(const collHvdTensor_t* input, const char* name, int op,
                                       double prescale, double postscale, int processSet,
                                       collHvdHandle_t* handle) {
  constexpr const char* call = "collHvdReducescatterAsync";
  return guarded(call, [&] {
    HVD_OUT(handle, call);
    const auto o = reduceOptions<hvd::ReducescatterOptions>(op, prescale, postscale, processSet, call);
    storeHandle(hvd::reducescatter_async(toTensor(input, call, "input"), toName(name, call), o),
                Kind::Reducescatter, handle);
  });
}

COLL_EXPORT collResult_t collHvdPoll(collHvdHandle_t handle, int* done) {
  return guarded("collHvdPoll", [&] {
    HVD_OUT(done, "collHvdPoll");
    *done = lookup(handle, "collHvdPoll").handle.poll() ? 1 : 0;
  });
}

COLL_EXPORT collResult_t collHvdWait(collHvdHandle_t handle) {
  return guarded("collHvdWait", [&] { lookup(handle, "collHvdWait").handle.wait(); });
}

COLL_EXPORT collResult_t collHvdOutputShape(collHvdHandle_t handle, int* ndim, int64_t* shape) {
  constexpr const char* call = "collHvdOutputShape";
  return guarded(call, [&] {
    HVD_OUT(ndim, call);
    HVD_OUT(shape, call);
    const hvd::Output& out = finishedOutput(lookup(handle, call), handle, call);
    const auto& dims = out.tensor.shape;
    if (dims.size() > COLL_HVD_MAX_DIMS)
      COLL_THROW(collInternalError, call, ": output has ", dims.size(), " dimensions");
    *ndim = static_cast<int>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) shape[i] = dims[i];
  });
}

COLL_EXPORT collResult_t collHvdOutputCopy(collHvdHandle_t handle, void* dst, size_t bytes) {
  constexpr const char* call = "collHvdOutputCopy";
  return guarded(call, [&] {
    const hvd::Output& out = finishedOutput(lookup(handle, call), handle, call);
    const size_t have = out.tensor.byte_size();
    HVD_CHECK(bytes == have, call, ": the output holds ", have, " bytes, the destination ", bytes);
    if (out.tensor.device.type != hvd::DeviceType::CPU)
      COLL_THROW(collInvalidUsage, call, ": the output is in device memory; copy it with the "
                 "device's runtime");
    if (have == 0) return;
    HVD_CHECK(dst, call, ": dst is NULL");
    std::memcpy(dst, out.tensor.data, have);
  });
}

COLL_EXPORT collResult_t collHvdReceivedSplits(collHvdHandle_t handle, int64_t* splits, int n) {
  constexpr const char* call = "collHvdReceivedSplits";
  return guarded(call, [&] {
    const Entry e = lookup(handle, call);
    if (e.kind != Kind::Alltoall)
      COLL_THROW(collInvalidUsage, call, ": handle ", handle, " is a ", kindName(e.kind),
                 "; only alltoall receives splits");
    const hvd::Output& out = finishedOutput(e, handle, call);
    const auto& got = out.received_splits;
    HVD_CHECK(n == static_cast<int>(got.size()), call, ": n is ", n, " but the process set has ",
              got.size(), " ranks");
    HVD_CHECK(n == 0 || splits, call, ": splits is NULL");
    for (int i = 0; i < n; ++i) splits[i] = got[static_cast<size_t>(i)];
  });
}

COLL_EXPORT collResult_t collHvdOutputTake(collHvdHandle_t handle, void** data) {
  constexpr const char* call = "collHvdOutputTake";
  return guarded(call, [&] {
    HVD_OUT(data, call);
    *data = nullptr;
    const Entry e = lookup(handle, call);
    const hvd::Output& out = finishedOutput(e, handle, call);
    if (out.tensor.device.type != hvd::DeviceType::CPU)
      COLL_THROW(collInvalidUsage, call, ": the output is in device memory");
    if (out.tensor.byte_size() == 0) return;  // nothing to hand over: *data stays NULL
    if (!out.storage)
      COLL_THROW(collInternalError, call, ": handle ", handle, "'s output has no storage");
    auto& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    auto it = t.entries.find(handle);
    if (it == t.entries.end())
      COLL_THROW(collInvalidArgument, call, ": unknown handle ", handle, " (released meanwhile)");
    if (it->second.taken)
      COLL_THROW(collInvalidUsage, call, ": handle ", handle, "'s output was taken already");
    it->second.taken = true;
    t.taken.emplace(out.storage.get(), out.storage);
    *data = out.storage.get();
  });
}

COLL_EXPORT collResult_t collHvdOutputFree(void* data) {
  return guarded("collHvdOutputFree", [&] {
    if (!data) return;
    auto& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    if (t.taken.erase(data) == 0)
      COLL_THROW(collInvalidArgument, "collHvdOutputFree: ", data,
                 " is not an output collHvdOutputTake handed over (or it was freed already)");
  });
}

COLL_EXPORT collResult_t collHvdRelease(collHvdHandle_t handle) {
  return guarded("collHvdRelease", [&] {
    auto& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    if (t.entries.erase(handle) == 0)
      COLL_THROW(collInvalidArgument, "collHvdRelease: unknown handle ", handle,
                 " (never issued, or released)");
  });
}

COLL_EXPORT collResult_t collHvdStartTimeline(const char* path, int markCycles) {
  return guarded("collHvdStartTimeline", [&] {
    HVD_CHECK(path && *path, "collHvdStartTimeline: path is NULL or empty");
    hvd::start_timeline(path, markCycles != 0);
  });
}

COLL_EXPORT collResult_t collHvdStopTimeline(void) {
  return guarded("collHvdStopTimeline", [&] { hvd::stop_timeline(); });
}

COLL_EXPORT collResult_t collHvdBarrier(int processSet) {
  return guarded("collHvdBarrier", [&] { hvd::barrier(hvd::ProcessSet{processSet}); });
}

COLL_EXPORT collResult_t collHvdJoin(int processSet, int* lastRank) {
  return guarded("collHvdJoin", [&] {
    const int last = hvd::join(hvd::ProcessSet{processSet});
    if (lastRank) *lastRank = last;
  });
}

}  // extern "C"
