#include "comm/recovery.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bootstrap/protocol.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/sha256.hpp"

namespace coll {

namespace {

constexpr uint32_t kNoticeMagic = 0x52564b45u;  // "RVKE"
enum : uint32_t { kNoticeRevoke = 1, kNoticeProbe = 2 };
constexpr size_t kNoticeBytes = 4 + 32 + 4 + 4;
constexpr int kProbeMs = 500;

std::vector<uint8_t> notice(const uint8_t* token, uint32_t kind, int rank) {
  bs::Writer w;
  w.u32(kNoticeMagic);
  w.bytes(token, 32);
  w.u32(kind);
  w.u32(static_cast<uint32_t>(rank));
  return std::move(w.data());
}

// Starts a non-blocking connect; returns the socket (invalid when it failed at once,
// with *err set).
Socket startConnect(const sockaddr_storage& to, int* err) {
  Socket s(::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) { *err = errno; return s; }
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&to), addrLen(to)) == 0 || errno == EINPROGRESS) {
    *err = 0;
    return s;
  }
  *err = errno;
  return Socket();
}

// Waits for a started connect; 0 when connected, else the error (ETIMEDOUT at the end).
int finishConnect(const Socket& s, int ms) {
  pollfd p{s.fd(), POLLOUT, 0};
  int rc;
  do rc = ::poll(&p, 1, ms); while (rc < 0 && errno == EINTR);
  if (rc == 0) return ETIMEDOUT;
  int soerr = 0;
  socklen_t len = sizeof(soerr);
  if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) return errno;
  return soerr;
}

// Peer of this kernel: is its process still running? Empty when it is, else why not.
std::string pidGone(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return strCat("its process (pid ", pid, ") has exited");
  const size_t close = line.rfind(')');
  if (close != std::string::npos && close + 2 < line.size()) {
    const char st = line[close + 2];
    if (st == 'Z' || st == 'X') return strCat("its process (pid ", pid, ") has exited (state ", st, ")");
  }
  return "";
}

void sha(const std::vector<uint8_t>& in, uint8_t out[32]) { sha256(in.data(), in.size(), out); }

}  // namespace

std::unique_ptr<Recovery> Recovery::create(Bootstrap& boot, const UniqueIdData& id, const Config& cfg,
                                           std::vector<uint64_t> kernelIds) {
  std::unique_ptr<Recovery> r(new Recovery());
  r->rank_ = boot.rank();
  r->nranks_ = boot.nranks();
  r->id_ = id;
  r->peers_ = boot.peers();
  r->kernelIds_ = std::move(kernelIds);
  r->kernelIds_.resize(r->nranks_, 0);
  sockaddr_storage a = chooseLocalAddrFor(id.root, cfg.getStr(kSocketIfnameEnv));
  setAddrPort(&a, 0);
  sockaddr_storage b = a;
  r->rendezvous_ = listenOn(&a);
  r->notice_ = listenOn(&b);
  setNonBlocking(r->notice_.fd());
  // The pid namespace too: peers on this kernel but in another container have pids that
  // mean nothing here.
  struct Blob {
    sockaddr_storage rendezvous, notice;
    uint64_t pidNs;
  } mine{a, b, 0};
  struct stat st{};
  if (::stat("/proc/self/ns/pid", &st) == 0) mine.pidNs = static_cast<uint64_t>(st.st_ino) ^ (static_cast<uint64_t>(st.st_dev) << 32);
  std::vector<uint8_t> all = boot.allGather(&mine, sizeof(mine));
  r->rendezvousAddrs_.resize(r->nranks_);
  r->noticeAddrs_.resize(r->nranks_);
  std::vector<uint64_t> ns(r->nranks_);
  for (int p = 0; p < r->nranks_; ++p) {
    Blob theirs;
    memcpy(&theirs, all.data() + p * sizeof(Blob), sizeof(Blob));
    r->rendezvousAddrs_[p] = theirs.rendezvous;
    r->noticeAddrs_[p] = theirs.notice;
    ns[p] = theirs.pidNs;
  }
  for (int p = 0; p < r->nranks_; ++p)  // pids are compared only within one pid namespace
    if (ns[p] == 0 || ns[p] != ns[r->rank_]) r->kernelIds_[p] = 0;
  bs::Writer w;
  w.bytes(id.secret, kSecretBytes);
  w.str("revoke");
  w.u64(id.jobNonce);
  sha(w.data(), r->token_);
  r->dead_.assign(r->nranks_, 0);
  r->why_.assign(r->nranks_, "");
  return r;
}

Recovery::~Recovery() { memset(token_, 0, sizeof(token_)); }

bool Recovery::pollNotices(int* from) {
  std::unique_lock<std::mutex> lock(pollMu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    *from = revokedBy_.load();
    return *from >= 0;
  }
  // Nothing here blocks: a notice still on its way is read at a later check, and a
  // connection that says nothing (a stray one, a flood) is dropped after a second.
  for (int n = 0; n < 64; ++n) {
    Socket s(::accept4(notice_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!s.valid()) break;
    if (pending_.size() >= 64) pending_.erase(pending_.begin());
    pending_.push_back(Pending{std::move(s), {}, std::chrono::steady_clock::now()});
  }
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    uint8_t buf[kNoticeBytes];
    const size_t want = kNoticeBytes - p.got.size();
    const ssize_t k = ::recv(p.sock.fd(), buf, want, MSG_DONTWAIT);
    if (k > 0) p.got.insert(p.got.end(), buf, buf + k);
    const bool complete = p.got.size() == kNoticeBytes;
    const bool gone = k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) || now - p.since > std::chrono::seconds(1);
    if (complete) {
      bs::Reader r(p.got.data(), p.got.size(), "notice");
      if (r.u32() == kNoticeMagic && memcmp(r.bytes(32), token_, 32) == 0) {
        const uint32_t kind = r.u32();
        const uint32_t who = r.u32();
        if (kind == kNoticeRevoke && revokedBy_.load() < 0 && who < static_cast<uint32_t>(nranks_))
          revokedBy_.store(static_cast<int>(who));
      }
    }
    if (complete || gone) pending_.erase(pending_.begin() + static_cast<long>(i));
    else ++i;
  }
  *from = revokedBy_.load();
  return *from >= 0;
}

void Recovery::sendRevoke() {
  const std::vector<uint8_t> msg = notice(token_, kNoticeRevoke, rank_);
  struct Out { int peer; Socket s; };
  std::vector<Out> outs;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (dead_[p]) continue;
    }
    int err = 0;
    Socket s = startConnect(noticeAddrs_[p], &err);
    if (!s.valid()) {
      if (err == ECONNREFUSED) markDead(p, strCat("its notice port ", addrToString(noticeAddrs_[p]), " refuses connections"));
      continue;
    }
    outs.push_back({p, std::move(s)});
  }
  const Deadline dl(1.0);
  for (auto& o : outs) {
    const int err = finishConnect(o.s, std::max(1, dl.remainingMs()));
    if (err == ECONNREFUSED) {
      markDead(o.peer, strCat("its notice port ", addrToString(noticeAddrs_[o.peer]), " refuses connections"));
      continue;
    }
    if (err != 0) {
      COLL_WARN("rank %d: could not tell rank %d of the revoke: %s", rank_, o.peer, sysErrorText(err).c_str());
      continue;
    }
    try {
      sendAll(o.s.fd(), msg.data(), msg.size(), Deadline(std::max(0.01, dl.remainingSeconds())));
    } catch (const Error& e) {
      COLL_WARN("rank %d: could not tell rank %d of the revoke: %s", rank_, o.peer, e.what());
    }
  }
}

void Recovery::markDead(int r, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dead_[r]) return;
  dead_[r] = 1;
  why_[r] = strCat(bs::describeRank(r, peers_[r]), ": ", why);
  COLL_INFO("rank %d: found %s", rank_, why_[r].c_str());
}

bool Recovery::probe(int r, std::string* why) {
  if (kernelIds_[r] != 0 && kernelIds_[r] == kernelIds_[rank_] && peers_[r].pid > 0) {
    *why = pidGone(peers_[r].pid);
    return why->empty();
  }
  int err = 0;
  Socket s = startConnect(noticeAddrs_[r], &err);
  if (s.valid()) err = finishConnect(s, kProbeMs);
  if (err == 0) {
    const std::vector<uint8_t> msg = notice(token_, kNoticeProbe, rank_);
    (void)::send(s.fd(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return true;
  }
  if (err == ETIMEDOUT)
    *why = strCat("its notice port ", addrToString(noticeAddrs_[r]), " did not answer within ", kProbeMs, " ms");
  else
    *why = strCat("its notice port ", addrToString(noticeAddrs_[r]), " refuses connections (", sysErrorText(err), ")");
  return false;
}

bool Recovery::alive(int r) {
  if (r == rank_) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_[r]) return false;
  }
  std::string why;
  if (probe(r, &why)) return true;
  markDead(r, why);
  return false;
}

void Recovery::probeAll() {
  int from;
  pollNotices(&from);  // probes of the peers queue on this rank's port too
  for (int p = 0; p < nranks_; ++p) alive(p);
}

std::vector<int> Recovery::failedRanks() {
  probeAll();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (int p = 0; p < nranks_; ++p)
    if (dead_[p]) out.push_back(p);
  return out;
}

std::string Recovery::failureReason(int r) {
  std::lock_guard<std::mutex> lock(mu_);
  return r >= 0 && r < nranks_ ? why_[r] : std::string();
}

UniqueIdData Recovery::derivedId(const char* tag, uint64_t attempt, int host) const {
  UniqueIdData d;
  bs::Writer w;
  w.bytes(id_.secret, kSecretBytes);
  w.str(tag);
  w.u64(attempt);
  w.u32(static_cast<uint32_t>(host));
  w.u64(id_.jobNonce);
  uint8_t h[32];
  sha(w.data(), h);
  memcpy(d.secret, h, kSecretBytes);
  w.str("nonce");
  sha(w.data(), h);
  memcpy(&d.jobNonce, h, sizeof(d.jobNonce));
  d.root = rendezvousAddrs_.at(host);
  return d;
}

void Recovery::hostRendezvous(const UniqueIdData& id, int nranks, double timeoutSec) {
  const int fd = ::fcntl(rendezvous_.fd(), F_DUPFD_CLOEXEC, 0);
  COLL_SYSCHECK(fd, "dup of the rendezvous port");
  RendezvousRoot::startOn(fd, rendezvousAddrs_[rank_], nranks, id.secret, timeoutSec);
}

std::string uniqueIdToHex(const collUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    const auto b = static_cast<uint8_t>(id.internal[i]);
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

collUniqueId uniqueIdFromHex(const std::string& hex) {
  collUniqueId id{};
  COLL_CHECK_ARG(hex.size() == 2 * sizeof(id.internal), "a unique id in hex has ", 2 * sizeof(id.internal),
                 " digits, not ", hex.size());
  auto val = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    COLL_THROW(collInvalidArgument, "a unique id in hex has a non-hex character '", c, "'");
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i)
    id.internal[i] = static_cast<char>(val(hex[2 * i]) << 4 | val(hex[2 * i + 1]));
  return id;
}

}  // namespace coll
