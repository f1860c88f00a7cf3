// A rank's side of the bootstrap: one TCP connection to the rendezvous root.
//
// Thread safety: calls are serialised by an internal mutex, so concurrent calls are safe
// but run one after another. failureReported() never waits for that mutex: while another
// call holds it, it answers from the notices already seen. It is therefore safe to call
// from any thread at any time, costs one non-blocking recv() when the socket is free,
// and nothing at all once a failure has been recorded.
//
// Destroying a Bootstrap without close() or abort() drops the connection without a
// goodbye, which the root reports to every other rank as a failure of this one.
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/protocol.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/socket.hpp"
#include "bootstrap/handshake.hpp"

namespace coll {
namespace {

using bs::MsgType;

struct Reply {
  MsgType type;
  std::vector<uint8_t> payload;
};

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(Socket s, int rank, int nranks, double timeoutSec, std::string rootName,
                  const std::atomic<bool>* cancel)
      : sock_(std::move(s)), cancel_(cancel), rank_(rank), nranks_(nranks), timeoutSec_(timeoutSec),
        root_(std::move(rootName)) {}

  void setCancel(const std::atomic<bool>* cancel) override { cancel_.store(cancel); }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const std::vector<PeerInfo>& peers() const override { return peers_; }

  void waitWelcome(const Deadline& dl) {
    std::lock_guard<std::mutex> lk(mu_);
    Reply r = waitReply(dl, "waiting for all ranks to join the rendezvous");
    if (r.type != MsgType::Welcome)
      COLL_THROW(collRemoteError, "rank ", rank_, ": the bootstrap root at ", root_, " sent message type ",
                 static_cast<uint32_t>(r.type), " instead of the peer table");
    peers_ = bs::decodePeers(r.payload.data(), r.payload.size(), nranks_);
  }

  std::vector<uint8_t> allGather(const void* mine, size_t bytes) override {
    COLL_CHECK_ARG(mine || bytes == 0, "bootstrap allGather: buffer is null for ", bytes, " bytes");
    COLL_CHECK_ARG(bytes <= bs::kMaxBlob, "bootstrap allGather: ", bytes, " bytes exceeds the limit of ",
                   bs::kMaxBlob);
    return round(bs::RoundKind::AllGather, mine, bytes, "bootstrap allGather");
  }

  void barrier() override { round(bs::RoundKind::Barrier, nullptr, 0, "bootstrap barrier"); }

  bool failureReported(std::string* why) override {
    if (!failed_.load(std::memory_order_acquire)) {
      std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
      if (lk.owns_lock() && sock_.valid()) readAvailable();
    }
    if (!failed_.load(std::memory_order_acquire)) return false;
    if (why) {
      std::lock_guard<std::mutex> lk(whyMu_);
      *why = failWhy_;
    }
    return true;
  }

  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!sock_.valid()) return;
    bs::Writer w;
    w.str(why.substr(0, bs::kMaxText - 64));
    sendLastWords(bs::makeFrame(MsgType::Abort, w.data().data(), w.data().size()));
  }

  double rootRttUs() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return sock_.valid() ? tcpMinRttUs(sock_.fd()) : 0;
  }

  void close() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!sock_.valid()) return;
    sendLastWords(bs::makeFrame(MsgType::Goodbye, nullptr, 0));
  }

 private:
  // Best effort: the root may already be gone, and leaving must not fail.
  void sendLastWords(const std::vector<uint8_t>& frame) {
    try {
      sendAll(sock_.fd(), frame.data(), frame.size(), Deadline(std::min(timeoutSec_, 2.0)));
      ::shutdown(sock_.fd(), SHUT_WR);
    } catch (const Error& e) {
      COLL_INFO("rank %d: could not say goodbye to the bootstrap root at %s: %s", rank_, root_.c_str(), e.what());
    }
    sock_.reset();
  }

  std::vector<uint8_t> round(bs::RoundKind kind, const void* mine, size_t bytes, const char* what) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!rootGone_.empty()) COLL_THROW(collRemoteError, what, " on rank ", rank_, ": ", rootGone_);
    COLL_CHECK_ARG(sock_.valid(), what, " on rank ", rank_, " after close() or abort()");
    throwIfFailed(what);
    Deadline dl(timeoutSec_);
    bs::Writer w;
    w.u32(static_cast<uint32_t>(kind));
    if (bytes) w.bytes(mine, bytes);
    std::vector<uint8_t> frame = bs::makeFrame(MsgType::Contribute, w.data().data(), w.data().size());
    try {
      sendAll(sock_.fd(), frame.data(), frame.size(), dl);
    } catch (const Error& e) {
      if (e.code() != collRemoteError) throw;
      recordFailure(strCat("lost the connection to the bootstrap root at ", root_, ": ", e.what()));
      throwIfFailed(what);
    }
    Reply r = waitReply(dl, what);
    if (r.type != MsgType::Result)
      COLL_THROW(collRemoteError, what, " on rank ", rank_, ": the root sent message type ",
                 static_cast<uint32_t>(r.type), " instead of a result");
    size_t expect = bytes * static_cast<size_t>(nranks_);
    if (r.payload.size() != expect)
      COLL_THROW(collRemoteError, what, " on rank ", rank_, ": the root returned ", r.payload.size(),
                 " bytes, expected nranks * bytes = ", expect);
    return std::move(r.payload);
  }

  // Waits for the root's answer; failure notices seen meanwhile end the wait.
  Reply waitReply(const Deadline& dl, const char* what) {
    while (true) {
      readAvailable();
      if (reply_) {
        Reply r = std::move(*reply_);
        reply_.reset();
        if (r.type == MsgType::Error) throwError(r, what);
        return r;
      }
      throwIfFailed(what);
      if (!rootGone_.empty()) COLL_THROW(collRemoteError, what, " on rank ", rank_, ": ", rootGone_);
      if (const std::atomic<bool>* c = cancel_.load(); c && c->load())
        COLL_THROW(collRemoteError, what, " on rank ", rank_, ": the communicator being split was aborted");
      if (dl.expired())
        COLL_THROW(collTimeout, what, " on rank ", rank_, " timed out after ", timeoutSec_,
                   " s (bootstrap root at ", root_, "; raise COLL_TIMEOUT if ranks are just slow)",
                   waiting_.empty() ? "" : "; the root last said: ", waiting_);
      pollfd p{sock_.fd(), POLLIN, 0};
      poll(&p, 1, std::min(dl.remainingMs(), 200));
    }
  }

  [[noreturn]] void throwError(const Reply& r, const char* what) {
    bs::Reader rd(r.payload.data(), r.payload.size(), "error notice");
    uint32_t code = rd.u32();
    std::string text = rd.str(bs::kMaxText);
    if (code <= collSuccess || code >= collNumResults) code = collRemoteError;
    COLL_THROW(static_cast<collResult_t>(code), what, " on rank ", rank_, ": ", text);
  }

  void throwIfFailed(const char* what) {
    if (!failed_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lk(whyMu_);
    COLL_THROW(collRemoteError, what, " on rank ", rank_, ": ", failWhy_);
  }

  void recordFailure(const std::string& why) {
    std::lock_guard<std::mutex> lk(whyMu_);
    if (failed_.load()) return;
    failWhy_ = why;
    failed_.store(true, std::memory_order_release);
  }

  // Consumes every complete frame the socket holds, without blocking.
  void readAvailable() {
    while (sock_.valid() && !failed_.load(std::memory_order_acquire)) {
      auto st = in_.read(sock_.fd(), nranks_);
      if (st == bs::FrameReader::Status::Again) return;
      if (st == bs::FrameReader::Status::Closed) {
        // The root lives in rank 0's process, which may finish and exit while others
        // still work among themselves: losing it is not by itself a failure of any rank.
        // A rank that really died is still noticed by its links (EOF, dead pid) and by
        // the deadline; only a later bootstrap round needs the root and fails then.
        COLL_INFO("rank %d: the bootstrap root at %s has gone; failure notices end here", rank_, root_.c_str());
        rootGone_ = strCat("lost the connection to the bootstrap root at ", root_,
                           in_.why().empty() ? "" : ": ", in_.why());
        sock_.reset();
        return;
      }
      if (st == bs::FrameReader::Status::Bad)
        return recordFailure(strCat("the bootstrap root at ", root_, " sent malformed data: ", in_.why()));
      onFrame();
      in_.reset();
    }
  }

  void onFrame() {
    if (in_.type() == MsgType::Failure) {
      bs::Reader rd(in_.payload().data(), in_.payload().size(), "failure notice");
      try {
        uint32_t who = rd.u32();
        std::string text = rd.str(bs::kMaxText);
        COLL_WARN("rank %d: bootstrap reports a failure of rank %u: %s", rank_, who, text.c_str());
        recordFailure(text);
      } catch (const Error& e) {
        recordFailure(strCat("the bootstrap root at ", root_, " sent a malformed failure notice"));
      }
      return;
    }
    if (in_.type() == MsgType::Waiting) {  // who has not joined yet, for a timeout's message
      bs::Reader rd(in_.payload().data(), in_.payload().size(), "waiting notice");
      try {
        waiting_ = rd.str(bs::kMaxText);
      } catch (const Error&) {
        recordFailure(strCat("the bootstrap root at ", root_, " sent a malformed waiting notice"));
      }
      return;
    }
    if (in_.type() == MsgType::Welcome || in_.type() == MsgType::Result || in_.type() == MsgType::Error) {
      reply_ = Reply{in_.type(), std::move(in_.payload())};
      return;
    }
    recordFailure(strCat("the bootstrap root at ", root_, " sent unexpected message type ",
                         static_cast<uint32_t>(in_.type())));
  }

  Socket sock_;
  std::atomic<const std::atomic<bool>*> cancel_;
  std::string rootGone_;  // why the root connection ended, if it did
  std::string waiting_;   // the root's last word on the ranks not joined yet
  int rank_;
  int nranks_;
  double timeoutSec_;
  std::string root_;
  std::vector<PeerInfo> peers_;
  bs::FrameReader in_;
  std::optional<Reply> reply_;
  mutable std::mutex mu_;  // serialises use of the socket
  std::atomic<bool> failed_{false};
  std::mutex whyMu_;
  std::string failWhy_;
};

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::connect(const UniqueIdData& id, int rank, int nranks, double timeoutSec,
                                              const std::atomic<bool>* cancel, const std::string& hostId) {
  COLL_CHECK_ARG(nranks >= 1 && nranks <= bs::kMaxRanks, "Bootstrap::connect: nranks = ", nranks,
                 " is outside [1, ", bs::kMaxRanks, "]");
  COLL_CHECK_ARG(rank >= 0 && rank < nranks, "Bootstrap::connect: rank = ", rank, " is outside [0, nranks = ",
                 nranks, ")");
  std::string root = addrToString(id.root);
  Deadline dl(timeoutSec);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  bs::RankHello h{rank, nranks, PeerInfo{hostId, host, static_cast<int>(getpid())}};
  std::vector<uint8_t> hello = bs::encodeHello(h);
  Socket s;
  for (int attempt = 1;; ++attempt) {
    try {
      s = connectWithRetry(id.root, dl);
    } catch (const Error& e) {
      COLL_THROW(e.code(), "rank ", rank, ": cannot reach the bootstrap root at ", root, " within ", timeoutSec,
                 " s: ", e.what());
    }
    bool in = false;
    try {
      in = clientHandshakeOrBusy(s.fd(), id.secret, ConnRole::Bootstrap, hello.data(), hello.size(), dl);
    } catch (const Error& e) {
      COLL_THROW(e.code(), "rank ", rank, ": bootstrap handshake with the root at ", root, " failed: ", e.what());
    }
    if (in) break;
    // A flood of strangers pushed this connection out (the root drops the oldest unproven
    // one to make room): connect again while the deadline allows.
    if (dl.remainingSeconds() < 0.01)
      COLL_THROW(collTimeout, "rank ", rank, ": the bootstrap root at ", root, " dropped the handshake as busy ",
                 attempt, " times within ", timeoutSec, " s (a flood of other connections?)");
    if (attempt == 1 || attempt % 100 == 0)
      COLL_INFO("rank %d: the bootstrap root at %s is busy (%d attempts); connecting again", rank, root.c_str(),
                attempt);
    s.reset();
    struct timespec ts = {0, std::min<long>(20, attempt * 2) * 1000 * 1000L};
    nanosleep(&ts, nullptr);
  }
  auto b = std::make_unique<SocketBootstrap>(std::move(s), rank, nranks, timeoutSec, root, cancel);
  b->waitWelcome(dl);
  COLL_TRACE("rank %d: joined the bootstrap at %s with %d ranks", rank, root.c_str(), nranks);
  return b;
}

}  // namespace coll
