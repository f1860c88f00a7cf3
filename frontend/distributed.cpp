#include "distributed.hpp"

#include <algorithm>

#include "comm.hpp"
#include "base/error.hpp"

namespace collective::frontend {

hvd::Tensor hvdView(Tensor& t) {
  return hvd::Tensor{t.data(), collFloat32, t.shape(),
                     t.device() == Device::CPU ? hvd::Device::cpu() : hvd::Device::cuda(0)};
}

DistributedOptimizer::DistributedOptimizer(Sequential& model, Sgd& sgd, hvd::Context& ctx,
                                           hvd::Compression compression)
    : DistributedOptimizer(model, sgd, ctx, compression,
                           compression.kind == hvd::Compressor::TopK) {}

DistributedOptimizer::DistributedOptimizer(Sequential& model, Sgd& sgd, hvd::Context& ctx,
                                           hvd::Compression compression, bool momentumCorrection)
    : model_(model), sgd_(sgd), ctx_(ctx), fold_(momentumCorrection),
      compressed_(compression.kind != hvd::Compressor::None) {
  opts_.op = hvd::ReduceOp::Average;
  opts_.compression = compression;
  denseOpts_.op = hvd::ReduceOp::Average;
  model_.setGradReadyHook([this](Module& layer) {
    if (atStep_) return;  // step() reduces everything at once
    for (Param* p : layer.parameters()) submit(*p);
  });
}

DistributedOptimizer::~DistributedOptimizer() {
  model_.setGradReadyHook({});
  // Gradients still in flight point into the model: let them finish before it goes.
  for (auto& h : pending_) {
    try {
      h.wait();
    } catch (const std::exception&) {
      // Already failing (shutdown or a peer died); nothing useful to do in a destructor.
    }
  }
}

void DistributedOptimizer::submit(Param& p) {
  if (std::find(submitted_.begin(), submitted_.end(), &p) != submitted_.end()) return;
  if (fold_) {
    const auto& all = sgd_.params();
    const auto at = std::find(all.begin(), all.end(), &p);
    COLL_CHECK_ARG(at != all.end(), "DistributedOptimizer: '", p.name,
                   "' is not a parameter of the optimizer");
    sgd_.foldMomentum(static_cast<size_t>(at - all.begin()));
  }
  hvd::Tensor view = hvdView(p.grad);
  const bool compress = p.grad.numel() >= kMinCompressedElements ||
                        reducePrecision_ != Precision::Float32;
  pending_.push_back(ctx_.allreduce_async(view, view, p.name, compress ? opts_ : denseOpts_));
  submitted_.push_back(&p);
}

void DistributedOptimizer::reduceAtStep(collComm_t comm) {
  COLL_CHECK_ARG(comm != nullptr, "DistributedOptimizer::reduceAtStep: comm is NULL");
  if (compressed_)
    COLL_THROW(collInvalidUsage, "DistributedOptimizer::reduceAtStep: compressed gradients go "
               "through the engine (its codecs and error feedback); use the overlapped mode");
  COLL_ENFORCE_EQ(commSize(comm), ctx_.size(), collInvalidArgument,
                  "DistributedOptimizer::reduceAtStep: communicator and engine differ in size");
  COLL_CHECK_ARG(pending_.empty(), "DistributedOptimizer::reduceAtStep: gradients of this step "
                 "are already with the engine; switch between steps");
  atStep_ = comm;
}

bool DistributedOptimizer::gradsArePacked() const {
  if (!packed_) return false;
  size_t at = 0;
  for (const Param* p : sgd_.params()) {
    if (p->grad.data() != packed_.get() + at) return false;
    at += static_cast<size_t>(p->grad.numel());
  }
  return at == packedSize_;
}

// Moves every gradient into one buffer and leaves each parameter's grad a view of its
// part: layers write their gradients there from then on. Done again only if something
// replaced a grad tensor.
void DistributedOptimizer::packGradients() {
  size_t total = 0;
  for (const Param* p : sgd_.params()) total += static_cast<size_t>(p->grad.numel());
  auto owner = std::make_shared<collective::SharedArray<float>>(std::max<size_t>(total, 1));
  std::shared_ptr<float[]> base(owner, owner->data());
  size_t at = 0;
  for (Param* p : sgd_.params()) {
    Tensor view = Tensor::wrap(std::shared_ptr<float[]>(base, base.get() + at), p->grad.shape());
    view.copyFrom(p->grad);
    p->grad = view;
    at += static_cast<size_t>(view.numel());
  }
  packed_ = std::move(base);
  packedSize_ = total;
}

void DistributedOptimizer::setReducePrecision(Precision p) {
  COLL_CHECK_ARG(!compressed_ || p == Precision::Float32, "DistributedOptimizer: gradient "
                 "compression and a 16-bit reduction precision do not combine");
  reducePrecision_ = p;
  if (p != Precision::Float32)
    opts_.compression.kind =
        p == Precision::BFloat16 ? hvd::Compressor::BF16 : hvd::Compressor::FP16;
}

int64_t DistributedOptimizer::bytesPerStep() const {
  int64_t elements = 0, compressible = 0;
  for (const Param* p : sgd_.params()) {
    elements += p->grad.numel();
    if (p->grad.numel() >= kMinCompressedElements) compressible += p->grad.numel();
  }
  if (reducePrecision_ != Precision::Float32) return 2 * elements;
  switch (opts_.compression.kind) {
    case hvd::Compressor::FP16:
    case hvd::Compressor::BF16:
      return 4 * (elements - compressible) + 2 * compressible;
    case hvd::Compressor::Int8:
      return 4 * (elements - compressible) + compressible;
    case hvd::Compressor::TopK:
      // index + value per kept element
      return 4 * (elements - compressible) +
             8 * static_cast<int64_t>(static_cast<double>(compressible) * opts_.compression.density);
    default:
      return 4 * elements;
  }
}

void DistributedOptimizer::setProfile(Profile* profile) {
  profile_ = profile;
  if (!profile_) return;
  reduceSection_ = profile_->section(atStep_ ? "allreduce (in step)" : "allreduce wait (not hidden)");
  updateSection_ = profile_->section("optimizer update");
}

void DistributedOptimizer::stepPacked() {
  if (!gradsArePacked()) packGradients();
  if (fold_)
    for (size_t i = 0; i < sgd_.params().size(); ++i) sgd_.foldMomentum(i);
  {
    ProfileScope t(profile_, reduceSection_);
    if (reducePrecision_ == Precision::Float32) {
      collCheck(collAllReduce(packed_.get(), packed_.get(), packedSize_, collFloat32, collAvg,
                              atStep_, nullptr),
                atStep_, "collAllReduce(gradients)");
    } else {
      if (!reduced_ || reduced_->size() != packedSize_)
        reduced_ = std::make_unique<collective::SharedArray<uint16_t>>(packedSize_);
      const int64_t n = static_cast<int64_t>(packedSize_);
      toBits(reducePrecision_, packed_.get(), reduced_->data(), n);
      collCheck(collAllReduce(reduced_->data(), reduced_->data(), packedSize_,
                              precisionType(reducePrecision_), collSum, atStep_, nullptr),
                atStep_, "collAllReduce(16-bit gradients)");
      fromBits(reducePrecision_, reduced_->data(), packed_.get(), n,
               1.0f / static_cast<float>(ctx_.size()));
    }
  }
  if (beforeUpdate_ && !beforeUpdate_()) return;
  ProfileScope t(profile_, updateSection_);
  if (fold_)
    sgd_.stepFolded();
  else
    sgd_.step();
}

void DistributedOptimizer::step() {
  if (atStep_) return stepPacked();
  // A parameter whose layer the hook never reported (not in the model's chain) still
  // has to be averaged, or ranks would diverge.
  {
    ProfileScope t(profile_, reduceSection_);
    for (Param* p : sgd_.params()) submit(*p);
    for (auto& h : pending_) h.wait();
  }
  pending_.clear();
  submitted_.clear();
  if (beforeUpdate_ && !beforeUpdate_()) return;
  ProfileScope t(profile_, updateSection_);
  if (fold_)
    sgd_.stepFolded();
  else
    sgd_.step();
}

namespace {

using NamedView = std::pair<std::string, hvd::Tensor>;

void broadcastAll(const std::vector<NamedView>& tensors, hvd::Context& ctx, int root) {
  COLL_CHECK_ARG(root >= 0 && root < ctx.size(), "broadcast root ", root, " outside [0, ",
                 ctx.size(), ")");
  std::vector<hvd::Handle> handles;
  handles.reserve(tensors.size());
  for (const auto& [name, view] : tensors)
    handles.push_back(ctx.broadcast_async(view, view, root, "broadcast." + name));
  for (auto& h : handles) h.wait();
}

}  // namespace

void broadcastParameters(Sequential& model, hvd::Context& ctx, int root) {
  std::vector<NamedView> all;
  for (Param* p : model.parameters()) all.emplace_back(p->name, hvdView(p->value));
  for (Buffer* b : model.buffers()) all.emplace_back(b->name, hvdView(b->value));
  broadcastAll(all, ctx, root);
}

void broadcastBuffers(Sequential& model, hvd::Context& ctx, int root) {
  std::vector<NamedView> all;
  for (Buffer* b : model.buffers()) all.emplace_back(b->name, hvdView(b->value));
  broadcastAll(all, ctx, root);
}

void broadcastOptimizerState(Sgd& sgd, hvd::Context& ctx, int root) {
  std::vector<NamedView> all;
  for (Buffer* b : sgd.state()) all.emplace_back(b->name, hvdView(b->value));
  // The step count decides whether momentum starts from the gradient.
  int64_t steps = sgd.steps();
  all.emplace_back("optimizer.steps", hvd::Tensor{&steps, collInt64, {1}, hvd::Device::cpu()});
  broadcastAll(all, ctx, root);
  sgd.setSteps(steps);
}

}  // namespace collective::frontend
