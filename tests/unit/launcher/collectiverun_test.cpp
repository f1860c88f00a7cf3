// collectiverun end to end: runs the built launcher (path in $COLLECTIVERUN) with small
// shell programs as ranks and checks what they saw, what was printed and how it ended.
// Remote ranks go through $FAKE_SSH, which runs the "remote" side here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
// No test should come near this; it only keeps a broken launcher from hanging the suite.
constexpr double kHangLimitSec = 30;
// A job killed after a failure ends well before the 3 s SIGTERM->SIGKILL grace; the
// margin is for a loaded 2-core machine.
constexpr double kQuickSec = 2.8;

struct Result {
  int exitCode = -1;  // 128+signal when the launcher itself was killed
  std::string out, err;
  double seconds = 0;
};

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* exe = std::getenv("COLLECTIVERUN");
    ASSERT_NE(exe, nullptr) << "set COLLECTIVERUN to the collectiverun executable";
    exe_ = exe;
    char tmpl[] = "/tmp/collectiverun_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // Starts the launcher with stdout/stderr in files; `extraEnv` is added to ours.
  pid_t start(const std::vector<std::string>& args, const std::vector<std::string>& extraEnv = {}) {
    std::vector<std::string> argv{exe_};
    argv.insert(argv.end(), args.begin(), args.end());
    return startArgv(argv, extraEnv);
  }

  // The launcher under a limit on its address space (KiB), through sh's ulimit.
  Result runWithMemoryLimit(long kib, const std::vector<std::string>& args) {
    std::vector<std::string> argv{"/bin/sh", "-c", "ulimit -v " + std::to_string(kib) + " && exec \"$0\" \"$@\"", exe_};
    argv.insert(argv.end(), args.begin(), args.end());
    return finish(startArgv(argv, {}));
  }

  pid_t startArgv(std::vector<std::string> argv, const std::vector<std::string>& extraEnv) {
    std::vector<std::string> env(extraEnv);
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    std::vector<char*> cargv, cenv;
    for (auto& s : argv) cargv.push_back(s.data());
    for (auto& s : env) cenv.push_back(s.data());
    cargv.push_back(nullptr);
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (stdoutFd_ >= 0) posix_spawn_file_actions_adddup2(&fa, stdoutFd_, 1);
    else posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0);
    started_ = Clock::now();
    return pid;
  }

  Result finish(pid_t pid) {
    Result r;
    int status = 0;
    for (;;) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (Clock::now() - started_ > std::chrono::duration<double>(kHangLimitSec)) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "collectiverun did not exit within " << kHangLimitSec << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = readFile(dir_ + "/out");
    r.err = readFile(dir_ + "/err");
    return r;
  }

  Result run(const std::vector<std::string>& args, const std::vector<std::string>& extraEnv = {}) {
    return finish(start(args, extraEnv));
  }

  // Waits until `path` has at least `lines` lines.
  bool waitForLines(const std::string& path, size_t lines, double sec = 10) {
    auto until = Clock::now() + std::chrono::duration<double>(sec);
    while (Clock::now() < until) {
      std::string s = readFile(path);
      if (static_cast<size_t>(std::count(s.begin(), s.end(), '\n')) >= lines) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string exe_, dir_;
  int stdoutFd_ = -1;  // the launcher's stdout when set, else the file dir_/out
  Clock::time_point started_;
};

// Gone, or a zombie nobody has reaped yet (the container's init may be lazy).
bool processGone(pid_t pid) {
  if (::kill(pid, 0) < 0) return true;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool waitGone(pid_t pid, double sec = 3) {
  auto until = Clock::now() + std::chrono::duration<double>(sec);
  while (Clock::now() < until) {
    if (processGone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return processGone(pid);
}

// "[r] text" lines -> rank -> lines.
std::map<int, std::vector<std::string>> byRank(const std::string& text) {
  std::map<int, std::vector<std::string>> m;
  std::regex line(R"(\[(\d+)\] (.*))");
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    std::smatch sm;
    if (std::regex_match(l, sm, line)) m[std::stoi(sm[1])].push_back(sm[2]);
    else m[-1].push_back(l);
  }
  return m;
}

std::vector<int> pidsIn(const std::string& path) {
  std::vector<int> pids;
  std::istringstream in(readFile(path));
  int p;
  while (in >> p) pids.push_back(p);
  return pids;
}

TEST_F(Launcher, EveryRankGetsItsEnvironment) {
  Result r = run({"-np", "4", "sh", "-c",
                  "echo $COLL_RANK $COLL_SIZE $COLL_LOCAL_RANK $COLL_LOCAL_SIZE $COLL_ROOT_ADDR "
                  "$COLL_JOB_SECRET $COLL_JOB_ID"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto lines = byRank(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  std::string root, secret, id;
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(lines[rank].size(), 1u);
    std::istringstream f(lines[rank][0]);
    int rk, size, lrank, lsize;
    std::string rootAddr, sec, jobId;
    f >> rk >> size >> lrank >> lsize >> rootAddr >> sec >> jobId;
    EXPECT_EQ(rk, rank);
    EXPECT_EQ(size, 4);
    EXPECT_EQ(lrank, rank);
    EXPECT_EQ(lsize, 4);
    EXPECT_TRUE(std::regex_match(rootAddr, std::regex(R"(127\.0\.0\.1:\d+)"))) << rootAddr;
    EXPECT_TRUE(std::regex_match(sec, std::regex("[0-9a-f]{64}"))) << sec;
    EXPECT_TRUE(std::regex_match(jobId, std::regex("[0-9a-f]+"))) << jobId;
    if (rank == 0) root = rootAddr, secret = sec, id = jobId;
    EXPECT_EQ(rootAddr, root);  // the same job identity everywhere
    EXPECT_EQ(sec, secret);
    EXPECT_EQ(jobId, id);
  }
  Result again = run({"-np", "1", "sh", "-c", "echo $COLL_JOB_SECRET"});
  ASSERT_TRUE(std::regex_match(again.out, std::regex("\\[0\\] [0-9a-f]{64}\n"))) << again.out;
  EXPECT_NE(again.out.substr(4, 64), secret);  // fresh per job
}

// --bind-to auto (the default): with at least as many CPUs as ranks each rank runs on CPUs
// of its own; none leaves the launcher's.
TEST_F(Launcher, RanksGetCpusOfTheirOwn) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  if (cpus < 2) GTEST_SKIP() << "needs 2 CPUs";
  Result r = run({"-np", "2", "sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto lines = byRank(r.out);
  ASSERT_EQ(lines[0].size(), 1u);
  ASSERT_EQ(lines[1].size(), 1u);
  EXPECT_NE(lines[0][0], lines[1][0]) << r.out;
  Result none = run({"-np", "2", "--bind-to", "none", "sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"});
  auto unbound = byRank(none.out);
  EXPECT_EQ(unbound[0], unbound[1]) << none.out;
}

TEST_F(Launcher, UserRootAddrAndExportsWin) {
  Result r = run({"-np", "2", "-x", "EXTRA=a b", "sh", "-c", "echo $COLL_ROOT_ADDR/$EXTRA/$COLL_RANK"},
                 {"COLL_ROOT_ADDR=10.9.8.7:4242", "COLL_RANK=77"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto lines = byRank(r.out);
  EXPECT_EQ(lines[0], std::vector<std::string>{"10.9.8.7:4242/a b/0"});
  EXPECT_EQ(lines[1], std::vector<std::string>{"10.9.8.7:4242/a b/1"});
}

TEST_F(Launcher, OutputIsTaggedPerStream) {
  Result r = run({"-np", "2", "sh", "-c",
                  "echo out$COLL_RANK; echo err$COLL_RANK >&2; printf 'tail%s' $COLL_RANK"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto out = byRank(r.out);
  auto err = byRank(r.err);
  for (int rank = 0; rank < 2; ++rank) {
    std::string n = std::to_string(rank);
    EXPECT_EQ(out[rank], (std::vector<std::string>{"out" + n, "tail" + n})) << r.out;
    EXPECT_EQ(err[rank], std::vector<std::string>{"err" + n}) << r.err;
  }
  EXPECT_EQ(out.count(-1), 0u) << r.out;
  Result raw = run({"--no-tag-output", "-np", "1", "sh", "-c", "echo plain"});
  EXPECT_EQ(raw.exitCode, 0);
  EXPECT_EQ(raw.out, "plain\n");
}

TEST_F(Launcher, StdinIsDevNull) {
  // The launcher's own stdin is /dev/null here too, so read a pipe-like source instead:
  // a rank that waited on a terminal or pipe would hit the timeout.
  Result r = run({"--timeout", "10", "-np", "2", "sh", "-c", "cat; test ! -t 0 && echo eof"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(byRank(r.out)[1], std::vector<std::string>{"eof"});
}

TEST_F(Launcher, FailingRankKillsTheOthersAndItsStatusPropagates) {
  std::string pids = dir_ + "/pids";
  Result r = run({"-np", "4", "sh", "-c",
                  "echo $$ >> " + pids + "; "
                  "if [ $COLL_RANK = 2 ]; then sleep 0.2; echo bye; exit 3; fi; exec sleep 100"});
  EXPECT_EQ(r.exitCode, 3) << r.err;
  EXPECT_LT(r.seconds, kQuickSec);
  EXPECT_NE(r.err.find("rank 2 exited with status 3"), std::string::npos) << r.err;
  // The rank's own output comes before the launcher's verdict.
  EXPECT_NE(r.out.find("[2] bye"), std::string::npos);
  std::vector<int> started = pidsIn(pids);
  EXPECT_EQ(started.size(), 4u);
  for (int p : started) EXPECT_TRUE(waitGone(p)) << "pid " << p << " survived";
}

TEST_F(Launcher, SignalDeathIsReported) {
  Result r = run({"-np", "3", "sh", "-c",
                  "if [ $COLL_RANK = 1 ]; then kill -9 $$; fi; exec sleep 100"});
  EXPECT_EQ(r.exitCode, 128 + 9) << r.err;
  EXPECT_LT(r.seconds, kQuickSec);
  EXPECT_NE(r.err.find("rank 1 killed by signal 9"), std::string::npos) << r.err;
}

// Rank 1 is SIGKILLed and rank 0, a survivor, exits with an error reporting it; both are
// dead before the launcher looks (it is stopped meanwhile), and waitpid hands rank 0 over
// first. The blame, the message and the exit status go to the rank that was killed.
TEST_F(Launcher, TheKilledRankIsBlamedNotTheSurvivorReapedFirst) {
  const std::string d = dir_;
  pid_t l = start({"-np", "3", "sh", "-c",
                   "echo $$ > " + d + "/pid$COLL_RANK; "
                   "if [ $COLL_RANK = 1 ]; then while [ ! -e " + d + "/go1 ]; do sleep 0.01; done; kill -9 $$; fi; "
                   "if [ $COLL_RANK = 0 ]; then while [ ! -e " + d + "/go0 ]; do sleep 0.01; done; exit 24; fi; "
                   "exec sleep 100"});
  auto pidOf = [&](int r) {
    for (int i = 0; i < 500; ++i) {
      std::vector<int> p = pidsIn(d + "/pid" + std::to_string(r));
      if (!p.empty()) return p[0];
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  };
  int p0 = pidOf(0), p1 = pidOf(1);
  ASSERT_GT(p0, 0);
  ASSERT_GT(p1, 0);
  ASSERT_EQ(::kill(l, SIGSTOP), 0);
  std::ofstream(d + "/go1").put('\n');
  EXPECT_TRUE(waitGone(p1, 5));
  std::ofstream(d + "/go0").put('\n');
  EXPECT_TRUE(waitGone(p0, 5));
  ::kill(l, SIGCONT);
  Result r = finish(l);
  EXPECT_EQ(r.exitCode, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("rank 1 killed by signal 9"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 0 exited with status 24"), std::string::npos) << r.err;
}

TEST_F(Launcher, ChildrenOfRanksAreKilledToo) {
  std::string kids = dir_ + "/kids";
  Result r = run({"-np", "2", "sh", "-c",
                  "sleep 100 & echo $! >> " + kids + "; "
                  "if [ $COLL_RANK = 0 ]; then sleep 0.2; exit 4; fi; wait"});
  EXPECT_EQ(r.exitCode, 4) << r.err;
  std::vector<int> started = pidsIn(kids);
  EXPECT_EQ(started.size(), 2u);
  for (int p : started) EXPECT_TRUE(waitGone(p)) << "grandchild " << p << " survived";
}

TEST_F(Launcher, SigtermIsFollowedBySigkill) {
  Result r = run({"-np", "2", "sh", "-c",
                  "trap '' TERM; if [ $COLL_RANK = 1 ]; then sleep 0.1; exit 5; fi; "
                  "while :; do sleep 0.05; done"});
  EXPECT_EQ(r.exitCode, 5) << r.err;
  EXPECT_GE(r.seconds, 2.5);  // the 3 s grace
  EXPECT_LT(r.seconds, 6.0);
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
}

TEST_F(Launcher, TimeoutKillsTheJob) {
  Result r = run({"--timeout", "0.5", "-np", "2", "sleep", "100"});
  EXPECT_EQ(r.exitCode, 124) << r.err;
  EXPECT_GE(r.seconds, 0.45);
  EXPECT_LT(r.seconds, 2.5);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
}

TEST_F(Launcher, LauncherSignalsAreForwarded) {
  std::string pids = dir_ + "/pids";
  pid_t pid = start({"-np", "3", "sh", "-c", "echo $$ >> " + pids + "; exec sleep 100"});
  ASSERT_TRUE(waitForLines(pids, 3));
  ::kill(pid, SIGTERM);
  Result r = finish(pid);
  EXPECT_EQ(r.exitCode, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("forwarding"), std::string::npos) << r.err;
  for (int p : pidsIn(pids)) EXPECT_TRUE(waitGone(p)) << "pid " << p << " survived";
}

TEST_F(Launcher, StdoutNobodyReadsDoesNotStopTimeoutOrSignals) {
  // A reader that takes nothing (a paused pager, a stuck pipeline). The launcher used to
  // block in write() with SIGINT and SIGTERM blocked: neither --timeout nor a signal
  // ended the job, only SIGKILL did.
  int stalled[2];
  ASSERT_EQ(::pipe2(stalled, O_CLOEXEC), 0);
  stdoutFd_ = stalled[1];
  std::string pids = dir_ + "/pids";
  Result r = run({"--timeout", "0.5", "-np", "2", "sh", "-c", "echo $$ >> " + pids + "; exec yes flood"});
  EXPECT_EQ(r.exitCode, 124) << r.err;
  EXPECT_LT(r.seconds, 6.0);  // the 3 s SIGTERM grace, then the output is dropped
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  std::vector<int> started = pidsIn(pids);
  EXPECT_EQ(started.size(), 2u);
  for (int p : started) EXPECT_TRUE(waitGone(p)) << "pid " << p << " survived";

  // A failing rank ends the job too.
  Result f = run({"-np", "2", "sh", "-c", "if [ $COLL_RANK = 1 ]; then sleep 0.3; exit 5; fi; exec yes flood"});
  EXPECT_EQ(f.exitCode, 5) << f.err;
  EXPECT_LT(f.seconds, 6.0);
  EXPECT_NE(f.err.find("rank 1 exited with status 5"), std::string::npos) << f.err;

  pid_t pid = start({"-np", "2", "sh", "-c", "echo $$ >> " + pids + "2; exec yes flood"});
  ASSERT_TRUE(waitForLines(pids + "2", 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the pipe is full by now
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(pid, SIGTERM);  // a second one: SIGKILL at once
  Result s = finish(pid);
  EXPECT_EQ(s.exitCode, 128 + SIGTERM) << s.err;
  EXPECT_LT(s.seconds, 3.0);
  EXPECT_NE(s.err.find("forwarding it to every rank"), std::string::npos) << s.err;
  for (int p : pidsIn(pids + "2")) EXPECT_TRUE(waitGone(p)) << "pid " << p << " survived";
  ::close(stalled[0]);
  ::close(stalled[1]);
}

TEST_F(Launcher, AllRanksSucceeding) {
  Result r = run({"-np", "3", "true"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(Launcher, BadUsageExitsWith2) {
  std::vector<std::vector<std::string>> bad = {
      {"true"},  {"-np", "0", "true"}, {"-np", "x", "true"}, {"-np", "2"},
      {"-np", "3", "-H", "localhost:2", "true"}, {"--what", "-np", "1", "true"}};
  for (const auto& args : bad) {
    Result r = run(args);
    EXPECT_EQ(r.exitCode, 2) << args[0];
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
  }
  Result help = run({"--help"});
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("usage: collectiverun -np N"), std::string::npos);
}

TEST_F(Launcher, RunningOutOfMemoryIsAnErrorNotACrash) {
  // A million ranks' launch descriptions (each with a copy of the environment) do not
  // fit in 256 MiB: std::bad_alloc used to escape main ("terminate called", abort, 134).
  constexpr long kLimitKiB = 256 * 1024;
  Result probe = runWithMemoryLimit(kLimitKiB, {"-np", "1", "true"});
  if (probe.exitCode != 0) GTEST_SKIP() << "the launcher does not start under ulimit -v (sanitizer build?): " << probe.err;
  Result r = runWithMemoryLimit(kLimitKiB, {"-np", "1000000", "true"});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("collectiverun: out of memory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

TEST_F(Launcher, MissingProgramIsReported) {
  Result r = run({"-np", "2", "no-such-program-xyz"});
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_NE(r.err.find("no-such-program-xyz"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(Launcher, ExecFailureAfterTheChecksIsReported) {
  // Executable, so it passes the PATH check, but exec fails (no such interpreter).
  std::string script = dir_ + "/broken";
  std::ofstream(script) << "#!/no/such/interpreter\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  Result r = run({"-np", "2", script});
  EXPECT_EQ(r.exitCode, 127) << r.err;
  EXPECT_NE(r.err.find("cannot execute"), std::string::npos) << r.err;
}

TEST_F(Launcher, NoOutputIsLostOrReordered) {
  Result r = run({"-np", "3", "sh", "-c", "seq 20000; seq 5 >&2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto out = byRank(r.out);
  ASSERT_EQ(out.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(out[rank].size(), 20000u);
    for (int i = 0; i < 20000; ++i) ASSERT_EQ(out[rank][static_cast<size_t>(i)], std::to_string(i + 1));
    EXPECT_EQ(byRank(r.err)[rank].size(), 5u);
  }
}

TEST_F(Launcher, RemoteRanksThroughSsh) {
  const char* ssh = std::getenv("FAKE_SSH");
  ASSERT_NE(ssh, nullptr);
  Result r = run({"--ssh", ssh, "-np", "4", "-H", "nodeA:1,localhost:1,nodeB:2", "-x", "FWD",
                  "-x", "SET=it's $x", "--", "sh", "-c",
                  "echo \"$FAKE_SSH_HOST|$COLL_RANK|$COLL_LOCAL_RANK/$COLL_LOCAL_SIZE|"
                  "$COLL_ROOT_ADDR|${#COLL_JOB_SECRET}|$FWD|$SET|$COLL_DEBUG|$1\"",
                  "argv0", "a 'b' c"},
                 {"FWD=forwarded value", "COLL_DEBUG=WARN"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto lines = byRank(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0][0], m, std::regex(R"(nodeA\|0\|0/1\|nodeA:(\d+)\|.*)")))
      << lines[0][0];
  std::string root = "nodeA:" + m[1].str();
  std::string tail = "|64|forwarded value|it's $x|WARN|a 'b' c";
  EXPECT_EQ(lines[0][0], "nodeA|0|0/1|" + root + tail);
  // rank 1 is local: it has the launcher's whole environment, no FAKE_SSH_HOST.
  EXPECT_EQ(lines[1][0], "|1|0/1|" + root + tail);
  EXPECT_EQ(lines[2][0], "nodeB|2|0/2|" + root + tail);
  EXPECT_EQ(lines[3][0], "nodeB|3|1/2|" + root + tail);
}

TEST_F(Launcher, RemoteRanksDieWhenTheJobFails) {
  const char* ssh = std::getenv("FAKE_SSH");
  ASSERT_NE(ssh, nullptr);
  std::string pids = dir_ + "/pids";
  Result r = run({"--ssh", ssh, "-np", "3", "-H", "nodeA:3", "sh", "-c",
                  "echo $$ >> " + pids + "; "
                  "if [ $COLL_RANK = 1 ]; then sleep 0.3; exit 6; fi; exec sleep 100"});
  EXPECT_EQ(r.exitCode, 6) << r.err;
  EXPECT_LT(r.seconds, kQuickSec);
  EXPECT_NE(r.err.find("rank 1 (on nodeA) exited with status 6"), std::string::npos) << r.err;
  std::vector<int> started = pidsIn(pids);
  EXPECT_EQ(started.size(), 3u);
  // Out of the launcher's reach (own session): only the remote watcher can stop them.
  for (int p : started) EXPECT_TRUE(waitGone(p)) << "remote pid " << p << " survived";
}

}  // namespace
