// Chrome-trace timeline (COLL_TIMELINE=file.json): one track per tensor showing its queue,
// negotiate, copy-in, collective and copy-out phases, loadable by chrome://tracing and
// Perfetto. Events are "complete" events (ph "X") so that a trace cut short by a crash
// still parses (the trace format tolerates a missing closing bracket).
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

namespace coll::engine {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  // Opens path for writing (throws collSystemError when it cannot).
  Timeline(const std::string& path, int rank);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // One phase of one tensor. category is the operation ("allreduce"...).
  void span(const std::string& tensor, const char* phase, const char* category,
            Clock::time_point begin, Clock::time_point end);
  // An instant marker on the engine's own track (for example "cycle").
  void marker(const char* what, Clock::time_point at);
  void flush();

  // COLL_TIMELINE value -> this rank's file: "%r" becomes the rank; without "%r" only
  // rank 0 writes. Returns "" when this rank writes nothing.
  static std::string pathForRank(const std::string& pattern, int rank);

 private:
  int trackOf(const std::string& tensor);  // caller holds mu_
  void writeEventLocked(const std::string& body);
  double micros(Clock::time_point t) const;

  std::mutex mu_;
  FILE* file_ = nullptr;
  int rank_;
  bool first_ = true;
  Clock::time_point origin_;
  Clock::time_point lastFlush_;
  std::unordered_map<std::string, int> tracks_;
};

std::string jsonEscape(const std::string& s);

}  // namespace coll::engine
