#include "train/trainer.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <sstream>
#include <tuple>

#include "checkpoint.hpp"
#include "comm.hpp"
#include "base/error.hpp"
#include "model.hpp"
#include "train/progress.hpp"

namespace collective::frontend {

namespace {

int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// Runs f on rank 0 only (checkpoint files) and makes its failure every rank's at once:
// otherwise the other ranks wait in their next collective while rank 0's engine waits
// for them to shut down (a minute, COLL_SHUTDOWN_TIMEOUT) before it gives up alone.
template <typename F>
void onRankZero(int rank, collComm_t comm, const char* what, F&& f) {
  std::exception_ptr error;
  if (rank == 0) {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  double failed[1] = {error ? 1.0 : 0.0};
  allReduceSum(failed, comm);
  if (failed[0] == 0) return;
  if (error) std::rethrow_exception(error);
  COLL_THROW(collRemoteError, what, " failed on rank 0 (see its message)");
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, hvd::Context& ctx, collComm_t aux,
                 const Dataset& train, const Dataset& test, FILE* log)
    : o_(options),
      ctx_(ctx),
      aux_(aux),
      train_(train),
      test_(test),
      rank_(ctx.rank()),
      size_(ctx.size()),
      localBatch_(options.globalBatch / std::max(ctx.size(), 1)),
      sampler_(train.count, ctx.rank(), ctx.size(), options.seed) {
  COLL_CHECK_ARG(o_.globalBatch % size_ == 0, "--batch-size ", o_.globalBatch,
                 " must be a multiple of the number of ranks ", size_);
  // The sampler drops the last size % ranks samples: with fewer samples than ranks no
  // rank would take a step, and the run would report an untrained model as a result.
  COLL_CHECK_ARG(train_.count >= size_, "Trainer: ", train_.count,
                 " training image(s) for ", size_, " ranks: every rank needs at least one");
  COLL_CHECK_ARG(test_.count > 0, "Trainer: no test images to evaluate on");
  COLL_ENFORCE_EQ(commSize(aux), size_, collInvalidArgument,
                  "Trainer: aux communicator and engine differ in size");
  log_ = rank_ == 0 ? log : nullptr;
  ModelOptions mo;
  mo.seed = o_.seed;
  mo.syncBatchNorm = o_.syncBatchNorm;
  mo.bnComm = aux_;
  model_ = makeFashionCnn(mo);
  sgd_ =
      std::make_unique<Sgd>(model_->parameters(), SgdOptions{o_.lr, o_.momentum, o_.weightDecay});
  dopt_ = std::make_unique<DistributedOptimizer>(*model_, *sgd_, ctx_, o_.compression,
                                                 o_.useMomentumCorrection());
  // The gradients share `aux` with SyncBatchNorm: both run on this thread, one after the
  // other, so their calls never interleave.
  cpus_ = usableCpus();
  if (o_.gradSyncAtStep(ctx.local_size(), cpus_)) dopt_->reduceAtStep(aux_);
  const Precision precision = parsePrecision(o_.precision);
  if (precision != Precision::Float32) {
    mp_ = std::make_unique<MixedPrecision>(model_->parameters(), precision);
    model_->setBoundaryPrecision(precision);
    dopt_->setReducePrecision(precision);
    dopt_->setBeforeUpdate([this] { return mp_->unscaleAndCheck(); });
  }
  if (o_.profile) {
    dataSection_ = profile_.section("batch gather");
    model_->setProfile(&profile_);
    lossSection_ = profile_.section("loss fwd+bwd");
    dopt_->setProfile(&profile_);
  }
}

Trainer::~Trainer() = default;

int64_t Trainer::restoreOrBroadcast() {
  int64_t epoch = 0;
  if (!o_.loadPath.empty()) {
    onRankZero(rank_, aux_, "loading the checkpoint", [&] {
      epoch = loadCheckpoint(o_.loadPath, *model_, *sgd_).epoch;
    });
    if (log_)
      std::fprintf(log_, "loaded %s: resuming at epoch %lld\n", o_.loadPath.c_str(),
                   static_cast<long long>(epoch + 1));
  }
  // Every replica starts from rank 0's state, whatever its own seed or file said.
  broadcastParameters(*model_, ctx_, 0);
  broadcastOptimizerState(*sgd_, ctx_, 0);
  hvd::Tensor e{&epoch, collInt64, {1}, hvd::Device::cpu()};
  ctx_.broadcast_async(e, e, 0, "trainer.start_epoch").wait();
  return epoch;
}

std::vector<Tensor*> Trainer::stateTensors() {
  std::vector<Tensor*> all;
  for (Param* p : model_->parameters()) all.push_back(&p->value);
  for (Buffer* b : model_->buffers()) all.push_back(&b->value);
  for (Buffer* b : sgd_->state()) all.push_back(&b->value);
  return all;
}

void Trainer::saveCommit(int64_t epoch, int64_t step) {
  const std::vector<Tensor*> all = stateTensors();
  if (commit_->tensors.size() != all.size()) {
    commit_->tensors.clear();
    for (Tensor* t : all) commit_->tensors.push_back(t->clone());
  } else {
    for (size_t i = 0; i < all.size(); ++i) commit_->tensors[i].copyFrom(*all[i]);
  }
  commit_->epoch = epoch;
  commit_->step = step;
  commit_->sgdSteps = sgd_->steps();
  commit_->results = results_;
  commit_->valid = true;
}

std::pair<int64_t, int64_t> Trainer::restoreCommit() {
  if (!commit_->joining) {
    const std::vector<Tensor*> all = stateTensors();
    COLL_ENFORCE_EQ(all.size(), commit_->tensors.size(), collInternalError,
                    "Trainer: the commit does not match the model");
    for (size_t i = 0; i < all.size(); ++i) all[i]->copyFrom(commit_->tensors[i]);
    sgd_->setSteps(commit_->sgdSteps);
  }
  broadcastParameters(*model_, ctx_, 0);
  broadcastOptimizerState(*sgd_, ctx_, 0);
  // Position and finished epochs: rank 0's commit may be a later one than another rank's.
  constexpr int kFields = 5;
  int64_t head[3] = {commit_->epoch, commit_->step,
                     static_cast<int64_t>(commit_->results.size())};
  hvd::Tensor h{head, collInt64, {3}, hvd::Device::cpu()};
  ctx_.broadcast_async(h, h, 0, "elastic.position").wait();
  std::vector<double> packed(static_cast<size_t>(head[2]) * kFields + 1);
  for (size_t i = 0; i < commit_->results.size() && rank_ == 0; ++i) {
    const EpochResult& r = commit_->results[i];
    const double fields[kFields] = {static_cast<double>(r.epoch), r.seconds, r.trainLoss,
                                    r.testAccuracy, static_cast<double>(r.images)};
    std::copy(fields, fields + kFields, packed.begin() + static_cast<long>(i * kFields));
  }
  hvd::Tensor res{packed.data(), collFloat64, {static_cast<int64_t>(packed.size())},
                  hvd::Device::cpu()};
  ctx_.broadcast_async(res, res, 0, "elastic.results").wait();
  results_.clear();
  for (int64_t i = 0; i < head[2]; ++i) {
    const double* f = packed.data() + i * kFields;
    EpochResult r;
    r.epoch = static_cast<int64_t>(f[0]);
    r.seconds = f[1];
    r.trainLoss = f[2];
    r.testAccuracy = f[3];
    r.images = static_cast<int64_t>(f[4]);
    results_.push_back(r);
  }
  saveCommit(head[0], head[1]);  // every rank now holds the same commit
  commit_->joining = false;
  if (log_)
    std::fprintf(log_, "elastic: %d rank(s) resume from the last commit: epoch %lld, step %lld\n",
                 size_, static_cast<long long>(head[0] + 1), static_cast<long long>(head[1]));
  if (log_) std::fflush(log_);
  return {head[0], head[1]};
}

EpochResult Trainer::trainEpoch(int64_t epoch, int64_t firstStep) {
  model_->setTraining(true);
  // Steps of the whole epoch (the learning-rate schedule counts them); an elastic resume
  // runs the rest from firstStep, whose samples start at position firstStep * batch.
  const int64_t steps = o_.maxSteps > 0 ? std::min(o_.maxSteps, sampler_.steps(localBatch_))
                                        : sampler_.steps(localBatch_);
  firstStep = std::min(firstStep, steps);
  const std::vector<int64_t> order = sampler_.indices(epoch, firstStep * o_.globalBatch);
  const int64_t mine = static_cast<int64_t>(order.size());
  std::ostringstream label;
  label << "epoch " << epoch + 1 << "/" << o_.epochs;
  ProgressBar bar(log_ ? log_ : stdout, log_ != nullptr && o_.progress, label.str(), steps);
  Tensor x;
  std::vector<int32_t> labels;
  double lossSum = 0;
  int64_t seen = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = firstStep; s < steps; ++s) {
    const int64_t begin = (s - firstStep) * localBatch_, n = std::min(localBatch_, mine - begin);
    {
      ProfileScope t(o_.profile ? &profile_ : nullptr, dataSection_);
      gatherBatch(train_, std::span(order).subspan(begin, n), x, labels);
    }
    Tensor dlogits;
    if (mp_) mp_->castParameters();
    {
      Tensor logits = model_->forward(x);
      ProfileScope t(o_.profile ? &profile_ : nullptr, lossSection_);
      lossSum += static_cast<double>(loss_.forward(logits, labels)) * n;
      dlogits = loss_.backward();
      if (mp_ && mp_->scalesLoss())
        for (float& v : dlogits.span()) v *= mp_->lossScale();
    }
    model_->backward(dlogits);
    dlogits = Tensor();
    if (mp_) mp_->restoreMaster();
    sgd_->setLr(o_.lrAt(sgd_->steps(), steps * o_.epochs));
    dopt_->step();
    seen += n;
    bar.update(s + 1, seen * size_, lossSum / seen);
    if (commit_ && (s + 1) % o_.commitEvery == 0 && s + 1 < steps) saveCommit(epoch, s + 1);
  }
  EpochResult r;
  r.epoch = epoch;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double totals[2] = {lossSum, static_cast<double>(seen)};
  allReduceSum(totals, aux_);
  r.trainLoss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
  r.images = static_cast<int64_t>(totals[1]);
  bar.finish(r.images, r.trainLoss);
  if (o_.profile) {
    std::ostringstream title;
    title << "rank " << rank_ << ", epoch " << epoch + 1;
    profile_.print(log_, steps, title.str());
    profile_.reset();
  }
  return r;
}

double Trainer::evaluate() {
  // Per-rank BatchNorm statistics differ; evaluate one model, rank 0's.
  if (!o_.syncBatchNorm && size_ > 1) broadcastBuffers(*model_, ctx_, 0);
  model_->setTraining(false);
  const int64_t total = o_.testLimit > 0 ? std::min(o_.testLimit, test_.count) : test_.count;
  // Contiguous shards covering every test image: no collective runs inside the loop,
  // so ranks may take different numbers of batches.
  const int64_t lo = total * rank_ / size_, hi = total * (rank_ + 1) / size_;
  std::vector<int64_t> idx;
  Tensor x;
  std::vector<int32_t> labels;
  double counts[2] = {0, static_cast<double>(hi - lo)};
  for (int64_t b = lo; b < hi; b += o_.evalBatch) {
    idx.resize(static_cast<size_t>(std::min(o_.evalBatch, hi - b)));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = b + static_cast<int64_t>(i);
    gatherBatch(test_, idx, x, labels);
    counts[0] += static_cast<double>(countCorrect(model_->forward(x), labels));
  }
  allReduceSum(counts, aux_);
  model_->setTraining(true);
  return counts[1] > 0 ? counts[0] / counts[1] : 0.0;
}

void Trainer::report(const EpochResult& r) const {
  if (!log_) return;
  std::fprintf(log_,
               "epoch %lld/%lld: train loss %.4f, test accuracy %.2f%%, %.2f s (%.0f img/s)\n",
               static_cast<long long>(r.epoch + 1), static_cast<long long>(o_.epochs), r.trainLoss,
               100.0 * r.testAccuracy, r.seconds, r.seconds > 0 ? r.images / r.seconds : 0.0);
  std::fflush(log_);
}

void Trainer::summary(const std::vector<EpochResult>& results) const {
  if (!log_ || results.empty()) return;
  double total = 0;
  std::ostringstream secs, accs;
  for (size_t i = 0; i < results.size(); ++i) {
    total += results[i].seconds;
    secs << (i ? "," : "") << results[i].seconds;
    accs << (i ? "," : "") << results[i].testAccuracy;
  }
  const double mean = total / static_cast<double>(results.size());
  std::fprintf(log_,
               "summary: %d rank(s), %zu epoch(s), global batch %lld, sync-bn %s, compression %s, "
               "grad-sync %s: final test accuracy %.2f%%, mean epoch %.2f s\n",
               size_, results.size(), static_cast<long long>(o_.globalBatch),
               o_.syncBatchNorm ? "on" : "off", o_.compressionName().c_str(),
               dopt_->reducesAtStep() ? "step" : "overlap",
               100.0 * results.back().testAccuracy, mean);
  // One machine-readable line for perf/frontend scripts.
  std::fprintf(log_,
               "RESULT {\"ranks\": %d, \"global_batch\": %lld, \"sync_bn\": %s, "
               "\"compression\": \"%s\", \"grad_sync\": \"%s\", \"epoch_seconds\": [%s], \"test_accuracy\": [%s], "
               "\"mean_epoch_seconds\": %.4f, \"final_test_accuracy\": %.6f, \"mode\": \"dp\", "
               "\"precision\": \"%s\", \"bytes_per_step\": %lld, \"skipped_steps\": %lld}\n",
               size_, static_cast<long long>(o_.globalBatch), o_.syncBatchNorm ? "true" : "false",
               o_.compressionName().c_str(), dopt_->reducesAtStep() ? "step" : "overlap",
               secs.str().c_str(), accs.str().c_str(), mean,
               results.back().testAccuracy, o_.precision.c_str(),
               static_cast<long long>(dopt_->bytesPerStep()),
               static_cast<long long>(mp_ ? mp_->skippedSteps() : 0));
  std::fflush(log_);
}

std::vector<EpochResult> Trainer::run() {
  int64_t first = 0, firstStep = 0;
  if (commit_ && (commit_->valid || commit_->joining)) {
    std::tie(first, firstStep) = restoreCommit();
  } else {
    first = restoreOrBroadcast();
    results_.clear();
    if (commit_) saveCommit(first, 0);
  }
  if (log_)
    std::fprintf(log_, "gradient sync: %s (%d rank(s) on this host, %d CPU(s) per rank)\n",
                 dopt_->reducesAtStep() ? "one all-reduce per step" : "overlapped with backward",
                 ctx_.local_size(), cpus_);
  if (log_) std::fflush(log_);  // training starts now: tell whoever watches a pipe
  for (int64_t epoch = first; epoch < o_.epochs; ++epoch) {
    EpochResult r = trainEpoch(epoch, epoch == first ? firstStep : 0);
    r.testAccuracy = evaluate();
    report(r);
    if (!o_.savePath.empty()) {
      onRankZero(rank_, aux_, "saving the checkpoint", [&] {
        saveCheckpoint(o_.savePath, *model_, *sgd_, {epoch + 1, sgd_->steps()});
      });
    }
    results_.push_back(r);
    if (commit_) saveCommit(epoch + 1, 0);
  }
  summary(results_);
  return results_;
}

}  // namespace collective::frontend
