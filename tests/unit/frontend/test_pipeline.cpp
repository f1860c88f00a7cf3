// Pipeline model parallelism: the layer split, and one step's gradients of P stages x R
// replicas with M micro-batches against one rank that runs the same micro-batches one
// after another (BatchNorm per micro-batch, over all replicas' parts of it) and sums
// their gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include "base/error.hpp"
#include "loss.hpp"
#include "model.hpp"
#include "rank_threads.hpp"
#include "synthetic_data.hpp"
#include "train/pipeline_trainer.hpp"

namespace collective::frontend {
namespace {

TEST(TrainModes, OptionsAreValidated) {
  const TrainOptions p = TrainOptions::parse({"--mode", "pipeline", "--stages", "3",
                                              "--micro-batches", "8"});
  EXPECT_EQ(p.mode, "pipeline");
  EXPECT_EQ(p.stages, 3);
  EXPECT_EQ(p.microBatches, 8);
  const TrainOptions q = TrainOptions::parse({"--mode=ps", "--servers", "2", "--ps-async",
                                              "--max-staleness", "0"});
  EXPECT_TRUE(q.psAsync);
  EXPECT_EQ(q.maxStaleness, 0);
  for (std::vector<std::string> bad : {
           std::vector<std::string>{"--mode", "mesh"},
           {"--mode", "pipeline", "--stages", "0"},
           {"--mode", "pipeline", "--micro-batches", "0"},
           {"--mode", "ps", "--servers", "0"},
           {"--mode", "ps", "--max-staleness", "-1"},
           {"--mode", "ps", "--ps-timeout", "0"},
           {"--mode", "pipeline", "--precision", "bf16"},
           {"--mode", "ps", "--compression", "int8"},
           {"--mode", "pipeline", "--save", "x.ckpt"},
           {"--precision", "fp8"},
           {"--precision", "bf16", "--compression", "fp16"},
           {"--max-steps", "-2"},
       })
    EXPECT_THROW(TrainOptions::parse(bad), coll::Error) << bad[0] << " " << bad[1];
}

TEST(Pipeline, SplitMinimisesTheMostExpensiveStage) {
  EXPECT_EQ(PipelineTrainer::splitLayers({1, 1, 1, 1}, 2), (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(PipelineTrainer::splitLayers({5, 1, 1, 1}, 2), (std::vector<size_t>{0, 1, 4}));
  EXPECT_EQ(PipelineTrainer::splitLayers({1, 2, 3}, 3), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_THROW(PipelineTrainer::splitLayers({1, 2}, 3), std::exception);
}

using Grads = std::map<std::string, std::vector<float>>;

// The reference: one rank, micro-batch m = every replica's m-th part, last one first
// (the pipeline's backward order, so the sums add in the same order).
Grads referenceGradients(const Dataset& data, const std::vector<std::vector<int64_t>>& replicas,
                         int M) {
  auto model = makeFashionCnn({});
  SoftmaxCrossEntropy ce;
  Grads sum;
  const int64_t n = static_cast<int64_t>(replicas[0].size());
  const int64_t total = n * static_cast<int64_t>(replicas.size());
  for (int m = M - 1; m >= 0; --m) {
    const int64_t lo = n * m / M, hi = n * (m + 1) / M;
    std::vector<int64_t> idx;
    for (const auto& r : replicas) idx.insert(idx.end(), r.begin() + lo, r.begin() + hi);
    Tensor x;
    std::vector<int32_t> labels;
    gatherBatch(data, idx, x, labels);
    ce.forward(model->forward(x), labels);
    Tensor g = ce.backward().clone();
    for (float& v : g.span()) v *= static_cast<float>(idx.size()) / static_cast<float>(total);
    model->backward(g);
    for (Param* p : model->parameters()) {
      auto& s = sum[p->name];
      if (s.empty()) s.assign(static_cast<size_t>(p->grad.numel()), 0.0f);
      for (size_t i = 0; i < s.size(); ++i) s[i] += p->grad[static_cast<int64_t>(i)];
    }
  }
  return sum;
}

struct Case {
  int stages, replicas, micro;
};

class PipelineGradients : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineGradients, EqualOneRankOverTheSameMicroBatches) {
  const Case c = GetParam();
  const Dataset data = testing::patchData(256, 9), test = testing::patchData(20, 10);
  const int64_t local = 24;
  std::vector<std::vector<int64_t>> shards(c.replicas);
  for (int r = 0; r < c.replicas; ++r)
    for (int64_t i = 0; i < local; ++i) shards[r].push_back(7 + r + i * c.replicas);
  TrainOptions o = TrainOptions::parse({"--mode", "pipeline", "--stages",
                                        std::to_string(c.stages), "--micro-batches",
                                        std::to_string(c.micro)});
  o.globalBatch = local * c.replicas;
  Grads got;
  std::mutex mu;
  testing::runRanks(c.stages * c.replicas, [&](int rank, collComm_t world) {
    PipelineTrainer t(o, world, data, test, nullptr);
    EXPECT_EQ(t.stage(), rank % c.stages);
    t.computeGradients(shards[t.replica()]);
    std::lock_guard<std::mutex> lock(mu);
    for (Param* p : t.stageModel().parameters()) {
      auto g = p->grad.toVector();
      auto [it, fresh] = got.emplace(p->name, g);
      if (!fresh) EXPECT_EQ(it->second, g) << p->name << ": replicas differ";
    }
  });
  const Grads ref = referenceGradients(data, shards, c.micro);
  ASSERT_EQ(got.size(), ref.size());  // every parameter on exactly one stage
  double largest = 0;
  for (const auto& [name, r] : ref)
    for (float v : r) largest = std::max(largest, static_cast<double>(std::abs(v)));
  for (const auto& [name, r] : ref) {
    const auto& g = got.at(name);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(g[i] - r[i])));
      scale = std::max(scale, static_cast<double>(std::abs(r[i])));
    }
    EXPECT_GT(scale, 0) << name;
    // One replica: the same operations in the same order. With replicas, SyncBatchNorm
    // and the average add float summation-order differences; a convolution's bias before
    // a BatchNorm has a gradient of zero up to rounding (~1e-8), hence the floor.
    EXPECT_LE(diff, (c.replicas == 1 ? 1e-6 : 1e-4) * scale + 1e-6 * largest) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineGradients,
                         ::testing::Values(Case{2, 1, 4}, Case{3, 1, 3}, Case{2, 2, 2}),
                         [](const auto& info) {
                           return "P" + std::to_string(info.param.stages) + "R" +
                                  std::to_string(info.param.replicas) + "M" +
                                  std::to_string(info.param.micro);
                         });

}  // namespace
}  // namespace collective::frontend
