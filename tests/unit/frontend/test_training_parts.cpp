// Loss, optimizer, sampler, data files and checkpoints.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "checkpoint.hpp"
#include "base/error.hpp"
#include "data/fashion_mnist.hpp"
#include "data/sampler.hpp"
#include "gradcheck.hpp"
#include "loss.hpp"
#include "model.hpp"
#include "sgd.hpp"

namespace collective::frontend {
namespace {

using testing::randomTensor;

TEST(SoftmaxCrossEntropy, LossAndGradientMatchDefinition) {
  const Tensor z = randomTensor({3, 4}, 1, -3.0f, 3.0f);
  const std::vector<int32_t> labels = {2, 0, 3};
  SoftmaxCrossEntropy ce;
  const float loss = ce.forward(z, labels);
  double want = 0;
  for (int64_t b = 0; b < 3; ++b) {
    double sum = 0;
    for (int64_t j = 0; j < 4; ++j) sum += std::exp(static_cast<double>(z[b * 4 + j]));
    want += std::log(sum) - z[b * 4 + labels[b]];
  }
  EXPECT_NEAR(loss, want / 3, 1e-6);
  const Tensor g = ce.backward().clone();
  Tensor zz = z.clone();
  testing::compareNumerical(
      "logits", zz, g, [&] { return SoftmaxCrossEntropy().forward(zz, labels); },
      testing::GradTolerance{1e-2, 1e-3, 1e-2, 100});
}

TEST(SoftmaxCrossEntropy, StableForHugeLogitsAndCountsCorrect) {
  const Tensor z = Tensor::fromVector({2, 2}, {1000.0f, 0.0f, 0.0f, 1000.0f});
  SoftmaxCrossEntropy ce;
  const std::vector<int32_t> labels = {0, 0};
  const float loss = ce.forward(z, labels);
  EXPECT_NEAR(loss, 500.0f, 1e-3);  // (0 + 1000) / 2
  EXPECT_EQ(ce.correct(), 1);
  EXPECT_EQ(countCorrect(z, labels), 1);
  EXPECT_THROW(ce.forward(z, std::vector<int32_t>{0, 2}), coll::Error);
}

TEST(Sgd, FollowsPyTorchMomentumAndWeightDecay) {
  Param p{"w", Tensor::fromVector({2}, {1.0f, -2.0f}), Tensor::fromVector({2}, {0.5f, 0.25f})};
  Sgd sgd({&p}, SgdOptions{0.1f, 0.9f, 0.01f});
  // step 1: g = grad + wd*p; buf = g; p -= lr*buf
  double p0 = 1.0, buf0 = 0.5 + 0.01 * 1.0;
  p0 -= 0.1 * buf0;
  sgd.step();
  EXPECT_NEAR(p.value[0], p0, 1e-7);
  // step 2: buf = 0.9*buf + g
  buf0 = 0.9 * buf0 + (0.5 + 0.01 * p0);
  p0 -= 0.1 * buf0;
  sgd.step();
  EXPECT_NEAR(p.value[0], p0, 1e-6);
  EXPECT_NEAR(sgd.state()[0]->value[0], buf0, 1e-6);
  EXPECT_EQ(sgd.steps(), 2);
}

TEST(DistributedSampler, ShardsAreDisjointEqualAndCoverAllButRemainder) {
  const int64_t n = 103;
  const int ranks = 4;
  std::set<int64_t> seen;
  for (int r = 0; r < ranks; ++r) {
    DistributedSampler s(n, r, ranks, 7);
    const auto idx = s.indices(3);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), 25);
    EXPECT_EQ(s.steps(8), 4);
    for (int64_t i : idx) EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice";
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(DistributedSampler, SharedSeedPerEpochAndInterleavedShards) {
  DistributedSampler one(64, 0, 1, 5), r0(64, 0, 2, 5), r1(64, 1, 2, 5);
  EXPECT_NE(one.indices(0), one.indices(1)) << "each epoch reshuffles";
  EXPECT_EQ(r0.indices(2), DistributedSampler(64, 0, 2, 5).indices(2)) << "deterministic";
  // Step s of 2 ranks x batch 4 covers the samples of step s of 1 rank x batch 8.
  const auto all = one.indices(1), a = r0.indices(1), b = r1.indices(1);
  for (int64_t s = 0; s < 8; ++s) {
    std::set<int64_t> want(all.begin() + 8 * s, all.begin() + 8 * s + 8), got;
    got.insert(a.begin() + 4 * s, a.begin() + 4 * s + 4);
    got.insert(b.begin() + 4 * s, b.begin() + 4 * s + 4);
    EXPECT_EQ(got, want) << "step " << s;
  }
}

// An elastic resume after step s of global batch 12 on 4 ranks, on 3 ranks: the rest of
// the epoch is the same samples, in the same global steps, as the uninterrupted run's.
TEST(DistributedSampler, StartResumesTheEpochOnAnotherNumberOfRanks) {
  const int64_t n = 100, batch = 12, done = 3;
  const auto all = DistributedSampler(n, 0, 1, 9).indices(4);
  std::vector<DistributedSampler> three;
  for (int r = 0; r < 3; ++r) three.emplace_back(n, r, 3, 9);
  const int64_t start = done * batch, local = batch / 3;
  EXPECT_EQ(three[0].perRankFrom(start), n / 3 - start / 3);
  EXPECT_EQ(three[0].steps(local, start), three[0].steps(local) - done);
  for (int64_t s = 0; s < three[0].steps(local, start) - 1; ++s) {
    std::set<int64_t> want(all.begin() + start + s * batch, all.begin() + start + (s + 1) * batch),
        got;
    for (const auto& r : three) {
      const auto mine = r.indices(4, start);
      got.insert(mine.begin() + s * local, mine.begin() + (s + 1) * local);
    }
    EXPECT_EQ(got, want) << "step " << s;
  }
  EXPECT_EQ(three[1].indices(4, 0), three[1].indices(4));
  EXPECT_TRUE(three[2].indices(4, 300).empty()) << "past the end: nothing left";
  EXPECT_THROW(three[0].indices(4, 13), coll::Error) << "not a multiple of the ranks";
  EXPECT_THROW(three[0].steps(local, -3), coll::Error);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("frontend_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

void writeGz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

using IdxFiles = TempDir;

TEST_F(IdxFiles, ReadsHeaderAndPayload) {
  // 2 images of 2x3: magic 0x00000803, dims 2, 2, 3.
  std::vector<uint8_t> img = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int i = 0; i < 12; ++i) img.push_back(static_cast<uint8_t>(i * 20));
  writeGz(path("train-images-idx3-ubyte.gz"), img);
  writeGz(path("train-labels-idx1-ubyte.gz"), {0, 0, 8, 1, 0, 0, 0, 2, 7, 3});
  const Dataset d = loadFashionMnist(dir_.string(), true);
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.rows, 2);
  EXPECT_EQ(d.cols, 3);
  EXPECT_EQ(d.labels, std::vector<int32_t>({7, 3}));
  EXPECT_EQ(d.pixels[7], 140);
  Tensor x;
  std::vector<int32_t> labels;
  const std::vector<int64_t> pick = {1};
  gatherBatch(d, pick, x, labels);
  EXPECT_EQ(x.shape(), Shape({1, 1, 2, 3}));
  EXPECT_NEAR(x[1], (140.0f / 255.0f - 0.2860f) / 0.3530f, 1e-5);
  EXPECT_EQ(labels, std::vector<int32_t>({3}));
}

TEST_F(IdxFiles, RejectsBadMagicAndTruncation) {
  std::vector<int64_t> shape;
  writeGz(path("a.gz"), {0, 0, 9, 1, 0, 0, 0, 1, 5});
  EXPECT_THROW(readIdx(path("a.gz"), 1, shape), coll::Error);
  writeGz(path("b.gz"), {0, 0, 8, 1, 0, 0, 0, 5, 1, 2});
  EXPECT_THROW(readIdx(path("b.gz"), 1, shape), coll::Error);
  writeGz(path("c.gz"), {0, 0, 8, 1, 0, 0, 0, 1, 1, 2});
  EXPECT_THROW(readIdx(path("c.gz"), 1, shape), coll::Error) << "trailing bytes";
  EXPECT_THROW(readIdx(path("missing.gz"), 1, shape), coll::Error);
}

// A label of 10 or more used to be found only by the loss, on the one rank whose shard
// held it, mid-epoch: that rank failed and the others hung in their next collective.
TEST_F(IdxFiles, RejectsLabelsOutsideTheTenClasses) {
  std::vector<uint8_t> img = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6};
  writeGz(path("train-images-idx3-ubyte.gz"), img);
  writeGz(path("train-labels-idx1-ubyte.gz"), {0, 0, 8, 1, 0, 0, 0, 2, 9, 10});
  try {
    loadFashionMnist(dir_.string(), true);
    FAIL() << "label 10 accepted";
  } catch (const coll::Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 10 of sample 1 is not a class in [0, 10)"), std::string::npos) << e.what();
  }
  writeGz(path("train-labels-idx1-ubyte.gz"), {0, 0, 8, 1, 0, 0, 0, 2, 9, 0});
  EXPECT_EQ(loadFashionMnist(dir_.string(), true).labels, std::vector<int32_t>({9, 0}));
}

TEST(FashionMnist, InstalledDatasetHasExpectedShape) {
  if (!std::filesystem::exists(std::string(kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const Dataset d = loadFashionMnist(kFashionMnistDir, false);
  EXPECT_EQ(d.count, 10000);
  EXPECT_EQ(d.rows, 28);
  EXPECT_EQ(d.cols, 28);
  std::vector<int> perClass(10, 0);
  for (int32_t l : d.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++perClass[l];
  }
  for (int c : perClass) EXPECT_EQ(c, 1000);  // the test split is balanced
}

using Checkpoints = TempDir;

TEST_F(Checkpoints, RoundTripRestoresEveryTensor) {
  auto model = makeFashionCnn({});
  Sgd sgd(model->parameters(), {});
  for (Param* p : model->parameters()) p->grad.fill(0.5f);
  sgd.step();
  model->buffers()[0]->value.fill(3.0f);
  saveCheckpoint(path("ck"), *model, sgd, {4, sgd.steps()});

  auto other = makeFashionCnn(ModelOptions{99});
  Sgd sgd2(other->parameters(), {});
  const CheckpointInfo info = loadCheckpoint(path("ck"), *other, sgd2);
  EXPECT_EQ(info.epoch, 4);
  EXPECT_EQ(sgd2.steps(), 1);
  auto a = model->parameters(), b = other->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]->value.toVector(), b[i]->value.toVector());
  EXPECT_EQ(other->buffers()[0]->value[0], 3.0f);
  EXPECT_EQ(sgd2.state()[0]->value.toVector(), sgd.state()[0]->value.toVector());
}

TEST_F(Checkpoints, RejectsOtherModelsAndGarbage) {
  auto model = makeFashionCnn({});
  Sgd sgd(model->parameters(), {});
  Sequential small("model");
  Sgd none(small.parameters(), {});
  saveCheckpoint(path("small"), small, none, {});
  EXPECT_THROW(loadCheckpoint(path("small"), *model, sgd), coll::Error);
  FILE* f = std::fopen(path("junk").c_str(), "wb");
  std::fputs("not a checkpoint", f);
  std::fclose(f);
  EXPECT_THROW(loadCheckpoint(path("junk"), *model, sgd), coll::Error);
}

}  // namespace
}  // namespace collective::frontend
