// Unfolding for convolution as a GEMM.
//
// The column matrix is [C*kh*kw, B*OH*OW]: one GEMM then covers the whole batch (one large
// GEMM runs much closer to peak than B small ones), at the price of a transpose of the
// output from [M, B*OH*OW] to NCHW, which is a block copy.
#pragma once

#include <cstdint>

namespace collective::frontend {

struct ConvGeometry {
  int64_t batch, channels, height, width;
  int64_t kernel, stride, padding;
  int64_t outHeight() const { return (height + 2 * padding - kernel) / stride + 1; }
  int64_t outWidth() const { return (width + 2 * padding - kernel) / stride + 1; }
  int64_t colRows() const { return channels * kernel * kernel; }
  int64_t colCols() const { return batch * outHeight() * outWidth(); }
};

// x: NCHW input; col: colRows() x colCols(), fully written (padding becomes zeros).
void im2col(const ConvGeometry& g, const float* x, float* col);
// Adds every column entry back to the input position it came from; dx is overwritten.
void col2im(const ConvGeometry& g, const float* col, float* dx);

}  // namespace collective::frontend
