// The interface speed the cost model gets for virtual links: the tbf rate parsed from
// rtnetlink, and end to end on a veth shaped with tc inside a private network namespace.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "topology/netdev.hpp"

namespace coll {
namespace {

// One RTM_NEWQDISC message: kind, and inside TCA_OPTIONS the tbf parameters (and a
// 64-bit rate when rate64 is not 0).
std::vector<char> qdiscMessage(int ifindex, const char* kind, uint32_t rate, uint64_t rate64 = 0) {
  std::vector<char> m(4096, 0);
  auto* n = reinterpret_cast<nlmsghdr*>(m.data());
  n->nlmsg_type = RTM_NEWQDISC;
  auto* t = static_cast<tcmsg*>(NLMSG_DATA(n));
  t->tcm_ifindex = ifindex;
  size_t len = NLMSG_LENGTH(sizeof(tcmsg));
  auto add = [&](char* at, unsigned short type, const void* data, size_t bytes) {
    auto* a = reinterpret_cast<rtattr*>(at);
    a->rta_type = type;
    a->rta_len = static_cast<unsigned short>(RTA_LENGTH(bytes));
    if (data) memcpy(RTA_DATA(a), data, bytes);
    return a;
  };
  add(m.data() + NLMSG_ALIGN(len), TCA_KIND, kind, strlen(kind) + 1);
  len = NLMSG_ALIGN(len) + RTA_ALIGN(RTA_LENGTH(strlen(kind) + 1));
  rtattr* opts = add(m.data() + len, TCA_OPTIONS, nullptr, 0);
  size_t inner = RTA_LENGTH(0);
  tc_tbf_qopt q{};
  q.rate.rate = rate;
  add(reinterpret_cast<char*>(opts) + inner, TCA_TBF_PARMS, &q, sizeof q);
  inner += RTA_ALIGN(RTA_LENGTH(sizeof q));
  if (rate64) {
    add(reinterpret_cast<char*>(opts) + inner, TCA_TBF_RATE64, &rate64, sizeof rate64);
    inner += RTA_ALIGN(RTA_LENGTH(sizeof rate64));
  }
  opts->rta_len = static_cast<unsigned short>(inner);
  len += inner;
  n->nlmsg_len = static_cast<uint32_t>(len);
  m.resize(len);
  return m;
}

TEST(NetDev, TbfRateFromNetlinkMessage) {
  auto m = qdiscMessage(7, "tbf", 125000000);
  EXPECT_EQ(tbfRateOfMessage(m.data(), m.size(), 7), 125000000u);
  EXPECT_EQ(tbfRateOfMessage(m.data(), m.size(), 8), 0u) << "another interface";
  auto big = qdiscMessage(3, "tbf", ~0u, uint64_t{50} * 1000 * 1000 * 1000);
  EXPECT_EQ(tbfRateOfMessage(big.data(), big.size(), 3), uint64_t{50} * 1000 * 1000 * 1000);
  auto other = qdiscMessage(7, "fq_codel", 125000000);
  EXPECT_EQ(tbfRateOfMessage(other.data(), other.size(), 7), 0u) << "not a shaper";
  EXPECT_EQ(tbfRateOfMessage(m.data(), sizeof(nlmsghdr) - 1, 7), 0u) << "truncated";
  EXPECT_EQ(tbfRateOfMessage(m.data(), m.size() - 8, 7), 0u) << "length beyond the buffer";
}

TEST(NetDev, LoopbackAddressAndUnknownInterfaces) {
  sockaddr_storage a{};
  auto* in = reinterpret_cast<sockaddr_in*>(&a);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(interfaceOfAddress(a), "lo");
  in->sin_addr.s_addr = inet_addr("192.0.2.77");  // TEST-NET-1: on no interface
  EXPECT_EQ(interfaceOfAddress(a), "");
  EXPECT_EQ(describeLocalNet(a).speedMbps, 0u);
  EXPECT_EQ(linkSpeedMbps("no-such-if0"), 0u);
  EXPECT_EQ(linkSpeedMbps("../../etc"), 0u);
  EXPECT_EQ(shapedRateMbps("no-such-if0"), 0u);
  EXPECT_EQ(shapedRateMbps(""), 0u);
}

// In a child with a network namespace of its own: a veth pair, one end shaped to 1 Gbit/s
// with tbf. Exit 0 = as expected, 77 = cannot set up here, other = the failed check.
int shapedVethChild() {
  if (unshare(CLONE_NEWNET) != 0) return 77;
  if (system("ip link add nd0 type veth peer name nd1 >/dev/null 2>&1 && "
             "ip addr add 10.77.0.1/24 dev nd0 && ip link set nd0 up && ip link set nd1 up") != 0)
    return 77;
  if (system("tc qdisc add dev nd0 root tbf rate 1gbit burst 128kb latency 20ms >/dev/null 2>&1") != 0)
    return 77;
  if (shapedRateMbps("nd0") != 1000) return 10;
  if (shapedRateMbps("nd1") != 0) return 11;
  sockaddr_storage a{};
  auto* in = reinterpret_cast<sockaddr_in*>(&a);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = inet_addr("10.77.0.1");
  LocalNet net = describeLocalNet(a);
  if (net.name != "nd0") return 12;
  if (net.speedMbps != 1000 || net.shapedMbps != 1000) return 13;
  if (net.linkMbps && net.linkMbps < 1000) return 14;
  // A rate above the link's (tbf at 40 Gbit/s on a 10 Gbit/s veth) leaves the link speed.
  if (system("tc qdisc replace dev nd0 root tbf rate 40gbit burst 1mb latency 20ms >/dev/null 2>&1") != 0)
    return 77;
  net = describeLocalNet(a);
  if (net.shapedMbps != 40000) return 15;
  if (net.speedMbps != (net.linkMbps ? net.linkMbps : 40000)) return 16;
  return 0;
}

TEST(NetDev, ShapedVethInPrivateNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  if (system("command -v ip >/dev/null && command -v tc >/dev/null") != 0)
    GTEST_SKIP() << "ip or tc (iproute2) is not installed";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(shapedVethChild());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot make a namespace with a shaped veth here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed check number (see shapedVethChild)";
}

}  // namespace
}  // namespace coll
