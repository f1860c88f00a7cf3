// Loads a tuner plugin (COLL_TUNER_PLUGIN, interface in plugins/tuner/coll_tuner.h) and
// asks it to override the cost model's choice.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/op.hpp"

namespace coll {

struct TunerJob {
  int nranks = 1;
  int nhosts = 1;
  int maxLocalRanks = 1;
};

class TunerPlugin {
 public:
  // dlopens `path` and checks its symbol and version. Throws collInvalidArgument naming
  // the path and what is wrong (not found, no symbol, unknown version, missing function).
  static std::unique_ptr<TunerPlugin> open(const std::string& path);
  ~TunerPlugin();
  TunerPlugin(const TunerPlugin&) = delete;
  TunerPlugin& operator=(const TunerPlugin&) = delete;

  // Calls the plugin's init once for a communicator (later calls return the first one's
  // answer); false (with a warning) if it failed, after which choose() always keeps the
  // model's choice.
  bool init(const TunerJob& job);
  // The index into `names` the plugin picks, or -1 to keep `modelChoice`.
  int choose(const OpArgs& args, size_t bytes, const std::vector<const char*>& names,
             const std::vector<double>& costs, int modelChoice) const;
  const std::string& name() const { return name_; }

 private:
  TunerPlugin() = default;
  void* handle_ = nullptr;
  const void* api_ = nullptr;  // collTunerPlugin_v1_t
  void* context_ = nullptr;
  bool ready_ = false;
  bool tried_ = false;
  // Each kind of bad answer is logged once: it would otherwise repeat on every call.
  mutable std::atomic<bool> warnedError_{false}, warnedRange_{false};
  std::string path_, name_;
};

}  // namespace coll
