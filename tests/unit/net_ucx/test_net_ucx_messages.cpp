// The UCX plugin in one process: message sizes across the plugin's and UCX's thresholds
// up to 64 MiB, tags, order with more messages than the plugin takes at once,
// truncation, a worker connected to itself, and endpoints driven from several threads.
#include <algorithm>
#include <memory>
#include <thread>

#include "net_ucx_fixture.hpp"

namespace net_ucx_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST_F(NetUcx, SymbolVersionAndProperties) {
  EXPECT_EQ(api_->version, COLL_NET_PLUGIN_VERSION);
  EXPECT_STREQ(api_->name, "ucx");
  int ndev = 0;
  ASSERT_EQ(api_->devices(a_, &ndev), 0) << err();
  EXPECT_EQ(ndev, 1);
  collNetProperties_t props;
  ASSERT_EQ(api_->getProperties(a_, 0, &props), 0) << err();
  EXPECT_EQ(std::string(props.name), "ucx");
  EXPECT_GE(props.maxRequests, 1);
  // Once an endpoint exists, the name says which UCX transport it uses.
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  ASSERT_EQ(api_->getProperties(a_, 0, &props), 0) << err();
  EXPECT_EQ(std::string(props.name).rfind("ucx:", 0), 0u) << props.name;
  closePair(&p);
}

// Sends `sizes` from A to B at once, each with its own pattern and tag, and checks every
// byte, the reported size and the tag, with guard bytes after each receive untouched.
void exchange(NetUcx* t, const Pair& p, const std::vector<size_t>& sizes) {
  const Api* api = t->api_;
  constexpr size_t kGuard = 64;
  size_t n = sizes.size();
  std::vector<std::vector<unsigned char>> out(n), in(n);
  std::vector<Op> sends(n), recvs(n);
  std::vector<Op*> all;
  for (size_t i = 0; i < n; ++i) {
    out[i].resize(sizes[i]);
    fillPattern(out[i].data(), sizes[i], 1000 + i);
    in[i].assign(sizes[i] + kGuard, 0xA5);
    ASSERT_EQ(api->irecv(p.recv, in[i].data(), sizes[i], &recvs[i].req), 0) << api->lastError(nullptr);
    ASSERT_NE(recvs[i].req, nullptr);
    uint64_t tag = 0xC0FFEE0000000000ull ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull);
    ASSERT_EQ(api->isend(p.send, out[i].data(), sizes[i], tag, &sends[i].req), 0) << api->lastError(nullptr);
    ASSERT_NE(sends[i].req, nullptr);
    all.push_back(&sends[i]);
    all.push_back(&recvs[i]);
  }
  t->driveAll(all, 120);
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE("message " + std::to_string(i) + " of " + std::to_string(sizes[i]) + " bytes");
    EXPECT_EQ(recvs[i].size, sizes[i]);
    EXPECT_EQ(sends[i].size, sizes[i]);
    EXPECT_EQ(recvs[i].tag, 0xC0FFEE0000000000ull ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull));
    EXPECT_EQ(checkPattern(in[i].data(), sizes[i], 1000 + i), sizes[i]) << "first wrong byte";
    EXPECT_TRUE(std::all_of(in[i].end() - kGuard, in[i].end(), [](unsigned char c) { return c == 0xA5; }));
  }
}

// Around the plugin's packing limit (1 KiB), UCX's eager/zero-copy/rendezvous switches
// (8185, 8192, 20553, 262144 with tcp here) and up to 64 MiB.
const std::vector<size_t> kSizes = {0,    1,    2,    15,     16,     17,     1023,       1024,   1025,
                                    4096, 8185, 8186, 8192,   8193,   20553,  20554,      65536,  262144,
                                    262145, kMiB, kMiB + 3, 64 * kMiB};

TEST_F(NetUcx, SizesAndTagsBetweenTwoContexts) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  exchange(this, p, kSizes);
  closePair(&p);
}

TEST_F(NetUcx, WorkerConnectedToItself) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, a_, &p));
  exchange(this, p, {0, 1, 1024, 1025, 70000, 4 * kMiB});
  closePair(&p);
}

TEST_F(NetUcx, OrderKeptWithMoreMessagesThanRequests) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  collNetProperties_t props;
  ASSERT_EQ(api_->getProperties(a_, 0, &props), 0);
  const size_t n = size_t(props.maxRequests) * 3 + 7;
  const size_t kinds[] = {0, 7, 1024, 1500, 70000};
  std::vector<std::vector<unsigned char>> out(n), in(n);
  std::vector<Op> sends(n), recvs(n);
  size_t posted = 0, received = 0;
  bool sendFull = false, recvFull = false;
  std::vector<size_t> order;
  double deadline = now() + 120;
  // Keep posting sends and receives (retrying NULL requests) and collect receives as
  // they finish; the n-th receive must hold the n-th message.
  size_t nextRecv = 0;
  while (received < n) {
    ASSERT_LT(now(), deadline) << "stuck at " << received << " of " << n;
    while (posted < n) {
      size_t size = kinds[posted % 5];
      if (out[posted].empty() && size) {
        out[posted].resize(size);
        fillPattern(out[posted].data(), size, 7 * posted);
      }
      ASSERT_EQ(api_->isend(p.send, out[posted].data(), size, posted, &sends[posted].req), 0) << err();
      if (!sends[posted].req) {
        sendFull = true;
        break;
      }
      ++posted;
    }
    while (nextRecv < n) {
      in[nextRecv].assign(70000, 0);
      ASSERT_EQ(api_->irecv(p.recv, in[nextRecv].data(), 70000, &recvs[nextRecv].req), 0) << err();
      if (!recvs[nextRecv].req) {
        recvFull = true;
        break;
      }
      ++nextRecv;
    }
    for (size_t i = 0; i < posted; ++i) {
      if (sends[i].done) continue;
      int done = 0;
      ASSERT_EQ(api_->test(sends[i].req, &done, &sends[i].size, nullptr), 0) << err();
      sends[i].done = done;
    }
    for (size_t i = received; i < nextRecv; ++i) {
      if (recvs[i].done) continue;
      int done = 0;
      ASSERT_EQ(api_->test(recvs[i].req, &done, &recvs[i].size, &recvs[i].tag), 0) << err();
      recvs[i].done = done;
    }
    while (received < nextRecv && recvs[received].done) ++received;
  }
  EXPECT_TRUE(sendFull) << "isend never answered NULL with " << n << " messages";
  EXPECT_TRUE(recvFull) << "irecv never answered NULL with " << n << " receives";
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(recvs[i].tag, i) << "receive " << i << " got another message";
    ASSERT_EQ(recvs[i].size, kinds[i % 5]);
    ASSERT_EQ(checkPattern(in[i].data(), recvs[i].size, 7 * i), recvs[i].size) << "message " << i;
  }
  std::vector<Op*> rest;
  for (Op& s : sends)
    if (!s.done) rest.push_back(&s);
  driveAll(rest);
  closePair(&p);
}

TEST_F(NetUcx, TruncationReportsTrueSizeAndWritesOnlyTheReceive) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  struct Case {
    size_t sent, room;
  };
  // Packed into the head, sent as data eagerly, and by rendezvous.
  for (Case c : {Case{100, 50}, Case{1024, 0}, Case{5000, 4096}, Case{65536, 65535}, Case{kMiB, 1000},
                 Case{8 * kMiB, 4 * kMiB}}) {
    SCOPED_TRACE(std::to_string(c.sent) + " bytes into " + std::to_string(c.room));
    std::vector<unsigned char> out(c.sent), in(c.room + 4096, 0x5A);
    fillPattern(out.data(), c.sent, c.sent);
    Op s, r;
    ASSERT_EQ(api_->irecv(p.recv, in.data(), c.room, &r.req), 0) << err();
    ASSERT_EQ(api_->isend(p.send, out.data(), c.sent, 42, &s.req), 0) << err();
    driveAll({&s, &r});
    EXPECT_EQ(r.size, c.sent);
    EXPECT_EQ(r.tag, 42u);
    EXPECT_TRUE(std::all_of(in.begin() + c.room, in.end(), [](unsigned char b) { return b == 0x5A; }))
        << "bytes written past the receive";
    // The connection still lines up: the next message arrives whole.
    std::vector<unsigned char> next(3000), back(3000);
    fillPattern(next.data(), next.size(), 99);
    Op s2, r2;
    ASSERT_EQ(api_->irecv(p.recv, back.data(), back.size(), &r2.req), 0) << err();
    ASSERT_EQ(api_->isend(p.send, next.data(), next.size(), 43, &s2.req), 0) << err();
    driveAll({&s2, &r2});
    EXPECT_EQ(r2.size, 3000u);
    EXPECT_EQ(r2.tag, 43u);
    EXPECT_EQ(back, next);
  }
  closePair(&p);
}

// Connections between the same two workers never take each other's messages, and
// closing one leaves the others working (a receive pending on another stays pending).
TEST_F(NetUcx, ConnectionsStayApart) {
  Pair p1, p2, back;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p1));
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p2));
  ASSERT_NO_FATAL_FAILURE(connectPair(b_, a_, &back));
  char in1[16] = {}, in2[16] = {}, out1[16] = "first", out2[16] = "second";
  Op r1, r2, s1, s2;
  ASSERT_EQ(api_->irecv(p1.recv, in1, sizeof in1, &r1.req), 0) << err();
  ASSERT_EQ(api_->irecv(p2.recv, in2, sizeof in2, &r2.req), 0) << err();
  ASSERT_EQ(api_->isend(p2.send, out2, sizeof out2, 2, &s2.req), 0) << err();
  ASSERT_EQ(api_->isend(p1.send, out1, sizeof out1, 1, &s1.req), 0) << err();
  driveAll({&s1, &s2, &r1, &r2});
  EXPECT_STREQ(in1, "first");
  EXPECT_STREQ(in2, "second");
  EXPECT_EQ(r1.tag, 1u);
  EXPECT_EQ(r2.tag, 2u);

  Op pending;
  char late[16] = {};
  ASSERT_EQ(api_->irecv(p2.recv, late, sizeof late, &pending.req), 0) << err();
  closePair(&p1);
  for (double end = now() + 0.3; now() < end;) ASSERT_NO_FATAL_FAILURE(step(&pending));
  EXPECT_FALSE(pending.done);
  Op s3, r3, s4;
  char in3[16] = {};
  ASSERT_EQ(api_->irecv(back.recv, in3, sizeof in3, &r3.req), 0) << err();
  ASSERT_EQ(api_->isend(back.send, out1, sizeof out1, 3, &s3.req), 0) << err();
  ASSERT_EQ(api_->isend(p2.send, out2, sizeof out2, 4, &s4.req), 0) << err();
  driveAll({&s3, &r3, &s4, &pending});
  EXPECT_STREQ(in3, "first");
  EXPECT_STREQ(late, "second");
  EXPECT_EQ(pending.tag, 4u);
  closePair(&p2);
  closePair(&back);
}

// Different endpoints used from different threads at once (both contexts shared).
TEST_F(NetUcx, EndpointsFromSeveralThreads) {
  constexpr int kThreads = 3, kMessages = 150;
  std::vector<Pair> pairs(kThreads);
  for (int t = 0; t < kThreads; ++t)
    ASSERT_NO_FATAL_FAILURE(connectPair(t % 2 ? b_ : a_, t % 2 ? a_ : b_, &pairs[t]));
  std::vector<std::string> failures(kThreads);
  auto run = [&](int t) {
    uint64_t seed = 77 + t;
    std::vector<unsigned char> out, in;
    for (int m = 0; m < kMessages; ++m) {
      size_t size = splitmix(seed) % 3 == 0 ? splitmix(seed) % 200000 : splitmix(seed) % 2000;
      out.resize(size);
      fillPattern(out.data(), size, seed + m);
      in.assign(size, 0);
      void *s = nullptr, *r = nullptr;
      if (api_->irecv(pairs[t].recv, in.data(), size, &r) || api_->isend(pairs[t].send, out.data(), size, m, &s) ||
          !r || !s) {
        failures[t] = "post failed: " + std::string(api_->lastError(a_));
        return;
      }
      // Both sides are tested in turn: each request progresses only its own worker.
      size_t got = 0;
      uint64_t tag = 0;
      int sDone = 0, rDone = 0;
      for (double deadline = now() + 60; !(sDone && rDone);) {
        if ((!sDone && api_->test(s, &sDone, nullptr, nullptr)) || (!rDone && api_->test(r, &rDone, &got, &tag))) {
          failures[t] = "message " + std::to_string(m) + ": " + api_->lastError(a_);
          return;
        }
        if (now() > deadline) {
          failures[t] = "message " + std::to_string(m) + " timed out";
          return;
        }
      }
      if (got != size || tag != uint64_t(m) || in != out) {
        failures[t] = "message " + std::to_string(m) + " arrived wrong";
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(run, t);
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  for (auto& p : pairs) closePair(&p);
}

}  // namespace
}  // namespace net_ucx_test
