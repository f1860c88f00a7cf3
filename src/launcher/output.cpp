#include "launcher/output.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace coll::launcher {

void LineTagger::feed(std::string_view data) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      while (partial_.size() >= kMaxLine) {
        emit(std::string_view(partial_).substr(0, kMaxLine));
        partial_.erase(0, kMaxLine);
      }
      return;
    }
    if (partial_.empty()) {
      emit(data.substr(0, nl));
    } else {
      partial_.append(data.substr(0, nl));
      emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineTagger::finish() {
  if (partial_.empty()) return;
  emit(partial_);
  partial_.clear();
}

void LineTagger::emit(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  sink_(out);
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {  // someone made our stdout non-blocking
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (w <= 0) return false;
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

}  // namespace coll::launcher
