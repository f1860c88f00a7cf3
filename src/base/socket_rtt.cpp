// The kernel's round-trip estimate of a TCP connection. A file of its own: the field
// (tcpi_min_rtt) is only in the kernel's <linux/tcp.h>, which clashes with the C
// library's <netinet/tcp.h> that socket.cpp needs.
#include <linux/tcp.h>
#include <stddef.h>
#include <sys/socket.h>

#include "base/socket.hpp"

namespace coll {

double tcpMinRttUs(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  // Kernels older than the field return a shorter struct.
  if (len < offsetof(tcp_info, tcpi_min_rtt) + sizeof info.tcpi_min_rtt) return 0;
  // ~0U: no sample yet.
  return info.tcpi_min_rtt == ~0U ? 0 : static_cast<double>(info.tcpi_min_rtt);
}

}  // namespace coll
