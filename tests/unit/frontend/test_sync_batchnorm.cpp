// SyncBatchNorm over ranks-as-threads against BatchNorm over the concatenated batch.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <ostream>

#include "gradcheck.hpp"
#include "layers/batchnorm.hpp"
#include "layers/sync_batchnorm.hpp"
#include "rank_threads.hpp"

namespace collective::frontend {
namespace {

using testing::randomTensor;

struct SyncCase {
  std::vector<int64_t> batches;  // per rank; may differ, may be 0
  Shape sample;                  // {C} or {C, H, W}
};

void PrintTo(const SyncCase& c, std::ostream* os) {
  *os << "batches " << shapeString(c.batches) << ", sample " << shapeString(c.sample);
}

Shape withBatch(int64_t b, const Shape& sample) {
  Shape s{b};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

// Rows [begin, begin + n) of a batch-major tensor.
Tensor rows(const Tensor& t, int64_t begin, int64_t n) {
  const int64_t per = t.dim(0) ? t.numel() / t.dim(0) : 0;
  Shape s = t.shape();
  s[0] = n;
  Tensor out(s);
  if (n) std::memcpy(out.data(), t.data() + begin * per, n * per * sizeof(float));
  return out;
}

void setAffine(BatchNorm& bn) {
  auto p = bn.parameters();
  for (int64_t c = 0; c < p[0]->value.numel(); ++c) {
    p[0]->value[c] = 0.5f + 0.25f * static_cast<float>(c);
    p[1]->value[c] = 0.1f * static_cast<float>(c) - 0.2f;
  }
}

class SyncBatchNormTest : public ::testing::TestWithParam<SyncCase> {};

TEST_P(SyncBatchNormTest, MatchesBatchNormOverGlobalBatch) {
  const SyncCase sc = GetParam();
  const int nranks = static_cast<int>(sc.batches.size());
  const int64_t total = std::accumulate(sc.batches.begin(), sc.batches.end(), int64_t{0});
  const int64_t C = sc.sample[0];
  const Tensor x = randomTensor(withBatch(total, sc.sample), 21, -2.0f, 3.0f);
  const Tensor dy = randomTensor(withBatch(total, sc.sample), 22);

  BatchNorm ref("bn", C);
  setAffine(ref);
  const Tensor yRef = ref.forward(x).clone();
  const Tensor dxRef = ref.backward(dy).clone();
  auto refP = ref.parameters();
  auto refB = ref.buffers();

  std::vector<std::vector<float>> dgamma(nranks), dbeta(nranks), runMean(nranks), runVar(nranks);
  testing::runRanks(nranks, [&](int rank, collComm_t comm) {
    const int64_t begin =
        std::accumulate(sc.batches.begin(), sc.batches.begin() + rank, int64_t{0});
    const int64_t n = sc.batches[rank];
    SyncBatchNorm bn("bn", C, comm);
    setAffine(bn);
    const Tensor y = bn.forward(rows(x, begin, n));
    const Tensor want = rows(yRef, begin, n);
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_NEAR(y[i], want[i], 2e-5) << "rank " << rank << " output " << i;
    const Tensor dx = bn.backward(rows(dy, begin, n));
    const Tensor dxWant = rows(dxRef, begin, n);
    for (int64_t i = 0; i < dx.numel(); ++i)
      ASSERT_NEAR(dx[i], dxWant[i], 2e-5) << "rank " << rank << " input grad " << i;
    auto p = bn.parameters();
    auto b = bn.buffers();
    dgamma[rank] = p[0]->grad.toVector();
    dbeta[rank] = p[1]->grad.toVector();
    runMean[rank] = b[0]->value.toVector();
    runVar[rank] = b[1]->value.toVector();
  });
  // A rank that failed an assertion returned before filling in its results.
  ASSERT_FALSE(HasFailure());
  for (int64_t c = 0; c < C; ++c) {
    double g = 0, be = 0;
    for (int r = 0; r < nranks; ++r) {
      g += dgamma[r][c];
      be += dbeta[r][c];
    }
    // Per-rank parameter gradients add up to the global ones (the optimizer averages them).
    EXPECT_NEAR(g, refP[0]->grad[c], 1e-4) << "dgamma channel " << c;
    EXPECT_NEAR(be, refP[1]->grad[c], 1e-4) << "dbeta channel " << c;
    EXPECT_NEAR(runMean[0][c], refB[0]->value[c], 1e-6) << "running mean channel " << c;
    EXPECT_NEAR(runVar[0][c], refB[1]->value[c], 1e-6) << "running var channel " << c;
  }
  for (int r = 1; r < nranks; ++r) {
    EXPECT_EQ(runMean[r], runMean[0]) << "rank " << r << " running mean differs from rank 0";
    EXPECT_EQ(runVar[r], runVar[0]) << "rank " << r << " running var differs from rank 0";
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, SyncBatchNormTest,
                         ::testing::Values(SyncCase{{4, 4}, {3, 5, 4}},     // equal batches, 2d
                                           SyncCase{{5, 2, 9}, {2, 3, 3}},  // unequal batches
                                           SyncCase{{3, 0, 6},
                                                    {4, 2, 2}},    // a rank with no samples
                                           SyncCase{{1, 7}, {5}},  // 1d, a rank with one sample
                                           SyncCase{{2, 3, 1, 4}, {3}}));  // 1d, 4 ranks

TEST(SyncBatchNorm, EvalModeNeedsNoCommunication) {
  // One rank evaluating alone must not block waiting for the others.
  testing::runRanks(2, [&](int rank, collComm_t comm) {
    SyncBatchNorm bn("bn", 2, comm);
    bn.setTraining(false);
    if (rank == 0) {
      const Tensor y = bn.forward(Tensor::fromVector({1, 2}, {1.0f, 2.0f}));
      EXPECT_NEAR(y[1], 2.0f / std::sqrt(1.0f + 1e-5f), 1e-6);
      bn.backward(Tensor::fromVector({1, 2}, {1.0f, 1.0f}));
    }
  });
}

}  // namespace
}  // namespace collective::frontend
