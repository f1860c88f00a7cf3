// ContextImpl: the operations. Arguments are checked here, at the API edge, so that the
// engine thread only sees well-formed requests; agreement across ranks is checked by
// the negotiation.
#include <cstdint>

#include "base/error.hpp"
#include "base/types.hpp"
#include "engine/context.hpp"

namespace collective::hvd {

using coll::engine::CompressKind;
using coll::engine::Entry;
using coll::engine::OpType;

namespace {

collRedOp_t toRedOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return collSum;
    case ReduceOp::Average: return collAvg;
    case ReduceOp::Min: return collMin;
    case ReduceOp::Max: return collMax;
    case ReduceOp::Product: return collProd;
    case ReduceOp::SumReproducible: return collSumReproducible;
    case ReduceOp::AverageReproducible: return collAvgReproducible;
  }
  throw Error(collInvalidArgument, coll::strCat("reduce op ", static_cast<int>(op), " is not valid"));
}

void checkTensor(const Tensor& t, const std::string& name, const char* which) {
  if (!coll::validType(t.dtype))
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': ", which, " dtype ",
                                                  static_cast<int>(t.dtype), " is not valid"));
  for (int64_t d : t.shape)
    if (d < 0)
      throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': ", which, " shape ",
                                                    coll::engine::shapeString(t.shape), " has a negative dimension"));
  // Before num_elements() is trusted: a product that wraps would make the tensor look
  // empty (or small) here and overflow the engine's byte counts later.
  int64_t elems = 1;
  for (int64_t d : t.shape)
    if (__builtin_mul_overflow(elems, d, &elems) ||
        elems > PTRDIFF_MAX / static_cast<int64_t>(coll::typeSize(t.dtype)))
      throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': ", which, " shape ",
                                                    coll::engine::shapeString(t.shape),
                                                    " has more elements than fit in memory"));
  if (t.num_elements() > 0 && !t.data)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': ", which, " data is null for ",
                                                  t.num_elements(), " elements"));
  if (t.device.type != DeviceType::CPU)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': ", which, " is on CUDA device ",
                                                  t.device.index, "; the engine handles host tensors only"));
}

// The collectives work in place only when output and input are the same buffer. A partial
// overlap was refused by the collective on the engine's thread, which stopped the engine
// for every later call (and left ranks without the overlap waiting in that collective).
void checkOverlap(const Tensor& in, const Tensor& out, const std::string& name) {
  if (in.data == out.data) return;
  auto a = reinterpret_cast<uintptr_t>(in.data), b = reinterpret_cast<uintptr_t>(out.data);
  size_t an = in.byte_size(), bn = out.byte_size();
  if (an && bn && a < b + bn && b < a + an)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': output overlaps input without being the "
                                                  "same buffer (in place needs output.data == input.data)"));
}

void checkScales(const Tensor& t, const std::string& name, double pre, double post) {
  if ((pre != 1.0 || post != 1.0) && !coll::isFloatType(t.dtype))
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': prescale ", pre, " / postscale ",
                                                  post, " need a floating type, not ", coll::typeName(t.dtype)));
}

coll::engine::CompressionSpec toSpec(const Compression& c, const Tensor& t, collRedOp_t op,
                                     const std::string& name) {
  coll::engine::CompressionSpec s;
  s.kind = static_cast<CompressKind>(c.kind);
  s.stochastic = c.rounding == Rounding::Stochastic;
  s.errorFeedback = c.error_feedback;
  s.blockSize = c.block_size;
  s.density = c.density;
  if (s.kind == CompressKind::None) return {};
  if (static_cast<int>(c.kind) < 0 || c.kind > Compressor::TopK)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': compressor ", static_cast<int>(c.kind), " is not valid"));
  if (t.dtype != collFloat32)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': compression ", coll::engine::compressKindName(s.kind),
                                                  " needs float32 tensors, not ", coll::typeName(t.dtype)));
  if (op != collSum && op != collAvg)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': compression works with Sum and Average, not ",
                                                  coll::opName(op)));
  if (c.rounding != Rounding::Stochastic && c.rounding != Rounding::Nearest)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': rounding ", static_cast<int>(c.rounding), " is not valid"));
  if (s.kind == CompressKind::Int8 && s.blockSize <= 0)
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': int8 block_size = ", s.blockSize, " must be positive"));
  if (s.kind == CompressKind::TopK && !(s.density > 0 && s.density <= 1))
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': top-k density = ", s.density, " must be in (0, 1]"));
  // Top-k sends 32-bit element indices. A larger tensor wrapped them (a corrupt sum when
  // the exchange went dense) or was refused on the engine's thread, which stopped it.
  if (s.kind == CompressKind::TopK && t.num_elements() > int64_t{UINT32_MAX})
    throw Error(collInvalidArgument, coll::strCat("tensor '", name, "': top-k compression indexes elements with 32 bits, and ",
                                                  t.num_elements(), " elements are more than ", UINT32_MAX));
  // Fields a kind does not use are normalised so they cannot cause false mismatches.
  if (s.kind != CompressKind::Int8) { s.blockSize = 0; s.stochastic = false; }
  if (s.kind != CompressKind::TopK) s.density = 0;
  if (s.kind != CompressKind::Int8 && s.kind != CompressKind::TopK) s.errorFeedback = false;
  return s;
}

Handle submitOne(coll::engine::Engine& engine, std::unique_ptr<Entry> e) {
  Handle h(e->handle);
  try {
    engine.submit(std::move(e));
  } catch (const coll::Error& err) {
    throw Error(err.code(), err.what());
  }
  return h;
}

}  // namespace

std::unique_ptr<Entry> ContextImpl::makeEntry(OpType op, const Tensor& in, const std::string& name,
                                              const char* what) {
  auto e = std::make_unique<Entry>();
  e->meta.name = name.empty() ? coll::strCat(what, ".noname.", unnamed_++) : name;
  checkTensor(in, e->meta.name, "input");
  e->meta.op = op;
  e->meta.dtype = in.dtype;
  e->meta.shape = in.shape;
  e->input = in.data;
  e->handle = newHandle(1);
  return e;
}

Handle ContextImpl::allreduce(const Tensor& in, const Tensor& out, const std::string& name,
                              const AllreduceOptions& o) {
  return groupedAllreduce({in}, {out}, name, o);
}

Handle ContextImpl::groupedAllreduce(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                     const std::string& name, const AllreduceOptions& o) {
  if (in.size() != out.size() || in.empty())
    throw Error(collInvalidArgument, coll::strCat("allreduce '", name, "': ", in.size(), " inputs and ",
                                                  out.size(), " outputs"));
  const auto held = engineFor(o.process_set, "allreduce '" + name + "'");
  auto& engine = *held;
  bool grouped = in.size() > 1;
  std::string base = name.empty() ? coll::strCat("allreduce.noname.", unnamed_++) : name;
  auto handle = newHandle(static_cast<int>(in.size()));
  std::vector<std::unique_ptr<Entry>> entries;
  for (size_t i = 0; i < in.size(); ++i) {
    std::string n = grouped ? coll::strCat(base, ".", i) : base;
    auto e = makeEntry(OpType::Allreduce, in[i], n, "allreduce");
    checkTensor(out[i], n, "output");
    if (out[i].dtype != in[i].dtype || out[i].num_elements() != in[i].num_elements())
      throw Error(collInvalidArgument, coll::strCat("tensor '", n, "': output (", coll::typeName(out[i].dtype), " ",
                                                    coll::engine::shapeString(out[i].shape), ") does not match input (",
                                                    coll::typeName(in[i].dtype), " ", coll::engine::shapeString(in[i].shape), ")"));
    checkOverlap(in[i], out[i], n);
    checkScales(in[i], n, o.prescale_factor, o.postscale_factor);
    e->meta.redOp = toRedOp(o.op);
    e->meta.prescale = o.prescale_factor;
    e->meta.postscale = o.postscale_factor;
    e->meta.compression = toSpec(o.compression, in[i], e->meta.redOp, n);
    // The residual is kept per name, and an unnamed tensor gets a new name every call:
    // its residual would never be read again, only piled up.
    if (name.empty() && e->meta.compression.usesErrorFeedback())
      throw Error(collInvalidArgument, coll::strCat("allreduce: ", coll::engine::compressKindName(e->meta.compression.kind),
                                                    " error feedback keeps a residual per tensor name; name the tensor or "
                                                    "set error_feedback = false"));
    if (grouped) {
      e->meta.group = base;
      e->meta.groupSize = static_cast<int32_t>(in.size());
    }
    e->output = out[i].data;
    e->handle = handle;
    entries.push_back(std::move(e));
  }
  try {
    engine.submitAll(std::move(entries));
  } catch (const coll::Error& err) {
    throw Error(err.code(), err.what());
  }
  return Handle(handle);
}

Handle ContextImpl::allgather(const Tensor& in, const std::string& name, const CollectiveOptions& o) {
  const auto held = engineFor(o.process_set, "allgather '" + name + "'");
  auto& engine = *held;
  auto e = makeEntry(OpType::Allgather, in, name, "allgather");
  if (e->meta.shape.empty()) e->meta.shape = {1};
  e->allocate = o.allocate;
  return submitOne(engine, std::move(e));
}

Handle ContextImpl::broadcast(const Tensor& in, const Tensor& out, int root, const std::string& name,
                              const CollectiveOptions& o) {
  const auto held = engineFor(o.process_set, "broadcast '" + name + "'");
  auto& engine = *held;
  auto e = makeEntry(OpType::Broadcast, in, name, "broadcast");
  checkTensor(out, e->meta.name, "output");
  if (out.dtype != in.dtype || out.num_elements() != in.num_elements())
    throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': broadcast output does not match input"));
  checkOverlap(in, out, e->meta.name);
  if (root < 0 || root >= engine.size())
    throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': root_rank ", root,
                                                  " is outside [0, ", engine.size(), ")"));
  e->meta.root = root;
  e->output = out.data;
  return submitOne(engine, std::move(e));
}

Handle ContextImpl::alltoall(const Tensor& in, const std::vector<int64_t>& splitsIn,
                             const std::string& name, const CollectiveOptions& o) {
  const auto held = engineFor(o.process_set, "alltoall '" + name + "'");
  auto& engine = *held;
  auto e = makeEntry(OpType::Alltoall, in, name, "alltoall");
  const int n = engine.size();
  if (in.shape.empty())
    throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': alltoall needs at least one dimension"));
  std::vector<int64_t> splits = splitsIn;
  if (splits.empty()) {
    if (in.shape[0] % n != 0)
      throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': first dimension ", in.shape[0],
                                                    " does not split evenly over ", n, " ranks; pass splits"));
    splits.assign(n, in.shape[0] / n);
  }
  if (static_cast<int>(splits.size()) != n)
    throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': ", splits.size(),
                                                  " splits for ", n, " ranks"));
  // Summed with a bound so that splits whose true sum passes int64 cannot wrap to a match.
  int64_t sum = 0;
  for (int64_t s : splits) {
    if (s < 0) throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': negative split ", s));
    if (s > in.shape[0] - sum)
      throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': splits add up to more than the first "
                                                    "dimension ", in.shape[0]));
    sum += s;
  }
  if (sum != in.shape[0])
    throw Error(collInvalidArgument, coll::strCat("tensor '", e->meta.name, "': splits sum to ", sum,
                                                  " but the first dimension is ", in.shape[0]));
  e->meta.splits = splits;
  e->allocate = o.allocate;
  return submitOne(engine, std::move(e));
}

Handle ContextImpl::reducescatter(const Tensor& in, const std::string& name, const ReducescatterOptions& o) {
  const auto held = engineFor(o.process_set, "reducescatter '" + name + "'");
  auto& engine = *held;
  auto e = makeEntry(OpType::Reducescatter, in, name, "reducescatter");
  if (e->meta.shape.empty()) e->meta.shape = {1};
  checkScales(in, e->meta.name, o.prescale_factor, o.postscale_factor);
  e->meta.redOp = toRedOp(o.op);
  e->meta.prescale = o.prescale_factor;
  e->meta.postscale = o.postscale_factor;
  e->allocate = o.allocate;
  return submitOne(engine, std::move(e));
}

void ContextImpl::barrier(ProcessSet ps) {
  const auto held = engineFor(ps, "barrier");
  auto& engine = *held;
  auto e = std::make_unique<Entry>();
  e->meta.name = "__barrier";
  e->meta.op = OpType::Barrier;
  e->meta.dtype = collUint8;
  e->handle = newHandle(1);
  submitOne(engine, std::move(e)).wait();
}

int ContextImpl::join(ProcessSet ps) {
  const auto held = engineFor(ps, "join");
  auto& engine = *held;
  auto e = std::make_unique<Entry>();
  e->meta.name = "__join";
  e->meta.op = OpType::Join;
  e->meta.dtype = collUint8;
  auto h = newHandle(1);
  e->handle = h;
  submitOne(engine, std::move(e)).wait();
  return h->value;
}

}  // namespace collective::hvd
