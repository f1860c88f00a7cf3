// coll-netdelay: a user-space Ethernet switch that holds every frame for a fixed time
// before forwarding it, so that simulated hosts (network namespaces, scripts/netns.sh)
// see a link with latency on kernels built without the netem qdisc.
//
//   coll-netdelay --delay TIME [--max-seconds N] [--pidfile FILE] IFACE IFACE [IFACE...]
//
// Each IFACE is the root-namespace end of a host's veth pair (not enslaved to a bridge).
// A frame that arrives on one port leaves, TIME later, on the port that owns its
// destination MAC address (learned from source addresses), or on every other port when
// the destination is a broadcast, multicast or unknown address. Frames keep their offload
// metadata (PACKET_VNET_HDR), so TCP segmentation offload still works through the switch,
// and every frame is delayed by the same TIME, in arrival order, as netem's "delay TIME"
// on the sending host's egress would. Shaping (tbf) stays on the hosts' interfaces.
//
// It exits by itself when fewer than two ports remain (the namespaces were deleted), after
// --max-seconds (default 7200), or on SIGTERM/SIGINT.
#include <arpa/inet.h>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <map>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace {

// The header PACKET_VNET_HDR puts before each frame (struct virtio_net_hdr: flags,
// gso_type, hdr_len, gso_size, csum_start, csum_offset); the switch passes it through.
constexpr size_t kHdr = 10;
constexpr size_t kMaxFrame = 256 * 1024;          // a GSO super-frame fits
constexpr size_t kMaxQueuedBytes = 256u << 20;    // beyond this, frames are dropped

volatile sig_atomic_t gStop = 0;
void onSignal(int) { gStop = 1; }

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "coll-netdelay: %s\n", msg.c_str());
  std::exit(1);
}

uint64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// "1ms", "500us", "0.5ms", "2s", "250000ns"; a bare number is milliseconds (as tc reads it).
bool parseDuration(const char* s, uint64_t* ns) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno || end == s || !(v >= 0) || v > 3600) return false;
  const std::string unit(end);
  double scale;
  if (unit.empty() || unit == "ms") scale = 1e6;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ns") scale = 1;
  else if (unit == "s") scale = 1e9;
  else return false;
  *ns = uint64_t(v * scale);
  return true;
}

struct Port {
  std::string name;
  int fd = -1;
  int ifindex = 0;
};

struct Frame {
  uint64_t dueNs;
  int inPort;
  std::vector<unsigned char> bytes;  // virtio_net_hdr, then the Ethernet frame
};

using Mac = std::array<unsigned char, 6>;

int openPort(const char* name, Port* p) {
  p->name = name;
  p->ifindex = int(if_nametoindex(name));
  if (p->ifindex == 0) die(std::string("no interface '") + name + "': " + std::strerror(errno));
  p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (p->fd < 0) die(std::string("packet socket: ") + std::strerror(errno) + " (needs root)");
  int one = 1;
  if (setsockopt(p->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0)
    die(std::string("PACKET_VNET_HDR: ") + std::strerror(errno));
  setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  int buf = 16 << 20;
  setsockopt(p->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = p->ifindex;
  if (bind(p->fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0)
    die(std::string("bind to ") + name + ": " + std::strerror(errno));
  return p->fd;
}

class Switch {
 public:
  Switch(std::vector<Port> ports, uint64_t delayNs) : ports_(std::move(ports)), delayNs_(delayNs) {}

  int run(uint64_t deadlineNs) {
    std::vector<pollfd> pfds;
    while (!gStop) {
      const uint64_t now = nowNs();
      if (now >= deadlineNs) {
        std::fprintf(stderr, "coll-netdelay: --max-seconds reached, exiting\n");
        return 0;
      }
      forwardDue(now);
      if (live() < 2) {
        std::fprintf(stderr, "coll-netdelay: fewer than two ports left, exiting\n");
        return 0;
      }
      pfds.clear();
      for (const Port& p : ports_) pfds.push_back({p.fd, POLLIN, 0});
      uint64_t waitNs = deadlineNs - now;
      if (!queue_.empty()) waitNs = queue_.front().dueNs > now ? queue_.front().dueNs - now : 0;
      if (waitNs > 200000000ull) waitNs = 200000000ull;
      timespec ts{time_t(waitNs / 1000000000ull), long(waitNs % 1000000000ull)};
      const int n = ppoll(pfds.data(), pfds.size(), &ts, nullptr);
      if (n < 0) {
        if (errno == EINTR) continue;
        die(std::string("ppoll: ") + std::strerror(errno));
      }
      for (size_t i = 0; i < pfds.size(); ++i) {
        if (pfds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) drain(int(i), true);
        else if (pfds[i].revents & POLLIN) drain(int(i), false);
      }
    }
    return 0;
  }

 private:
  int live() const {
    int n = 0;
    for (const Port& p : ports_) n += p.fd >= 0;
    return n;
  }

  void closePort(int i, const char* why) {
    std::fprintf(stderr, "coll-netdelay: port %s gone (%s)\n", ports_[size_t(i)].name.c_str(), why);
    close(ports_[size_t(i)].fd);
    ports_[size_t(i)].fd = -1;
  }

  // Reads every frame waiting on port i into the delay queue.
  void drain(int i, bool errored) {
    Port& p = ports_[size_t(i)];
    if (p.fd < 0) return;
    for (int k = 0; k < 256; ++k) {
      sockaddr_ll from{};
      socklen_t fl = sizeof from;
      const ssize_t n = recvfrom(p.fd, rx_.data(), rx_.size(), MSG_TRUNC,
                                 reinterpret_cast<sockaddr*>(&from), &fl);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
          if (errored && if_nametoindex(p.name.c_str()) == 0) closePort(i, "interface deleted");
          return;
        }
        closePort(i, std::strerror(errno));
        return;
      }
      if (size_t(n) > rx_.size() || size_t(n) < kHdr + ETH_HLEN) { ++dropped_; continue; }
      if (from.sll_pkttype == PACKET_OUTGOING) continue;
      if (queuedBytes_ + size_t(n) > kMaxQueuedBytes) { ++dropped_; continue; }
      Mac src;
      std::memcpy(src.data(), rx_.data() + kHdr + 6, 6);
      if (!(src[0] & 1)) owner_[src] = i;
      queue_.push_back({nowNs() + delayNs_, i, std::vector<unsigned char>(rx_.data(), rx_.data() + n)});
      queuedBytes_ += size_t(n);
    }
  }

  void sendOn(int port, const Frame& f) {
    Port& p = ports_[size_t(port)];
    if (p.fd < 0) return;
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = p.ifindex;
    to.sll_halen = 6;
    std::memcpy(to.sll_addr, f.bytes.data() + kHdr, 6);
    if (sendto(p.fd, f.bytes.data(), f.bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
      if (errno == ENXIO || errno == ENODEV || errno == ENETDOWN) closePort(port, std::strerror(errno));
      else ++dropped_;  // a full queue on the way out drops the frame, as a switch would
    }
  }

  void forwardDue(uint64_t now) {
    while (!queue_.empty() && queue_.front().dueNs <= now) {
      const Frame& f = queue_.front();
      Mac dst;
      std::memcpy(dst.data(), f.bytes.data() + kHdr, 6);
      auto it = (dst[0] & 1) ? owner_.end() : owner_.find(dst);
      if (it != owner_.end()) {
        if (it->second != f.inPort) sendOn(it->second, f);
      } else {
        for (int j = 0; j < int(ports_.size()); ++j)
          if (j != f.inPort) sendOn(j, f);
      }
      queuedBytes_ -= f.bytes.size();
      queue_.pop_front();
    }
  }

  std::vector<Port> ports_;
  const uint64_t delayNs_;
  std::deque<Frame> queue_;  // due times only grow: one delay for every frame
  size_t queuedBytes_ = 0;
  std::map<Mac, int> owner_;
  std::vector<unsigned char> rx_ = std::vector<unsigned char>(kMaxFrame + kHdr);
  uint64_t dropped_ = 0;
};

void usage() {
  std::fprintf(stderr,
               "usage: coll-netdelay --delay TIME [--max-seconds N] [--pidfile FILE] IFACE IFACE...\n"
               "  TIME: e.g. 1ms, 500us, 0.5ms (a bare number is ms)\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t delayNs = 0;
  bool haveDelay = false;
  double maxSeconds = 7200;
  const char* pidfile = nullptr;
  std::vector<const char*> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--delay" && i + 1 < argc) {
      if (!parseDuration(argv[++i], &delayNs)) die(std::string("bad --delay '") + argv[i] + "'");
      haveDelay = true;
    } else if (a == "--max-seconds" && i + 1 < argc) {
      char* end = nullptr;
      maxSeconds = std::strtod(argv[++i], &end);
      if (*end || !(maxSeconds > 0)) die(std::string("bad --max-seconds '") + argv[i] + "'");
    } else if (a == "--pidfile" && i + 1 < argc) {
      pidfile = argv[++i];
    } else if (a == "-h" || a == "--help" || a.rfind("-", 0) == 0) {
      usage();
    } else {
      names.push_back(argv[i]);
    }
  }
  if (!haveDelay || names.size() < 2) usage();
  std::vector<Port> ports(names.size());
  for (size_t i = 0; i < names.size(); ++i) openPort(names[i], &ports[i]);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake within microseconds of a frame's due time
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  std::signal(SIGHUP, SIG_IGN);
  if (pidfile) {
    FILE* f = std::fopen(pidfile, "w");
    if (!f) die(std::string("cannot write ") + pidfile + ": " + std::strerror(errno));
    std::fprintf(f, "%d\n", int(getpid()));
    std::fclose(f);
  }
  Switch sw(std::move(ports), delayNs);
  const int rc = sw.run(nowNs() + uint64_t(maxSeconds * 1e9));
  if (pidfile) unlink(pidfile);
  return rc;
}
