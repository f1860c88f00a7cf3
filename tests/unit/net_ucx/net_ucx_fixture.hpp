// The in-process fixture for the UCX plugin's tests: two plugin contexts (two UCP
// workers in one process, connected over whatever UCX picks between them) and helpers to
// connect a pair and drive requests on both sides until they finish.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "net_ucx_util.hpp"

namespace net_ucx_test {

struct Op {
  void* req = nullptr;
  bool done = false;
  size_t size = 0;
  uint64_t tag = 0;
};

struct Pair {
  void* send = nullptr;
  void* recv = nullptr;
};

class NetUcx : public ::testing::Test {
 public:
  static const Api* api() {
    static std::string why;
    static const Api* a = loadPlugin(NET_UCX_SO, &why);
    if (!a) ADD_FAILURE() << "cannot load " << NET_UCX_SO << ": " << why;
    return a;
  }

  void SetUp() override {
    api_ = api();
    ASSERT_NE(api_, nullptr);
    collNetInit_t in{logToStderr};
    ASSERT_EQ(api_->init(&in, &a_), 0) << api_->lastError(nullptr);
    ASSERT_EQ(api_->init(&in, &b_), 0) << api_->lastError(nullptr);
  }

  // Both at once, as two processes would: each one's endpoint closes finish only while
  // the other's worker progresses.
  void TearDown() override {
    std::thread other([this] {
      if (api_ && b_) api_->finalize(b_);
    });
    if (api_ && a_) api_->finalize(a_);
    other.join();
    a_ = b_ = nullptr;
  }

  std::string err() const { return api_->lastError(a_); }

  // A connection from context `from` to context `to`.
  void connectPair(void* from, void* to, Pair* p) {
    char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
    void* listen = nullptr;
    ASSERT_EQ(api_->listen(to, 0, handle, &listen), 0) << err();
    ASSERT_NE(listen, nullptr);
    ASSERT_EQ(api_->connect(from, 0, handle, reply, &p->send), 0) << err();
    ASSERT_NE(p->send, nullptr);
    ASSERT_EQ(api_->accept(listen, reply, &p->recv), 0) << err();
    ASSERT_NE(p->recv, nullptr);
  }

  void closePair(Pair* p) {
    if (p->send) {
      EXPECT_EQ(api_->closeSend(p->send), 0) << err();
    }
    if (p->recv) {
      EXPECT_EQ(api_->closeRecv(p->recv), 0) << err();
    }
    *p = Pair{};
  }

  // One test() of an op that has not finished yet.
  void step(Op* op) {
    if (op->done) return;
    int done = 0;
    ASSERT_EQ(api_->test(op->req, &done, &op->size, &op->tag), 0) << err();
    op->done = done != 0;
  }

  // Tests every unfinished op until all are done; an error or the timeout fails the test.
  void driveAll(const std::vector<Op*>& ops, double timeoutSec = 120) {
    double deadline = now() + timeoutSec;
    for (;;) {
      bool all = true;
      for (Op* op : ops) {
        ASSERT_NO_FATAL_FAILURE(step(op));
        all = all && op->done;
      }
      if (all) return;
      ASSERT_LT(now(), deadline) << "requests did not finish within " << timeoutSec << " s";
    }
  }

  const Api* api_ = nullptr;
  void* a_ = nullptr;
  void* b_ = nullptr;
};

}  // namespace net_ucx_test
