#include "launcher/job.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <dirent.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/error.hpp"

namespace coll::launcher {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Bounds the drain after a rank exits: a grandchild that keeps the pipe and keeps
// writing must not stall the loop.
constexpr size_t kDrainLimit = 1 << 20;

Job::Clock::time_point after(double sec) {
  return Job::Clock::now() +
         std::chrono::duration_cast<Job::Clock::duration>(std::chrono::duration<double>(sec));
}

int msUntil(Job::Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Job::Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
}

std::string describeSignal(int sig) {
  const char* name = strsignal(sig);
  return strCat(sig, name ? strCat(" (", name, ")") : "");
}

}  // namespace

Job::Job(std::vector<RankLaunch> ranks, double timeoutSec) : timeoutSec_(timeoutSec) {
  procs_.resize(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) procs_[i].launch = std::move(ranks[i]);
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM}) sigaddset(&mask, s);
  if (sigprocmask(SIG_BLOCK, &mask, &oldMask_) < 0)
    COLL_THROW(collSystemError, "sigprocmask: ", std::strerror(errno));
  sigFd_.reset(signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!sigFd_) COLL_THROW(collSystemError, "signalfd: ", std::strerror(errno));
  // emit() waits for a stream to poll writable: one opened read-only never would.
  auto writable = [](int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && (flags & O_ACCMODE) != O_RDONLY;
  };
  stdoutOk_ = writable(1);
  stderrOk_ = writable(2);
}

Job::~Job() { sigprocmask(SIG_SETMASK, &oldMask_, nullptr); }

void Job::say(const std::string& msg) {
  std::string line = "collectiverun: " + msg + "\n";
  if (waitingFd_ >= 0) deferred_ += line;  // after the write under way (2>&1: one stream)
  else if (stderrOk_) stderrOk_ = emit(2, line);
}

void Job::flushDeferred() {
  if (deferred_.empty() || waitingFd_ >= 0) return;
  std::string text;
  text.swap(deferred_);
  if (stderrOk_) stderrOk_ = emit(2, text);
}

int Job::msUntilNextDeadline() const {
  int ms = -1;
  for (const auto& t : {timeoutAt_, killAt_, giveUpAt_})
    if (t) ms = ms < 0 ? msUntil(*t) : std::min(ms, msUntil(*t));
  return ms;
}

bool Job::emit(int fd, std::string_view data) {
  while (!data.empty()) {
    pollfd fds[2] = {{fd, POLLOUT, 0}, {sigFd_.get(), POLLIN, 0}};
    waitingFd_ = fd;
    // Once SIGKILL has gone out the job is over: what the reader does not take at once
    // is dropped, so that the launcher can end.
    int n = ::poll(fds, 2, giveUpAt_ ? 0 : msUntilNextDeadline());
    int err = errno;
    if (n > 0 && fds[1].revents) handleSignals();
    checkDeadlines();
    waitingFd_ = -1;
    if (n < 0 && err != EINTR) return false;
    if (fds[0].revents & (POLLERR | POLLNVAL)) return false;
    if (!(fds[0].revents & (POLLOUT | POLLHUP))) {
      if (giveUpAt_ && n >= 0) return false;
      continue;
    }
    // At most PIPE_BUF: a pipe that polls writable takes that much without blocking.
    ssize_t w = ::write(fd, data.data(), std::min(data.size(), size_t{PIPE_BUF}));
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return false;  // EPIPE: the reader has gone
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

int Job::run() {
  if (timeoutSec_ > 0) timeoutAt_ = after(timeoutSec_);
  launchAll();
  while (running_ > 0) {
    loopOnce();
    if (giveUpAt_ && Clock::now() >= *giveUpAt_) {
      say(strCat(running_, " rank(s) did not exit after SIGKILL; giving up on them"));
      break;
    }
  }
  reportExits();
  for (Proc& p : procs_) finishOutput(p);
  if (ending_ != Ending::None) reapLeftoverGroups();
  if (elastic_ && (lost_ || joined_))
    say(strCat("--elastic: ", lost_, " rank(s) lost, ", joined_, " started to join; ",
               ending_ == Ending::None ? "the job finished" : "the job failed"));
  flushDeferred();
  return exitCode_;
}

void Job::reapLeftoverGroups() {
  // Every rank has exited, but a child a rank left behind (say a background job that
  // ignores SIGINT) still gets the same SIGTERM grace and then SIGKILL.
  auto anyGroupAlive = [this] {
    bool alive = false;
    for (Proc& p : procs_) {
      if (p.pid <= 0 || p.groupGone) continue;
      if (::kill(-p.pid, 0) < 0 && errno == ESRCH) p.groupGone = true;
      else alive = true;
    }
    return alive;
  };
  while (killAt_ && Clock::now() < *killAt_ && anyGroupAlive()) {
    pollfd fd{sigFd_.get(), POLLIN, 0};
    if (::poll(&fd, 1, std::min(msUntil(*killAt_), 50)) > 0) handleSignals();
  }
  if (anyGroupAlive()) signalAll(SIGKILL);
}

void Job::launchAll() {
  for (Proc& p : procs_)
    if (!launchOne(p)) return;
}

bool Job::launchOne(Proc& p) {
  try {
    Child c = spawnChild(p.launch.request, oldMask_);
    p.pid = c.pid;
    p.running = true;
    ++running_;
    p.out = std::move(c.out);
    p.err = std::move(c.err);
    p.in = std::move(c.in);
  } catch (const Error& e) {
    say(strCat("rank ", p.launch.rank, ": ", e.what()));
    beginTermination(Ending::Failure, 127, SIGTERM);
    return false;
  }
  if (p.in && !p.launch.stdinLine.empty()) writeAll(p.in.get(), p.launch.stdinLine);
  std::string prefix = strCat("[", p.launch.rank, "] ");
  p.outTag = std::make_unique<LineTagger>(prefix, [this](std::string_view s) {
    if (stdoutOk_) outBuf_.append(s);
  });
  p.errTag = std::make_unique<LineTagger>(prefix, [this](std::string_view s) {
    if (stderrOk_) errBuf_.append(s);
  });
  return true;
}

// --elastic: the grow requests the ranks left in the job's directory.
void Job::startJoiners() {
  if (!elastic_ || ending_ != Ending::None) return;
  DIR* d = ::opendir(elastic_->dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, "grow-", 5) == 0 && !growsSeen_.count(e->d_name)) names.push_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    growsSeen_.insert(name);
    std::ifstream f(elastic_->dir + "/" + name);
    int nNew = 0, size = 0;
    std::string hex;
    if (!(f >> nNew >> size >> hex) || nNew < 1 || size < nNew || hex.size() != 2 * COLL_UNIQUE_ID_BYTES) {
      say(strCat("--elastic: ignoring the malformed grow request ", name));
      continue;
    }
    for (int i = 0; i < nNew; ++i) {
      if (running_ >= elastic_->maxNp) {
        say(strCat("--elastic: not starting rank ", size - nNew + i, ": ", running_, " ranks run already (--max-np ",
                   elastic_->maxNp, ")"));
        continue;
      }
      Proc& p = procs_.emplace_back();
      p.launch = elastic_->joiner;
      p.launch.rank = size - nNew + i;
      auto set = [&](const std::string& k, const std::string& v) {
        auto& env = p.launch.request.env;
        env.erase(std::remove_if(env.begin(), env.end(), [&](const std::string& kv) { return kv.rfind(k + "=", 0) == 0; }),
                  env.end());
        env.push_back(k + "=" + v);
      };
      set("COLL_RANK", std::to_string(p.launch.rank));
      set("COLL_SIZE", std::to_string(size));
      set("COLL_JOIN_ID", hex);
      if (launchOne(p)) {
        ++joined_;
        say(strCat("--elastic: started rank ", p.launch.rank, " of ", size, " to join (pid ", p.pid, ")"));
      }
    }
  }
}

void Job::loopOnce() {
  reportExits();
  flushDeferred();
  if (running_ == 0) return;
  std::vector<pollfd> fds{{sigFd_.get(), POLLIN, 0}};
  std::vector<std::pair<Proc*, bool>> owners{{nullptr, false}};
  for (Proc& p : procs_) {
    if (p.out) fds.push_back({p.out.get(), POLLIN, 0}), owners.emplace_back(&p, false);
    if (p.err) fds.push_back({p.err.get(), POLLIN, 0}), owners.emplace_back(&p, true);
  }
  int wait = msUntilNextDeadline();
  if (elastic_) wait = wait < 0 ? 20 : std::min(wait, 20);  // grow requests are files
  int n = ::poll(fds.data(), fds.size(), wait);
  if (n < 0 && errno != EINTR) COLL_THROW(collSystemError, "poll: ", std::strerror(errno));
  for (size_t i = 1; n > 0 && i < fds.size(); ++i)
    if (fds[i].revents) readPipe(*owners[i].first, owners[i].second, false);
  if (n > 0 && fds[0].revents) handleSignals();
  checkDeadlines();
  startJoiners();
}

void Job::handleSignals() {
  signalfd_siginfo info;
  bool child = false;
  while (::read(sigFd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (static_cast<int>(info.ssi_signo) == SIGCHLD) child = true;
    else onLauncherSignal(static_cast<int>(info.ssi_signo));
  }
  // SIGCHLDs coalesce, so one reap loop per wakeup collects every exited child.
  if (child) reapChildren();
}

namespace {

// How likely an exit is the first cause of a job's failure, among those reaped at once
// (waitpid returns them in the order the children were made, not the order they died):
// a rank killed by a signal did not choose to go, while one that exits with an error may
// be a survivor reporting it; a remote rank's shell passes a signal death on as 128 + n.
int causeRank(const RankLaunch& l, int status) {
  if (WIFSIGNALED(status)) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 3;
  if (l.remote && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 255) return 1;
  return 2;
}

}  // namespace

void Job::reapChildren() {
  int status = 0;
  pid_t pid;
  std::vector<std::pair<Proc*, int>> batch;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    for (Proc& p : procs_) {
      if (p.pid != pid || !p.running) continue;
      p.running = false;
      --running_;
      p.in.reset();
      batch.emplace_back(&p, status);
    }
  }
  std::stable_sort(batch.begin(), batch.end(), [](const auto& a, const auto& b) {
    return causeRank(a.first->launch, a.second) < causeRank(b.first->launch, b.second);
  });
  // The job ends now, even while emit() waits on a reader that takes nothing.
  for (auto& [p, st] : batch) exited_.emplace_back(p, onRankExit(*p, st));
  reportExits();
}

void Job::reportExits() {
  // Draining writes output: not while emit() waits to write (it comes back here after).
  while (!exited_.empty() && waitingFd_ < 0) {
    auto [p, verdict] = exited_.front();
    exited_.erase(exited_.begin());
    // Everything the rank wrote before exiting is in the pipe now: show it before any
    // message about how it ended.
    if (p->out) readPipe(*p, false, true);
    if (p->err) readPipe(*p, true, true);
    if (!verdict.empty()) say(verdict);
  }
}

std::string Job::onRankExit(Proc& p, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  std::string who = strCat("rank ", p.launch.rank);
  if (p.launch.remote) who += strCat(" (on ", p.launch.host, ")");
  if (ending_ != Ending::None) {
    // A consequence of the ending under way, as a rule. Except a rank killed by a signal
    // nobody here sent, soon after a rank that exited with an error began the ending: it
    // died first (its death was seen later), and the other was a survivor reporting it.
    if (ending_ == Ending::Failure && blameIsExit_ && WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM &&
        !sentKill_ && Clock::now() < endingAt_ + std::chrono::seconds(1)) {
      blameIsExit_ = false;
      exitCode_ = 128 + WTERMSIG(status);
      return strCat(who, " killed by signal ", describeSignal(WTERMSIG(status)),
                    " (the first failure: the rank above reported it)");
    }
    return "";
  }
  std::string others = procs_.size() > 1 ? "; killing the other ranks" : "";
  const std::string how = WIFSIGNALED(status) ? strCat("killed by signal ", describeSignal(WTERMSIG(status)))
                                              : strCat("exited with status ", WEXITSTATUS(status));
  if (elastic_) {
    ++lost_;
    if (running_ >= elastic_->minNp)
      return strCat(who, " ", how, "; ", running_, " rank(s) go on (--elastic, --min-np ", elastic_->minNp, ")");
    beginTermination(Ending::Failure, WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status), SIGTERM);
    return strCat(who, " ", how, "; ", running_, " rank(s) left, fewer than --min-np ", elastic_->minNp, others);
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    beginTermination(Ending::Failure, 128 + sig, SIGTERM);
    return strCat(who, " killed by signal ", describeSignal(sig), others);
  }
  blameIsExit_ = true;
  int code = WEXITSTATUS(status);
  // ssh's own failures (host unreachable, authentication) exit with 255.
  std::string hint = p.launch.remote && code == 255 ? " (the remote shell may have failed)" : "";
  beginTermination(Ending::Failure, code, SIGTERM);
  return strCat(who, " exited with status ", code, hint, others);
}

void Job::onLauncherSignal(int signo) {
  if (ending_ == Ending::None) {
    say(strCat("got signal ", describeSignal(signo), "; forwarding it to every rank"));
    beginTermination(Ending::Signal, 128 + signo, signo);
    return;
  }
  say(strCat("got signal ", describeSignal(signo), " again; killing every rank"));
  signalAll(SIGKILL);
  killAt_.reset();
  if (!giveUpAt_) giveUpAt_ = after(kReapGiveUpSec);
}

void Job::checkDeadlines() {
  Clock::time_point now = Clock::now();
  if (timeoutAt_ && now >= *timeoutAt_) {
    timeoutAt_.reset();
    if (ending_ == Ending::None) {
      say(strCat("job timed out after ", timeoutSec_, " s (--timeout); killing every rank"));
      beginTermination(Ending::Timeout, 124, SIGTERM);
    }
  }
  if (killAt_ && now >= *killAt_) {
    killAt_.reset();
    if (running_ > 0)
      say(strCat(running_, " rank(s) still running ", kKillGraceSec,
                 " s after they were told to stop; sending SIGKILL"));
    signalAll(SIGKILL);
    giveUpAt_ = after(kReapGiveUpSec);
  }
}

void Job::beginTermination(Ending why, int exitCode, int signo) {
  if (ending_ != Ending::None) return;
  ending_ = why;
  exitCode_ = exitCode;
  endingAt_ = Clock::now();
  // Closing a remote rank's stdin is what stops it: its watcher sees EOF.
  for (Proc& p : procs_) p.in.reset();
  signalAll(signo);
  killAt_ = after(kKillGraceSec);
}

void Job::signalAll(int signo) {
  if (signo == SIGKILL) sentKill_ = true;
  // Groups of ranks that already exited are signalled too: their children may live on.
  // A group's id cannot be reused while any member is alive, and ESRCH marks it gone.
  for (Proc& p : procs_) {
    if (p.pid <= 0 || p.groupGone) continue;
    if (::kill(-p.pid, signo) < 0 && errno == ESRCH) {
      if (!p.running) p.groupGone = true;
      else ::kill(p.pid, signo);  // not yet in its own group (cannot happen after spawn)
    }
  }
}

void Job::readPipe(Proc& p, bool isErr, bool drain) {
  UniqueFd& fd = isErr ? p.err : p.out;
  LineTagger* tag = isErr ? p.errTag.get() : p.outTag.get();
  char buf[kReadChunk];
  size_t total = 0;
  while (fd) {
    ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return;
    if (r <= 0) {  // EOF, or an error that will not go away
      if (tag) tag->finish();
      flushRankOutput();
      fd.reset();
      return;
    }
    if (tag) tag->feed(std::string_view(buf, static_cast<size_t>(r)));
    flushRankOutput();
    total += static_cast<size_t>(r);
    if (!drain || total >= kDrainLimit) return;
  }
}

void Job::finishOutput(Proc& p) {
  if (p.out) readPipe(p, false, true);
  if (p.err) readPipe(p, true, true);
  if (p.outTag) p.outTag->finish();
  if (p.errTag) p.errTag->finish();
  flushRankOutput();
}

void Job::flushRankOutput() {
  std::string text;
  text.swap(outBuf_);
  if (!text.empty() && stdoutOk_) stdoutOk_ = emit(1, text);
  text.clear();
  text.swap(errBuf_);
  if (!text.empty() && stderrOk_) stderrOk_ = emit(2, text);
}

}  // namespace coll::launcher
