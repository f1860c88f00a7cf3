// Helpers shared by the topology tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "topology/job.hpp"

namespace coll::test {

// COLL_TOPO_TEST_DATA is tests/data/topo, passed by meson.
inline std::string dataFile(const std::string& name) { return std::string(COLL_TOPO_TEST_DATA) + "/" + name; }

// Sets an environment variable for the scope, restoring the previous state afterwards:
// for tests whose subject is the environment (the others pass a Config).
class EnvGuard {
 public:
  EnvGuard(const char* name, const std::string& value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvGuard() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// A fresh directory under /tmp, removed with its files at the end of the scope.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/coll-topo-test-XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A copy of tests/data/topo/`name` in `dir` with the first `from` replaced by `to`.
inline std::string editedCopy(const TempDir& dir, const std::string& name, const std::string& from,
                              const std::string& to) {
  std::stringstream text;
  text << std::ifstream(dataFile(name)).rdbuf();
  std::string s = text.str();
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  std::string path = dir.path() + "/edited-" + name;
  std::ofstream(path) << s;
  return path;
}

// Rank `rank`'s placement on host `host` of topology `t`, allowed on `cpus`, driving GPU
// `gpu` (-1 none).
inline RankPlacement place(const HostTopo& t, int rank, const std::string& host, std::vector<int> cpus,
                           int gpu = -1, int tieBreak = 0) {
  PlacementInput in;
  in.rank = rank;
  in.hostId = host;
  in.hostname = host;
  in.pid = 1000 + rank;
  in.cpus = std::move(cpus);
  in.gpu = gpu;
  in.tieBreak = tieBreak;
  return makePlacement(t, in);
}

// Runs f, expecting a coll::Error with `code` whose message contains every fragment.
template <typename F>
void expectError(F&& f, collResult_t code, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "no coll::Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* frag : fragments) EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
        << "message '" << e.what() << "' lacks '" << frag << "'";
  }
}

}  // namespace coll::test
