// Per-section timers for train_fashion_mnist --profile: wall-clock and thread CPU time
// per named section (one per layer and direction, the loss, the gradient all-reduce,
// the optimizer step), summed over steps and printed as milliseconds per step.
//
// Wall time is what a step costs; CPU time is what this thread computed. On a machine
// shared with other work their difference is mostly time spent descheduled; in the
// all-reduce it is also time waiting for the peers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace collective::frontend {

class Profile {
 public:
  struct Section {
    std::string name;
    double wall = 0, cpu = 0;  // seconds, summed
    int64_t calls = 0;
  };
  // A section's index; the same name returns the same index.
  size_t section(const std::string& name);
  void add(size_t section, double wallSeconds, double cpuSeconds);
  void reset();
  const std::vector<Section>& sections() const { return sections_; }
  // One row per section: wall and CPU ms per step, share of the summed wall time.
  void print(FILE* out, int64_t steps, const std::string& title) const;

  static double wallNow();
  static double cpuNow();  // this thread's CPU time

 private:
  std::vector<Section> sections_;
};

// Adds the time from construction to destruction to a section (no-op when profile is null).
class ProfileScope {
 public:
  ProfileScope(Profile* profile, size_t section)
      : profile_(profile), section_(section) {
    if (profile_) {
      wall_ = Profile::wallNow();
      cpu_ = Profile::cpuNow();
    }
  }
  ~ProfileScope() {
    if (profile_) profile_->add(section_, Profile::wallNow() - wall_, Profile::cpuNow() - cpu_);
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profile* profile_;
  size_t section_;
  double wall_ = 0, cpu_ = 0;
};

}  // namespace collective::frontend
