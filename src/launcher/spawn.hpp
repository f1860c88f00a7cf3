// Starting one rank process (the program itself, or the remote shell for a rank on
// another host).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace coll::launcher {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in the launcher's PATH
  std::vector<std::string> env;   // NAME=value
  bool pipeOutput = true;         // stdout/stderr through pipes, else inherited
  bool stdinPipe = false;         // stdin from a pipe the launcher keeps, else /dev/null
  std::vector<int> cpus;          // CPUs the child may run on; empty: the launcher's own
};

struct Child {
  pid_t pid = -1;
  UniqueFd out, err, in;  // launcher's ends, non-blocking and close-on-exec
};

// Forks and execs in a new process group (so the whole tree a rank starts can be
// signalled at once) with the signal mask `childMask`. The child is killed if the
// launcher dies. Throws collSystemError when the program cannot be executed: the
// child's exec errno comes back through a close-on-exec pipe, so the message is exact.
Child spawnChild(const SpawnRequest& req, const sigset_t& childMask);

// Where `program` would be found (empty when it would not): a path containing '/' is
// checked as is, a bare name is searched in `pathVar`.
std::string findProgram(const std::string& program, const char* pathVar);

}  // namespace coll::launcher
