// The rendezvous root: one thread, one poll() loop over every connection, each
// connection a small state machine (handshake -> joined -> left). Nothing in the loop
// blocks on a single peer, so a client that is silent, slow or hostile costs the job
// nothing but a warning when it is dropped.
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/handshake.hpp"
#include "bootstrap/protocol.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/socket.hpp"

namespace coll {

COLL_PARAM(kHandshakeTimeout, "COLL_BOOTSTRAP_HANDSHAKE_TIMEOUT", "5",
           "seconds a new bootstrap connection has to prove the job secret");

namespace {

// The process that hosts a root must not exit while the root still owes ranks an answer:
// a rank that finished its init (and exits early) may host the root that the others are
// still collecting their last init round from. Each root publishes whether it is busy
// (a round collecting, or answers not yet handed to the kernel); at exit the process
// waits for all of them, a few seconds at most.
struct RootActivity {
  std::mutex mu;
  std::vector<std::shared_ptr<std::atomic<bool>>> busy;
};
RootActivity& rootActivity() {
  static RootActivity* a = [] {
    auto* made = new RootActivity;  // never destroyed: used from atexit
    // A child forked while another thread registers a root must not inherit the lock
    // held: its own roots and its exit take it.
    pthread_atfork([] { rootActivity().mu.lock(); }, [] { rootActivity().mu.unlock(); },
                   [] { rootActivity().mu.unlock(); });
    return made;
  }();
  return *a;
}

void waitForRootsAtExit() {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    bool any = false;
    {
      std::lock_guard<std::mutex> lock(rootActivity().mu);
      for (auto& b : rootActivity().busy) any |= b->load(std::memory_order_acquire);
    }
    if (!any || std::chrono::steady_clock::now() > until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::shared_ptr<std::atomic<bool>> registerRootActivity() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(waitForRootsAtExit); });
  auto flag = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard<std::mutex> lock(rootActivity().mu);
  auto& v = rootActivity().busy;
  // Forget roots that have finished (their flag stays false and nobody else holds it).
  v.erase(std::remove_if(v.begin(), v.end(), [](auto& b) { return b.use_count() == 1; }), v.end());
  v.push_back(flag);
  return flag;
}

using bs::MsgType;
using Frame = std::shared_ptr<const std::vector<uint8_t>>;

struct StatCounters {
  std::atomic<uint64_t> connections{0}, framesIn{0}, bytesIn{0}, framesOut{0}, bytesOut{0};
};
StatCounters& statCounters() {
  static StatCounters* s = new StatCounters;  // never destroyed: read until exit
  return *s;
}

// Connections still proving the secret; beyond this the oldest is dropped so a flood
// cannot exhaust descriptors.
constexpr size_t kMaxPending = 256;
// Least pause between two Waiting notices while the job forms.
constexpr double kWaitingPeriodSec = 0.2;

struct Conn {
  enum class State { Handshake, Joined, Left, Dead };
  Conn(Socket s, std::string peer, const uint8_t* secret, double hsSec)
      : sock(std::move(s)), peer(std::move(peer)), hsm(secret, ConnRole::Bootstrap), hsDeadline(hsSec) {}
  Socket sock;
  std::string peer;
  State state = State::Handshake;
  hs::ServerHandshake hsm;
  Deadline hsDeadline;
  int rank = -1;
  bs::FrameReader in;
  bs::OutQueue out;
  bool closeWhenFlushed = false;  // a rejected or departed peer: close once told why
};

Frame makeShared(MsgType t, const std::vector<uint8_t>& payload) {
  return std::make_shared<const std::vector<uint8_t>>(bs::makeFrame(t, payload.data(), payload.size()));
}

Frame textFrame(MsgType t, uint32_t code, const std::string& text) {
  bs::Writer w;
  w.u32(code);
  w.str(text.substr(0, bs::kMaxText));
  return makeShared(t, w.data());
}

class Root {
 public:
  Root(Socket listen, const sockaddr_storage& addr, int nranks, const uint8_t* secret, double timeoutSec,
       double hsSec, bool endOnFailure = false)
      : listen_(std::move(listen)), endOnFailure_(endOnFailure), name_(addrToString(addr)), nranks_(nranks > 0 ? nranks : 0),
        formDeadline_(timeoutSec), timeoutSec_(timeoutSec), hsSec_(hsSec) {
    memcpy(secret_, secret, kSecretBytes);
    if (nranks_) sizeTables();
  }
  ~Root() { memset(secret_, 0, sizeof(secret_)); }

  void run() {
    COLL_INFO("bootstrap root %s: serving %d ranks", name_.c_str(), nranks_);
    while (!finished()) {
      pollOnce();
      checkDeadlines();
      tellWaiting();
      flushAll();
      sweep();
      busy_->store(owesAnswers(), std::memory_order_release);
    }
    finalFlush();
    busy_->store(false, std::memory_order_release);
    COLL_INFO("bootstrap root %s: done", name_.c_str());
  }

 private:
  void sizeTables() {
    byRank_.assign(nranks_, nullptr);
    peers_.assign(nranks_, PeerInfo{});
    blobs_.assign(nranks_, {});
    kinds_.assign(nranks_, 0);
    contributed_.assign(nranks_, 0);
  }

  void pollOnce() {
    std::vector<pollfd> fds;
    size_t first = 0;
    if (listen_.valid()) { fds.push_back({listen_.fd(), POLLIN, 0}); first = 1; }
    size_t polled = conns_.size();
    for (auto& c : conns_)
      fds.push_back({c->sock.fd(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    int rc = poll(fds.data(), fds.size(), formed_ ? 1000 : 50);
    if (rc <= 0) return;
    if (first && (fds[0].revents & POLLIN)) acceptNew();
    for (size_t k = 0; k < polled; ++k) {
      Conn& c = *conns_[k];
      if (c.state != Conn::State::Dead && (fds[first + k].revents & (POLLIN | POLLHUP | POLLERR)))
        onReadable(c);
    }
  }

  void acceptNew() {
    for (int n = 0; n < 64; ++n) {  // bounded so a flood cannot starve the joined ranks
      sockaddr_storage from{};
      socklen_t len = sizeof(from);
      Socket s(::accept4(listen_.fd(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!s.valid()) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors, the ranks still to come would wait in the backlog until
          // COLL_TIMEOUT while this warning repeated: the job cannot form, so say so now.
          // accept fails so whenever no descriptor is free, also with nobody waiting (after
          // the last rank's connection took the last one): only a waiting rank counts.
          const int err = errno;
          pollfd p{listen_.fd(), POLLIN, 0};
          if (poll(&p, 1, 0) > 0)
            endFormation(collSystemError, strCat("the bootstrap root at ", name_,
                                                 " cannot accept the ranks' connections: ", sysErrorText(err)));
          return;
        }
        if (errno == ENOBUFS || errno == ENOMEM) {
          // The listener stays readable: pause instead of spinning until fds free up.
          COLL_WARN("bootstrap root %s: accept: %s", name_.c_str(), sysErrorText(errno).c_str());
          struct timespec ts = {0, 20 * 1000 * 1000};
          nanosleep(&ts, nullptr);
        }
        return;
      }
      std::string peer = addrToString(from);
      size_t pending = 0;
      Conn* oldest = nullptr;  // conns_ is in arrival order
      for (auto& c : conns_)
        if (c->state == Conn::State::Handshake) {
          if (!oldest) oldest = c.get();
          ++pending;
        }
      if (pending >= kMaxPending) {
        // Refusing the newcomer would let strangers that hold their sockets keep every
        // real rank out; a real rank proves the secret within a round trip, so the one
        // that waited longest unproven is the likeliest stranger. A rank dropped so
        // reconnects within its own deadline.
        if (evicted_++ % 100 == 0)
          COLL_WARN("bootstrap root %s: %zu connections are handshaking; dropped the oldest, %s (%zu dropped so)",
                    name_.c_str(), pending, oldest->peer.c_str(), evicted_);
        hs::sendBusy(oldest->sock.fd());
        oldest->state = Conn::State::Dead;
        oldest->sock.reset();  // now: its descriptor is the one the newcomer needs
      }
      auto c = std::make_unique<Conn>(std::move(s), peer, secret_, std::min(hsSec_, timeoutSec_));
      if (c->hsm.start(c->sock.fd()) == hs::ServerHandshake::Status::Failed) {
        COLL_WARN("bootstrap root %s: dropped %s: %s", name_.c_str(), peer.c_str(), c->hsm.why().c_str());
        continue;
      }
      statCounters().connections.fetch_add(1, std::memory_order_relaxed);
      conns_.push_back(std::move(c));
    }
  }

  void onReadable(Conn& c) {
    if (c.state == Conn::State::Handshake) {
      auto st = c.hsm.step(c.sock.fd());
      if (st == hs::ServerHandshake::Status::Failed) {
        COLL_WARN("bootstrap root %s: dropped connection from %s: %s", name_.c_str(), c.peer.c_str(),
                  c.hsm.why().c_str());
        c.state = Conn::State::Dead;
      } else if (st == hs::ServerHandshake::Status::Done) {
        onHello(c);
      }
      return;
    }
    while (c.state == Conn::State::Joined) {
      auto st = c.in.read(c.sock.fd(), nranks_);
      if (st == bs::FrameReader::Status::Again) return;
      if (st == bs::FrameReader::Status::Closed) return lost(c, "disconnected");
      if (st == bs::FrameReader::Status::Bad) return lost(c, "sent a malformed message: " + c.in.why());
      statCounters().framesIn.fetch_add(1, std::memory_order_relaxed);
      statCounters().bytesIn.fetch_add(bs::kFrameHeader + c.in.payload().size(), std::memory_order_relaxed);
      try {
        onFrame(c);
      } catch (const Error& e) {
        return lost(c, strCat("sent a malformed message: ", e.what()));
      }
      c.in.reset();
    }
    if (c.state == Conn::State::Left) {
      // A departed or rejected peer has nothing more to say; drain until it closes.
      char sink[256];
      ssize_t k = ::recv(c.sock.fd(), sink, sizeof(sink), MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) c.state = Conn::State::Dead;
    }
  }

  // Every frame the root sends goes through here (counted for RendezvousRoot::stats).
  static void queue(Conn& c, const Frame& f) {
    statCounters().framesOut.fetch_add(1, std::memory_order_relaxed);
    statCounters().bytesOut.fetch_add(f->size(), std::memory_order_relaxed);
    c.out.push(f);
  }

  void reject(Conn& c, collResult_t code, const std::string& why) {
    COLL_WARN("bootstrap root %s: rejected %s: %s", name_.c_str(), c.peer.c_str(), why.c_str());
    queue(c, textFrame(MsgType::Error, code, why));
    c.state = Conn::State::Left;
    c.closeWhenFlushed = true;
  }

  void onHello(Conn& c) {
    bs::RankHello h;
    try {
      h = bs::decodeHello(c.hsm.hello());
    } catch (const Error& e) {
      COLL_WARN("bootstrap root %s: dropped %s: %s", name_.c_str(), c.peer.c_str(), e.what());
      c.state = Conn::State::Dead;
      return;
    }
    if (h.nranks < 1 || h.nranks > bs::kMaxRanks)
      return reject(c, collInvalidArgument, strCat("nranks = ", h.nranks, " is outside [1, ", bs::kMaxRanks, "]"));
    if (!nranks_) { nranks_ = h.nranks; sizeTables(); }
    if (h.nranks != nranks_)
      return reject(c, collInvalidUsage, strCat("rank ", h.rank, " says nranks = ", h.nranks,
                                                 " but the job has nranks = ", nranks_));
    if (h.rank < 0 || h.rank >= nranks_)
      return reject(c, collInvalidArgument, strCat("rank ", h.rank, " is outside [0, ", nranks_, ")"));
    if (byRank_[h.rank])
      return reject(c, collInvalidUsage, strCat("duplicate rank: ", bs::describeRank(h.rank, h.info),
                                                 " but ", bs::describeRank(h.rank, peers_[h.rank]),
                                                 " already joined"));
    if (failure_) {
      queue(c, failure_);
      c.state = Conn::State::Left;
      c.closeWhenFlushed = true;
      return;
    }
    c.state = Conn::State::Joined;
    c.rank = h.rank;
    byRank_[h.rank] = &c;
    peers_[h.rank] = h.info;
    COLL_TRACE("bootstrap root %s: %s joined (%d of %d)", name_.c_str(),
               bs::describeRank(h.rank, h.info).c_str(), joined_ + 1, nranks_);
    if (++joined_ == nranks_) formJob();
    else rosterChanged_ = true;
  }

  // "rank 2, rank 5 and 3 more": the ranks that have not joined, for the notices.
  std::string missingRanks(int named) const {
    std::string list;
    int n = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (byRank_[r]) continue;
      if (n++ < named) list += strCat(list.empty() ? "" : ", ", r);
    }
    if (n > named) list += strCat(" and ", n - named, " more");
    return list;
  }

  // While the job forms, every joined rank learns who is still missing, so that a rank
  // whose own deadline passes first can name them (the root's own timer may fire later).
  void tellWaiting() {
    if (formed_ || timedOut_ || failure_ || !rosterChanged_ || !sinceWaiting_.expired()) return;
    rosterChanged_ = false;
    sinceWaiting_ = Deadline(kWaitingPeriodSec);
    bs::Writer w;
    w.str(strCat(joined_, " of ", nranks_, " ranks joined; missing ranks: ", missingRanks(64))
              .substr(0, bs::kMaxText));
    COLL_TRACE("bootstrap root %s: told the ranks %d of %d joined", name_.c_str(), joined_, nranks_);
    broadcast(makeShared(MsgType::Waiting, w.data()), -1);
  }

  void formJob() {
    formed_ = true;
    // Nobody else may join now: stop listening so strangers no longer reach us.
    listen_.reset();
    for (auto& c : conns_)
      if (c->state == Conn::State::Handshake) c->state = Conn::State::Dead;
    broadcast(makeShared(MsgType::Welcome, bs::encodePeers(peers_)), -1);
    COLL_INFO("bootstrap root %s: all %d ranks joined", name_.c_str(), nranks_);
  }

  void onFrame(Conn& c) {
    bs::Reader r(c.in.payload().data(), c.in.payload().size(), "bootstrap message");
    switch (c.in.type()) {
      case MsgType::Contribute: {
        if (!formed_) COLL_THROW(collRemoteError, "contribution before the job formed");
        uint32_t kind = r.u32();
        if (failure_) return;  // the job is over; the rank already has the failure notice
        if (contributed_[c.rank]) COLL_THROW(collRemoteError, "two contributions to one round");
        contributed_[c.rank] = 1;
        kinds_[c.rank] = kind;
        blobs_[c.rank].assign(c.in.payload().begin() + 4, c.in.payload().end());
        ++contributions_;
        return checkRound();
      }
      case MsgType::Abort: {
        std::string why = r.str(bs::kMaxText);
        c.state = Conn::State::Left;
        reportFailure(c.rank, strCat(bs::describeRank(c.rank, peers_[c.rank]), " aborted: ", why));
        return;
      }
      case MsgType::Goodbye:
        COLL_TRACE("bootstrap root %s: rank %d said goodbye", name_.c_str(), c.rank);
        c.state = Conn::State::Left;
        return checkRound();
      default:
        COLL_THROW(collRemoteError, "unexpected message type ", static_cast<uint32_t>(c.in.type()));
    }
  }

  void clearRound() {
    for (auto& b : blobs_) std::vector<uint8_t>().swap(b);
    std::fill(contributed_.begin(), contributed_.end(), 0);
    contributions_ = 0;
  }

  // Fails the round for the ranks that contributed.
  void failRound(collResult_t code, const std::string& why) {
    COLL_WARN("bootstrap root %s: %s", name_.c_str(), why.c_str());
    Frame f = textFrame(MsgType::Error, code, why);
    for (int r = 0; r < nranks_; ++r)
      if (contributed_[r] && byRank_[r]) queue(*byRank_[r], f);
    clearRound();
  }

  void checkRound() {
    if (!contributions_ || failure_) return;
    for (int r = 0; r < nranks_; ++r)
      if (!contributed_[r] && (!byRank_[r] || byRank_[r]->state != Conn::State::Joined))
        return failRound(collRemoteError, strCat("rank ", r, " closed its bootstrap while other ranks wait in a "
                                                 "bootstrap all-gather or barrier"));
    if (contributions_ < nranks_) return;
    for (int r = 1; r < nranks_; ++r) {
      if (kinds_[r] != kinds_[0])
        return failRound(collInvalidUsage, strCat("bootstrap mismatch: rank 0 called ", kindName(kinds_[0]),
                                                  " but rank ", r, " called ", kindName(kinds_[r])));
      if (blobs_[r].size() != blobs_[0].size())
        return failRound(collInvalidUsage, strCat("bootstrap all-gather size mismatch: rank 0 contributed ",
                                                  blobs_[0].size(), " bytes but rank ", r, " contributed ",
                                                  blobs_[r].size(), " bytes"));
    }
    std::vector<uint8_t> all;
    all.reserve(blobs_[0].size() * nranks_);
    for (auto& b : blobs_) all.insert(all.end(), b.begin(), b.end());
    broadcast(makeShared(MsgType::Result, all), -1);
    clearRound();
  }

  static const char* kindName(uint32_t k) {
    return k == static_cast<uint32_t>(bs::RoundKind::Barrier) ? "barrier" : "allGather";
  }

  void broadcast(const Frame& f, int except) {
    // Busy before the first answer can leave: the rank that gets it first may be the one
    // whose process hosts us, and it must not exit before the others have theirs.
    busy_->store(true, std::memory_order_release);
    for (int r = 0; r < nranks_; ++r)
      if (r != except && byRank_[r] && byRank_[r]->state == Conn::State::Joined) queue(*byRank_[r], f);
  }

  // The ranks the job still waited for besides `failed`: those not joined while it forms,
  // or not yet in the round in progress. A rank that gives up waiting for an unreachable
  // or frozen one fails first, and the notice must not leave the others blaming it alone.
  std::string stillWaitingFor(int failed) const {
    constexpr int kNamed = 8;  // the notice stays short on a large job
    std::string list;
    int n = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (r == failed || (formed_ ? contributions_ == 0 || contributed_[r] : byRank_[r] != nullptr)) continue;
      if (n++ < kNamed)
        list += strCat(list.empty() ? "" : ", ", formed_ ? bs::describeRank(r, peers_[r]) : strCat("rank ", r));
    }
    if (n == 0) return "";
    if (n > kNamed) list += strCat(" and ", n - kNamed, " more");
    return strCat("; the job was still waiting for ", list,
                  formed_ ? " in a bootstrap all-gather or barrier" : " to join the rendezvous");
  }

  // The failure detector: the first failure ends the job for everyone.
  void reportFailure(int rank, const std::string& what) {
    if (failure_) {  // ranks leaving a job that already failed are no news
      COLL_INFO("bootstrap root %s: %s", name_.c_str(), what.c_str());
      return;
    }
    std::string text = what + stillWaitingFor(rank);
    COLL_WARN("bootstrap root %s: %s", name_.c_str(), text.c_str());
    failure_ = textFrame(MsgType::Failure, static_cast<uint32_t>(rank), text);
    broadcast(failure_, rank);
    clearRound();
    if (endOnFailure_ && !formed_) endFormation(collRemoteError, text);
  }

  void lost(Conn& c, const std::string& how) {
    c.state = Conn::State::Dead;
    reportFailure(c.rank, strCat(bs::describeRank(c.rank, peers_[c.rank]), " ", how));
  }

  void checkDeadlines() {
    for (auto& c : conns_)
      if (c->state == Conn::State::Handshake && c->hsDeadline.expired()) {
        COLL_WARN("bootstrap root %s: dropped %s: no valid handshake within %.1f s", name_.c_str(),
                  c->peer.c_str(), std::min(hsSec_, timeoutSec_));
        c->state = Conn::State::Dead;
      }
    if (formed_ || timedOut_ || !formDeadline_.expired()) return;
    std::string missing = nranks_ ? missingRanks(64) : "";
    endFormation(collTimeout, strCat("only ", joined_, " of ", nranks_ ? std::to_string(nranks_) : "?",
                                     " ranks joined the rendezvous at ", name_, " within ", timeoutSec_,
                                     " s; missing ranks: ", missing.empty() ? "unknown" : missing));
  }

  // The job will not form: the ranks that joined get `why`; closing the listener and the
  // connections still handshaking resets them, so those ranks fail at once too.
  void endFormation(collResult_t code, const std::string& why) {
    timedOut_ = true;
    listen_.reset();
    COLL_WARN("bootstrap root %s: %s", name_.c_str(), why.c_str());
    Frame f = textFrame(MsgType::Error, code, why);
    for (auto& c : conns_)
      if (c->state == Conn::State::Handshake) {
        c->state = Conn::State::Dead;
      } else if (c->state == Conn::State::Joined) {
        queue(*c, f);
        c->state = Conn::State::Left;
        c->closeWhenFlushed = true;
      }
  }

  bool owesAnswers() const {
    if (contributions_ > 0) return true;
    for (auto& c : conns_)
      if (c->state != Conn::State::Dead && !c->out.empty()) return true;
    return false;
  }

  void flushAll() {
    for (auto& c : conns_) {
      if (c->state == Conn::State::Dead || c->out.empty()) continue;
      std::string why;
      if (!c->out.flush(c->sock.fd(), &why)) {
        if (c->state == Conn::State::Joined) lost(*c, "disconnected (" + why + ")");
        else c->state = Conn::State::Dead;
      }
    }
  }

  void sweep() {
    for (auto& c : conns_)
      if (c->closeWhenFlushed && c->out.empty()) c->state = Conn::State::Dead;
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->state != Conn::State::Dead) { ++it; continue; }
      int r = (*it)->rank;
      if (r >= 0 && byRank_[r] == it->get()) byRank_[r] = nullptr;
      it = conns_.erase(it);
    }
  }

  bool finished() const {
    // A job that failed while it formed still has ranks to come: they get the failure
    // notice (onHello) until the formation deadline, instead of a refused connection
    // that they would retry until their own timeout.
    if (!formed_ && !timedOut_) return false;
    for (auto& c : conns_)
      if (c->state == Conn::State::Joined || (c->closeWhenFlushed && c->state != Conn::State::Dead)) return false;
    return true;
  }

  // Last words (a failure notice, a goodbye's answer) still queued get a short grace.
  void finalFlush() {
    Deadline grace(1.0);
    for (auto& c : conns_) {
      std::string why;
      while (!c->out.empty() && !grace.expired() && c->out.flush(c->sock.fd(), &why)) {
        pollfd p{c->sock.fd(), POLLOUT, 0};
        poll(&p, 1, 10);
      }
    }
  }

  Socket listen_;
  bool endOnFailure_;
  std::string name_;
  int nranks_;
  uint8_t secret_[kSecretBytes];
  Deadline formDeadline_;
  double timeoutSec_;
  double hsSec_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> byRank_;
  std::vector<PeerInfo> peers_;
  int joined_ = 0;
  size_t evicted_ = 0;               // unproven connections dropped to make room
  bool rosterChanged_ = false;       // a rank joined since the last Waiting notice
  Deadline sinceWaiting_{1e-6};  // (0 would mean never)
  bool formed_ = false;
  bool timedOut_ = false;
  Frame failure_;  // the first failure notice, also given to late joiners
  // The round in progress.
  std::vector<std::vector<uint8_t>> blobs_;
  std::vector<uint32_t> kinds_;
  std::vector<char> contributed_;
  int contributions_ = 0;
  std::shared_ptr<std::atomic<bool>> busy_ = registerRootActivity();
};

}  // namespace

RendezvousRoot::Stats RendezvousRoot::stats() {
  const StatCounters& c = statCounters();
  return Stats{c.connections.load(), c.framesIn.load(), c.bytesIn.load(), c.framesOut.load(), c.bytesOut.load()};
}

namespace {

// The root runs on a thread of its own, detached: it outlives the call that started it
// and ends when the job it serves has formed and gone.
void serveInBackground(std::unique_ptr<Root> root) {
  try {
    std::thread([r = std::move(root)]() {
      try {
        r->run();
      } catch (const std::exception& e) {
        COLL_WARN("bootstrap root: stopped by an internal error: %s", e.what());
      }
    }).detach();
  } catch (const std::system_error& e) {
    COLL_THROW(collSystemError, "cannot start the bootstrap root thread: ", e.what());
  }
}

}  // namespace

sockaddr_storage RendezvousRoot::start(const sockaddr_storage& addr, int nranks, const uint8_t* secret,
                                       double timeoutSec) {
  COLL_CHECK_ARG(secret, "RendezvousRoot::start: secret is null");
  COLL_CHECK_ARG(nranks <= bs::kMaxRanks, "RendezvousRoot::start: nranks = ", nranks, " exceeds ", bs::kMaxRanks);
  sockaddr_storage bound = addr;
  Socket l = listenOn(&bound);
  setNonBlocking(l.fd());
  double hsSec = Config::fromEnv().getDouble(kHandshakeTimeout);
  auto root = std::make_unique<Root>(std::move(l), bound, nranks, secret, timeoutSec, hsSec);
  serveInBackground(std::move(root));
  return bound;
}

void RendezvousRoot::startOn(int listenFd, const sockaddr_storage& addr, int nranks, const uint8_t* secret,
                             double timeoutSec) {
  Socket l(listenFd);
  COLL_CHECK_ARG(secret, "RendezvousRoot::startOn: secret is null");
  COLL_CHECK_ARG(nranks >= 1 && nranks <= bs::kMaxRanks, "RendezvousRoot::startOn: nranks = ", nranks,
                 " is outside [1, ", bs::kMaxRanks, "]");
  setNonBlocking(l.fd());
  double hsSec = Config::fromEnv().getDouble(kHandshakeTimeout);
  auto root = std::make_unique<Root>(std::move(l), addr, nranks, secret, timeoutSec, hsSec, true);
  serveInBackground(std::move(root));
}

}  // namespace coll
