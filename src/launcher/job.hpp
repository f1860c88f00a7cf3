// A running job: the rank processes, their output pipes and the rules for ending.
//
// One thread, one poll loop over the output pipes and a signalfd (SIGCHLD, SIGINT,
// SIGTERM are blocked and read from it, so no handler races with the loop). The first
// event that ends the job early fixes the exit code:
//   a rank exits non-zero or by a signal  -> its status (128+signal)
//   --timeout passes                      -> 124
//   the launcher gets SIGINT/SIGTERM      -> forwarded to every rank, 128+signal
//   a rank cannot be started              -> 127
// and every rank's process group then gets SIGTERM (or the forwarded signal), and
// SIGKILL kKillGraceSec later. Deaths caused by that are not reported as failures.
#pragma once

#include <signal.h>

#include <chrono>
#include <deque>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/output.hpp"
#include "launcher/spawn.hpp"

namespace coll::launcher {

struct RankLaunch {
  int rank = 0;
  std::string host;       // for messages; empty when local
  bool remote = false;
  SpawnRequest request;
  std::string stdinLine;  // written to the child's stdin pipe right after it starts
};

// --elastic: the job goes on while at least minNp ranks run. A rank that fails is
// reported and left out, and new ranks are started when the ranks ask for them: a file
// grow-<anything> in `dir` holding "nNew size join-id-hex" (written by the ranks after
// collCommGetGrowId, doc/recovery.md) starts nNew processes like `joiner` with
// COLL_RANK = size-nNew+i, COLL_SIZE = size and COLL_JOIN_ID, as long as at most maxNp
// ranks then run.
struct ElasticPolicy {
  int minNp = 0;
  int maxNp = 0;
  std::string dir;
  RankLaunch joiner;
};

class Job {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kKillGraceSec = 3.0;    // SIGTERM -> SIGKILL
  static constexpr double kReapGiveUpSec = 5.0;   // after SIGKILL, stop waiting

  Job(std::vector<RankLaunch> ranks, double timeoutSec);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  // Starts every rank, waits for the job to end, returns the launcher's exit code.
  int run();
  void setElastic(ElasticPolicy e) { elastic_ = std::move(e); }

 private:
  enum class Ending { None, Failure, Timeout, Signal };
  struct Proc {
    RankLaunch launch;
    pid_t pid = -1;
    bool running = false;
    bool groupGone = false;
    UniqueFd out, err, in;
    std::unique_ptr<LineTagger> outTag, errTag;
  };

  void launchAll();
  bool launchOne(Proc& p);
  void startJoiners();
  void loopOnce();
  void handleSignals();
  void reapChildren();
  void reportExits();
  // Begins the job's termination if this exit is its first failure; returns the message.
  std::string onRankExit(Proc& p, int status);
  void onLauncherSignal(int signo);
  void checkDeadlines();
  void beginTermination(Ending why, int exitCode, int signo);
  void signalAll(int signo);
  void reapLeftoverGroups();
  // Reads what `fd` has now (one chunk, or until empty when `drain`); closes it at EOF.
  void readPipe(Proc& p, bool isErr, bool drain);
  void finishOutput(Proc& p);
  void say(const std::string& msg);
  // Writes to the launcher's stdout (1) or stderr (2) without letting a reader that
  // takes nothing (a paused pager) stop the job: while waiting, launcher signals and
  // deadlines are still handled. False once the stream is unusable, or still full after
  // SIGKILL went out.
  bool emit(int fd, std::string_view data);
  void flushRankOutput();  // the tagged lines of the last read, in one go per stream
  void flushDeferred();
  int msUntilNextDeadline() const;

  std::deque<Proc> procs_;  // a deque: joiners are added while Proc pointers are held
  std::optional<ElasticPolicy> elastic_;
  std::set<std::string> growsSeen_;
  int lost_ = 0, joined_ = 0;
  std::optional<Clock::time_point> timeoutAt_;
  double timeoutSec_;
  std::optional<Clock::time_point> killAt_, giveUpAt_;
  Ending ending_ = Ending::None;
  Clock::time_point endingAt_;
  bool blameIsExit_ = false;  // the ending began with a rank exiting with an error status
  bool sentKill_ = false;     // SIGKILL went out from here
  int exitCode_ = 0;
  int running_ = 0;
  bool stdoutOk_ = true, stderrOk_ = true;
  int waitingFd_ = -1;  // the stream emit() is waiting on; -1 when none
  // Ranks reaped whose last output and exit message (if any) are not written yet: that
  // waits while emit() does.
  std::vector<std::pair<Proc*, std::string>> exited_;
  std::string deferred_;  // messages for stderr while emit() waits
  std::string outBuf_, errBuf_;  // tagged rank lines not yet written
  sigset_t oldMask_;
  UniqueFd sigFd_;
};

}  // namespace coll::launcher
