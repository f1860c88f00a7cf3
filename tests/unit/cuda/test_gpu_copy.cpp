// Batched copies: hundreds of tensors of awkward sizes and alignments gathered into a
// fusion buffer and scattered back, several launches' worth of descriptors.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda/kernels.hpp"
#include "gpu_util.hpp"

TEST(GpuBatchedCopy, GatherIntoAFusionBufferAndScatterBack) {
  COLL_REQUIRE_GPU();
  const size_t sizes[] = {0, 1, 3, 15, 16, 17, 255, 4096, 65537, 1 << 20};
  const size_t tensors = 3 * coll::cuda::kMaxCopiesPerLaunch + 5;
  std::vector<size_t> len(tensors), srcOff(tensors), fuseOff(tensors);
  size_t srcTotal = 0, fuseTotal = 0;
  for (size_t t = 0; t < tensors; ++t) {
    len[t] = sizes[t % 10];
    srcOff[t] = srcTotal + t % 3;  // some tensors misaligned
    srcTotal = srcOff[t] + len[t];
    fuseOff[t] = fuseTotal;
    fuseTotal += (len[t] + 15) / 16 * 16;
  }
  std::vector<uint8_t> src(srcTotal);
  std::mt19937 rng(9);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  gputest::DeviceMemory dsrc(srcTotal), fused(fuseTotal), dback(srcTotal);
  dsrc.upload(src);
  COLL_CUDA_CHECK(cudaMemset(dback.get(), 0, srcTotal));
  std::vector<coll::cuda::CopyDesc> in(tensors), out(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    in[t] = {dsrc.as<uint8_t>() + srcOff[t], fused.as<uint8_t>() + fuseOff[t], len[t]};
    out[t] = {fused.as<uint8_t>() + fuseOff[t], dback.as<uint8_t>() + srcOff[t], len[t]};
  }
  coll::cuda::batchedCopy(in.data(), tensors, nullptr);
  in.assign(tensors, {nullptr, nullptr, 0});  // the descriptors may be reused at once
  coll::cuda::batchedCopy(out.data(), tensors, nullptr);
  const auto f = fused.download<uint8_t>(fuseTotal);
  const auto back = dback.download<uint8_t>(srcTotal);
  for (size_t t = 0; t < tensors; ++t)
    for (size_t i = 0; i < len[t]; ++i) {
      ASSERT_EQ(f[fuseOff[t] + i], src[srcOff[t] + i]) << "tensor " << t << " byte " << i;
      ASSERT_EQ(back[srcOff[t] + i], src[srcOff[t] + i]) << "tensor " << t << " byte " << i;
    }
}
