#include "layers/im2col.hpp"

#include "blas.hpp"

#include <algorithm>
#include <cstring>

namespace collective::frontend {

namespace {

// Output columns ow whose input column ow*stride - padding + j lies inside [0, width).
struct ColRange {
  int64_t lo, hi;
};

ColRange validColumns(const ConvGeometry& g, int64_t j, int64_t outW) {
  const int64_t off = j - g.padding;  // input column = ow*stride + off
  int64_t lo = off >= 0 ? 0 : (-off + g.stride - 1) / g.stride;
  int64_t hi = off >= g.width ? 0 : (g.width - 1 - off) / g.stride + 1;
  return {std::min(lo, outW), std::clamp<int64_t>(hi, 0, outW)};
}

}  // namespace

FRONTEND_VECTOR_CLONES
void im2col(const ConvGeometry& g, const float* x, float* col) {
  const int64_t oh = g.outHeight(), ow = g.outWidth(), plane = oh * ow;
  const int64_t cols = g.colCols();
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t i = 0; i < g.kernel; ++i) {
      for (int64_t j = 0; j < g.kernel; ++j) {
        const int64_t row = (c * g.kernel + i) * g.kernel + j;
        const ColRange r = validColumns(g, j, ow);
        const int64_t off = j - g.padding;
        for (int64_t b = 0; b < g.batch; ++b) {
          const float* src = x + (b * g.channels + c) * g.height * g.width;
          float* dst = col + row * cols + b * plane;
          for (int64_t y = 0; y < oh; ++y, dst += ow) {
            const int64_t iy = y * g.stride - g.padding + i;
            if (iy < 0 || iy >= g.height || r.lo >= r.hi) {
              std::fill_n(dst, ow, 0.0f);
              continue;
            }
            // First valid input element of this row (never before the row's start).
            const float* s = src + iy * g.width + r.lo * g.stride + off;
            std::fill_n(dst, r.lo, 0.0f);
            if (g.stride == 1) {
              std::memcpy(dst + r.lo, s, (r.hi - r.lo) * sizeof(float));
            } else {
              for (int64_t xo = r.lo; xo < r.hi; ++xo) dst[xo] = s[(xo - r.lo) * g.stride];
            }
            std::fill(dst + r.hi, dst + ow, 0.0f);
          }
        }
      }
    }
  }
}

FRONTEND_VECTOR_CLONES
void col2im(const ConvGeometry& g, const float* col, float* dx) {
  const int64_t oh = g.outHeight(), ow = g.outWidth(), plane = oh * ow;
  const int64_t cols = g.colCols();
  std::fill_n(dx, g.batch * g.channels * g.height * g.width, 0.0f);
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t i = 0; i < g.kernel; ++i) {
      for (int64_t j = 0; j < g.kernel; ++j) {
        const int64_t row = (c * g.kernel + i) * g.kernel + j;
        const ColRange r = validColumns(g, j, ow);
        const int64_t off = j - g.padding;
        for (int64_t b = 0; b < g.batch; ++b) {
          float* dst = dx + (b * g.channels + c) * g.height * g.width;
          const float* src = col + row * cols + b * plane;
          for (int64_t y = 0; y < oh; ++y, src += ow) {
            const int64_t iy = y * g.stride - g.padding + i;
            if (iy < 0 || iy >= g.height) continue;
            if (r.lo >= r.hi) continue;
            float* d = dst + iy * g.width + r.lo * g.stride + off;
            if (g.stride == 1) {  // contiguous: lets the compiler vectorise the add
              for (int64_t xo = r.lo; xo < r.hi; ++xo) d[xo - r.lo] += src[xo];
            } else {
              for (int64_t xo = r.lo; xo < r.hi; ++xo) d[(xo - r.lo) * g.stride] += src[xo];
            }
          }
        }
      }
    }
  }
}

}  // namespace collective::frontend
