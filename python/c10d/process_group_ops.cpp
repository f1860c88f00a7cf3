// The process group's operations: checks of their arguments, staging of tensors, and the
// library calls each runs on the worker.
#include "pg_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace collective_c10d {
namespace {


std::string describe(const at::Tensor& t) {
  std::ostringstream os;
  os << t.scalar_type() << t.sizes();
  return os.str();
}

// The library's type for moving a tensor's bytes, or for reducing them.
collDataType_t reduceType(at::ScalarType st, bool* ok) {
  *ok = true;
  switch (st) {
    case at::kFloat: return collFloat32;
    case at::kDouble: return collFloat64;
    case at::kHalf: return collFloat16;
    case at::kBFloat16: return collBfloat16;
    case at::kChar: return collInt8;
    case at::kByte: return collUint8;
    case at::kShort: return collInt16;
    case at::kInt: return collInt32;
    case at::kLong: return collInt64;
    case at::kBool: return collUint8;
    default: *ok = false; return collUint8;
  }
}

// Data movement takes any dtype: its elements move as bytes of the same total size.
struct Moved {
  collDataType_t dt;
  size_t scale;  // library elements per tensor element
};
Moved movedType(const at::Tensor& t) {
  bool ok = false;
  collDataType_t dt = reduceType(t.scalar_type(), &ok);
  if (ok) return {dt, 1};
  return {collUint8, static_cast<size_t>(t.element_size())};
}

void checkCpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "collective backend: ", what, " is an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "collective backend: ", what, " is on ", t.device(),
              "; this backend takes CPU tensors");
  TORCH_CHECK(t.layout() == at::kStrided, "collective backend: ", what, " is not a dense (strided) tensor");
}

void checkOne(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "collective backend: ", op, " takes a list of exactly one tensor, got ", ts.size());
  checkCpu(ts[0], op);
}

void checkRoot(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "collective backend: ", op, ": root rank ", root, " is out of range [0, ",
              size, ")");
}

void checkLike(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* what) {
  checkCpu(t, what);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "collective backend: ", op, ": ", what, " has dtype ",
              t.scalar_type(), " but the input has ", ref.scalar_type());
  TORCH_CHECK(t.numel() == ref.numel(), "collective backend: ", op, ": ", what, " has ", t.numel(),
              " elements (", describe(t), ") but the input has ", ref.numel(), " (", describe(ref), ")");
}

// A reduction as the library runs it: type, op, and for a pre-multiplied sum the factor.
struct Reduction {
  collDataType_t dt = collFloat32;
  collRedOp_t op = collSum;
  bool preMul = false;
  at::Tensor factor;  // one element of the tensor's dtype (PREMUL_SUM)
};

Reduction reduction(const c10d::ReduceOp& rop, const at::Tensor& t, const char* opName) {
  bool ok = false;
  Reduction r;
  r.dt = reduceType(t.scalar_type(), &ok);
  TORCH_CHECK(ok, "collective backend: ", opName, " cannot reduce dtype ", t.scalar_type(),
              " (float32/64, float16, bfloat16, int8/16/32/64, uint8 and bool can)");
  const bool isFloat = at::isFloatingType(t.scalar_type());
  const bool isBool = t.scalar_type() == at::kBool;
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? collMax : collSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? collMin : collProd; break;
    case c10d::ReduceOp::MIN: r.op = collMin; break;
    case c10d::ReduceOp::MAX: r.op = collMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "collective backend: ", opName, ": AVG does not take bool tensors");
      r.op = collAvg;
      break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!isFloat, "collective backend: ", opName, ": bitwise reductions take integer or bool tensors, not ",
                  t.scalar_type());
      r.op = rop.op_ == c10d::ReduceOp::BAND ? collBand : rop.op_ == c10d::ReduceOp::BOR ? collBor : collBxor;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(!isBool, "collective backend: ", opName, ": PREMUL_SUM does not take bool tensors");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
      TORCH_CHECK(sup, "collective backend: ", opName, ": PREMUL_SUM without its factor");
      at::Tensor f;
      if (!sup->tensor_factors.empty()) {
        TORCH_CHECK(sup->tensor_factors.size() == 1, "collective backend: ", opName,
                    ": PREMUL_SUM takes one factor, got ", sup->tensor_factors.size());
        f = sup->tensor_factors[0].detach().reshape({-1});
        TORCH_CHECK(f.numel() == 1, "collective backend: ", opName, ": the PREMUL_SUM factor must have one element");
        f = f.to(at::kCPU, t.scalar_type()).clone();
      } else {
        f = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(t.scalar_type())).reshape({1});
      }
      r.op = collSum;
      r.preMul = true;
      r.factor = f.contiguous();
      break;
    }
    default: TORCH_CHECK(false, "collective backend: ", opName, ": unsupported reduction ", int(rop.op_));
  }
  return r;
}

// A contiguous view of t, or a contiguous copy that is written back after the operation.
struct Staged {
  at::Tensor user;
  at::Tensor buf;
  bool copyBack = false;
};
Staged stageOut(const at::Tensor& t, bool readInput) {
  Staged s{t, t, false};
  if (!t.is_contiguous()) {
    s.buf = readInput ? t.contiguous() : at::empty(t.sizes(), t.options());
    s.copyBack = true;
  }
  return s;
}
void writeBack(Staged& s) {
  if (s.copyBack) s.user.copy_(s.buf);
}

size_t elems(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace

// ---- operations

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::broadcast(std::vector<at::Tensor>& tensors,
                                                                 const c10d::BroadcastOptions& opts) {
  checkOne(tensors, "broadcast");
  checkRoot(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "collective backend: broadcast: rootTensor must be 0");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], rank_ == opts.rootRank));
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, tensors, [this, st, root](std::vector<collRequest_t>&) {
    const Moved m = movedType(st->buf);
    void* p = st->buf.data_ptr();
    check(collBroadcast(p, p, elems(st->buf) * m.scale, m.dt, root, comm_, nullptr), "collBroadcast");
    writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allreduce(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceOptions& opts) {
  checkOne(tensors, "allreduce");
  Reduction red = reduction(opts.reduceOp, tensors[0], "allreduce");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], true));
  return enqueue(c10d::OpType::ALLREDUCE, tensors, [this, st, red](std::vector<collRequest_t>&) {
    void* p = st->buf.data_ptr();
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collAllReduce(p, p, elems(st->buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collAllReduce");
    writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "collective backend: allreduce_coalesced needs at least one tensor");
  for (auto& t : tensors) {
    checkCpu(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "collective backend: allreduce_coalesced: all tensors must have one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  Reduction red = reduction(opts.reduceOp, tensors[0], "allreduce_coalesced");
  std::vector<at::Tensor> flat;
  for (auto& t : tensors) flat.push_back(t.reshape({-1}));
  auto buf = std::make_shared<at::Tensor>(at::cat(flat));
  std::vector<at::Tensor> users = tensors;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors, [this, buf, red, users](std::vector<collRequest_t>&) {
    void* p = buf->data_ptr();
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collAllReduce(p, p, elems(*buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collAllReduce");
    int64_t off = 0;
    for (const auto& t : users) {
      at::Tensor u = t;
      u.copy_(buf->narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::reduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::ReduceOptions& opts) {
  checkOne(tensors, "reduce");
  checkRoot(opts.rootRank, size_, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "collective backend: reduce: rootTensor must be 0");
  Reduction red = reduction(opts.reduceOp, tensors[0], "reduce");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], true));
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, tensors, [this, st, red, root](std::vector<collRequest_t>&) {
    void* p = st->buf.data_ptr();
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collReduce(p, p, elems(st->buf), red.dt, op, root, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collReduce");
    if (rank_ == root) writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions&) {
  checkOne(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "collective backend: allgather takes one output list, got ", outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "collective backend: allgather: the output list has ",
              outputs[0].size(), " tensors, the group ", size_, " ranks");
  for (auto& o : outputs[0]) checkLike(o, inputs[0], "allgather", "an output tensor");
  at::Tensor in = inputs[0].contiguous();
  std::vector<at::Tensor> outs = outputs[0];
  const size_t total = static_cast<size_t>(in.nbytes()) * static_cast<size_t>(size_);
  const bool direct = total >= kDirectAllGatherBytes &&
                      std::all_of(outs.begin(), outs.end(), [](const at::Tensor& o) { return o.is_contiguous(); });
  if (direct) {
    // Large: each rank's part goes straight into its output tensor, one broadcast per
    // root, instead of an all-gather into a staging buffer (made, faulted in and copied
    // out again on every call: most of the time at these sizes).
    return enqueue(c10d::OpType::ALLGATHER, outs, [this, in, outs](std::vector<collRequest_t>&) {
      const Moved m = movedType(in);
      for (int r = 0; r < size_; ++r)
        check(collBroadcast(r == rank_ ? in.data_ptr() : outs[r].data_ptr(), outs[r].data_ptr(),
                            elems(in) * m.scale, m.dt, r, comm_, nullptr),
              "collBroadcast (all-gather)");
    });
  }
  return enqueue(c10d::OpType::ALLGATHER, outs, [this, in, outs](std::vector<collRequest_t>&) {
    const Moved m = movedType(in);
    at::Tensor flat = scratch(in, size_);
    check(collAllGather(in.data_ptr(), flat.data_ptr(), elems(in) * m.scale, m.dt, comm_, nullptr), "collAllGather");
    for (int r = 0; r < size_; ++r) {
      at::Tensor o = outs[r];
      o.copy_(flat.narrow(0, r * in.numel(), in.numel()).view(o.sizes()));
    }
  }, nullptr, total);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::AllgatherOptions&) {
  checkCpu(input, "_allgather_base input");
  checkCpu(output, "_allgather_base output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "collective backend: all_gather_into_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "collective backend: all_gather_into_tensor: output has ",
              output.numel(), " elements, it must have world size ", size_, " x input's ", input.numel());
  at::Tensor in = input.contiguous();
  auto st = std::make_shared<Staged>(stageOut(output, false));
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [this, in, st](std::vector<collRequest_t>&) {
    const Moved m = movedType(in);
    check(collAllGather(in.data_ptr(), st->buf.data_ptr(), elems(in) * m.scale, m.dt, comm_, nullptr),
          "collAllGather");
    writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_, "collective backend: allgather_coalesced: ",
              outputLists.size(), " output lists for a group of ", size_, " ranks");
  for (auto& t : inputs) checkCpu(t, "allgather_coalesced input");
  for (auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "collective backend: allgather_coalesced: an output list has ",
                list.size(), " tensors, the input list ", inputs.size());
    for (size_t i = 0; i < list.size(); ++i) checkLike(list[i], inputs[i], "allgather_coalesced", "an output tensor");
  }
  // One all-gather of the rank's inputs flattened as bytes.
  std::vector<at::Tensor> bytes;
  for (auto& t : inputs) bytes.push_back(t.contiguous().reshape({-1}).view(at::kByte));
  at::Tensor in = bytes.empty() ? at::empty({0}, at::kByte) : at::cat(bytes);
  auto flat = std::make_shared<at::Tensor>(at::empty({size_ * in.numel()}, in.options()));
  std::vector<at::Tensor> outs;
  for (auto& list : outputLists) outs.insert(outs.end(), list.begin(), list.end());
  auto lists = outputLists;
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, outs, [this, in, flat, lists](std::vector<collRequest_t>&) {
    check(collAllGather(in.data_ptr(), flat->data_ptr(), elems(in), collUint8, comm_, nullptr), "collAllGather");
    for (int r = 0; r < size_; ++r) {
      int64_t off = r * in.numel();
      for (const auto& t : lists[r]) {
        const int64_t nb = t.numel() * t.element_size();
        at::Tensor o = t;
        o.copy_(flat->narrow(0, off, nb).view(t.scalar_type()).view(t.sizes()));
        off += nb;
      }
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::GatherOptions& opts) {
  checkOne(inputs, "gather");
  checkRoot(opts.rootRank, size_, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "collective backend: gather: the root needs one output list of ", size_, " tensors");
    for (auto& o : outputs[0]) checkLike(o, inputs[0], "gather", "an output tensor");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "collective backend: gather: only the root passes output tensors");
  }
  at::Tensor in = inputs[0].contiguous();
  return enqueue(c10d::OpType::GATHER, outs, [this, in, outs, root](std::vector<collRequest_t>&) {
    const Moved m = movedType(in);
    at::Tensor flat = rank_ == root ? scratch(in, size_) : at::Tensor();
    void* r = rank_ == root ? flat.data_ptr() : nullptr;
    check(collGather(in.data_ptr(), r, elems(in) * m.scale, m.dt, root, comm_, nullptr), "collGather");
    if (rank_ != root) return;
    for (int k = 0; k < size_; ++k) {
      at::Tensor o = outs[k];
      o.copy_(flat.narrow(0, k * in.numel(), in.numel()).view(o.sizes()));
    }
  }, nullptr, static_cast<size_t>(in.nbytes()) * static_cast<size_t>(size_));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::scatter(std::vector<at::Tensor>& outputs,
                                                               std::vector<std::vector<at::Tensor>>& inputs,
                                                               const c10d::ScatterOptions& opts) {
  checkOne(outputs, "scatter");
  checkRoot(opts.rootRank, size_, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> parts;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "collective backend: scatter: the root needs one input list of ", size_, " tensors");
    for (auto& t : inputs[0]) {
      checkLike(t, outputs[0], "scatter", "an input tensor");
      parts.push_back(t);
    }
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "collective backend: scatter: only the root passes input tensors");
  }
  auto st = std::make_shared<Staged>(stageOut(outputs[0], false));
  const size_t total = static_cast<size_t>(st->buf.nbytes()) * static_cast<size_t>(size_);
  return enqueue(c10d::OpType::SCATTER, outputs, [this, parts, st, root](std::vector<collRequest_t>&) {
    const Moved m = movedType(st->buf);
    at::Tensor flat;
    if (rank_ == root) {
      flat = scratch(st->buf, size_);
      const int64_t n = st->buf.numel();
      for (int k = 0; k < size_; ++k) flat.narrow(0, k * n, n).copy_(parts[k].reshape({-1}));
    }
    const void* s = rank_ == root ? flat.data_ptr() : nullptr;
    check(collScatter(s, st->buf.data_ptr(), elems(st->buf) * m.scale, m.dt, root, comm_, nullptr), "collScatter");
    writeBack(*st);
  }, nullptr, total);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                                      const c10d::ReduceScatterOptions& opts) {
  checkOne(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "collective backend: reduce_scatter needs one input list of ", size_, " tensors");
  std::vector<at::Tensor> parts;
  for (auto& t : inputs[0]) {
    checkLike(t, outputs[0], "reduce_scatter", "an input tensor");
    parts.push_back(t.reshape({-1}));
  }
  Reduction red = reduction(opts.reduceOp, outputs[0], "reduce_scatter");
  at::Tensor flat = at::cat(parts);
  auto st = std::make_shared<Staged>(stageOut(outputs[0], false));
  return enqueue(c10d::OpType::REDUCE_SCATTER, outputs, [this, flat, st, red](std::vector<collRequest_t>&) {
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collReduceScatter(flat.data_ptr(), st->buf.data_ptr(), elems(st->buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collReduceScatter");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                            const c10d::ReduceScatterOptions& opts) {
  checkCpu(input, "reduce_scatter_tensor input");
  checkCpu(output, "reduce_scatter_tensor output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "collective backend: reduce_scatter_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, "collective backend: reduce_scatter_tensor: input has ",
              input.numel(), " elements, it must have world size ", size_, " x output's ", output.numel());
  Reduction red = reduction(opts.reduceOp, input, "reduce_scatter_tensor");
  at::Tensor in = input.contiguous();
  auto st = std::make_shared<Staged>(stageOut(output, false));
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [this, in, st, red](std::vector<collRequest_t>&) {
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collReduceScatter(in.data_ptr(), st->buf.data_ptr(), elems(st->buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collReduceScatter");
    writeBack(*st);
  });
}

namespace {
// Counts and displacements (in library elements) of an all-to-all split along dim 0.
void splitsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, size_t scale, const char* side,
              std::vector<size_t>* counts, std::vector<size_t>* displs) {
  counts->assign(size, 0);
  displs->assign(size, 0);
  if (splits.empty()) {
    TORCH_CHECK(t.dim() > 0 ? t.size(0) % size == 0 : t.numel() == 0, "collective backend: alltoall_base: the ",
                side, " tensor's first dimension (", t.dim() > 0 ? t.size(0) : 0,
                ") does not split evenly over ", size, " ranks");
    const size_t per = elems(t) / size * scale;
    for (int p = 0; p < size; ++p) (*counts)[p] = per, (*displs)[p] = per * p;
    return;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "collective backend: alltoall_base: ", side, " split sizes has ",
              splits.size(), " entries for a group of ", size, " ranks");
  TORCH_CHECK(t.dim() > 0, "collective backend: alltoall_base: the ", side, " tensor has no dimension to split");
  int64_t sum = 0;
  for (int64_t s : splits) {
    TORCH_CHECK(s >= 0, "collective backend: alltoall_base: negative ", side, " split size ", s);
    sum += s;
  }
  TORCH_CHECK(sum == t.size(0), "collective backend: alltoall_base: ", side, " split sizes add up to ", sum,
              " but the tensor's first dimension is ", t.size(0));
  const size_t row = (t.size(0) ? elems(t) / t.size(0) : 0) * scale;
  size_t off = 0;
  for (int p = 0; p < size; ++p) {
    (*counts)[p] = static_cast<size_t>(splits[p]) * row;
    (*displs)[p] = off;
    off += (*counts)[p];
  }
}
}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                     std::vector<int64_t>& outputSplits,
                                                                     std::vector<int64_t>& inputSplits,
                                                                     const c10d::AllToAllOptions&) {
  checkCpu(input, "alltoall_base input");
  checkCpu(output, "alltoall_base output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "collective backend: alltoall_base: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  const Moved m = movedType(input);
  auto v = std::make_shared<std::vector<std::vector<size_t>>>(4);
  splitsOf(input, inputSplits, size_, m.scale, "input", &(*v)[0], &(*v)[1]);
  splitsOf(output, outputSplits, size_, m.scale, "output", &(*v)[2], &(*v)[3]);
  at::Tensor in = input.contiguous();
  auto st = std::make_shared<Staged>(stageOut(output, false));
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, [this, in, st, v, m](std::vector<collRequest_t>&) {
    auto& c = *v;
    check(collAllToAllv(in.data_ptr(), c[0].data(), c[1].data(), st->buf.data_ptr(), c[2].data(), c[3].data(), m.dt,
                        comm_, nullptr),
          "collAllToAllv");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::alltoall(std::vector<at::Tensor>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "collective backend: alltoall needs ", size_, " input and output tensors, got ", inputs.size(), " and ",
              outputs.size());
  for (int p = 0; p < size_; ++p) {
    checkCpu(inputs[p], "alltoall input");
    checkCpu(outputs[p], "alltoall output");
    TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() && outputs[p].scalar_type() == inputs[0].scalar_type(),
                "collective backend: alltoall: all tensors must have one dtype");
  }
  std::vector<at::Tensor> ins, outsFlat;
  auto v = std::make_shared<std::vector<std::vector<size_t>>>(4, std::vector<size_t>(size_));
  size_t so = 0, ro = 0;
  for (int p = 0; p < size_; ++p) {
    ins.push_back(inputs[p].contiguous().reshape({-1}).view(at::kByte));
    (*v)[0][p] = elems(inputs[p]) * inputs[p].element_size();
    (*v)[1][p] = so;
    so += (*v)[0][p];
    (*v)[2][p] = elems(outputs[p]) * outputs[p].element_size();
    (*v)[3][p] = ro;
    ro += (*v)[2][p];
  }
  at::Tensor in = at::cat(ins);
  auto flat = std::make_shared<at::Tensor>(at::empty({static_cast<int64_t>(ro)}, at::kByte));
  std::vector<at::Tensor> outs = outputs;
  return enqueue(c10d::OpType::ALLTOALL, outs, [this, in, flat, v, outs](std::vector<collRequest_t>&) {
    auto& c = *v;
    check(collAllToAllv(in.data_ptr(), c[0].data(), c[1].data(), flat->data_ptr(), c[2].data(), c[3].data(),
                        collUint8, comm_, nullptr),
          "collAllToAllv");
    for (int p = 0; p < size_; ++p) {
      at::Tensor o = outs[p];
      o.copy_(flat->narrow(0, static_cast<int64_t>(c[3][p]), static_cast<int64_t>(c[2][p]))
                  .view(o.scalar_type())
                  .view(o.sizes()));
    }
  });
}


c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  checkOne(tensors, "send");
  TORCH_CHECK(dst >= 0 && dst < size_, "collective backend: send: destination rank ", dst, " is out of range [0, ",
              size_, ")");
  TORCH_CHECK(dst != rank_, "collective backend: send: rank ", rank_, " cannot send to itself");
  at::Tensor t = tensors[0].contiguous();
  auto hdr = std::make_shared<P2PHeader>(P2PHeader{tag, static_cast<int64_t>(t.numel() * t.element_size())});
  return enqueue(c10d::OpType::SEND, tensors, [this, t, hdr, dst](std::vector<collRequest_t>& reqs) {
    reqs.resize(2, nullptr);
    check(collIsend(hdr.get(), sizeof(P2PHeader), collUint8, dst, comm_, &reqs[0]), "collIsend");
    if (hdr->bytes > 0)
      check(collIsend(t.data_ptr(), static_cast<size_t>(hdr->bytes), collUint8, dst, comm_, &reqs[1]), "collIsend");
  }, [t, hdr] {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  checkOne(tensors, "recv");
  TORCH_CHECK(src >= 0 && src < size_, "collective backend: recv: source rank ", src, " is out of range [0, ", size_,
              ")");
  TORCH_CHECK(src != rank_, "collective backend: recv: rank ", rank_, " cannot receive from itself");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], false));
  auto hdr = std::make_shared<P2PHeader>(P2PHeader{-1, -1});
  const int64_t bytes = st->buf.numel() * st->buf.element_size();
  const int me = rank_;
  return enqueue(c10d::OpType::RECV, tensors, [this, st, hdr, src, bytes](std::vector<collRequest_t>& reqs) {
    reqs.resize(2, nullptr);
    check(collIrecv(hdr.get(), sizeof(P2PHeader), collUint8, src, comm_, &reqs[0]), "collIrecv");
    if (bytes > 0)
      check(collIrecv(st->buf.data_ptr(), static_cast<size_t>(bytes), collUint8, src, comm_, &reqs[1]), "collIrecv");
  }, [st, hdr, src, tag, bytes, me] {
    if (hdr->tag != tag || hdr->bytes != bytes)
      throw std::runtime_error("collective backend: recv on rank " + std::to_string(me) + " from rank " +
                               std::to_string(src) + " with tag " + std::to_string(tag) + " (" + std::to_string(bytes) +
                               " bytes) matched a send with tag " + std::to_string(hdr->tag) + " (" +
                               std::to_string(hdr->bytes) +
                               " bytes): messages between two ranks match in the order they are posted");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "collective backend: recv without a source rank is not supported");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, {}, [this](std::vector<collRequest_t>&) {
    check(collBarrier(comm_), "collBarrier");
  }, nullptr, 0);
}

}  // namespace collective_c10d
