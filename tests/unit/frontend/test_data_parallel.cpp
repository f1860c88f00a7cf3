// Synchronous SGD through the hvd engine, ranks as threads:
//  * 2 ranks x batch 32 with SyncBatchNorm follow 1 rank x batch 64 (differences come from
//    float summation order only) and hold bit-identical parameters;
//  * with per-rank BatchNorm they do not follow it: each rank normalises with the
//    statistics of its own 32 samples, so the forward pass, the loss and its gradient are
//    different functions from the 64-sample ones, and averaging the two gradients does
//    not give the global-batch gradient. Parameters stay identical across ranks (the
//    averaged gradient is), but the running statistics do not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "collective/hvd.hpp"
#include "data/fashion_mnist.hpp"
#include "data/sampler.hpp"
#include "distributed.hpp"
#include "comm.hpp"
#include "base/error.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"
#include "loss.hpp"
#include "model.hpp"
#include "rank_threads.hpp"
#include "rng.hpp"
#include "synthetic_data.hpp"

namespace collective::frontend {
namespace {

constexpr int64_t kSteps = 50;
constexpr int64_t kGlobalBatch = 64;

Dataset syntheticData(int64_t n, uint64_t seed) { return testing::patchData(n, seed); }

struct Snapshot {
  std::vector<std::vector<float>> params, buffers;
};

Snapshot snapshot(Sequential& m) {
  Snapshot s;
  for (Param* p : m.parameters()) s.params.push_back(p->value.toVector());
  for (Buffer* b : m.buffers()) s.buffers.push_back(b->value.toVector());
  return s;
}

// Largest |a - b| over all parameters, relative to the largest |b|.
double relativeDistance(const std::vector<std::vector<float>>& a,
                        const std::vector<std::vector<float>>& b) {
  double diff = 0, scale = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t i = 0; i < a[t].size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(a[t][i] - b[t][i])));
      scale = std::max(scale, static_cast<double>(std::abs(b[t][i])));
    }
  return diff / scale;
}

void trainStep(Sequential& m, const Dataset& data, int64_t begin, int64_t n, Tensor& x,
               std::vector<int32_t>& labels, SoftmaxCrossEntropy& ce) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), begin);
  gatherBatch(data, idx, x, labels);
  ce.forward(m.forward(x), labels);
  m.backward(ce.backward());
}

Snapshot trainSingleRank(const Dataset& data) {
  auto m = makeFashionCnn(ModelOptions{3});
  Sgd sgd(m->parameters(), SgdOptions{0.05f, 0.9f, 0.0f});
  Tensor x;
  std::vector<int32_t> labels;
  SoftmaxCrossEntropy ce;
  for (int64_t s = 0; s < kSteps; ++s) {
    trainStep(*m, data, s * kGlobalBatch, kGlobalBatch, x, labels, ce);
    sgd.step();
  }
  return snapshot(*m);
}

std::vector<Snapshot> trainRanks(const Dataset& data, int nranks, bool syncBn,
                                 bool momentumCorrection = false, bool atStep = false) {
  std::vector<Snapshot> out(nranks);
  const int64_t local = kGlobalBatch / nranks;
  testing::runRanks(nranks, [&](int rank, collComm_t world) {
    OwnedComm aux = OwnedComm::duplicate(world);  // before the engine owns `world`
    auto ctx = hvd::Context::from_comm(world, false);
    auto m = makeFashionCnn(ModelOptions{3, syncBn, aux.get()});
    Sgd sgd(m->parameters(), SgdOptions{0.05f, 0.9f, 0.0f});
    {
      DistributedOptimizer dopt(*m, sgd, *ctx, hvd::Compression::none(), momentumCorrection);
      if (atStep) dopt.reduceAtStep(aux.get());
      broadcastParameters(*m, *ctx);
      broadcastOptimizerState(sgd, *ctx);
      Tensor x;
      std::vector<int32_t> labels;
      SoftmaxCrossEntropy ce;
      for (int64_t s = 0; s < kSteps; ++s) {
        trainStep(*m, data, s * kGlobalBatch + rank * local, local, x, labels, ce);
        dopt.step();
      }
      if (atStep) {
        // Every grad is a view into the one buffer the all-reduce works on.
        const std::span<const float> packed = dopt.packedGradients();
        size_t at = 0;
        for (Param* p : m->parameters()) {
          EXPECT_EQ(p->grad.data(), packed.data() + at) << p->name;
          at += static_cast<size_t>(p->grad.numel());
        }
        EXPECT_EQ(at, packed.size());
      }
    }
    out[rank] = snapshot(*m);
    ctx->shutdown();
  });
  return out;
}

class DataParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new Dataset(syntheticData(kSteps * kGlobalBatch, 11));
    reference_ = new Snapshot(trainSingleRank(*data_));
  }
  static void TearDownTestSuite() {
    delete data_;
    delete reference_;
  }
  static Dataset* data_;
  static Snapshot* reference_;
};
Dataset* DataParallel::data_ = nullptr;
Snapshot* DataParallel::reference_ = nullptr;

// Summation order alone (BLAS blocking over 32 vs 64 columns, the all-reduce's order)
// moves the result by a few float ulps per step; after 50 momentum steps that measured
// ~1e-7 relative, against ~5e-2 for per-rank BatchNorm.
constexpr double kOrderTolerance = 1e-5;

TEST_F(DataParallel, SyncBatchNormTwoRanksMatchOneRankGlobalBatch) {
  const auto ranks = trainRanks(*data_, 2, true);
  const double d = relativeDistance(ranks[0].params, reference_->params);
  std::printf("relative distance to 1 rank x 64: %.3g (SyncBatchNorm)\n", d);
  EXPECT_LT(d, kOrderTolerance) << "2 ranks x 32 with SyncBatchNorm vs 1 rank x 64";
  EXPECT_LT(relativeDistance(ranks[0].buffers, reference_->buffers), kOrderTolerance);
  EXPECT_EQ(ranks[0].params, ranks[1].params) << "replicas must be bit-identical";
  EXPECT_EQ(ranks[0].buffers, ranks[1].buffers) << "running statistics must be bit-identical";
}

TEST_F(DataParallel, PlainBatchNormDivergesFromGlobalBatch) {
  const auto ranks = trainRanks(*data_, 2, false);
  const double d = relativeDistance(ranks[0].params, reference_->params);
  std::printf("relative distance to 1 rank x 64: %.3g (per-rank BatchNorm)\n", d);
  EXPECT_GT(d, 10 * kOrderTolerance) << "per-rank statistics should change the trajectory";
  EXPECT_EQ(ranks[0].params, ranks[1].params) << "averaged gradients keep parameters identical";
  EXPECT_NE(ranks[0].buffers, ranks[1].buffers) << "running statistics are per rank";
}

TEST_F(DataParallel, MomentumCorrectionWithoutCompressionIsTheSameUpdate) {
  // Averaging is linear, so folding momentum in before the reduction changes only the
  // rounding; a mistake in the folded update (double-counted decay, momentum applied
  // twice) would move the parameters far more.
  const auto ranks = trainRanks(*data_, 2, true, true);
  const double d = relativeDistance(ranks[0].params, reference_->params);
  std::printf("relative distance to 1 rank x 64: %.3g (momentum correction)\n", d);
  EXPECT_LT(d, 10 * kOrderTolerance);
  EXPECT_EQ(ranks[0].params, ranks[1].params);
}

// One blocking all-reduce of the packed gradients in step() instead of the engine: the
// same update up to summation order, replicas bit-identical, with and without momentum
// folded in.
TEST_F(DataParallel, GradientsReducedAtStepGiveTheSameTraining) {
  for (bool fold : {false, true}) {
    const auto ranks = trainRanks(*data_, 2, true, fold, true);
    const double d = relativeDistance(ranks[0].params, reference_->params);
    std::printf("relative distance to 1 rank x 64: %.3g (reduced at step%s)\n", d,
                fold ? ", momentum folded" : "");
    EXPECT_LT(d, 10 * kOrderTolerance);
    EXPECT_EQ(ranks[0].params, ranks[1].params);
    EXPECT_EQ(ranks[0].buffers, ranks[1].buffers);
  }
}

TEST(DistributedOptimizerArgs, ReduceAtStepRefusesCompressionAndBadComms) {
  testing::runRanks(2, [&](int, collComm_t world) {
    OwnedComm aux = OwnedComm::duplicate(world);
    auto ctx = hvd::Context::from_comm(world, false);
    auto m = makeFashionCnn(ModelOptions{3});
    Sgd sgd(m->parameters(), SgdOptions{0.05f, 0.9f, 0.0f});
    {
      DistributedOptimizer int8(*m, sgd, *ctx, hvd::Compression::int8());
      try {
        int8.reduceAtStep(aux.get());
        ADD_FAILURE() << "reduceAtStep accepted compressed gradients";
      } catch (const coll::Error& e) {
        EXPECT_EQ(e.code(), collInvalidUsage) << e.what();
      }
    }
    {
      DistributedOptimizer plain(*m, sgd, *ctx);
      EXPECT_THROW(plain.reduceAtStep(nullptr), coll::Error);
      EXPECT_FALSE(plain.reducesAtStep());
      plain.reduceAtStep(aux.get());
      EXPECT_TRUE(plain.reducesAtStep());
    }
    ctx->shutdown();
  });
}

TEST(TrainOptionsGradSync, ParsedCheckedAndChosenByCores) {
  EXPECT_EQ(TrainOptions::parse({}).gradSync, "auto");
  EXPECT_EQ(TrainOptions::parse({"--grad-sync", "step"}).gradSync, "step");
  EXPECT_THROW(TrainOptions::parse({"--grad-sync", "sometimes"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--grad-sync=step", "--compression", "int8"}), coll::Error);
  const TrainOptions a = TrainOptions::parse({});
  EXPECT_TRUE(a.gradSyncAtStep(2, 2)) << "2 ranks on 2 cores: nothing left to overlap on";
  EXPECT_TRUE(a.gradSyncAtStep(2, 1)) << "ranks bound to one core each";
  EXPECT_FALSE(a.gradSyncAtStep(2, 8)) << "spare cores: overlap";
  EXPECT_FALSE(a.gradSyncAtStep(1, 1)) << "a single rank per host";
  EXPECT_FALSE(TrainOptions::parse({"--compression", "topk"}).gradSyncAtStep(2, 2));
  EXPECT_TRUE(TrainOptions::parse({"--blas-threads", "4"}).gradSyncAtStep(2, 8));
  EXPECT_FALSE(TrainOptions::parse({"--grad-sync", "overlap"}).gradSyncAtStep(2, 2));
  EXPECT_TRUE(TrainOptions::parse({"--grad-sync", "step"}).gradSyncAtStep(1, 64));
}

TEST(TrainOptionsElastic, ParsedAndLimitedToWhatTheCommitHolds) {
  EXPECT_FALSE(TrainOptions::parse({}).elastic);
  const TrainOptions e = TrainOptions::parse({"--elastic", "--commit-every", "5"});
  EXPECT_TRUE(e.elastic);
  EXPECT_EQ(e.commitEvery, 5);
  EXPECT_EQ(TrainOptions::parse({"--elastic"}).commitEvery, 20);
  EXPECT_THROW(TrainOptions::parse({"--elastic", "--commit-every", "0"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--elastic", "--mode", "ps"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--elastic", "--precision", "bf16"}), coll::Error);
  EXPECT_NE(TrainOptions::usage().find("--elastic"), std::string::npos);
  EXPECT_FALSE(e.elasticGrow);
  EXPECT_TRUE(TrainOptions::parse({"--elastic", "--elastic-grow"}).elasticGrow);
  EXPECT_THROW(TrainOptions::parse({"--elastic-grow"}), coll::Error) << "needs --elastic";
}

// inf (or a value that overflows float, 1e40) used to pass and train to NaN with exit 0;
// NaN and negatives were caught only by Sgd, after the job had started.
TEST(TrainOptionsSgd, LearningRateMomentumAndDecayMustBeFiniteAndNonNegative) {
  for (const char* flag : {"--lr", "--momentum", "--weight-decay"}) {
    for (const char* bad : {"inf", "-inf", "nan", "1e40", "-0.5"})
      EXPECT_THROW(TrainOptions::parse({flag, bad}), coll::Error) << flag << " " << bad;
    EXPECT_NO_THROW(TrainOptions::parse({flag, "0"})) << flag;
    EXPECT_NO_THROW(TrainOptions::parse({flag, "0.1"})) << flag;
  }
  EXPECT_FLOAT_EQ(TrainOptions::parse({"--lr", "0.2"}).lr, 0.2f);
}

// strtoll saturated silently (--batch-size 99999999999999999999 trained on nothing and
// exited 0) and --blas-threads 4294967297 became 1.
TEST(TrainOptionsIntegers, OutOfRangeValuesAreRefused) {
  EXPECT_THROW(TrainOptions::parse({"--batch-size", "99999999999999999999"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--epochs", "-99999999999999999999"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--seed", "99999999999999999999"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--blas-threads", "4294967297"}), coll::Error);
  EXPECT_THROW(TrainOptions::parse({"--blas-threads", "0"}), coll::Error);
  EXPECT_EQ(TrainOptions::parse({"--blas-threads", "2"}).blasThreads, 2);
  EXPECT_EQ(TrainOptions::parse({"--batch-size", "9223372036854775807"}).globalBatch,
            INT64_MAX);
  // The step count of a batch as large as an int64 holds does not overflow.
  EXPECT_EQ(DistributedSampler(64, 0, 1, 1).steps(INT64_MAX), 1);
  EXPECT_EQ(DistributedSampler(64, 0, 2, 1).steps(32), 1);
  EXPECT_EQ(DistributedSampler(65, 0, 1, 1).steps(32), 3);
}

// --train-limit -5 used to train on all 60000 images without a word.
TEST(TrainOptionsIntegers, NegativeLimitsAreRefused) {
  for (const char* flag : {"--train-limit", "--test-limit"}) {
    EXPECT_THROW(TrainOptions::parse({flag, "-5"}), coll::Error) << flag;
    EXPECT_NO_THROW(TrainOptions::parse({flag, "0"})) << flag;
  }
  EXPECT_EQ(TrainOptions::parse({"--train-limit", "100"}).trainLimit, 100);
  EXPECT_EQ(TrainOptions::parse({"--test-limit", "7"}).testLimit, 7);
}

// Fewer training images than ranks: no rank took a step, yet the run reported loss 0
// and the untrained model's accuracy with exit 0. An empty test set reported 0%.
TEST(TrainerData, FewerImagesThanRanksOrNoTestImagesIsAnError) {
  TrainOptions o = TrainOptions::parse({"--epochs", "1", "--batch-size", "2", "--no-progress"});
  const Dataset one = syntheticData(1, 3), two = syntheticData(2, 4), none = syntheticData(0, 5);
  for (const auto& [train, test] : {std::pair{&one, &two}, std::pair{&two, &none}}) {
    EXPECT_THROW(testing::runRanks(2,
                                   [&](int, collComm_t world) {
                                     OwnedComm aux = OwnedComm::duplicate(world);
                                     auto ctx = hvd::Context::from_comm(world, false);
                                     Trainer t(o, *ctx, aux.get(), *train, *test, nullptr);
                                     t.run();
                                     ctx->shutdown();
                                   }),
                 coll::Error)
        << train->count << " train, " << test->count << " test images";
  }
}

// Only rank 0 reads --load and writes --save. A bad file used to fail rank 0 alone: the
// others waited in the parameter broadcast (or the next epoch) while rank 0's engine
// waited for them to shut down, a minute (COLL_SHUTDOWN_TIMEOUT) with no output. Now
// every rank fails at once. The timeouts are lowered so that a regression fails here
// in seconds instead of hanging.
TEST(TrainerData, CheckpointFailureOnRankZeroStopsEveryRankPromptly) {
  const std::string dir = ::testing::TempDir();
  const std::string junk = dir + "/frontend_junk_ckpt_" + std::to_string(::getpid());
  {
    FILE* f = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("not a checkpoint", f);
    std::fclose(f);
  }
  const Dataset train = syntheticData(8, 6), test = syntheticData(4, 7);
  const std::vector<std::vector<std::string>> cases = {
      {"--load", junk}, {"--save", dir + "/no_such_dir/ckpt"}};
  for (const auto& extra : cases) {
    std::vector<std::string> args = {"--epochs", "1", "--batch-size", "4", "--no-progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    const TrainOptions o = TrainOptions::parse(args);
    std::vector<int> failed(2, 0);
    const auto start = std::chrono::steady_clock::now();
    testing::runRanks(2, [&](int rank, collComm_t world) {
      OwnedComm aux = OwnedComm::duplicate(world);
      auto ctx = hvd::Context::from_comm(world, false);
      try {
        Trainer t(o, *ctx, aux.get(), train, test, nullptr);
        t.run();
      } catch (const std::exception&) {
        failed[rank] = 1;
      }
      ctx->shutdown();
    }, {{"COLL_SHUTDOWN_TIMEOUT", "8"}, {"COLL_TIMEOUT", "8"}});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(failed, std::vector<int>({1, 1})) << extra[0];
    EXPECT_LT(seconds, 5.0) << extra[0];
  }
  std::remove(junk.c_str());
}

TEST(Broadcast, ParametersBuffersAndOptimizerStateFollowRankZero) {
  std::vector<Snapshot> before(2), after(2);
  std::vector<std::vector<float>> momentum(2);
  std::vector<int64_t> steps(2);
  testing::runRanks(2, [&](int rank, collComm_t world) {
    auto ctx = hvd::Context::from_comm(world, false);
    auto m = makeFashionCnn(ModelOptions{static_cast<uint64_t>(10 + rank)});  // differ
    Sgd sgd(m->parameters(), {});
    for (int s = 0; s <= rank; ++s) {  // rank 1 takes one step more
      for (Param* p : m->parameters()) p->grad.fill(0.1f * (rank + 1));
      sgd.step();
    }
    m->buffers()[0]->value.fill(static_cast<float>(rank + 5));
    before[rank] = snapshot(*m);
    broadcastParameters(*m, *ctx);
    broadcastOptimizerState(sgd, *ctx);
    after[rank] = snapshot(*m);
    momentum[rank] = sgd.state()[0]->value.toVector();
    steps[rank] = sgd.steps();
    ctx->shutdown();
  });
  ASSERT_NE(before[0].params, before[1].params);
  EXPECT_EQ(after[0].params, before[0].params);
  EXPECT_EQ(after[1].params, before[0].params);
  EXPECT_EQ(after[1].buffers, before[0].buffers);
  EXPECT_EQ(momentum[1], momentum[0]);
  EXPECT_EQ(steps[1], 1);
}

}  // namespace
}  // namespace collective::frontend
