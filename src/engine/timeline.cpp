#include "engine/timeline.hpp"

#include <cerrno>
#include <cinttypes>

#include "core/error.hpp"

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
  file_ = fopen(path.c_str(), "w");
  if (!file_) COLL_THROW(collSystemError, "COLL_TIMELINE: cannot open '", path, "': ", sysErrorText(errno));
  origin_ = lastFlush_ = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  fputs("[\n", file_);
  writeEventLocked(strCat(R"({"name":"process_name","ph":"M","pid":)", rank_,
                          R"(,"tid":0,"args":{"name":"rank )", rank_, R"("}})"));
  writeEventLocked(strCat(R"({"name":"thread_name","ph":"M","pid":)", rank_,
                          R"(,"tid":0,"args":{"name":"engine"}})"));
}

Timeline::~Timeline() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!file_) return;
  fputs("\n]\n", file_);
  fclose(file_);
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
  char times[96];
  double dur = micros(end) - micros(begin);
  snprintf(times, sizeof(times), R"("ts":%.3f,"dur":%.3f)", micros(begin), dur < 0 ? 0.0 : dur);
  std::lock_guard<std::mutex> lk(mu_);
  int tid = trackOf(tensor);
  writeEventLocked(strCat(R"({"name":")", phase, R"(","cat":")", category, R"(","ph":"X","pid":)",
                          rank_, R"(,"tid":)", tid, ",", times, "}"));
}

void Timeline::marker(const char* what, Clock::time_point at) {
  char ts[48];
  snprintf(ts, sizeof(ts), R"("ts":%.3f)", micros(at));
  std::lock_guard<std::mutex> lk(mu_);
  writeEventLocked(strCat(R"({"name":")", what, R"(","ph":"i","s":"t","pid":)", rank_,
                          R"(,"tid":0,)", ts, "}"));
}

void Timeline::flush() {
  std::lock_guard<std::mutex> lk(mu_);
  auto now = Clock::now();
  // Flushing costs a syscall; once a second keeps a crashed run's trace useful.
  if (now - lastFlush_ < std::chrono::seconds(1)) return;
  lastFlush_ = now;
  fflush(file_);
}

}  // namespace coll::engine
