// Horovod-style C++ API over libcollective.
//
// Training frameworks hand the engine many named tensors per step, in an order that may
// differ between ranks. A background thread per process set negotiates which tensors are
// ready on every rank, fuses them into a few large collectives that run in the same
// order everywhere, and completes each tensor's Handle.
//
//   collective::hvd::init();                          // collectiverun / mpirun / Slurm env
//   Tensor g{grad_ptr, collFloat32, {1000, 2048}};    // a view: no copy
//   auto h = hvd::allreduce_async(g, g, "fc.weight"); // in place, Average by default
//   ...
//   hvd::synchronize(h);                              // throws hvd::Error on failure
//   hvd::shutdown();
//
// The free functions act on one process-wide default Context. A Context can also be
// made explicitly (several per process, for example one per thread in tests).
//
// Tensors passed to an async call must stay valid until its handle has completed.
// Errors are thrown as collective::hvd::Error (what() names the tensor and the ranks).
#pragma once

#if !defined(__cplusplus) || __cplusplus <= 201703L
#error "<collective/hvd.hpp> needs C++20 (-std=c++20); C and older C++ can use <collective.h>"
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.h"

// Same definition as src/base/export.hpp (an identical redefinition is allowed).
#define COLL_EXPORT __attribute__((visibility("default")))

namespace collective::hvd {

// SumReproducible and AverageReproducible: collSumReproducible and collAvgReproducible.
enum class ReduceOp : int { Sum = 0, Average = 1, Min = 2, Max = 3, Product = 4, SumReproducible = 5, AverageReproducible = 6 };

enum class DeviceType : int { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceType::CUDA, index}; }
  bool operator==(const Device&) const = default;
};

// A view of framework memory: pointer, element type, shape, device. Never owns data.
struct Tensor {
  void* data = nullptr;
  collDataType_t dtype = collFloat32;
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  Device device{};

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t byte_size() const {
    return static_cast<size_t>(num_elements()) * collTypeSize(dtype);
  }
};

// Gradient compression for allreduce (float32 tensors, Sum or Average).
enum class Compressor : int { None = 0, FP16 = 1, BF16 = 2, Int8 = 3, TopK = 4 };
enum class Rounding : int { Stochastic = 0, Nearest = 1 };

struct Compression {
  Compressor kind = Compressor::None;
  int block_size = 256;                     // Int8: elements sharing one float scale
  Rounding rounding = Rounding::Stochastic;  // Int8
  double density = 0.01;                    // TopK: fraction of elements sent
  bool error_feedback = true;               // Int8, TopK: keep what was not sent, add it next step

  static Compression none() { return {}; }
  static Compression fp16() { return {Compressor::FP16}; }
  static Compression bf16() { return {Compressor::BF16}; }
  static Compression int8(int block_size = 256, Rounding r = Rounding::Stochastic,
                          bool error_feedback = true) {
    return {Compressor::Int8, block_size, r, 0.01, error_feedback};
  }
  static Compression topk(double density = 0.01, bool error_feedback = true) {
    return {Compressor::TopK, 256, Rounding::Nearest, density, error_feedback};
  }
};

// A subset of the global ranks with its own communicator, queue and background thread.
// The default-constructed value is the global process set (id 0).
class ProcessSet {
 public:
  ProcessSet() = default;
  explicit ProcessSet(int id) : id_(id) {}
  int id() const { return id_; }
  bool operator==(const ProcessSet&) const = default;

 private:
  int id_ = 0;
};

// Allocates the output of allgather / alltoall / reducescatter once its shape is known
// (called on the engine's thread). Returns a pointer to at least byte_size() bytes of
// memory on spec.device; spec.data is null on entry.
using Allocator = std::function<void*(const Tensor& spec)>;

struct AllreduceOptions {
  ReduceOp op = ReduceOp::Average;
  double prescale_factor = 1.0;   // applied to the input before the reduction
  double postscale_factor = 1.0;  // applied to the result (after Average's division)
  Compression compression{};
  ProcessSet process_set{};
};

struct ReducescatterOptions {
  ReduceOp op = ReduceOp::Average;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  ProcessSet process_set{};
  Allocator allocate{};  // default: the handle owns the output memory
};

struct CollectiveOptions {
  ProcessSet process_set{};
  Allocator allocate{};  // allgather / alltoall only; default: handle-owned memory
};

// Engine-produced output (allgather, alltoall, reducescatter).
struct Output {
  Tensor tensor;                         // shape decided by the negotiation
  std::shared_ptr<void> storage;         // owns tensor.data unless an Allocator was given
  std::vector<int64_t> received_splits;  // alltoall: rows received from each rank
};

class COLL_EXPORT Error : public std::runtime_error {
 public:
  Error(collResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  collResult_t code() const { return code_; }

 private:
  collResult_t code_;
};

namespace detail {
struct HandleState;
}

// Completion of one async call. Copyable; all copies share the same state.
class COLL_EXPORT Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> s) : state_(std::move(s)) {}
  bool valid() const { return state_ != nullptr; }
  // True once the operation finished, successfully or not. Never blocks.
  bool poll() const;
  // Waits for completion; throws Error if the operation failed.
  void wait() const;
  // The output of allgather / alltoall / reducescatter (valid after wait()).
  const Output& output() const;
  const std::shared_ptr<detail::HandleState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::HandleState> state_;
};

// Counters of one process set's engine (for tests, benchmarks and tuning).
struct Stats {
  uint64_t cycles = 0;             // negotiation rounds
  uint64_t cache_hits = 0;         // tensors scheduled through the response cache
  uint64_t negotiated = 0;         // tensors scheduled through the full negotiation
  uint64_t collectives = 0;        // data collectives issued
  uint64_t fused_tensors = 0;      // tensors that went through a fusion buffer
  uint64_t stall_warnings = 0;     // stall reports issued by this rank
  uint64_t direct_bytes = 0;       // uncompressed tensors this large ran unfused in the last
                                   // round (COLL_FUSION_DIRECT_BYTES; same on every rank)
  // The parameters in effect: COLL_FUSION_THRESHOLD, COLL_CYCLE_TIME (microseconds) and
  // COLL_FUSION_CHUNK, or the values COLL_AUTOTUNE chose (the same on every rank).
  uint64_t fusion_threshold = 0;
  uint64_t cycle_time_us = 0;
  uint64_t fusion_chunk = 0;
  bool autotune_done = false;      // COLL_AUTOTUNE settled on its final values
  // Of the cycles, those run in the thread of a caller waiting on its results rather than
  // in the engine's own thread (COLL_ENGINE_CALLER_ROUNDS).
  uint64_t caller_rounds = 0;
};

class ContextImpl;

// Everything the API needs for one process: communicators, process sets and engines.
class COLL_EXPORT Context {
 public:
  // Reads rank, size and rendezvous from the environment (collCommInitFromEnv).
  static std::unique_ptr<Context> from_env();
  // Uses comm for the global process set; the Context destroys it when take_ownership.
  // The engine's tunables (COLL_FUSION_THRESHOLD, COLL_TIMELINE, ...) are those given to
  // comm in collConfig_t::tunables, else the environment's; so for from_ranks.
  static std::unique_ptr<Context> from_comm(collComm_t comm, bool take_ownership = false);
  // Collective over `comm`: members of `ranks` (ranks of comm) form the global process set;
  // others get nullptr. Takes ownership of comm when take_ownership.
  static std::unique_ptr<Context> from_ranks(collComm_t comm, const std::vector<int>& ranks,
                                             bool take_ownership = false);
  ~Context();  // shutdown()
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Stops the engines on every rank at their next round, as Horovod does: operations
  // still pending on any rank fail, and later calls there are refused with the reason.
  // Returns once this rank's engines have stopped (bounded by COLL_SHUTDOWN_TIMEOUT).
  void shutdown();

  int size() const;
  int rank() const;
  int local_size() const;
  int local_rank() const;
  int cross_size() const;
  int cross_rank() const;

  Handle allreduce_async(const Tensor& input, const Tensor& output, const std::string& name,
                         const AllreduceOptions& opts = {});
  // Always fused and completed together; members are named name.0, name.1, ...
  Handle grouped_allreduce_async(const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& outputs, const std::string& name,
                                 const AllreduceOptions& opts = {});
  // First dimension may differ per rank; the output stacks every rank's rows in rank order.
  Handle allgather_async(const Tensor& input, const std::string& name,
                         const CollectiveOptions& opts = {});
  // input == output (same data) broadcasts in place.
  Handle broadcast_async(const Tensor& input, const Tensor& output, int root_rank,
                         const std::string& name, const CollectiveOptions& opts = {});
  // splits[r] rows of input go to rank r (empty: first dimension split evenly).
  Handle alltoall_async(const Tensor& input, const std::vector<int64_t>& splits,
                        const std::string& name, const CollectiveOptions& opts = {});
  // Reduces over ranks and leaves rank r its share of the first dimension (the first
  // dim % size ranks get one more row).
  Handle reducescatter_async(const Tensor& input, const std::string& name,
                             const ReducescatterOptions& opts = {});
  void barrier(ProcessSet ps = {});
  // This rank has no more data: it takes part in other ranks' allreduces with zeros until
  // every rank joined. Returns the last rank to join.
  int join(ProcessSet ps = {});

  // Collective over the global process set: every rank calls it with the same ranks.
  ProcessSet add_process_set(const std::vector<int>& ranks);
  void remove_process_set(ProcessSet ps);
  std::vector<int> process_set_ranks(ProcessSet ps) const;
  bool process_set_included(ProcessSet ps) const;
  int process_set_rank(ProcessSet ps) const;  // -1 if not a member
  int process_set_size(ProcessSet ps) const;

  Stats stats(ProcessSet ps = {}) const;

  // Records the engine's timeline (Chrome trace JSON, as COLL_TIMELINE does) into path
  // from now until stop_timeline(): "%r" in path becomes the rank, and without it only
  // rank 0 writes. mark_cycles adds a marker for every engine round that ran operations.
  // Local to the calling rank. Throws collInvalidUsage while a timeline is being written
  // (COLL_TIMELINE's included), collSystemError when the file cannot be created.
  void start_timeline(const std::string& path, bool mark_cycles = false);
  // Closes the file; nothing when no timeline is being written.
  void stop_timeline();

 private:
  explicit Context(std::unique_ptr<ContextImpl> impl);
  std::unique_ptr<ContextImpl> impl_;
};

// ---- the Horovod-style free functions (default process-wide Context) ----

COLL_EXPORT void init();
COLL_EXPORT void init(collComm_t comm);                     // not owned
COLL_EXPORT void init(const std::vector<int>& ranks);       // subset of the env's world
COLL_EXPORT void shutdown();
COLL_EXPORT bool is_initialized();
COLL_EXPORT Context& context();  // throws if not initialized

COLL_EXPORT int size();
COLL_EXPORT int rank();
COLL_EXPORT int local_size();
COLL_EXPORT int local_rank();
COLL_EXPORT int cross_size();
COLL_EXPORT int cross_rank();

COLL_EXPORT Handle allreduce_async(const Tensor& input, const Tensor& output,
                                   const std::string& name, const AllreduceOptions& opts = {});
COLL_EXPORT void allreduce(const Tensor& input, const Tensor& output, const std::string& name,
                           const AllreduceOptions& opts = {});
COLL_EXPORT Handle grouped_allreduce_async(const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& outputs,
                                           const std::string& name,
                                           const AllreduceOptions& opts = {});
COLL_EXPORT void grouped_allreduce(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& outputs, const std::string& name,
                                   const AllreduceOptions& opts = {});
COLL_EXPORT Handle allgather_async(const Tensor& input, const std::string& name,
                                   const CollectiveOptions& opts = {});
COLL_EXPORT Output allgather(const Tensor& input, const std::string& name,
                             const CollectiveOptions& opts = {});
COLL_EXPORT Handle broadcast_async(const Tensor& input, const Tensor& output, int root_rank,
                                   const std::string& name, const CollectiveOptions& opts = {});
COLL_EXPORT void broadcast(const Tensor& input, const Tensor& output, int root_rank,
                           const std::string& name, const CollectiveOptions& opts = {});
COLL_EXPORT Handle alltoall_async(const Tensor& input, const std::vector<int64_t>& splits,
                                  const std::string& name, const CollectiveOptions& opts = {});
COLL_EXPORT Output alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                            const std::string& name, const CollectiveOptions& opts = {});
COLL_EXPORT Handle reducescatter_async(const Tensor& input, const std::string& name,
                                       const ReducescatterOptions& opts = {});
COLL_EXPORT Output reducescatter(const Tensor& input, const std::string& name,
                                 const ReducescatterOptions& opts = {});
COLL_EXPORT void barrier(ProcessSet ps = {});
COLL_EXPORT int join(ProcessSet ps = {});

COLL_EXPORT bool poll(const Handle& handle);
COLL_EXPORT void synchronize(const Handle& handle);

COLL_EXPORT void start_timeline(const std::string& path, bool mark_cycles = false);
COLL_EXPORT void stop_timeline();

COLL_EXPORT ProcessSet global_process_set();
COLL_EXPORT ProcessSet add_process_set(const std::vector<int>& ranks);
COLL_EXPORT void remove_process_set(ProcessSet ps);

}  // namespace collective::hvd
