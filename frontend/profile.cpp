#include "profile.hpp"

#include <time.h>

namespace collective::frontend {

size_t Profile::section(const std::string& name) {
  for (size_t i = 0; i < sections_.size(); ++i)
    if (sections_[i].name == name) return i;
  sections_.push_back({name});
  return sections_.size() - 1;
}

void Profile::add(size_t section, double wallSeconds, double cpuSeconds) {
  if (section >= sections_.size()) return;
  Section& s = sections_[section];
  s.wall += wallSeconds;
  s.cpu += cpuSeconds;
  ++s.calls;
}

void Profile::reset() {
  for (Section& s : sections_) {
    s.wall = s.cpu = 0;
    s.calls = 0;
  }
}

void Profile::print(FILE* out, int64_t steps, const std::string& title) const {
  if (!out || steps <= 0) return;
  double wall = 0, cpu = 0;
  for (const Section& s : sections_) {
    wall += s.wall;
    cpu += s.cpu;
  }
  const double per = 1e3 / static_cast<double>(steps);
  std::fprintf(out, "profile %s (%lld steps; ms per step)\n", title.c_str(),
               static_cast<long long>(steps));
  std::fprintf(out, "  %-24s %9s %9s %7s\n", "section", "wall", "cpu", "wall %");
  for (const Section& s : sections_)
    std::fprintf(out, "  %-24s %9.3f %9.3f %6.1f%%\n", s.name.c_str(), s.wall * per, s.cpu * per,
                 wall > 0 ? 100.0 * s.wall / wall : 0.0);
  std::fprintf(out, "  %-24s %9.3f %9.3f\n", "total", wall * per, cpu * per);
  std::fflush(out);
}

double Profile::wallNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Profile::cpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace collective::frontend
