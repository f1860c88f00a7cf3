// The UCX plugin between two processes (the peer is net_ucx_peer, started by fork +
// exec; blobs travel over pipes), so UCX's inter-process transports run: messages both
// ways, then a peer killed with SIGKILL must turn the parent's pending requests into
// errors within a bounded time instead of a hang.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net_ucx_fixture.hpp"

namespace net_ucx_test {
namespace {

struct Peer {
  pid_t pid = -1;
  int rfd = -1, wfd = -1;
};

Peer spawn(const std::vector<std::string>& args) {
  int toPeer[2], fromPeer[2];
  Peer p;
  if (pipe(toPeer) || pipe(fromPeer)) return p;
  p.pid = fork();
  if (p.pid == 0) {
    close(toPeer[1]);
    close(fromPeer[0]);
    std::vector<std::string> all = {NET_UCX_PEER, NET_UCX_SO, std::to_string(toPeer[0]), std::to_string(fromPeer[1])};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(NET_UCX_PEER, argv.data());
    _exit(127);
  }
  close(toPeer[0]);
  close(fromPeer[1]);
  p.rfd = fromPeer[0];
  p.wfd = toPeer[1];
  return p;
}

// Reads exactly n bytes within the timeout; false when the peer went away or was slow.
bool readTimed(int fd, void* buf, size_t n, int timeoutMs) {
  auto* c = static_cast<char*>(buf);
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeoutMs) <= 0) return false;
    ssize_t got = read(fd, c, n);
    if (got <= 0) return false;
    c += got;
    n -= size_t(got);
  }
  return true;
}

// Exit status of the peer, or -1 when it did not exit within the timeout (then killed).
int reap(pid_t pid, double timeoutSec) {
  for (double end = now() + timeoutSec; now() < end; usleep(10000)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

class NetUcxProcesses : public NetUcx {
 public:
  void TearDown() override {
    if (peer_.pid > 0) reap(peer_.pid, 0);
    if (peer_.rfd >= 0) close(peer_.rfd);
    if (peer_.wfd >= 0) close(peer_.wfd);
    NetUcx::TearDown();
  }

  // Connects both ways with the peer: `toPeer` carries our messages, `fromPeer` its.
  void connectPeer(Pair* toPeer, Pair* fromPeer) {
    char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES], peerHandle[COLL_NET_HANDLE_BYTES];
    void* listen = nullptr;
    ASSERT_EQ(api_->listen(a_, 0, handle, &listen), 0) << err();
    ASSERT_EQ(write(peer_.wfd, handle, sizeof handle), ssize_t(sizeof handle));
    ASSERT_TRUE(readTimed(peer_.rfd, reply, sizeof reply, 30000)) << "no reply from the peer";
    ASSERT_TRUE(readTimed(peer_.rfd, peerHandle, sizeof peerHandle, 30000)) << "no handle from the peer";
    char ourReply[COLL_NET_HANDLE_BYTES];
    ASSERT_EQ(api_->connect(a_, 0, peerHandle, ourReply, &toPeer->send), 0) << err();
    ASSERT_EQ(write(peer_.wfd, ourReply, sizeof ourReply), ssize_t(sizeof ourReply));
    ASSERT_EQ(api_->accept(listen, reply, &fromPeer->recv), 0) << err();
  }

  Peer peer_;
};

TEST_F(NetUcxProcesses, MessagesBothWays) {
  const std::vector<size_t> sizes = {0, 1, 1024, 1025, 8192, 20554, 262145, 1 << 20, 16 << 20};
  peer_ = spawn({"echo", std::to_string(sizes.size())});
  ASSERT_GT(peer_.pid, 0);
  Pair out, in;
  ASSERT_NO_FATAL_FAILURE(connectPeer(&out, &in));
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(std::to_string(sizes[i]) + " bytes");
    uint64_t tag = (uint64_t(500 + i) << 32) | sizes[i];
    std::vector<unsigned char> msg(sizes[i]), echo(sizes[i] + 64, 0xEE);
    fillPattern(msg.data(), msg.size(), 500 + i);
    Op s, r;
    ASSERT_EQ(api_->irecv(in.recv, echo.data(), sizes[i], &r.req), 0) << err();
    ASSERT_EQ(api_->isend(out.send, msg.data(), msg.size(), tag, &s.req), 0) << err();
    ASSERT_NO_FATAL_FAILURE(driveAll({&s, &r}, 60));
    EXPECT_EQ(r.size, sizes[i]);
    EXPECT_EQ(r.tag, tag + 1);
    EXPECT_EQ(checkPattern(echo.data(), sizes[i], 500 + i), sizes[i]);
    EXPECT_EQ(echo[sizes[i]], 0xEE);
  }
  // Close and finalize while the peer does the same, so both sides' closes can finish.
  closePair(&out);
  closePair(&in);
  api_->finalize(a_);
  a_ = nullptr;
  EXPECT_EQ(reap(peer_.pid, 30), 0) << "the peer failed (see its stderr)";
  peer_.pid = -1;
}

TEST_F(NetUcxProcesses, KilledPeerFailsPendingRequests) {
  peer_ = spawn({"hold"});
  ASSERT_GT(peer_.pid, 0);
  Pair out, in;
  ASSERT_NO_FATAL_FAILURE(connectPeer(&out, &in));
  char hello[64] = {};
  Op first;
  ASSERT_EQ(api_->irecv(in.recv, hello, sizeof hello, &first.req), 0) << err();
  ASSERT_NO_FATAL_FAILURE(driveAll({&first}, 30));
  EXPECT_STREQ(hello, "still here");
  char ready = 0;
  ASSERT_TRUE(readTimed(peer_.rfd, &ready, 1, 30000));

  // Pending when the peer dies: a receive (only the endpoint back to the peer can tell
  // it died: a tag receive belongs to no endpoint).
  std::vector<unsigned char> buf(4096);
  Op r;
  ASSERT_EQ(api_->irecv(in.recv, buf.data(), buf.size(), &r.req), 0) << err();
  ASSERT_NO_FATAL_FAILURE(step(&r));
  ASSERT_FALSE(r.done);
  kill(peer_.pid, SIGKILL);
  EXPECT_EQ(reap(peer_.pid, 10), 128 + SIGKILL);
  peer_.pid = -1;
  double t0 = now();
  std::string recvErr;
  EXPECT_EQ(waitRequest(api_, a_, r.req, nullptr, nullptr, 30, &recvErr), 1) << recvErr;
  double took = now() - t0;
  EXPECT_LT(took, 30.0);
  EXPECT_NE(recvErr.find("ucx: connection to peer failed: "), std::string::npos) << recvErr;
  fprintf(stderr, "dead peer noticed by a receive after %.3f s: %s\n", took, recvErr.c_str());

  // A rendezvous send to the dead peer fails too, at the post or in test().
  std::vector<unsigned char> big(8 << 20, 1);
  void* req = nullptr;
  std::string sendErr;
  t0 = now();
  if (api_->isend(out.send, big.data(), big.size(), 9, &req) != 0) {
    sendErr = api_->lastError(a_);
  } else {
    EXPECT_EQ(waitRequest(api_, a_, req, nullptr, nullptr, 30, &sendErr), 1) << sendErr;
  }
  EXPECT_LT(now() - t0, 30.0);
  EXPECT_NE(sendErr.find("ucx: "), std::string::npos) << sendErr;
  fprintf(stderr, "send to the dead peer: %s\n", sendErr.c_str());
  // Further use fails at once, with the same reason; close is bounded.
  EXPECT_NE(api_->isend(out.send, big.data(), 10, 1, &req), 0);
  EXPECT_NE(std::string(api_->lastError(a_)).find("connection to peer failed"), std::string::npos);
  t0 = now();
  closePair(&out);
  closePair(&in);
  EXPECT_LT(now() - t0, 12.0);
}

}  // namespace
}  // namespace net_ucx_test
