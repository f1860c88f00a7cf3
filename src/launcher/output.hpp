// Tagged output: a rank's bytes are cut into lines and each line is written as one
// "[rank] line\n" write, so lines of different ranks never interleave mid-line (a pipe
// or terminal write of this size is not split between writers).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace coll::launcher {

class LineTagger {
 public:
  // A line longer than this is emitted in pieces of this size, each tagged, so a rank
  // that never writes a newline cannot make the launcher buffer without limit.
  static constexpr size_t kMaxLine = 64 * 1024;
  using Sink = std::function<void(std::string_view)>;

  LineTagger(std::string prefix, Sink sink) : prefix_(std::move(prefix)), sink_(std::move(sink)) {}
  void feed(std::string_view data);
  // Emits a partial last line (with a newline added); called at EOF and at exit.
  void finish();

 private:
  void emit(std::string_view line);
  std::string prefix_;
  Sink sink_;
  std::string partial_;
};

// Writes everything to `fd`, retrying short writes and EINTR. Returns false once the
// reader has gone (EPIPE) or the fd fails; the caller then drops further output.
bool writeAll(int fd, std::string_view data);

}  // namespace coll::launcher
