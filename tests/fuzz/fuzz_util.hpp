// Shared bits of the libFuzzer targets (scripts/fuzz.sh builds and runs them).
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace coll::fuzz {

// A non-blocking socketpair: [0] is the side under test, [1] the fuzzer's. The fuzzer's
// bytes are written into [1] (as many as the socket takes) and its write side is shut,
// so the side under test reads them and then end-of-file.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fd) != 0) abort();
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void feed(const uint8_t* data, size_t size, bool close = true) {
    size_t off = 0;
    while (off < size) {
      ssize_t k = ::send(fd[1], data + off, size - off, MSG_NOSIGNAL);
      if (k <= 0) break;
      off += static_cast<size_t>(k);
    }
    if (close) ::shutdown(fd[1], SHUT_WR);
  }
};

}  // namespace coll::fuzz
