// The public hvd API: Context forwards to ContextImpl; the free functions act on one
// process-wide default Context. That default is the one piece of global state here, and
// deliberately so: the Horovod-style API (init() ... shutdown()) is process-wide by
// definition. Code that needs several contexts (tests, libraries) makes its own.
#include <mutex>

#include "base/config.hpp"
#include "base/error.hpp"
#include "comm/comm.hpp"
#include "comm/handles.hpp"
#include "engine/context.hpp"

namespace collective::hvd {

using coll::engine::makeCommCollectives;

namespace {

template <typename F>
auto translate(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const coll::Error& e) {
    throw Error(e.code(), e.what());
  }
}

// The engine's tunables: those given to the communicator (collConfig_t::tunables), which
// its splits inherit, in place of the environment's.
coll::Config configOf(collComm_t comm) {
  coll::CommUseScope use;
  return coll::Config::fromEnv(coll::liveComm(comm).impl->givenConfig());
}

}  // namespace

Context::Context(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

std::unique_ptr<Context> Context::from_comm(collComm_t comm, bool take_ownership) {
  if (!comm) throw Error(collInvalidArgument, "Context::from_comm: communicator is null");
  return translate([&] {
    auto collectives = makeCommCollectives(comm, take_ownership);
    auto impl = std::make_unique<ContextImpl>(std::move(collectives), configOf(comm));
    return std::unique_ptr<Context>(new Context(std::move(impl)));
  });
}

std::unique_ptr<Context> Context::from_env() {
  collComm_t comm = nullptr;
  collResult_t res = collCommInitFromEnv(&comm);
  if (res != collSuccess)
    throw Error(res, coll::strCat("init: collCommInitFromEnv failed: ", collGetLastError(nullptr)));
  return from_comm(comm, true);
}

std::unique_ptr<Context> Context::from_ranks(collComm_t comm, const std::vector<int>& ranks,
                                             bool take_ownership) {
  if (!comm) throw Error(collInvalidArgument, "Context::from_ranks: communicator is null");
  return translate([&]() -> std::unique_ptr<Context> {
    auto parent = makeCommCollectives(comm, take_ownership);
    bool member = false;
    for (int r : ranks) member |= r == parent->rank();
    auto sub = parent->split(member ? 0 : COLL_SPLIT_NOCOLOR, parent->rank());
    if (!sub) return nullptr;
    auto impl = std::make_unique<ContextImpl>(std::move(sub), configOf(comm));
    return std::unique_ptr<Context>(new Context(std::move(impl)));
  });
}

void Context::shutdown() { translate([&] { impl_->shutdown(); }); }
int Context::size() const { return impl_->size(); }
int Context::rank() const { return impl_->rank(); }
int Context::local_size() const { return impl_->localSize(); }
int Context::local_rank() const { return impl_->localRank(); }
int Context::cross_size() const { return impl_->crossSize(); }
int Context::cross_rank() const { return impl_->crossRank(); }

Handle Context::allreduce_async(const Tensor& in, const Tensor& out, const std::string& name,
                                const AllreduceOptions& o) {
  return translate([&] { return impl_->allreduce(in, out, name, o); });
}
Handle Context::grouped_allreduce_async(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                        const std::string& name, const AllreduceOptions& o) {
  return translate([&] { return impl_->groupedAllreduce(in, out, name, o); });
}
Handle Context::allgather_async(const Tensor& in, const std::string& name, const CollectiveOptions& o) {
  return translate([&] { return impl_->allgather(in, name, o); });
}
Handle Context::broadcast_async(const Tensor& in, const Tensor& out, int root, const std::string& name,
                                const CollectiveOptions& o) {
  return translate([&] { return impl_->broadcast(in, out, root, name, o); });
}
Handle Context::alltoall_async(const Tensor& in, const std::vector<int64_t>& splits,
                               const std::string& name, const CollectiveOptions& o) {
  return translate([&] { return impl_->alltoall(in, splits, name, o); });
}
Handle Context::reducescatter_async(const Tensor& in, const std::string& name,
                                    const ReducescatterOptions& o) {
  return translate([&] { return impl_->reducescatter(in, name, o); });
}
void Context::barrier(ProcessSet ps) { translate([&] { impl_->barrier(ps); }); }
void Context::start_timeline(const std::string& path, bool mark_cycles) {
  translate([&] { impl_->startTimeline(path, mark_cycles); });
}
void Context::stop_timeline() { translate([&] { impl_->stopTimeline(); }); }
int Context::join(ProcessSet ps) { return translate([&] { return impl_->join(ps); }); }

ProcessSet Context::add_process_set(const std::vector<int>& ranks) {
  return translate([&] { return impl_->addProcessSet(ranks); });
}
void Context::remove_process_set(ProcessSet ps) { translate([&] { impl_->removeProcessSet(ps); }); }
std::vector<int> Context::process_set_ranks(ProcessSet ps) const { return impl_->processSetRanks(ps); }
bool Context::process_set_included(ProcessSet ps) const { return impl_->processSetRank(ps) >= 0; }
int Context::process_set_rank(ProcessSet ps) const { return impl_->processSetRank(ps); }
int Context::process_set_size(ProcessSet ps) const {
  return static_cast<int>(impl_->processSetRanks(ps).size());
}
Stats Context::stats(ProcessSet ps) const { return impl_->stats(ps); }

// ---- the default context ----

namespace {

struct DefaultContext {
  std::mutex mu;
  std::unique_ptr<Context> ctx;
};

DefaultContext& defaults() {
  static DefaultContext d;
  return d;
}

void setDefault(std::unique_ptr<Context> c) {
  auto& d = defaults();
  std::lock_guard<std::mutex> lk(d.mu);
  if (d.ctx) throw Error(collInvalidUsage, "init: already initialized (call shutdown() first)");
  d.ctx = std::move(c);
}

}  // namespace

void init() { setDefault(Context::from_env()); }
void init(collComm_t comm) { setDefault(Context::from_comm(comm, false)); }

void init(const std::vector<int>& ranks) {
  collComm_t comm = nullptr;
  collResult_t res = collCommInitFromEnv(&comm);
  if (res != collSuccess)
    throw Error(res, coll::strCat("init: collCommInitFromEnv failed: ", collGetLastError(nullptr)));
  auto c = Context::from_ranks(comm, ranks, true);
  if (c) setDefault(std::move(c));
}

void shutdown() {
  std::unique_ptr<Context> c;
  {
    auto& d = defaults();
    std::lock_guard<std::mutex> lk(d.mu);
    c = std::move(d.ctx);
  }
  if (c) c->shutdown();
}

bool is_initialized() {
  auto& d = defaults();
  std::lock_guard<std::mutex> lk(d.mu);
  return d.ctx != nullptr;
}

Context& context() {
  auto& d = defaults();
  std::lock_guard<std::mutex> lk(d.mu);
  if (!d.ctx) throw Error(collInvalidUsage, "collective::hvd is not initialized: call hvd::init() first");
  return *d.ctx;
}

int size() { return context().size(); }
int rank() { return context().rank(); }
int local_size() { return context().local_size(); }
int local_rank() { return context().local_rank(); }
int cross_size() { return context().cross_size(); }
int cross_rank() { return context().cross_rank(); }

Handle allreduce_async(const Tensor& in, const Tensor& out, const std::string& name,
                       const AllreduceOptions& o) {
  return context().allreduce_async(in, out, name, o);
}
void allreduce(const Tensor& in, const Tensor& out, const std::string& name, const AllreduceOptions& o) {
  allreduce_async(in, out, name, o).wait();
}
Handle grouped_allreduce_async(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                               const std::string& name, const AllreduceOptions& o) {
  return context().grouped_allreduce_async(in, out, name, o);
}
void grouped_allreduce(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                       const std::string& name, const AllreduceOptions& o) {
  grouped_allreduce_async(in, out, name, o).wait();
}
Handle allgather_async(const Tensor& in, const std::string& name, const CollectiveOptions& o) {
  return context().allgather_async(in, name, o);
}
Output allgather(const Tensor& in, const std::string& name, const CollectiveOptions& o) {
  Handle h = allgather_async(in, name, o);
  h.wait();
  return h.output();
}
Handle broadcast_async(const Tensor& in, const Tensor& out, int root, const std::string& name,
                       const CollectiveOptions& o) {
  return context().broadcast_async(in, out, root, name, o);
}
void broadcast(const Tensor& in, const Tensor& out, int root, const std::string& name,
               const CollectiveOptions& o) {
  broadcast_async(in, out, root, name, o).wait();
}
Handle alltoall_async(const Tensor& in, const std::vector<int64_t>& splits, const std::string& name,
                      const CollectiveOptions& o) {
  return context().alltoall_async(in, splits, name, o);
}
Output alltoall(const Tensor& in, const std::vector<int64_t>& splits, const std::string& name,
                const CollectiveOptions& o) {
  Handle h = alltoall_async(in, splits, name, o);
  h.wait();
  return h.output();
}
Handle reducescatter_async(const Tensor& in, const std::string& name, const ReducescatterOptions& o) {
  return context().reducescatter_async(in, name, o);
}
Output reducescatter(const Tensor& in, const std::string& name, const ReducescatterOptions& o) {
  Handle h = reducescatter_async(in, name, o);
  h.wait();
  return h.output();
}
void barrier(ProcessSet ps) { context().barrier(ps); }
void start_timeline(const std::string& path, bool mark_cycles) { context().start_timeline(path, mark_cycles); }
void stop_timeline() { context().stop_timeline(); }
int join(ProcessSet ps) { return context().join(ps); }

bool poll(const Handle& h) { return h.poll(); }
void synchronize(const Handle& h) { h.wait(); }

ProcessSet global_process_set() { return ProcessSet{0}; }
ProcessSet add_process_set(const std::vector<int>& ranks) { return context().add_process_set(ranks); }
void remove_process_set(ProcessSet ps) { context().remove_process_set(ps); }

}  // namespace collective::hvd
