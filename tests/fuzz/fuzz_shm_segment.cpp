// A shm segment's header as the opener finds it (the creator, another process, wrote
// it): magic, version, line size, ring size, segment size and record keys must all be
// checked against the object before anything in it is used. The input is the header
// page; byte 0 picks how large the memory file is.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "base/error.hpp"
#include "transport/shm/shm_segment.hpp"

using namespace coll;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const size_t kSizes[] = {0, 64, 4095, 4096, 4096 + 2 * 4096, 4096 + 2 * 8192, 4096 + 2 * 65536};
  const size_t bytes = kSizes[data[0] % 7];
  static int n = 0;
  const std::string name = "coll-fuzz-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) abort();
  if (bytes && ftruncate(fd, static_cast<off_t>(bytes)) != 0) abort();
  size_t take = std::min(size - 1, bytes);
  if (take && pwrite(fd, data + 1, take, 0) != static_cast<ssize_t>(take)) abort();
  try {
    shm::Segment s = shm::Segment::open("/" + name, getpid());
    if (s.bytes() != bytes || shm::segmentBytesFor(s.ringBytes()) != bytes || !s.checkHeader().empty())
      abort();  // accepted a segment whose header does not describe it
    s.ring(1)[s.ringBytes() - 1] ^= 1;  // the whole of both rings is inside the mapping
  } catch (const Error&) {
  }
  ::close(fd);
  return 0;
}
