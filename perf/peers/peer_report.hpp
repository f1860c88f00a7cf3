// The table the peer benchmarks print: the out-of-place half of the *_perf table, same
// columns in the same order, so compare_allreduce.sh reads every program alike
// (column 1 size in bytes, 6 time in us, 8 busbw in GB/s).
#pragma once

#include <cstdio>

namespace perf {

inline void printPeerTableHeader() {
  const char* f = "# %10s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s\n";
  std::printf(f, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
  std::printf(f, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
}

// wrong < 0 prints N/A (check disabled).
inline void printPeerRow(size_t bytes, size_t count, const char* type, const char* op, int root,
                         double timeUs, double busFactor, long long wrong) {
  double algBw = timeUs > 0 ? static_cast<double>(bytes) / timeUs / 1e3 : 0.0;
  char time[32], wrongText[32];
  std::snprintf(time, sizeof time, timeUs < 1e4 ? "%.2f" : (timeUs < 1e5 ? "%.1f" : "%.0f"),
                timeUs);
  if (wrong < 0) std::snprintf(wrongText, sizeof wrongText, "N/A");
  else std::snprintf(wrongText, sizeof wrongText, "%lld", wrong);
  std::printf("%12zu  %12zu  %8s  %6s  %6d  %8s  %7.2f  %7.2f  %6s\n", bytes, count, type, op,
              root, time, algBw, algBw * busFactor, wrongText);
  std::fflush(stdout);
}

}  // namespace perf
