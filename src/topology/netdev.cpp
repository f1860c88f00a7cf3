#include "topology/netdev.hpp"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/log.hpp"

namespace coll {
namespace {

bool sameHostAddress(const sockaddr* a, const sockaddr_storage& b) {
  if (!a || a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                  &reinterpret_cast<const sockaddr_in6*>(&b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

// The payload of attribute `type` among the attributes in [p, p + len), or null.
const rtattr* findAttr(const void* p, size_t len, unsigned short type) {
  int left = static_cast<int>(len);
  for (auto* a = static_cast<const rtattr*>(p); RTA_OK(a, left); a = RTA_NEXT(a, left))
    if (a->rta_type == type) return a;
  return nullptr;
}

class NetlinkSocket {
 public:
  NetlinkSocket() : fd_(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) {
    if (fd_ < 0) return;
    timeval tv{1, 0};  // a kernel that never answers costs a second, not a hang
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~NetlinkSocket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string interfaceOfAddress(const sockaddr_storage& addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i && name.empty(); i = i->ifa_next)
    if (sameHostAddress(i->ifa_addr, addr)) name = i->ifa_name;
  freeifaddrs(list);
  return name;
}

uint64_t linkSpeedMbps(const std::string& ifname) {
  if (ifname.empty() || ifname.find('/') != std::string::npos) return 0;
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long v = 0;
  if (!(f >> v) || v <= 0) return 0;
  return static_cast<uint64_t>(v);
}

uint64_t tbfRateOfMessage(const void* msg, size_t len, int ifindex) {
  auto* n = static_cast<const nlmsghdr*>(msg);
  if (len < sizeof(nlmsghdr) || n->nlmsg_len > len || n->nlmsg_type != RTM_NEWQDISC ||
      n->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg)))
    return 0;
  auto* t = static_cast<const tcmsg*>(NLMSG_DATA(n));
  if (t->tcm_ifindex != ifindex) return 0;
  size_t attrLen = n->nlmsg_len - NLMSG_LENGTH(sizeof(tcmsg));
  const void* attrs = reinterpret_cast<const char*>(t) + NLMSG_ALIGN(sizeof(tcmsg));
  const rtattr* kind = findAttr(attrs, attrLen, TCA_KIND);
  if (!kind || strncmp(static_cast<const char*>(RTA_DATA(kind)), "tbf", RTA_PAYLOAD(kind)) != 0)
    return 0;
  const rtattr* opts = findAttr(attrs, attrLen, TCA_OPTIONS);
  if (!opts) return 0;
  if (const rtattr* r64 = findAttr(RTA_DATA(opts), RTA_PAYLOAD(opts), TCA_TBF_RATE64);
      r64 && RTA_PAYLOAD(r64) >= sizeof(uint64_t)) {
    uint64_t v;
    memcpy(&v, RTA_DATA(r64), sizeof v);
    if (v) return v;
  }
  const rtattr* parms = findAttr(RTA_DATA(opts), RTA_PAYLOAD(opts), TCA_TBF_PARMS);
  if (!parms || RTA_PAYLOAD(parms) < sizeof(tc_tbf_qopt)) return 0;
  tc_tbf_qopt q;
  memcpy(&q, RTA_DATA(parms), sizeof q);
  return q.rate.rate;
}

uint64_t shapedRateMbps(const std::string& ifname) {
  int ifindex = ifname.empty() ? 0 : static_cast<int>(if_nametoindex(ifname.c_str()));
  if (ifindex <= 0) return 0;
  NetlinkSocket nl;
  if (nl.fd() < 0) return 0;
  struct {
    nlmsghdr n;
    tcmsg t;
  } req{};
  req.n.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.n.nlmsg_type = RTM_GETQDISC;
  req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.n.nlmsg_seq = 1;
  req.t.tcm_family = AF_UNSPEC;
  req.t.tcm_ifindex = ifindex;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl.fd(), &req, req.n.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return 0;
  uint64_t lowest = 0;  // bytes/s
  alignas(nlmsghdr) char buf[32768];
  // A dump lists every qdisc of every interface; a few hundred replies at most on any
  // real host, so the loop is bounded by the end marker, an error or the receive timeout.
  for (int batch = 0; batch < 10000; ++batch) {
    ssize_t got = recv(nl.fd(), buf, sizeof buf, 0);
    if (got <= 0) break;
    int left = static_cast<int>(got);
    for (auto* n = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(n, left); n = NLMSG_NEXT(n, left)) {
      if (n->nlmsg_type == NLMSG_DONE || n->nlmsg_type == NLMSG_ERROR)
        return lowest ? std::max<uint64_t>(1, lowest * 8 / 1000000) : 0;
      uint64_t rate = tbfRateOfMessage(n, n->nlmsg_len, ifindex);
      if (rate && (!lowest || rate < lowest)) lowest = rate;
    }
  }
  return lowest ? std::max<uint64_t>(1, lowest * 8 / 1000000) : 0;
}

LocalNet describeLocalNet(const sockaddr_storage& addr) {
  LocalNet net;
  net.name = interfaceOfAddress(addr);
  if (net.name.empty()) return net;
  net.linkMbps = linkSpeedMbps(net.name);
  net.shapedMbps = shapedRateMbps(net.name);
  net.speedMbps = net.linkMbps;
  if (net.shapedMbps && (!net.speedMbps || net.shapedMbps < net.speedMbps)) net.speedMbps = net.shapedMbps;
  COLL_TRACE("topology: traffic leaves through %s (link %llu Mb/s, shaped %llu Mb/s)", net.name.c_str(),
             static_cast<unsigned long long>(net.linkMbps), static_cast<unsigned long long>(net.shapedMbps));
  return net;
}

}  // namespace coll
