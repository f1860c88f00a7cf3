// Training checkpoints: parameters, BatchNorm running statistics, optimizer state and
// the epoch to resume at, as named tensors in one binary file (little-endian host).
//
// Layout: "CFMCKPT1", int64 epoch, int64 optimizer steps, uint32 entries, then per entry
// uint32 name length, name, uint32 ndim, int64 dims[ndim], float data[numel].
#pragma once

#include <cstdint>
#include <string>

#include "sequential.hpp"
#include "sgd.hpp"

namespace collective::frontend {

struct CheckpointInfo {
  int64_t epoch = 0;  // the next epoch to run
  int64_t steps = 0;  // optimizer steps taken
};

// Writes path atomically (a temporary file renamed over it).
void saveCheckpoint(const std::string& path, Sequential& model, Sgd& opt, CheckpointInfo info);
// Restores every tensor of model and opt; names and shapes must match exactly.
CheckpointInfo loadCheckpoint(const std::string& path, Sequential& model, Sgd& opt);

}  // namespace collective::frontend
