// Sockets shared by the bootstrap and the TCP transport: addresses, interface choice,
// listening, connecting with retry, and the authenticated handshake that every
// connection of a job starts with.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/wait.hpp"

namespace coll {

// The tunable naming the interfaces sockets may use (declared once, in socket.cpp).
constexpr const char* kSocketIfnameEnv = "COLL_SOCKET_IFNAME";

// Owns a file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept { if (this != &o) { reset(); fd_ = o.release(); } return *this; }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset();

 private:
  int fd_ = -1;
};

std::string addrToString(const sockaddr_storage& a);  // "1.2.3.4:555" or "[::1]:555"
socklen_t addrLen(const sockaddr_storage& a);
int addrPort(const sockaddr_storage& a);
void setAddrPort(sockaddr_storage* a, int port);
// "host:port", "1.2.3.4:port", "[v6]:port"; resolves names. Throws collInvalidArgument.
sockaddr_storage parseAddr(const std::string& hostPort);

// The address to listen on and advertise. ifnameSpec follows COLL_SOCKET_IFNAME:
// "eth0,ib" prefixes, "^docker" excludes, "=eth0" exact. Empty: the first interface that
// is up and not loopback, else loopback. Port is 0.
sockaddr_storage chooseLocalAddr(const std::string& ifnameSpec);
// The interface to use for a job whose root is at `root` (an interface that can reach it:
// loopback for a loopback root), honouring ifnameSpec when set.
sockaddr_storage chooseLocalAddrFor(const sockaddr_storage& root, const std::string& ifnameSpec);

// Listens on addr (port 0 picks a free port); *addr gets the bound address.
Socket listenOn(sockaddr_storage* addr, int backlog = 512);
// Connects, retrying refused/unreachable connections until the deadline.
// Throws collTimeout / collSystemError naming the address.
Socket connectWithRetry(const sockaddr_storage& addr, const Deadline& deadline);

void setNonBlocking(int fd, bool on = true);
void setNoDelay(int fd);
void setBufferSizes(int fd, int bytes);
// The smallest round trip the kernel has measured on a TCP connection, in microseconds;
// 0 when it has none or cannot say.
double tcpMinRttUs(int fd);

// Blocking transfers on a (possibly non-blocking) socket, bounded by the deadline.
// A closed peer is collRemoteError; an expired deadline is collTimeout.
// The address of fd's peer as text, for messages ("a disconnected peer" once it is gone).
std::string peerName(int fd);
void sendAll(int fd, const void* buf, size_t n, const Deadline& deadline);
void recvAll(int fd, void* buf, size_t n, const Deadline& deadline);

// Who a connection is for, so one kind can never be mistaken for another.
enum class ConnRole : uint32_t { Bootstrap = 1, Tcp = 2, Plugin = 3 };

// The most hello payload a connection handshake carries (bootstrap/handshake.hpp).
constexpr size_t kMaxHello = 4096;

}  // namespace coll
