#include "engine/timeline.hpp"

#include <cerrno>
#include <cinttypes>

#include "base/error.hpp"

namespace coll::engine {

std::string jsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Timeline::pathForRank(const std::string& pattern, int rank) {
  if (pattern.empty()) return "";
  auto pos = pattern.find("%r");
  if (pos == std::string::npos) return rank == 0 ? pattern : "";
  std::string p = pattern;
  while ((pos = p.find("%r")) != std::string::npos) p.replace(pos, 2, std::to_string(rank));
  return p;
}

Timeline::Timeline(const std::string& path, int rank) : rank_(rank) {
  std::lock_guard<std::mutex> lk(mu_);
  openLocked(path);
}

Timeline::Timeline(int rank) : rank_(rank) {}

Timeline::~Timeline() {
  std::lock_guard<std::mutex> lk(mu_);
  closeLocked();
}

void Timeline::openLocked(const std::string& path) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) COLL_THROW(collSystemError, "COLL_TIMELINE: cannot open '", path, "': ", sysErrorText(errno));
  file_ = f;
  path_ = path;
  first_ = true;
  tracks_.clear();  // each file names its tracks again
  origin_ = lastFlush_ = Clock::now();
  fputs("[\n", file_);
  writeEventLocked(strCat(R"({"name":"process_name","ph":"M","pid":)", rank_,
                          R"(,"tid":0,"args":{"name":"rank )", rank_, R"("}})"));
  writeEventLocked(strCat(R"({"name":"thread_name","ph":"M","pid":)", rank_,
                          R"(,"tid":0,"args":{"name":"engine"}})"));
  recording_.store(true, std::memory_order_relaxed);
}

void Timeline::closeLocked() {
  if (!file_) return;
  recording_.store(false, std::memory_order_relaxed);
  fputs("\n]\n", file_);
  fclose(file_);
  file_ = nullptr;
  path_.clear();
}

void Timeline::start(const std::string& path, bool markCycles) {
  COLL_CHECK_ARG(!path.empty(), "start_timeline: the file path is empty");
  std::lock_guard<std::mutex> lk(mu_);
  if (file_)
    COLL_THROW(collInvalidUsage, "start_timeline: the timeline is already being written to '", path_,
               "' (COLL_TIMELINE or an earlier start_timeline); stop_timeline first");
  openLocked(path);
  markCycles_ = markCycles;
}

void Timeline::stop() {
  std::lock_guard<std::mutex> lk(mu_);
  closeLocked();
  markCycles_ = false;
}

void Timeline::cycle(Clock::time_point at) {
  if (!recording()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!markCycles_) return;
  }
  marker("cycle", at);
}

double Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Timeline::writeEventLocked(const std::string& body) {
  if (!first_) fputs(",\n", file_);
  first_ = false;
  fputs(body.c_str(), file_);
}

int Timeline::trackOf(const std::string& tensor) {
  auto it = tracks_.find(tensor);
  if (it != tracks_.end()) return it->second;
  int tid = static_cast<int>(tracks_.size()) + 1;
  tracks_[tensor] = tid;
  writeEventLocked(strCat(R"({"name":"thread_name","ph":"M","pid":)", rank_, R"(,"tid":)", tid,
                          R"(,"args":{"name":")", jsonEscape(tensor), R"("}})"));
  return tid;
}

void Timeline::span(const std::string& tensor, const char* phase, const char* category,
                    Clock::time_point begin, Clock::time_point end) {
  if (!recording()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (!file_) return;  // stopped meanwhile
  // A phase that began before this file was started is shown from the file's start.
  if (begin < origin_) begin = origin_;
  if (end < begin) end = begin;
  char times[96];
  snprintf(times, sizeof(times), R"("ts":%.3f,"dur":%.3f)", micros(begin), micros(end) - micros(begin));
  int tid = trackOf(tensor);
  writeEventLocked(strCat(R"({"name":")", phase, R"(","cat":")", category, R"(","ph":"X","pid":)",
                          rank_, R"(,"tid":)", tid, ",", times, "}"));
}

void Timeline::marker(const char* what, Clock::time_point at) {
  if (!recording()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (!file_) return;
  char ts[48];
  snprintf(ts, sizeof(ts), R"("ts":%.3f)", micros(at < origin_ ? origin_ : at));
  writeEventLocked(strCat(R"({"name":")", what, R"(","ph":"i","s":"t","pid":)", rank_,
                          R"(,"tid":0,)", ts, "}"));
}

void Timeline::flush() {
  if (!recording()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (!file_) return;
  auto now = Clock::now();
  // Flushing costs a syscall; once a second keeps a crashed run's trace useful.
  if (now - lastFlush_ < std::chrono::seconds(1)) return;
  lastFlush_ = now;
  fflush(file_);
}

}  // namespace coll::engine
