#include "transport/tcp/tcp_connect.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/handshake.hpp"
#include "base/error.hpp"
#include "base/log.hpp"

namespace coll::tcp {
namespace {

// Half-open or silent connections parked in the accept loop; beyond this the oldest is
// dropped so a flood cannot exhaust file descriptors.
constexpr size_t kMaxPendingAccepts = 256;
// Seconds an accepted connection may take to prove the secret.
constexpr double kHandshakeSec = 5.0;

struct Pair {
  int streams;
  size_t chunk;
};

Pair settle(const StreamOptions& opt, const ListenRecord& other) {
  return Pair{settledStreams(opt, other), settledChunk(opt, other)};
}

}  // namespace

std::vector<uint8_t> makeStreamHello(int rank, int stream, int streams, const std::string& tag) {
  StreamHello h{uint32_t(rank), uint32_t(stream), uint32_t(streams), uint32_t(tag.size())};
  std::vector<uint8_t> out(sizeof(h) + tag.size());
  memcpy(out.data(), &h, sizeof(h));
  memcpy(out.data() + sizeof(h), tag.data(), tag.size());
  return out;
}

bool parseStreamHello(const std::vector<uint8_t>& bytes, StreamHello* hello, std::string* tag) {
  *hello = StreamHello{};
  tag->clear();
  if (bytes.size() < sizeof(StreamHello)) return false;
  memcpy(hello, bytes.data(), sizeof(StreamHello));
  tag->assign(bytes.begin() + sizeof(StreamHello), bytes.end());
  return hello->tagLen == bytes.size() - sizeof(StreamHello);
}

namespace {

// Buffer sizes are set before the handshake (accepted sockets inherit the listener's).
void tuneSocket(int fd) {
  setNoDelay(fd);
  setNonBlocking(fd, true);
}

// Accepts and authenticates the streams of every lower-ranked peer. Connections that fail
// the handshake or say the wrong thing are dropped with a warning; accepting goes on
// until every expected stream is in or the deadline passes.
class Acceptor {
 public:
  Acceptor(const TransportContext& ctx, int listenFd, std::map<int, PeerStreams>* out)
      : ctx_(ctx), fd_(listenFd), out_(out) {}

  void expect(int peer, const Pair& p) {
    (*out_)[peer].socks.resize(p.streams);
    (*out_)[peer].chunk = p.chunk;
    missing_ += p.streams;
  }
  void run(const Deadline& deadline);

 private:
  struct Pending {
    Socket sock;
    hs::ServerHandshake hs;
    Deadline until;  // a stranger holds a slot this long at most
  };
  void acceptNew();
  void finish(Pending& p);
  std::string missingList() const;

  const TransportContext& ctx_;
  int fd_;
  std::map<int, PeerStreams>* out_;
  std::vector<Pending> pending_;
  int missing_ = 0;
  size_t evicted_ = 0;
};

void Acceptor::acceptNew() {
  for (;;) {
    int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      COLL_THROW(collSystemError, "tcp: accept on rank ", ctx_.rank, ": ", sysErrorText(errno));
    }
    Pending p{Socket(fd), hs::ServerHandshake(ctx_.secret, ConnRole::Tcp),
              Deadline(std::min(kHandshakeSec, ctx_.timeoutSec))};
    if (p.hs.start(fd) != hs::ServerHandshake::Status::InProgress) {
      COLL_WARN("tcp: dropped an incoming connection: %s", p.hs.why().c_str());
      continue;
    }
    if (pending_.size() >= kMaxPendingAccepts) {
      // The newcomer may be a real peer held out by strangers: the oldest goes, told that
      // it was busy, so that a real peer among them connects again.
      if (evicted_++ % 100 == 0)
        COLL_WARN("tcp: rank %d: %zu connections stuck in the handshake; dropping the oldest (%zu so far)",
                  ctx_.rank, pending_.size(), evicted_);
      hs::sendBusy(pending_.front().sock.fd());
      pending_.erase(pending_.begin());
    }
    pending_.push_back(std::move(p));
  }
}

// A handshake completed: checks that the hello names a stream this rank still waits for.
void Acceptor::finish(Pending& p) {
  const std::vector<uint8_t>& h = p.hs.hello();
  StreamHello f{};
  std::string tag;
  const bool wellFormed = parseStreamHello(h, &f, &tag);
  auto it = out_->find(static_cast<int>(f.rank));
  const char* why = nullptr;
  if (!wellFormed) why = "malformed hello";
  else if (tag != ctx_.jobTag) why = "hello for another communicator";
  else if (it == out_->end() || static_cast<int>(f.rank) >= ctx_.rank) why = "hello from a rank that is not an expected peer";
  else if (f.streams != it->second.socks.size() || f.stream >= f.streams) why = "hello with a wrong stream count or index";
  else if (it->second.socks[f.stream].valid()) why = "duplicate stream";
  if (why) {
    COLL_WARN("tcp: rank %d dropped a connection (%s: rank %u stream %u of %u, tag '%s')", ctx_.rank,
              why, f.rank, f.stream, f.streams, tag.substr(0, 64).c_str());
    return;
  }
  tuneSocket(p.sock.fd());
  it->second.socks[f.stream] = std::move(p.sock);
  --missing_;
}

std::string Acceptor::missingList() const {
  std::string s;
  for (const auto& [peer, ps] : *out_)
    for (size_t k = 0; k < ps.socks.size(); ++k)
      if (!ps.socks[k].valid()) s += strCat(s.empty() ? "" : ", ", "rank ", peer, " stream ", k);
  return s;
}

void Acceptor::run(const Deadline& deadline) {
  std::vector<pollfd> pfds;
  while (missing_ > 0) {
    if (deadline.expired())
      COLL_THROW(collTimeout, "tcp: rank ", ctx_.rank, " timed out after ", ctx_.timeoutSec,
                 " s waiting for connections (missing: ", missingList(), ")");
    // A rank that failed to initialise (out of descriptors, say) never connects; it told
    // the bootstrap, and waiting for it until COLL_TIMEOUT would only delay the error.
    std::string why;
    if (ctx_.bootstrap->failureReported(&why))
      COLL_THROW(collRemoteError, "tcp: rank ", ctx_.rank, " stopped waiting for connections (missing: ",
                 missingList(), "): ", why);
    if (ctx_.cancel && ctx_.cancel->load())
      COLL_THROW(collRemoteError, "tcp: rank ", ctx_.rank, " stopped waiting for connections (missing: ",
                 missingList(), "): the communicator being split was aborted");
    pfds.assign(1, pollfd{fd_, POLLIN, 0});
    for (auto& p : pending_) pfds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
    int rc = poll(pfds.data(), pfds.size(), std::min(deadline.remainingMs(), 100));
    if (rc < 0 && errno != EINTR) COLL_THROW(collSystemError, "tcp: poll: ", sysErrorText(errno));
    if (rc < 0) continue;
    // Handshakes first (pfds[1..] match pending_ as it was), then new connections.
    std::vector<Pending> still;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      if (!pfds[i + 1].revents) {
        if (p.until.expired()) COLL_WARN("tcp: rank %d dropped a connection silent in the handshake", ctx_.rank);
        else still.push_back(std::move(p));
        continue;
      }
      auto st = p.hs.step(p.sock.fd());
      if (st == hs::ServerHandshake::Status::InProgress) still.push_back(std::move(p));
      else if (st == hs::ServerHandshake::Status::Done) finish(p);
      else COLL_WARN("tcp: rank %d dropped an incoming connection: %s", ctx_.rank, p.hs.why().c_str());
    }
    pending_ = std::move(still);
    if (pfds[0].revents) acceptNew();
  }
}

// connectWithRetry in half-second slices: a peer that died while the job forms refuses
// connections until the deadline, and its failure (or the parent's cancel) ends it sooner.
Socket connectWatching(const TransportContext& ctx, int peer, const sockaddr_storage& addr, const Deadline& deadline) {
  for (;;) {
    try {
      return connectWithRetry(addr, Deadline(std::min(deadline.remainingSeconds(), 0.5)));
    } catch (const Error& e) {
      if (e.code() != collTimeout || deadline.expired()) throw;
    }
    std::string why;
    if (ctx.bootstrap->failureReported(&why))
      COLL_THROW(collRemoteError, "tcp: rank ", ctx.rank, " stopped connecting to rank ", peer, ": ", why);
    if (ctx.cancel && ctx.cancel->load())
      COLL_THROW(collRemoteError, "tcp: rank ", ctx.rank, " stopped connecting to rank ", peer,
                 ": the communicator being formed was cancelled");
  }
}

std::vector<ListenRecord> exchange(const TransportContext& ctx, const ListenRecord& mine) {
  std::vector<uint8_t> all = ctx.bootstrap->allGather(&mine, sizeof(mine));
  COLL_ENFORCE_EQ(all.size(), sizeof(mine) * size_t(ctx.nranks), collInternalError,
                  "tcp: address exchange returned the wrong size");
  std::vector<ListenRecord> recs(ctx.nranks);
  memcpy(recs.data(), all.data(), all.size());
  return recs;
}

void checkPeers(const TransportContext& ctx, const std::vector<int>& peers) {
  std::set<int> seen;
  for (int p : peers) {
    COLL_CHECK_ARG(p >= 0 && p < ctx.nranks && p != ctx.rank, "tcp connect on rank ", ctx.rank,
                   ": peer ", p, " is not another rank in [0, ", ctx.nranks, ")");
    COLL_CHECK_ARG(seen.insert(p).second, "tcp connect: peer ", p, " is listed twice");
  }
}

}  // namespace

Socket dialPeer(const sockaddr_storage& addr, const Deadline& deadline, Bootstrap* bootstrap, int rank, int peer) {
  for (;;) {
    try {
      return connectWithRetry(addr, Deadline(std::min(deadline.remainingSeconds(), 0.25)));
    } catch (const Error& e) {
      if (e.code() != collTimeout || deadline.expired()) throw;
    }
    std::string why;
    if (bootstrap && bootstrap->failureReported(&why))
      COLL_THROW(collRemoteError, "tcp: rank ", rank, " stopped connecting to rank ", peer, ": ", why);
  }
}

std::map<int, PeerStreams> connectStreams(const TransportContext& ctx, const std::vector<int>& peers,
                                          const StreamOptions& opt) {
  COLL_CHECK_ARG(ctx.bootstrap && ctx.secret, "tcp connect: the context has no bootstrap or secret");
  checkPeers(ctx, peers);
  Deadline deadline(ctx.timeoutSec);
  bool anyLower = std::any_of(peers.begin(), peers.end(), [&](int p) { return p < ctx.rank; });

  ListenRecord mine{kRecordMagic, uint32_t(opt.streams), uint64_t(opt.chunk), {}};
  Socket listener;
  if (anyLower) {
    mine.addr = chooseLocalAddrFor(ctx.root, opt.ifname);
    listener = listenOn(&mine.addr);
    setBufferSizes(listener.fd(), opt.bufferBytes);  // accepted sockets inherit it
    setNonBlocking(listener.fd(), true);
  }
  std::vector<ListenRecord> recs = exchange(ctx, mine);

  std::map<int, PeerStreams> out;
  for (int p : peers)
    COLL_ENFORCE_EQ(recs[p].magic, kRecordMagic, collRemoteError,
                    "tcp: rank ", p, " sent a malformed address record");
  // Higher ranks are connected first; the highest rank only accepts, so every chain of
  // waiting clients ends at a rank that serves them.
  for (int p : peers) {
    if (p < ctx.rank) continue;
    Pair pair = settle(opt, recs[p]);
    PeerStreams& ps = out[p];
    ps.chunk = pair.chunk;
    for (int k = 0; k < pair.streams; ++k) {
      std::vector<uint8_t> hello = makeStreamHello(ctx.rank, k, pair.streams, ctx.jobTag);
      Socket s;
      for (int attempt = 1;; ++attempt) {
        s = connectWatching(ctx, p, recs[p].addr, deadline);
        setBufferSizes(s.fd(), opt.bufferBytes);
        bool in = false;
        try {
          in = clientHandshakeOrBusy(s.fd(), ctx.secret, ConnRole::Tcp, hello.data(), hello.size(), deadline);
        } catch (const Error& e) {
          // A peer that gave up (another rank failed) or died drops us: say whom we dialed,
          // and why the job is failing where the bootstrap already knows.
          std::string why;
          const bool told = ctx.bootstrap->failureReported(&why);
          COLL_THROW(e.code(), "tcp: rank ", ctx.rank, " connecting to rank ", p, ": ", e.what(),
                     told ? "; the job is failing: " + why : std::string());
        }
        if (in) break;
        // Strangers crowd rank p's port: it dropped us to make room; connect again.
        if (deadline.expired())
          COLL_THROW(collTimeout, "tcp: rank ", ctx.rank, ": rank ", p, " dropped the connection as busy ",
                     attempt, " times within ", ctx.timeoutSec, " s (a flood of other connections?)");
        struct timespec ts = {0, std::min<long>(20, attempt * 2) * 1000 * 1000L};
        nanosleep(&ts, nullptr);
      }
      tuneSocket(s.fd());
      ps.socks.push_back(std::move(s));
    }
  }
  if (anyLower) {
    Acceptor acc(ctx, listener.fd(), &out);
    for (int p : peers)
      if (p < ctx.rank) acc.expect(p, settle(opt, recs[p]));
    acc.run(deadline);
  }
  return out;
}

}  // namespace coll::tcp
