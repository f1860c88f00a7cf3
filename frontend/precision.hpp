// Mixed-precision training on the CPU: float32 master parameters, forward and backward in
// bfloat16 or float16.
//
// The CPU has no 16-bit arithmetic here, so "computing in 16 bits" means what a GPU's
// tensor cores do at the boundaries: every layer's input, output and gradient, and the
// weights a step computes with, are rounded to the 16-bit type (round to nearest even,
// kept in float32 storage), while each GEMM and reduction accumulates in float32 through
// OpenBLAS. The optimizer updates the float32 master copy. Gradients are all-reduced as
// 16-bit values (half the bytes of float32).
//
// float16's range ends at 65504 and its normal numbers at 6.1e-5, so small gradients
// underflow: dynamic loss scaling multiplies the loss gradient by a scale S (65536 to
// start) and divides the parameter gradients by S after the all-reduce. A step whose
// gradients hold an inf or NaN (an overflow) is skipped and S halved; after `growthInterval`
// good steps in a row S doubles. Every rank sees the same reduced gradients, so every rank
// makes the same decision.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collective.h"
#include "module.hpp"

namespace collective::frontend {

enum class Precision { Float32, BFloat16, Float16 };

Precision parsePrecision(const std::string& name);  // fp32 | bf16 | fp16, else throws
const char* precisionName(Precision p);
collDataType_t precisionType(Precision p);           // collFloat32, collBfloat16, collFloat16
size_t precisionBytes(Precision p);                  // 4 or 2

// Round-to-nearest-even conversions (NaN stays NaN, overflow becomes inf).
uint16_t floatToBf16(float v);
float bf16ToFloat(uint16_t h);
uint16_t floatToFp16(float v);
float fp16ToFloat(uint16_t h);

// Each value to the nearest value of the 16-bit type, in place (Float32: nothing).
void roundInPlace(Precision p, float* data, int64_t n);
void toBits(Precision p, const float* in, uint16_t* out, int64_t n);
// out = bits * scale
void fromBits(Precision p, const uint16_t* in, float* out, int64_t n, float scale);

struct LossScaleOptions {
  float initial = 65536.0f;
  int64_t growthInterval = 2000;
  float minScale = 1.0f;
};

class MixedPrecision {
 public:
  // params: the optimizer's parameters (their values are the master copy between steps).
  MixedPrecision(std::vector<Param*> params, Precision precision, LossScaleOptions scale = {});

  Precision precision() const { return p_; }
  bool scalesLoss() const { return p_ == Precision::Float16; }
  float lossScale() const { return scalesLoss() ? scale_ : 1.0f; }

  // Before forward: keeps the master values and rounds the parameters in place to the
  // 16-bit type, which forward and backward then compute with.
  void castParameters();
  // After backward: puts the master values back for the optimizer.
  void restoreMaster();
  // After the all-reduce: divides the gradients by the loss scale; returns false (skip
  // the update) when any is inf or NaN, and adjusts the scale.
  bool unscaleAndCheck();

  int64_t skippedSteps() const { return skipped_; }

 private:
  std::vector<Param*> params_;
  Precision p_;
  LossScaleOptions o_;
  float scale_;
  int64_t goodSteps_ = 0, skipped_ = 0;
  std::vector<std::vector<float>> master_;
};

}  // namespace collective::frontend
