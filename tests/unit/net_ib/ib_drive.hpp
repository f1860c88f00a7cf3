// Driving messages over connected InfiniBand endpoints in the tests: messages with
// guard bytes after each receive, a side that posts (retrying when the backend hands
// out NULL) and tests what is in flight, and the checks of sizes, tags, bytes and guards.
#pragma once

#include <algorithm>
#include <vector>

#include "ib_harness.hpp"

namespace coll::net::ib::test {

inline constexpr size_t kGuard = 32;
inline constexpr uint8_t kGuardByte = 0xA5;

struct Msg {
  std::vector<uint8_t> src;
  std::vector<uint8_t> dst;  // cap bytes, then kGuard guard bytes
  size_t cap = 0;
  uint64_t tag = 0;
  void* sreq = nullptr;
  void* rreq = nullptr;
  bool sdone = false, rdone = false;
  size_t sentSize = ~size_t(0), gotSize = ~size_t(0);
  uint64_t gotTag = 0;
};

inline std::vector<Msg> makeMsgs(const std::vector<size_t>& sizes, const std::vector<size_t>& caps, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<Msg> m(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    m[i].src = randomBytes(sizes[i], seed * 1000 + i);
    m[i].cap = caps.empty() ? sizes[i] : caps[i];
    m[i].dst.assign(m[i].cap + kGuard, kGuardByte);
    m[i].tag = g();
  }
  return m;
}

struct Stats {
  int nullSends = 0, nullRecvs = 0;
};

// One side of a connection: posts its messages (retrying when the backend hands out
// NULL) and tests those in flight. A side is driven from one thread at a time.
class Side {
 public:
  Side(const Backend& b, void* ep, std::vector<Msg>& msgs, bool send, int* nulls)
      : b_(b), ep_(ep), msgs_(msgs), send_(send), nulls_(nulls) {}
  bool finished() const { return failed_ || done_ == msgs_.size(); }
  void step() {
    while (!failed_ && next_ < msgs_.size()) {
      Msg& m = msgs_[next_];
      void** req = send_ ? &m.sreq : &m.rreq;
      int rc = send_ ? b_.p->isend(ep_, m.src.data(), m.src.size(), m.tag, req)
                     : b_.p->irecv(ep_, m.cap ? m.dst.data() : nullptr, m.cap, req);
      if (rc) return fail(send_ ? "isend" : "irecv");
      if (!*req) {
        (*nulls_)++;
        break;
      }
      next_++;
    }
    for (size_t i = done_; i < next_ && !failed_; ++i) {
      Msg& m = msgs_[i];
      bool& flag = send_ ? m.sdone : m.rdone;
      if (flag) continue;
      int d = 0;
      int rc = send_ ? b_.p->test(m.sreq, &d, &m.sentSize, nullptr) : b_.p->test(m.rreq, &d, &m.gotSize, &m.gotTag);
      if (rc) return fail("test");
      flag = d;
    }
    while (done_ < next_ && (send_ ? msgs_[done_].sdone : msgs_[done_].rdone)) done_++;
  }
  std::string where() const {
    return testing::PrintToString(done_) + " of " + testing::PrintToString(msgs_.size()) +
           (send_ ? " sends" : " receives") + " done";
  }

 private:
  void fail(const char* what) {
    ADD_FAILURE() << what << " failed: " << b_.error();
    failed_ = true;
  }
  const Backend& b_;
  void* ep_;
  std::vector<Msg>& msgs_;
  bool send_;
  int* nulls_;
  size_t next_ = 0, done_ = 0;
  bool failed_ = false;
};

inline void drive(std::vector<Side*> sides, double seconds = 60) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool all = true;
    for (Side* s : sides) {
      s->step();
      all = all && s->finished();
    }
    if (all) return;
    if (Clock::now() > end) {
      for (Side* s : sides) ADD_FAILURE() << "timed out: " << s->where();
      return;
    }
  }
}

// Both ends of one connection from one thread, as one rank's thread does.
inline void driveBoth(const Backend& b, Pair& pr, std::vector<Msg>& msgs, Stats* st) {
  Side s(b, pr.send, msgs, true, &st->nullSends), r(b, pr.recv, msgs, false, &st->nullRecvs);
  drive({&s, &r});
}

inline void checkMsgs(const std::vector<Msg>& msgs) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Msg& m = msgs[i];
    SCOPED_TRACE(testing::Message() << "message " << i << " of " << m.src.size() << " bytes into " << m.cap);
    EXPECT_EQ(m.sentSize, m.src.size());
    EXPECT_EQ(m.gotSize, m.src.size());
    EXPECT_EQ(m.gotTag, m.tag);
    size_t n = std::min(m.cap, m.src.size());
    if (n) {  // memcmp of no bytes may still not take a null pointer
      EXPECT_EQ(memcmp(m.dst.data(), m.src.data(), n), 0);
    }
    for (size_t k = n; k < m.dst.size(); ++k)
      if (m.dst[k] != kGuardByte) {
        ADD_FAILURE() << "byte " << k << " written past the message or the receive";
        break;
      }
  }
}

}  // namespace coll::net::ib::test
