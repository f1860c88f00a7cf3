// Fashion-MNIST from the IDX files of Debian's dataset-fashion-mnist (gzip, read with zlib).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor.hpp"

namespace collective::frontend {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, kept as bytes: 4x less memory per rank
  std::vector<int32_t> labels;
};

// train: train-*-ubyte.gz, else t10k-*-ubyte.gz. limit > 0 keeps the first `limit` samples.
Dataset loadFashionMnist(const std::string& dir, bool train, int64_t limit = 0);

// Reads one IDX file (gzip or plain): checks the magic (unsigned byte data, `dims`
// dimensions) and that the payload holds exactly the declared number of elements.
std::vector<uint8_t> readIdx(const std::string& path, int dims, std::vector<int64_t>& shape);

// Copies the samples at `indices` into images [n, 1, rows, cols], normalised with the
// training set's mean and standard deviation, and their labels.
void gatherBatch(const Dataset& data, std::span<const int64_t> indices, Tensor& images,
                 std::vector<int32_t>& labels);

}  // namespace collective::frontend
