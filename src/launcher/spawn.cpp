#include "launcher/spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace coll::launcher {
namespace {

[[noreturn]] void throwSys(const std::string& what, int err) {
  COLL_THROW(collSystemError, what, ": ", std::strerror(err), " (errno ", err, ")");
}

void makePipe(UniqueFd* readEnd, UniqueFd* writeEnd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) throwSys("pipe", errno);
  readEnd->reset(fds[0]);
  writeEnd->reset(fds[1]);
}

void setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throwSys("fcntl", errno);
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void childMain(char* const* argv, char* const* envp, pid_t parent, int in,
                            int out, int err, int errPipe, const sigset_t& mask,
                            const cpu_set_t* cpus) {
  ::setpgid(0, 0);
  // Best effort: a binding the kernel refuses (a cpuset changed since the launcher looked)
  // leaves the rank on the launcher's CPUs rather than failing the job.
  if (cpus) (void)::sched_setaffinity(0, sizeof *cpus, cpus);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
  ::signal(SIGPIPE, SIG_DFL);                // the launcher ignores it; ranks should not
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  if (::dup2(in, 0) < 0 || (out >= 0 && ::dup2(out, 1) < 0) || (err >= 0 && ::dup2(err, 2) < 0)) {
    int e = errno;
    (void)!::write(errPipe, &e, sizeof e);
    ::_exit(127);
  }
  ::execvpe(argv[0], argv, envp);
  int e = errno;
  (void)!::write(errPipe, &e, sizeof e);
  ::_exit(127);
}

std::vector<char*> cArray(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

Child spawnChild(const SpawnRequest& req, const sigset_t& childMask) {
  COLL_CHECK_ARG(!req.argv.empty(), "spawnChild: empty argv");
  std::vector<char*> argv = cArray(req.argv);
  std::vector<char*> envp = cArray(req.env);
  UniqueFd devNull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devNull) throwSys("open /dev/null", errno);
  Child c;
  UniqueFd inChild, outChild, errChild, errRead, errWrite;
  if (req.stdinPipe) makePipe(&inChild, &c.in);
  if (req.pipeOutput) {
    makePipe(&c.out, &outChild);
    makePipe(&c.err, &errChild);
  }
  makePipe(&errRead, &errWrite);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : req.cpus) {
    COLL_CHECK_ARG(c >= 0 && c < CPU_SETSIZE, "spawnChild: CPU ", c, " out of range");
    CPU_SET(c, &cpus);
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throwSys("fork", errno);
  if (pid == 0)
    childMain(argv.data(), envp.data(), parent, req.stdinPipe ? inChild.get() : devNull.get(),
              outChild.get(), errChild.get(), errWrite.get(), childMask,
              req.cpus.empty() ? nullptr : &cpus);
  c.pid = pid;
  // Also here, so the group exists before the launcher may signal it.
  ::setpgid(pid, pid);
  errWrite.reset();
  int childErr = 0;
  ssize_t r;
  do {
    r = ::read(errRead.get(), &childErr, sizeof childErr);
  } while (r < 0 && errno == EINTR);
  if (r == static_cast<ssize_t>(sizeof childErr)) {
    ::waitpid(pid, nullptr, 0);
    throwSys("cannot execute '" + req.argv[0] + "'", childErr);
  }
  for (UniqueFd* fd : {&c.out, &c.err, &c.in})
    if (*fd) setNonBlocking(fd->get());
  return c;
}

std::string findProgram(const std::string& program, const char* pathVar) {
  auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) return runnable(program) ? program : "";
  std::string path = pathVar ? pathVar : "/bin:/usr/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (runnable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

}  // namespace coll::launcher
