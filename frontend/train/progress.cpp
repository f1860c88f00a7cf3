#include "train/progress.hpp"

#include <unistd.h>

#include <algorithm>

namespace collective::frontend {

namespace {

constexpr int kBarWidth = 30;
constexpr double kRedrawSeconds = 0.2;

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

ProgressBar::ProgressBar(FILE* out, bool enabled, std::string label, int64_t totalSteps)
    : out_(out),
      enabled_(enabled),
      tty_(enabled && isatty(fileno(out))),
      label_(std::move(label)),
      total_(std::max<int64_t>(totalSteps, 1)),
      start_(std::chrono::steady_clock::now()),
      lastDraw_(start_) {}

void ProgressBar::draw(int64_t step, int64_t images, double meanLoss, bool final) {
  const double secs = since(start_);
  const double rate = secs > 0 ? static_cast<double>(images) / secs : 0.0;
  const int filled = static_cast<int>(kBarWidth * step / total_);
  std::string bar(kBarWidth, ' ');
  std::fill_n(bar.begin(), filled, '=');
  if (filled < kBarWidth) bar[filled] = '>';
  std::fprintf(out_, "%s%s [%s] %lld/%lld  %.0f img/s  loss %.4f  %.1fs%s", tty_ ? "\r" : "",
               label_.c_str(), bar.c_str(), static_cast<long long>(step),
               static_cast<long long>(total_), rate, meanLoss, secs, tty_ && !final ? "" : "\n");
  std::fflush(out_);
}

void ProgressBar::update(int64_t step, int64_t images, double meanLoss) {
  if (!enabled_) return;
  if (tty_) {
    if (since(lastDraw_) < kRedrawSeconds) return;
    lastDraw_ = std::chrono::steady_clock::now();
    draw(step, images, meanLoss, false);
  } else if (nextQuarter_ < 4 && step * 4 >= nextQuarter_ * total_) {
    ++nextQuarter_;
    draw(step, images, meanLoss, false);
  }
}

double ProgressBar::finish(int64_t images, double meanLoss) {
  const double secs = since(start_);
  if (enabled_) draw(total_, images, meanLoss, true);
  return secs;
}

}  // namespace collective::frontend
