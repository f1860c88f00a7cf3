#include "transport/tcp/tcp_lazy.hpp"

#include <errno.h>
#include <time.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/handshake.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/tcp/tcp_link.hpp"

namespace coll::tcp {
namespace {

// Connections still proving the secret; more are refused so a flood cannot exhaust fds.
constexpr size_t kMaxPending = 256;
// How long a connection may take to prove the secret before it is dropped.
constexpr double kHandshakeSec = 10;

}  // namespace

// The listener's thread: accepts, runs the handshakes without blocking on any one
// connection, and files each authenticated stream under its rank.
class LazyAcceptor {
 public:
  LazyAcceptor(Socket listener, int rank, std::string tag, const uint8_t* secret, std::vector<int> expected)
      : listen_(std::move(listener)), rank_(rank), tag_(std::move(tag)), secret_(secret),
        expected_(std::move(expected)) {
    wake_ = Socket(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_.valid()) COLL_THROW(collSystemError, "tcp: eventfd: ", sysErrorText(errno));
    try {
      thread_ = std::thread([this] {
        try {
          loop();
        } catch (const std::exception& e) {  // out of memory, say: dialers then time out
          COLL_WARN("tcp: rank %d: the connection thread stopped: %s", rank_, e.what());
        }
      });
    } catch (const std::system_error& e) {
      COLL_THROW(collSystemError, "tcp: cannot start the connection thread: ", e.what());
    }
  }
  ~LazyAcceptor() {
    stop_.store(true);
    uint64_t one = 1;
    if (write(wake_.fd(), &one, sizeof one) < 0) { /* the thread also polls with a timeout */ }
    thread_.join();
  }

  // All `streams` streams of `peer` when they have arrived, else an empty vector.
  std::vector<Socket> tryTake(int peer, int streams) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = got_.find(peer);
    if (it == got_.end() || static_cast<int>(it->second.size()) < streams) return {};
    std::vector<Socket> out(streams);
    int have = 0;
    for (auto& [k, s] : it->second)
      if (k < static_cast<uint32_t>(streams)) out[k] = std::move(s), ++have;
    got_.erase(it);
    if (have != streams)
      COLL_THROW(collRemoteError, "tcp: rank ", peer, " connected ", have, " of the ", streams,
                 " streams it agreed to (the others have wrong indices)");
    return out;
  }
  size_t descriptors() const { return 2; }

 private:
  struct Pending {
    Socket sock;
    hs::ServerHandshake hs;
    Deadline deadline;
  };

  void loop() {
    std::vector<pollfd> pfds;
    while (!stop_.load()) {
      pfds.assign({pollfd{wake_.fd(), POLLIN, 0}, pollfd{listen_.fd(), POLLIN, 0}});
      for (auto& p : pending_) pfds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
      int rc = poll(pfds.data(), pfds.size(), pending_.empty() ? 1000 : 100);
      if (stop_.load()) return;
      if (rc < 0 && errno != EINTR) {
        COLL_WARN("tcp: rank %d: connection thread: poll: %s", rank_, sysErrorText(errno).c_str());
        return;
      }
      std::vector<Pending> still;
      for (size_t i = 0; i < pending_.size(); ++i) {
        Pending& p = pending_[i];
        if (rc > 0 && pfds[i + 2].revents) {
          auto st = p.hs.step(p.sock.fd());
          if (st == hs::ServerHandshake::Status::Done) { finish(p); continue; }
          if (st == hs::ServerHandshake::Status::Failed) {
            COLL_WARN("tcp: rank %d dropped an incoming connection: %s", rank_, p.hs.why().c_str());
            continue;
          }
        }
        if (p.deadline.expired()) {
          COLL_WARN("tcp: rank %d dropped an incoming connection: no valid handshake within %.0f s", rank_,
                    kHandshakeSec);
          continue;
        }
        still.push_back(std::move(p));
      }
      pending_ = std::move(still);
      if (rc > 0 && pfds[1].revents) acceptNew();
    }
  }

  void acceptNew() {
    for (int n = 0; n < 64; ++n) {
      int fd = accept4(listen_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          COLL_WARN("tcp: rank %d: accept: %s", rank_, sysErrorText(errno).c_str());
        return;
      }
      Pending p{Socket(fd), hs::ServerHandshake(secret_, ConnRole::Tcp), Deadline(kHandshakeSec)};
      if (p.hs.start(fd) != hs::ServerHandshake::Status::InProgress) {
        COLL_WARN("tcp: rank %d dropped an incoming connection: %s", rank_, p.hs.why().c_str());
        continue;
      }
      if (pending_.size() >= kMaxPending) {
        // As at init (tcp_connect.cpp): the newcomer may be a real peer held out by
        // strangers, so the oldest unproven connection goes, told it was busy.
        if (evicted_++ % 100 == 0)
          COLL_WARN("tcp: rank %d: %zu connections stuck in the handshake; dropping the oldest (%zu so far)",
                    rank_, pending_.size(), evicted_);
        hs::sendBusy(pending_.front().sock.fd());
        pending_.erase(pending_.begin());
      }
      pending_.push_back(std::move(p));
    }
  }

  void finish(Pending& p) {
    const std::vector<uint8_t>& h = p.hs.hello();
    StreamHello f{};
    std::string tag;
    const bool wellFormed = parseStreamHello(h, &f, &tag);
    const char* why = nullptr;
    std::lock_guard<std::mutex> lk(mu_);
    if (!wellFormed) why = "malformed hello";
    else if (tag != tag_) why = "hello for another communicator";
    else if (!std::binary_search(expected_.begin(), expected_.end(), static_cast<int>(f.rank)))
      why = "hello from a rank that is not an expected peer";
    else if (f.stream >= f.streams || f.streams > 64) why = "hello with a wrong stream count or index";
    else if (got_[f.rank].count(f.stream)) why = "duplicate stream";
    if (why) {
      COLL_WARN("tcp: rank %d dropped a connection (%s: rank %u stream %u of %u)", rank_, why, f.rank, f.stream,
                f.streams);
      return;
    }
    setNoDelay(p.sock.fd());
    got_[f.rank][f.stream] = std::move(p.sock);
  }

  Socket listen_;
  Socket wake_;
  int rank_;
  std::string tag_;
  const uint8_t* secret_;
  std::vector<int> expected_;  // sorted: the lower-ranked peers, which dial us
  std::vector<Pending> pending_;  // the thread's own
  size_t evicted_ = 0;            // unproven connections dropped to make room
  std::mutex mu_;
  std::map<uint32_t, std::map<uint32_t, Socket>> got_;  // rank -> stream -> socket, under mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

namespace {

// The accepting end's link until the peer's streams are in: posts wait in order, and
// progress() becomes the TcpLink's once it can take the streams.
class AwaitedLink final : public Link {
 public:
  AwaitedLink(LazyAcceptor* acceptor, int rank, int peer, int streams, size_t chunk)
      : acceptor_(acceptor), rank_(rank), peer_(peer), streams_(streams), chunk_(chunk) {}

  void postSend(Xfer* x) override { link_ ? link_->postSend(x) : sends_.push_back(x); }
  void postRecv(Xfer* x) override { link_ ? link_->postRecv(x) : recvs_.push_back(x); }
  bool progress() override {
    if (!link_ && !arrive()) return false;
    return link_->progress();
  }
  void waitActivity(int timeoutMs) override {
    if (link_ || arrive()) return link_->waitActivity(timeoutMs);
    poll(nullptr, 0, std::min(timeoutMs, 1));
  }
  bool appendPollFds(std::vector<pollfd>* fds) override {
    if (link_ || arrive()) return link_->appendPollFds(fds);
    return false;  // the streams are not here yet: the waiter sleeps briefly instead
  }
  const char* transportName() const override { return "tcp"; }
  bool pending() const override { return link_ ? link_->pending() : !sends_.empty() || !recvs_.empty(); }
  uint64_t unclaimedCall() override { return link_ ? link_->unclaimedCall() : 0; }
  void abandon() override {
    if (link_) return link_->abandon();
    sends_.clear();
    recvs_.clear();
  }

 private:
  bool arrive() {
    std::vector<Socket> socks = acceptor_->tryTake(peer_, streams_);
    if (socks.empty()) return false;
    for (auto& s : socks) setNonBlocking(s.fd(), true);
    COLL_TRACE("tcp: rank %d <- rank %d: connected on first use, %d streams, chunk %zu", rank_, peer_, streams_,
               chunk_);
    link_ = std::make_unique<TcpLink>(peer_, std::move(socks), chunk_);
    for (Xfer* x : sends_) link_->postSend(x);
    for (Xfer* x : recvs_) link_->postRecv(x);
    sends_.clear();
    recvs_.clear();
    return true;
  }

  LazyAcceptor* acceptor_;
  int rank_, peer_, streams_;
  size_t chunk_;
  std::unique_ptr<TcpLink> link_;
  std::vector<Xfer*> sends_, recvs_;
};

}  // namespace

LazyFactory::LazyFactory(const TransportContext& ctx, const std::vector<int>& peers, const StreamOptions& opt)
    : rank_(ctx.rank), bootstrap_(ctx.bootstrap), jobTag_(ctx.jobTag), secret_(ctx.secret), opt_(opt) {
  COLL_CHECK_ARG(ctx.bootstrap && ctx.secret, "tcp connect: the context has no bootstrap or secret");
  isPeer_.assign(ctx.nranks, 0);
  std::vector<int> lower;
  for (int p : peers) {
    COLL_CHECK_ARG(p >= 0 && p < ctx.nranks && p != ctx.rank && !isPeer_[p], "tcp connect on rank ", ctx.rank,
                   ": peer ", p, " is not another rank in [0, ", ctx.nranks, ") or is listed twice");
    isPeer_[p] = 1;
    if (p < ctx.rank) lower.push_back(p);
  }
  std::sort(lower.begin(), lower.end());
  ListenRecord mine{kRecordMagic, uint32_t(opt.streams), uint64_t(opt.chunk), {}};
  Socket listener;
  if (!lower.empty()) {
    mine.addr = chooseLocalAddrFor(ctx.root, opt.ifname);
    listener = listenOn(&mine.addr);
    setBufferSizes(listener.fd(), opt.bufferBytes);  // accepted sockets inherit it
    setNonBlocking(listener.fd(), true);
  }
  std::vector<uint8_t> all = ctx.bootstrap->allGather(&mine, sizeof(mine));
  COLL_ENFORCE_EQ(all.size(), sizeof(mine) * size_t(ctx.nranks), collInternalError,
                  "tcp: address exchange returned the wrong size");
  recs_.resize(ctx.nranks);
  memcpy(recs_.data(), all.data(), all.size());
  for (int p : peers)
    COLL_ENFORCE_EQ(recs_[p].magic, kRecordMagic, collRemoteError, "tcp: rank ", p, " sent a malformed address record");
  if (!lower.empty())
    acceptor_ = std::make_unique<LazyAcceptor>(std::move(listener), ctx.rank, ctx.jobTag, ctx.secret, std::move(lower));
}

LazyFactory::~LazyFactory() = default;

size_t LazyFactory::descriptors() const { return acceptor_ ? acceptor_->descriptors() : 0; }

std::unique_ptr<Link> LazyFactory::connect(int peer, const Deadline& deadline) {
  COLL_CHECK_ARG(peer >= 0 && peer < static_cast<int>(isPeer_.size()) && isPeer_[peer], "tcp: rank ", peer,
                 " is not a tcp peer of rank ", rank_);
  const int streams = settledStreams(opt_, recs_[peer]);
  const size_t chunk = settledChunk(opt_, recs_[peer]);
  if (peer < rank_) return std::make_unique<AwaitedLink>(acceptor_.get(), rank_, peer, streams, chunk);
  // The peer's connection thread answers whatever its own algorithm is doing.
  std::vector<Socket> socks;
  for (int k = 0; k < streams; ++k) {
    std::vector<uint8_t> hello = makeStreamHello(rank_, k, streams, jobTag_);
    Socket s;
    for (int attempt = 1;; ++attempt) {
      s = dialPeer(recs_[peer].addr, deadline, bootstrap_, rank_, peer);
      setBufferSizes(s.fd(), opt_.bufferBytes);
      if (clientHandshakeOrBusy(s.fd(), secret_, ConnRole::Tcp, hello.data(), hello.size(), deadline)) break;
      // Strangers crowd the peer's port: it dropped us to make room; connect again.
      if (deadline.expired())
        COLL_THROW(collTimeout, "tcp: rank ", rank_, ": rank ", peer, " dropped the connection as busy ", attempt,
                   " times before the deadline (a flood of other connections?)");
      struct timespec ts = {0, std::min<long>(20, attempt * 2) * 1000 * 1000L};
      nanosleep(&ts, nullptr);
    }
    setNoDelay(s.fd());
    setNonBlocking(s.fd(), true);
    socks.push_back(std::move(s));
  }
  COLL_TRACE("tcp: rank %d -> rank %d: connected on first use, %d streams, chunk %zu", rank_, peer, streams, chunk);
  return std::make_unique<TcpLink>(peer, std::move(socks), chunk);
}

}  // namespace coll::tcp
