// The machine's topology shared between processes through a cache file (COLL_TOPO_CACHE):
// the first process discovers and writes it, the others load it; a file that is not
// trustworthy or not fresh is not used.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "coll_config.h"
#include "base/config.hpp"
#include "topology/topology.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::EnvGuard;
using test::TempDir;

#if COLL_HAVE_HWLOC

std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

Config cacheIn(const std::string& dir) { return Config::fromEnv({{"COLL_TOPO_CACHE", dir}}); }

const std::string kCached = "hwloc, cached in ";

// What a rank builds from the topology, less where it came from.
std::string summary(HostTopo t) {
  t.source.clear();
  std::string s = describeHost(t) + describePaths(t);
  for (const auto& n : t.nics) s += n.name + " " + std::to_string(n.speedMbps) + "\n";
  return s;
}

TEST(TopoCache, FirstProcessWritesTheOthersLoad) {
  TempDir dir;
  HostTopo first = discoverLocal(cacheIn(dir.path()));
  EXPECT_EQ(first.source, "hwloc");
  auto files = filesIn(dir.path());
  ASSERT_EQ(files.size(), 1u) << "one cache file, no lock or temporary left";
  const std::string file = files[0];
  EXPECT_NE(file.find("/collective-topo-" + std::to_string(geteuid()) + "-"), std::string::npos) << file;
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  HostTopo again = discoverLocal(cacheIn(dir.path()));
  EXPECT_EQ(again.source, kCached + file);
  EXPECT_EQ(summary(again), summary(first));
  EXPECT_EQ(filesIn(dir.path()), files);
}

// A file this process must not trust, or an old one, is discovered anew and replaced.
TEST(TopoCache, UntrustedBrokenOrOldFilesAreNotUsed) {
  TempDir dir;
  const std::string want = summary(discoverLocal(cacheIn(dir.path())));
  const std::string file = filesIn(dir.path()).at(0);
  auto discoveredAnew = [&](const char* why) {
    HostTopo t = discoverLocal(cacheIn(dir.path()));
    EXPECT_EQ(t.source, "hwloc") << why;
    EXPECT_EQ(summary(t), want) << why;
    struct stat st {};
    EXPECT_EQ(lstat(file.c_str(), &st), 0) << why;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << why;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << why;
    EXPECT_EQ(st.st_uid, geteuid()) << why;
    EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source, kCached + file) << why << ": rewritten usable";
  };
  chmod(file.c_str(), 0666);
  discoveredAnew("writable by others");
  { std::ofstream(file, std::ios::trunc) << "<?xml version=\"1.0\"?>\n<topology version=\"2.0\"><object"; }
  chmod(file.c_str(), 0600);
  discoveredAnew("a truncated file");
  { std::ofstream(file, std::ios::trunc) << "not xml at all\n"; }
  discoveredAnew("garbage");
  timeval old[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimes(file.c_str(), old), 0);
  discoveredAnew("an hour old");
  std::filesystem::copy_file(file, dir.path() + "/good.xml");
  std::filesystem::remove(file);
  std::filesystem::create_symlink(dir.path() + "/good.xml", file);
  discoveredAnew("a symbolic link");
  if (geteuid() == 0) {
    ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0);
    discoveredAnew("owned by another user");
  }
}

// The name depends on what changes hwloc's answer: another HWLOC_* setting is another file.
TEST(TopoCache, HwlocSettingsGetTheirOwnFile) {
  TempDir dir;
  discoverLocal(cacheIn(dir.path()));
  {
    EnvGuard hide("HWLOC_HIDE_ERRORS", "2");
    EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source, "hwloc");
    EXPECT_EQ(filesIn(dir.path()).size(), 2u);
    EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source.rfind(kCached, 0), 0u);
  }
}

// A process in another network namespace sees other interfaces: it must not load the
// file of a process outside it (nor they its).
TEST(TopoCache, NetworkNamespacesGetTheirOwnFile) {
  TempDir dir;
  discoverLocal(cacheIn(dir.path()));
  pid_t p = fork();
  if (p == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);  // not root, or no namespaces here
    // (What it sees there depends on the /sys it has: `ip netns exec` mounts the
    // namespace's own; the key covers the mount namespace too.)
    _exit(discoverLocal(cacheIn(dir.path())).source == "hwloc" ? 0 : 1);
  }
  ASSERT_GT(p, 0);
  int status = 0;
  ASSERT_EQ(waitpid(p, &status, 0), p);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot make a network namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child loaded the file of a process outside its namespace";
  EXPECT_EQ(filesIn(dir.path()).size(), 2u);
  EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source.rfind(kCached, 0), 0u);
}

// The environment is the subject: where "auto" puts the file, and "0" turning it off.
TEST(TopoCache, AutoUsesTheRuntimeOrTemporaryDirectoryAndZeroTurnsItOff) {
  TempDir runtime, tmp;
  EnvGuard noRuntime("XDG_RUNTIME_DIR", "");
  EnvGuard tmpdir("TMPDIR", tmp.path());
  EXPECT_EQ(discoverLocal(Config::fromEnv({{"COLL_TOPO_CACHE", "0"}})).source, "hwloc");
  EXPECT_TRUE(filesIn(tmp.path()).empty());
  discoverLocal(Config::fromEnv({{"COLL_TOPO_CACHE", "auto"}}));
  EXPECT_EQ(filesIn(tmp.path()).size(), 1u);
  EnvGuard run("XDG_RUNTIME_DIR", runtime.path());
  discoverLocal(Config::fromEnv({{"COLL_TOPO_CACHE", "auto"}}));
  EXPECT_EQ(filesIn(runtime.path()).size(), 1u);
  // A directory that cannot be written costs the cache, not the topology.
  EXPECT_EQ(discoverLocal(cacheIn("/nonexistent/dir")).source, "hwloc");
}

// A process that finds another one discovering waits for its file; a lock left by a
// process that died is passed over.
TEST(TopoCache, LocksOfTheDeadAreIgnored) {
  TempDir dir, probe;
  discoverLocal(cacheIn(probe.path()));  // learns the file name this process uses
  const std::string name = std::filesystem::path(filesIn(probe.path()).at(0)).filename();
  const std::string lock = dir.path() + "/" + name + ".lock";
  { std::ofstream(lock) << ""; }
  timeval old[2] = {{time(nullptr) - 60, 0}, {time(nullptr) - 60, 0}};
  ASSERT_EQ(utimes(lock.c_str(), old), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source, "hwloc");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5)
      << "a stale lock is not waited on";
  EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source, kCached + dir.path() + "/" + name);
  // A live lock and no file: the wait is bounded, then the process discovers itself.
  std::filesystem::remove(dir.path() + "/" + name);
  { std::ofstream(lock) << ""; }
  EXPECT_EQ(discoverLocal(cacheIn(dir.path())).source, "hwloc");
}

// Processes starting together: every one gets this machine's topology, and one file.
TEST(TopoCache, ProcessesStartingTogetherAgree) {
  TempDir dir;
  const std::string want = summary(discoverLocal(Config::fromEnv({{"COLL_TOPO_CACHE", "0"}})));
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    pid_t p = fork();
    if (p == 0) {
      bool same = false;
      try {
        same = summary(discoverLocal(cacheIn(dir.path()))) == want;
      } catch (...) {
      }
      _exit(same ? 0 : 1);
    }
    ASSERT_GT(p, 0);
    kids.push_back(p);
  }
  for (pid_t p : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(p, &status, 0), p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  EXPECT_EQ(filesIn(dir.path()).size(), 1u);
}

#else

TEST(TopoCache, NeedsHwloc) { GTEST_SKIP() << "built without hwloc"; }

#endif

}  // namespace
}  // namespace coll
