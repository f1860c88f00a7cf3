// 64 MiB per collective (float32 sum), and the float case MPICH tests: a large value,
// its negative and tiny values on different ranks, whose sum depends on the order of
// additions, must still come out bit-identical on every rank.
#include <cmath>
#include <cstring>

#include "harness.hpp"
#include "reference.hpp"

using namespace testing_coll;

namespace {

constexpr size_t k64M = 64u << 20;

class Large : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(Large, Collectives64MiB) {
  const int n = std::get<1>(GetParam());
  Job job(n, {{"COLL_TRANSPORT", std::get<0>(GetParam())}});
  ASSERT_TRUE(job.ok());
  const size_t count = k64M / sizeof(float);
  job.run([&](int r, collComm_t comm) {
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(smallValue(7, r, i, collSum));
    ASSERT_EQ(collAllReduce(in.data(), out.data(), count, collFloat32, collSum, comm, nullptr), collSuccess)
        << collGetLastError(comm);
    for (size_t i = 0; i < count; i += 4099) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += static_cast<float>(smallValue(7, p, i, collSum));
      ASSERT_EQ(out[i], want) << "allreduce element " << i;
    }
    // reduce-scatter: 64 MiB in, 64 MiB / n out
    size_t block = count / n;
    std::vector<float> rs(block);
    ASSERT_EQ(collReduceScatter(in.data(), rs.data(), block, collFloat32, collSum, comm, nullptr), collSuccess)
        << collGetLastError(comm);
    for (size_t i = 0; i < block; i += 4099) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += static_cast<float>(smallValue(7, p, r * block + i, collSum));
      ASSERT_EQ(rs[i], want) << "reducescatter element " << i;
    }
    // all-gather: the blocks back together
    ASSERT_EQ(collAllGather(rs.data(), out.data(), block, collFloat32, comm, nullptr), collSuccess);
    for (size_t i = 0; i < block * n; i += 4099) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += static_cast<float>(smallValue(7, p, i, collSum));
      ASSERT_EQ(out[i], want) << "allgather element " << i;
    }
    // broadcast from the last rank, in place
    for (size_t i = 0; i < count; ++i) out[i] = r == n - 1 ? static_cast<float>(i % 1000) : -1.f;
    ASSERT_EQ(collBroadcast(out.data(), out.data(), count, collFloat32, n - 1, comm, nullptr), collSuccess);
    for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(out[i], static_cast<float>(i % 1000));
    // reduce to rank 0
    ASSERT_EQ(collReduce(in.data(), out.data(), count, collFloat32, collMax, 0, comm, nullptr), collSuccess);
    if (r == 0)
      for (size_t i = 0; i < count; i += 4099) {
        float want = -100;
        for (int p = 0; p < n; ++p) want = std::max(want, static_cast<float>(smallValue(7, p, i, collSum)));
        ASSERT_EQ(out[i], want);
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Large,
                         ::testing::Combine(::testing::Values("tcp", "auto", "net"), ::testing::Values(2, 3, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
                         });

class Identity : public ::testing::TestWithParam<int> {};

TEST_P(Identity, CancellingFloatSumsAreBitIdenticalEverywhere) {
  const int n = GetParam();
  Job job(n);
  ASSERT_TRUE(job.ok());
  // Sizes that take the small-message and the ring path.
  for (size_t count : {size_t(3), size_t(1000), size_t(300000)}) {
    std::vector<std::vector<float>> outF(n, std::vector<float>(count));
    std::vector<std::vector<uint16_t>> outH(n, std::vector<uint16_t>(count));
    job.run([&](int r, collComm_t comm) {
      std::vector<float> in(count);
      for (size_t i = 0; i < count; ++i) {
        int role = static_cast<int>((r + i) % 3);
        in[i] = role == 0 ? 1e30f : role == 1 ? -1e30f : 1e-3f * static_cast<float>(r + 1);
      }
      ASSERT_EQ(collAllReduce(in.data(), outF[r].data(), count, collFloat32, collSum, comm, nullptr), collSuccess);
      std::vector<uint16_t> h(count);
      for (size_t i = 0; i < count; ++i) h[i] = coll::floatToHalf(in[i] > 1e20f ? 60000.f : in[i] < -1e20f ? -60000.f : in[i]);
      ASSERT_EQ(collAllReduce(h.data(), outH[r].data(), count, collFloat16, collSum, comm, nullptr), collSuccess);
    });
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(0, memcmp(outF[r].data(), outF[0].data(), count * sizeof(float))) << "float rank " << r << " count " << count;
      EXPECT_EQ(0, memcmp(outH[r].data(), outH[0].data(), count * 2)) << "half rank " << r << " count " << count;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Identity, ::testing::Values(2, 3, 4, 5, 8));

}  // namespace
