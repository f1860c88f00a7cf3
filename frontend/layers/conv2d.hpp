// 2-D convolution (square kernel, NCHW) as im2col + sgemm, one image at a time.
//
// Per image the column matrix (C*k*k x OH*OW, ~110 KB for the reference model's conv2)
// stays in L2 between im2col and the GEMM that reads it, and the GEMM writes NCHW output
// directly. Unfolding the whole batch into one GEMM was measured slower: its 7 MB column
// matrix goes through DRAM twice (write, then OpenBLAS packing) and the output needs a
// transpose. Backward unfolds the image again rather than keeping every column matrix.
#pragma once

#include <cstdint>

#include "layers/im2col.hpp"
#include "module.hpp"

namespace collective::frontend {

class Conv2d : public Module {
 public:
  Conv2d(std::string name, int64_t inChannels, int64_t outChannels, int64_t kernel, int64_t stride,
         int64_t padding, uint64_t seed);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Param*> parameters() override { return {&weight_, &bias_}; }

 private:
  int64_t in_, out_, kernel_, stride_, padding_;
  Param weight_;         // [out, in, k, k]
  Param bias_;           // [out]
  ConvGeometry geom_{};  // batch 1: one image
  int64_t batch_ = 0;
  Tensor x_;     // input of the last forward, released by backward
  Tensor col_;   // [in*k*k, OH*OW] scratch for one image
  Tensor dcol_;  // [in*k*k, OH*OW] scratch for one image
  Tensor y_, dx_;
};

}  // namespace collective::frontend
