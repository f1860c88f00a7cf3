#include "train/pipeline_trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <sstream>

#include "base/error.hpp"
#include "model.hpp"

namespace collective::frontend {

namespace {

// Relative compute of the reference CNN's layers (CPU time per step, frontend_step_bench);
// anything else counts 1.
double layerCost(const std::string& name) {
  static const std::pair<const char*, double> kCosts[] = {
      {"conv1", 0.4}, {"bn1", 0.7}, {"pool1", 0.5}, {"conv2", 2.8}, {"bn2", 0.3},
      {"pool2", 0.4}, {"flatten", 0.0}, {"fc1", 0.45}, {"relu3", 0.0}, {"fc2", 0.01}};
  for (const auto& [n, c] : kCosts)
    if (name == n) return c;
  return 1.0;
}

Shape perSample(const Shape& s) { return Shape(s.begin() + 1, s.end()); }

Shape withBatch(int64_t n, const Shape& perSample) {
  Shape s{n};
  s.insert(s.end(), perSample.begin(), perSample.end());
  return s;
}

}  // namespace

std::vector<size_t> PipelineTrainer::splitLayers(const std::vector<double>& costs, int parts) {
  const size_t n = costs.size();
  COLL_CHECK_ARG(parts >= 1 && static_cast<size_t>(parts) <= n, "pipeline: ", parts,
                 " stages for ", n, " layers");
  // best[k][i]: the smallest possible maximum cost splitting layers [0, i) into k runs.
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const double inf = 1e300;
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(parts + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k)
    for (size_t i = k; i <= n; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        const double c = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (c < best[k][i]) {
          best[k][i] = c;
          cut[k][i] = j;
        }
      }
  std::vector<size_t> starts(parts + 1);
  starts[parts] = n;
  for (int k = parts; k >= 1; --k) starts[k - 1] = cut[k][starts[k]];
  return starts;
}

PipelineTrainer::PipelineTrainer(const TrainOptions& options, collComm_t world,
                                 const Dataset& train, const Dataset& test, FILE* log)
    : o_(options),
      world_(world),
      train_(train),
      test_(test),
      rank_(commRank(world)),
      size_(commSize(world)),
      stages_(options.stages),
      replicas_(size_ / std::max(options.stages, 1)),
      stage_(rank_ % std::max(options.stages, 1)),
      replica_(rank_ / std::max(options.stages, 1)),
      localBatch_(options.globalBatch / std::max(replicas_, 1)),
      sampler_(train.count, replica_, std::max(replicas_, 1), options.seed) {
  COLL_CHECK_ARG(size_ % stages_ == 0, "--mode pipeline: ", size_, " ranks are not a multiple of "
                 "--stages ", stages_);
  COLL_CHECK_ARG(o_.globalBatch % (static_cast<int64_t>(replicas_) * o_.microBatches) == 0,
                 "--batch-size ", o_.globalBatch, " must be a multiple of replicas (", replicas_,
                 ") x --micro-batches (", o_.microBatches, ")");
  COLL_CHECK_ARG(train_.count >= replicas_, "pipeline: ", train_.count,
                 " training image(s) for ", replicas_, " replicas");
  COLL_CHECK_ARG(test_.count > 0, "pipeline: no test images to evaluate on");
  log_ = rank_ == 0 ? log : nullptr;
  // The replica's pipeline, ranks in stage order; the stage's replicas, for gradients
  // and SyncBatchNorm.
  collComm_t c = nullptr;
  collCheck(collCommSplit(world, replica_, stage_, &c), world, "collCommSplit(pipeline)");
  pipe_ = OwnedComm(c);
  collCheck(collCommSplit(world, stage_, replica_, &c), world, "collCommSplit(stage replicas)");
  dp_ = OwnedComm(c);

  ModelOptions mo;
  mo.seed = o_.seed;
  mo.syncBatchNorm = o_.syncBatchNorm && replicas_ > 1;
  mo.bnComm = dp_.get();
  // One copy of the stage per micro-batch, each keeping its own forward's context for
  // its backward (no re-materialisation), all sharing copy 0's parameter values and
  // BatchNorm running statistics (Tensor copies share storage); each has its own grads.
  std::vector<Shape> shapes{{1, 28, 28}};
  std::vector<size_t> starts;
  for (int m = 0; m < o_.microBatches; ++m) {
    auto full = makeFashionCnn(mo);
    if (m == 0) {
      // Per-sample shapes between layers, from one image in eval mode (no statistics
      // change), and the split.
      full->setTraining(false);
      Tensor h({1, 1, 28, 28});
      std::vector<double> costs;
      for (size_t i = 0; i < full->size(); ++i) {
        h = full->layer(i).forward(h);
        shapes.push_back(perSample(h.shape()));
        costs.push_back(layerCost(full->layer(i).name()));
      }
      full->setTraining(true);
      starts = splitLayers(costs, stages_);
      first_ = starts[stage_];
      last_ = starts[stage_ + 1];
      inShape_ = shapes[first_];
      outShape_ = shapes[last_];
    }
    std::ostringstream name;
    name << "stage" << stage_;
    copies_.push_back(full->extract(first_, last_, name.str()));
    if (m > 0) {
      auto mine = copies_.back()->parameters(), base = copies_[0]->parameters();
      for (size_t i = 0; i < mine.size(); ++i) mine[i]->value = base[i]->value;
      auto mineB = copies_.back()->buffers(), baseB = copies_[0]->buffers();
      for (size_t i = 0; i < mineB.size(); ++i) mineB[i]->value = baseB[i]->value;
    }
  }
  stageModel_ = copies_[0].get();
  sgd_ = std::make_unique<Sgd>(stageModel_->parameters(),
                               SgdOptions{o_.lr, o_.momentum, o_.weightDecay});
  for (Param* p : stageModel_->parameters())
    gradSum_.emplace_back(static_cast<size_t>(p->grad.numel()), 0.0f);
}

PipelineTrainer::~PipelineTrainer() = default;

Tensor PipelineTrainer::receive(const Shape& per, int64_t n, int from) {
  Tensor t(withBatch(n, per));
  collCheck(collRecv(t.data(), static_cast<size_t>(t.numel()), collFloat32, from, pipe_.get(),
                     nullptr),
            pipe_.get(), "collRecv(pipeline)");
  return t;
}

void PipelineTrainer::send(const Tensor& t, int to) {
  collCheck(collSend(t.data(), static_cast<size_t>(t.numel()), collFloat32, to, pipe_.get(),
                     nullptr),
            pipe_.get(), "collSend(pipeline)");
  sentBytes_ += static_cast<double>(t.bytes());
}

void PipelineTrainer::accumulateGradients(Sequential& copy, bool first) {
  const auto params = copy.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const float* g = params[i]->grad.data();
    float* acc = gradSum_[i].data();
    const size_t n = gradSum_[i].size();
    if (first)
      std::copy(g, g + n, acc);
    else
      for (size_t j = 0; j < n; ++j) acc[j] += g[j];
  }
}

double PipelineTrainer::computeGradients(std::span<const int64_t> batch) {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int M = static_cast<int>(std::min<int64_t>(o_.microBatches, std::max<int64_t>(n, 1)));
  const bool firstStage = stage_ == 0, lastStage = stage_ == stages_ - 1;
  std::vector<int64_t> lo(M + 1);
  for (int m = 0; m <= M; ++m) lo[m] = n * m / M;
  std::vector<Tensor> dlogits(M);
  std::vector<int32_t> labels;
  double loss = 0;
  Tensor x;
  // Forward of every micro-batch, each on its own copy of the stage.
  for (int m = 0; m < M; ++m) {
    const int64_t nm = lo[m + 1] - lo[m];
    Tensor in;
    if (firstStage) {
      gatherBatch(train_, batch.subspan(lo[m], nm), x, labels);
      in = x.clone();
    } else {
      in = receive(inShape_, nm, stage_ - 1);
    }
    Tensor out = copies_[m]->forward(in);
    if (lastStage) {
      gatherBatch(train_, batch.subspan(lo[m], nm), x, labels);
      loss += static_cast<double>(loss_.forward(out, labels)) * nm / std::max<int64_t>(n, 1);
      // Each micro-batch's loss is its mean; weighted by its share, the sum is the mean
      // over the batch.
      dlogits[m] = loss_.backward().clone();
      for (float& v : dlogits[m].span()) v *= static_cast<float>(nm) / static_cast<float>(n);
    } else {
      send(out, stage_ + 1);
    }
  }
  // Backward in reverse order: the last micro-batch's gradient comes back first.
  for (int m = M - 1; m >= 0; --m) {
    const int64_t nm = lo[m + 1] - lo[m];
    Tensor dy = lastStage ? dlogits[m] : receive(outShape_, nm, stage_ + 1);
    Tensor dx = copies_[m]->backward(dy);
    accumulateGradients(*copies_[m], m == M - 1);
    if (!firstStage) send(dx, stage_ - 1);
  }
  // Sum over micro-batches into the parameters' grads, averaged over replicas.
  const auto params = stageModel_->parameters();
  size_t total = 0;
  for (auto& g : gradSum_) total += g.size();
  std::vector<float> flat;
  flat.reserve(total);
  for (auto& g : gradSum_) flat.insert(flat.end(), g.begin(), g.end());
  if (replicas_ > 1) {
    collCheck(collAllReduce(flat.data(), flat.data(), flat.size(), collFloat32, collAvg,
                            dp_.get(), nullptr),
              dp_.get(), "collAllReduce(stage gradients)");
    sentBytes_ += static_cast<double>(flat.size() * sizeof(float));
  }
  size_t at = 0;
  for (Param* p : params) {
    std::copy(flat.begin() + at, flat.begin() + at + p->grad.numel(), p->grad.data());
    at += static_cast<size_t>(p->grad.numel());
  }
  ++steps_;
  return loss;
}

void PipelineTrainer::applyUpdate(float lr) {
  sgd_->setLr(lr);
  sgd_->step();
}

EpochResult PipelineTrainer::trainEpoch(int64_t epoch) {
  for (auto& c : copies_) c->setTraining(true);
  const std::vector<int64_t> order = sampler_.indices(epoch);
  int64_t steps = sampler_.steps(localBatch_);
  if (o_.maxSteps > 0) steps = std::min(steps, o_.maxSteps);
  const int64_t mine = static_cast<int64_t>(order.size());
  double lossSum = 0;
  int64_t seen = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t begin = s * localBatch_, n = std::min(localBatch_, mine - begin);
    lossSum += computeGradients(std::span(order).subspan(begin, n)) * n;
    applyUpdate(o_.lrAt(sgd_->steps(), steps * o_.epochs));
    seen += n;
  }
  EpochResult r;
  r.epoch = epoch;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Losses live on the last stages; every replica saw `seen` samples.
  const bool lastStage = stage_ == stages_ - 1;
  double totals[2] = {lastStage ? lossSum : 0.0, lastStage ? static_cast<double>(seen) : 0.0};
  allReduceSum(totals, world_);
  r.trainLoss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
  r.images = static_cast<int64_t>(totals[1]);
  return r;
}

double PipelineTrainer::evaluate() {
  stageModel_->setTraining(false);
  const int64_t total = o_.testLimit > 0 ? std::min(o_.testLimit, test_.count) : test_.count;
  const int64_t lo = total * replica_ / replicas_, hi = total * (replica_ + 1) / replicas_;
  const bool firstStage = stage_ == 0, lastStage = stage_ == stages_ - 1;
  std::vector<int64_t> idx;
  Tensor x;
  std::vector<int32_t> labels;
  double counts[2] = {0, lastStage ? static_cast<double>(hi - lo) : 0.0};
  for (int64_t b = lo; b < hi; b += o_.evalBatch) {
    const int64_t n = std::min(o_.evalBatch, hi - b);
    idx.resize(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), b);
    Tensor in;
    if (firstStage) {
      gatherBatch(test_, idx, x, labels);
      in = x;
    } else {
      in = receive(inShape_, n, stage_ - 1);
    }
    Tensor out = stageModel_->forward(in);
    if (lastStage) {
      gatherBatch(test_, idx, x, labels);
      counts[0] += static_cast<double>(countCorrect(out, labels));
    } else {
      send(out, stage_ + 1);
    }
  }
  allReduceSum(counts, world_);
  stageModel_->setTraining(true);
  return counts[1] > 0 ? counts[0] / counts[1] : 0.0;
}

std::vector<EpochResult> PipelineTrainer::run() {
  if (log_)
    std::fprintf(log_, "pipeline: %d stage(s) x %d replica(s), %d micro-batch(es) per step; "
                 "stage 0 holds layers [%zu, %zu)\n",
                 stages_, replicas_, o_.microBatches, first_, last_);
  std::vector<EpochResult> results;
  for (int64_t epoch = 0; epoch < o_.epochs; ++epoch) {
    const double before = sentBytes_;
    EpochResult r = trainEpoch(epoch);
    const double trainBytes = sentBytes_ - before;
    r.testAccuracy = evaluate();
    sentBytes_ = before + trainBytes;  // evaluation traffic is not per training step
    if (log_)
      std::fprintf(log_,
                   "epoch %lld/%lld: train loss %.4f, test accuracy %.2f%%, %.2f s (%.0f img/s)\n",
                   static_cast<long long>(epoch + 1), static_cast<long long>(o_.epochs),
                   r.trainLoss, 100.0 * r.testAccuracy, r.seconds,
                   r.seconds > 0 ? r.images / r.seconds : 0.0);
    results.push_back(r);
  }
  // Bytes per step averaged over the ranks.
  double bytes[1] = {bytesPerStep()};
  allReduceSum(bytes, world_);
  bytes[0] /= size_;
  if (log_ && !results.empty()) {
    std::ostringstream secs, accs;
    double mean = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      secs << (i ? "," : "") << results[i].seconds;
      accs << (i ? "," : "") << results[i].testAccuracy;
      mean += results[i].seconds / static_cast<double>(results.size());
    }
    std::fprintf(log_,
                 "summary: pipeline %d stage(s) x %d replica(s), %d micro-batch(es): final test "
                 "accuracy %.2f%%, mean epoch %.2f s, %.0f bytes per step per rank\n",
                 stages_, replicas_, o_.microBatches, 100.0 * results.back().testAccuracy, mean,
                 bytes[0]);
    std::fprintf(log_,
                 "RESULT {\"ranks\": %d, \"mode\": \"pipeline\", \"stages\": %d, "
                 "\"micro_batches\": %d, \"global_batch\": %lld, \"sync_bn\": %s, "
                 "\"compression\": \"none\", \"precision\": \"fp32\", \"epoch_seconds\": [%s], "
                 "\"test_accuracy\": [%s], \"mean_epoch_seconds\": %.4f, "
                 "\"final_test_accuracy\": %.6f, \"bytes_per_step\": %.0f}\n",
                 size_, stages_, o_.microBatches, static_cast<long long>(o_.globalBatch),
                 o_.syncBatchNorm && replicas_ > 1 ? "true" : "false", secs.str().c_str(),
                 accs.str().c_str(), mean, results.back().testAccuracy, bytes[0]);
    std::fflush(log_);
  }
  return results;
}

}  // namespace collective::frontend
