#include "base/socket.hpp"

#include "base/config.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"

namespace coll {

COLL_PARAM(kSocketIfnameDecl, "COLL_SOCKET_IFNAME", "",
           "interfaces for sockets: 'eth0,ib' prefixes, '^docker' excludes, '=eth0' exact");

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// ---- addresses ----

socklen_t addrLen(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int addrPort(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
}

void setAddrPort(sockaddr_storage* a, int port) {
  if (a->ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
  else reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
}

std::string addrToString(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, host, sizeof(host));
    return strCat("[", host, "]:", addrPort(a));
  }
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, host, sizeof(host));
    return strCat(host, ":", addrPort(a));
  }
  return strCat("<address family ", a.ss_family, ">");
}

sockaddr_storage parseAddr(const std::string& hostPort) {
  std::string host, port;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    COLL_CHECK_ARG(close != std::string::npos && close + 1 < hostPort.size() &&
                       hostPort[close + 1] == ':',
                   "address '", hostPort, "' is not of the form [ipv6]:port");
    host = hostPort.substr(1, close - 1);
    port = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    COLL_CHECK_ARG(colon != std::string::npos && colon > 0 &&
                       hostPort.find(':') == colon,
                   "address '", hostPort, "' is not of the form host:port (or [ipv6]:port)");
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  COLL_CHECK_ARG(!port.empty() && *end == 0 && p >= 0 && p <= 65535, "address '", hostPort,
                 "': port '", port, "' is not a number in [0, 65535]");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  COLL_CHECK_ARG(rc == 0 && res, "address '", hostPort, "': cannot resolve '", host,
                 "': ", gai_strerror(rc));
  // Prefer IPv4 when a name has both, since that is what every other rank will pick too.
  const addrinfo* pick = res;
  for (const addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) { pick = r; break; }
  sockaddr_storage out{};
  memcpy(&out, pick->ai_addr, std::min<size_t>(pick->ai_addrlen, sizeof(out)));
  freeaddrinfo(res);
  setAddrPort(&out, static_cast<int>(p));
  return out;
}

// ---- interface choice ----

namespace {

struct IfAddr {
  std::string name;
  sockaddr_storage addr{};
  sockaddr_storage mask{};
  bool loopback = false;
};

std::vector<IfAddr> listInterfaces() {
  ifaddrs* list = nullptr;
  COLL_SYSCHECK(getifaddrs(&list), "getifaddrs");
  std::vector<IfAddr> out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    IfAddr a;
    a.name = i->ifa_name;
    size_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&a.addr, i->ifa_addr, len);
    if (i->ifa_netmask) memcpy(&a.mask, i->ifa_netmask, len);
    a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    // A link-local IPv6 address needs a scope id on the remote side; nobody can use it.
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6&>(a.addr).sin6_addr))
      continue;
    out.push_back(a);
  }
  freeifaddrs(list);
  return out;
}

// COLL_SOCKET_IFNAME: comma-separated prefixes; '^' in front excludes them instead; '='
// (after any '^') makes them exact names.
bool ifnameMatches(const std::string& spec, const std::string& name) {
  std::string s = spec;
  bool exclude = false, exact = false;
  if (!s.empty() && s[0] == '^') { exclude = true; s.erase(0, 1); }
  if (!s.empty() && s[0] == '=') { exact = true; s.erase(0, 1); }
  bool hit = false;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty() && (exact ? name == item : name.compare(0, item.size(), item) == 0)) hit = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

// Bridges to containers and VMs are up but lead nowhere useful for a job.
bool isVirtualBridge(const std::string& name) {
  for (const char* p : {"docker", "virbr", "veth", "br-"})
    if (name.compare(0, strlen(p), p) == 0) return true;
  return false;
}

// First match, IPv4 before IPv6.
const IfAddr* pickFirst(const std::vector<IfAddr>& ifs, bool (*ok)(const IfAddr&, const std::string&),
                        const std::string& spec) {
  for (int fam : {AF_INET, AF_INET6})
    for (const auto& i : ifs)
      if (i.addr.ss_family == fam && ok(i, spec)) return &i;
  return nullptr;
}

bool isLoopbackAddr(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
  if (a.ss_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
  return false;
}

bool sameSubnet(const IfAddr& i, const sockaddr_storage& root) {
  if (i.addr.ss_family != root.ss_family || i.mask.ss_family != root.ss_family) return false;
  const uint8_t *a, *m, *r;
  size_t n;
  if (root.ss_family == AF_INET) {
    a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(i.addr).sin_addr);
    m = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(i.mask).sin_addr);
    r = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(root).sin_addr);
    n = 4;
  } else {
    a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6&>(i.addr).sin6_addr);
    m = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6&>(i.mask).sin6_addr);
    r = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6&>(root).sin6_addr);
    n = 16;
  }
  for (size_t k = 0; k < n; ++k)
    if ((a[k] & m[k]) != (r[k] & m[k])) return false;
  return true;
}

sockaddr_storage withPortZero(sockaddr_storage a) {
  setAddrPort(&a, 0);
  return a;
}

}  // namespace

sockaddr_storage chooseLocalAddr(const std::string& ifnameSpec) {
  std::vector<IfAddr> ifs = listInterfaces();
  const IfAddr* pick = nullptr;
  if (!ifnameSpec.empty()) {
    pick = pickFirst(ifs, [](const IfAddr& i, const std::string& s) { return ifnameMatches(s, i.name); },
                     ifnameSpec);
    if (!pick) {
      std::string names;
      for (const auto& i : ifs) names += (names.empty() ? "" : ", ") + i.name;
      COLL_THROW(collInvalidArgument, "COLL_SOCKET_IFNAME='", ifnameSpec,
                 "' matches no interface that is up (available: ", names, ")");
    }
  } else {
    pick = pickFirst(ifs, [](const IfAddr& i, const std::string&) { return !i.loopback && !isVirtualBridge(i.name); }, "");
    if (!pick) pick = pickFirst(ifs, [](const IfAddr& i, const std::string&) { return !i.loopback; }, "");
    if (!pick) pick = pickFirst(ifs, [](const IfAddr& i, const std::string&) { return i.loopback; }, "");
  }
  if (!pick) {
    // No interface at all is up (a bare network namespace): 127.0.0.1 is all there is.
    sockaddr_storage lo{};
    auto& in = reinterpret_cast<sockaddr_in&>(lo);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return lo;
  }
  COLL_TRACE("socket: chose interface %s (%s)", pick->name.c_str(), addrToString(pick->addr).c_str());
  return withPortZero(pick->addr);
}

sockaddr_storage chooseLocalAddrFor(const sockaddr_storage& root, const std::string& ifnameSpec) {
  if (!ifnameSpec.empty()) return chooseLocalAddr(ifnameSpec);
  if (isLoopbackAddr(root)) {
    sockaddr_storage lo{};
    if (root.ss_family == AF_INET6) {
      auto& in6 = reinterpret_cast<sockaddr_in6&>(lo);
      in6.sin6_family = AF_INET6;
      in6.sin6_addr = in6addr_loopback;
    } else {
      auto& in = reinterpret_cast<sockaddr_in&>(lo);
      in.sin_family = AF_INET;
      in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    return lo;
  }
  for (const auto& i : listInterfaces())
    if (!i.loopback && sameSubnet(i, root)) return withPortZero(i.addr);
  return chooseLocalAddr("");
}

// ---- listening and connecting ----

Socket listenOn(sockaddr_storage* addr, int backlog) {
  Socket s(::socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  COLL_SYSCHECK(s.fd(), strCat("socket() for listening on ", addrToString(*addr)));
  int one = 1;
  // A launcher may reuse a fixed rendezvous port right after a previous job.
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  COLL_SYSCHECK(::bind(s.fd(), reinterpret_cast<const sockaddr*>(addr), addrLen(*addr)),
                strCat("bind to ", addrToString(*addr)));
  COLL_SYSCHECK(::listen(s.fd(), backlog), strCat("listen on ", addrToString(*addr)));
  socklen_t len = sizeof(*addr);
  COLL_SYSCHECK(getsockname(s.fd(), reinterpret_cast<sockaddr*>(addr), &len),
                "getsockname of a listening socket");
  return s;
}

namespace {

// Errors that mean "nobody is listening there yet": the root may start after us.
bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EINTR || err == ECONNABORTED;
}

// One non-blocking connect attempt bounded by waitMs. Returns 0 or the errno.
int tryConnect(Socket* s, const sockaddr_storage& addr, int waitMs) {
  *s = Socket(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s->valid()) return errno;
  if (::connect(s->fd(), reinterpret_cast<const sockaddr*>(&addr), addrLen(addr)) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd p{s->fd(), POLLOUT, 0};
  int rc = poll(&p, 1, waitMs);
  if (rc < 0) return errno;
  if (rc == 0) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(s->fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

void sleepMs(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

}  // namespace

Socket connectWithRetry(const sockaddr_storage& addr, const Deadline& deadline) {
  int pauseMs = 5;
  int err = 0;
  int attempts = 0;
  while (true) {
    Socket s;
    ++attempts;
    err = tryConnect(&s, addr, std::min(deadline.remainingMs(), 2000));
    if (err == 0) {
      setNonBlocking(s.fd(), false);
      setNoDelay(s.fd());
      return s;
    }
    if (!retryableConnectError(err))
      COLL_THROW(collSystemError, "connect to ", addrToString(addr), ": ", sysErrorText(err));
    if (deadline.expired()) break;
    sleepMs(std::min(pauseMs, std::max(1, deadline.remainingMs())));
    pauseMs = std::min(pauseMs * 2, 200);
    if (deadline.expired()) break;
  }
  COLL_THROW(collTimeout, "connect to ", addrToString(addr), " timed out after ", attempts,
             " attempts (last error: ", sysErrorText(err), "); is the root up and reachable?");
}

void setNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  COLL_SYSCHECK(flags, "fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  COLL_SYSCHECK(fcntl(fd, F_SETFL, flags), "fcntl(F_SETFL, O_NONBLOCK)");
}

void setNoDelay(int fd) {
  int one = 1;
  COLL_SYSCHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), "setsockopt(TCP_NODELAY)");
}

void setBufferSizes(int fd, int bytes) {
  if (bytes <= 0) return;
  COLL_SYSCHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)), "setsockopt(SO_SNDBUF)");
  COLL_SYSCHECK(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)), "setsockopt(SO_RCVBUF)");
}

// ---- blocking transfers ----

std::string peerName(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "a disconnected peer";
  return addrToString(a);
}

namespace {

// Waits until fd is ready for `events` or the deadline passes.
void waitReady(int fd, short events, const Deadline& deadline, const char* what, size_t done, size_t n) {
  while (true) {
    if (deadline.expired())
      COLL_THROW(collTimeout, what, " ", peerName(fd), " timed out after ", done, " of ", n, " bytes");
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, std::min(deadline.remainingMs(), 1000));
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR) COLL_SYSCHECK(rc, strCat("poll on ", peerName(fd)));
  }
}

}  // namespace

void sendAll(int fd, const void* buf, size_t n, const Deadline& deadline) {
  const char* p = static_cast<const char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) { done += static_cast<size_t>(k); continue; }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) { waitReady(fd, POLLOUT, deadline, "send to", done, n); continue; }
    if (err == EPIPE || err == ECONNRESET)
      COLL_THROW(collRemoteError, "send to ", peerName(fd), ": peer closed the connection");
    COLL_THROW(collSystemError, "send to ", peerName(fd), ": ", sysErrorText(err));
  }
}

void recvAll(int fd, void* buf, size_t n, const Deadline& deadline) {
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (k > 0) { done += static_cast<size_t>(k); continue; }
    if (k == 0)
      COLL_THROW(collRemoteError, "recv from ", peerName(fd), ": peer closed the connection after ",
                 done, " of ", n, " bytes");
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) { waitReady(fd, POLLIN, deadline, "recv from", done, n); continue; }
    if (err == ECONNRESET)
      COLL_THROW(collRemoteError, "recv from ", peerName(fd), ": connection reset by peer");
    COLL_THROW(collSystemError, "recv from ", peerName(fd), ": ", sysErrorText(err));
  }
}

}  // namespace coll
