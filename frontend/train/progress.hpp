// Rank 0's per-epoch progress bar: steps, images/s and the running mean loss.
// On a terminal it redraws one line (at most 5 times a second); otherwise it prints a
// line at every quarter of the epoch so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace collective::frontend {

class ProgressBar {
 public:
  ProgressBar(FILE* out, bool enabled, std::string label, int64_t totalSteps);
  // After a step: images processed by all ranks so far this epoch, mean loss so far.
  void update(int64_t step, int64_t images, double meanLoss);
  // Ends the line (terminal) and returns the seconds since construction.
  double finish(int64_t images, double meanLoss);

 private:
  void draw(int64_t step, int64_t images, double meanLoss, bool final);

  FILE* out_;
  bool enabled_, tty_;
  std::string label_;
  int64_t total_;
  int64_t nextQuarter_ = 1;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

}  // namespace collective::frontend
