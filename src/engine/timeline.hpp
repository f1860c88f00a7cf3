// Chrome-trace timeline (COLL_TIMELINE=file.json): one track per tensor showing its queue,
// negotiate, copy-in, collective and copy-out phases, loadable by chrome://tracing and
// Perfetto. Events are "complete" events (ph "X") so that a trace cut short by a crash
// still parses (the trace format tolerates a missing closing bracket).
// A timeline is recording (a file is open) or idle; start() and stop() switch it at run
// time (hvd::start_timeline), each start writing a new file.
#pragma once

#include <atomic>
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
  // Idle until start().
  explicit Timeline(int rank);
  ~Timeline();

  // Starts writing to path: collInvalidUsage while already recording, collSystemError
  // when path cannot be opened. With markCycles, every engine round that ran operations
  // leaves a "cycle" marker on the engine's track.
  void start(const std::string& path, bool markCycles);
  // Closes the file (a complete JSON array); nothing when idle.
  void stop();
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  // The "cycle" marker of one engine round (only with markCycles).
  void cycle(Clock::time_point at);
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

  void openLocked(const std::string& path);
  void closeLocked();

  std::mutex mu_;
  FILE* file_ = nullptr;
  std::string path_;
  std::atomic<bool> recording_{false};
  bool markCycles_ = false;
  int rank_;
  bool first_ = true;
  Clock::time_point origin_;
  Clock::time_point lastFlush_;
  std::unordered_map<std::string, int> tracks_;
};

std::string jsonEscape(const std::string& s);

}  // namespace coll::engine
