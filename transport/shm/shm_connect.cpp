#include "transport/shm/shm_connect.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shm {
namespace {

uint64_t randomWord() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    int err = errno;
    COLL_THROW(collSystemError, "shm: getrandom failed: ", sysErrorText(err));
  }
  return v;
}

}  // namespace

Connector::Connector(const TransportContext& ctx, const std::vector<int>& peers,
                     const ShmOptions& opt)
    : ctx_(ctx), opt_(opt), peers_(peers) {
  COLL_CHECK_ARG(ctx.bootstrap != nullptr, "shm connect: no bootstrap");
}

void Connector::addPeers() {
  for (int p : peers_) {
    COLL_CHECK_ARG(p >= 0 && p < ctx_.nranks && p != ctx_.rank, "shm connect: peer ", p,
                   " is not another rank of ", ctx_.nranks, " (this is rank ", ctx_.rank, ")");
    for (const Pair& q : pairs_)
      COLL_CHECK_ARG(q.peer != p, "shm connect: peer ", p, " is listed twice");
    pairs_.push_back(Pair{p, ctx_.rank < p ? 0 : 1, Segment()});
  }
}

template <typename F>
void Connector::guarded(F&& f) {
  if (err_) return;
  try {
    f();
  } catch (...) {
    err_ = std::current_exception();
  }
}

std::map<int, std::unique_ptr<Link>> Connector::run(std::exception_ptr early) {
  err_ = early;
  guarded([&] {
    addPeers();
    nonce_ = randomWord();
    probeWord_ = randomWord() | 1;  // never 0, so an unread word cannot match
  });
  // Segments are anonymous memory files (see Segment): however a rank ends, nothing of
  // them is left behind. They are still made only once every rank has arrived.
  Hello mine{err_ ? 0u : 1u, static_cast<uint32_t>(getpid()), nonce_};
  std::vector<uint8_t> raw = ctx_.bootstrap->allGather(&mine, sizeof mine);
  COLL_ENFORCE_EQ(raw.size(), sizeof(Hello) * ctx_.nranks, collInternalError,
                  "shm connect: all-gather returned the wrong size");
  std::vector<Hello> hello(ctx_.nranks);
  std::memcpy(hello.data(), raw.data(), raw.size());
  guarded([&] { checkPeersOk(okOf(hello)); });
  guarded([&] { createSegments(); });
  std::vector<uint32_t> okB = gatherOk();
  guarded([&] { openSegments(hello, okB); });
  std::vector<uint32_t> okC = gatherOk();
  for (Pair& p : pairs_)
    if (p.side == 0) p.seg.unlink();  // the opener has it mapped, or never will
  guarded([&] { finishCreated(okC); });
  std::vector<uint32_t> okD = gatherOk();
  guarded([&] { checkPeersOk(okD); });
  if (err_) std::rethrow_exception(err_);
  return makeLinks();
}

// More of this communicator's ranks on this host than cores to run them: a staged copy
// needs both ends running at once, a single-copy one only the side that copies.
bool Connector::oversubscribed() const {
  int local = 0;
  for (const std::string& h : ctx_.hostIds) local += h == ctx_.hostIds[ctx_.rank];
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  // A process confined to a set of cores (a container's cpuset) runs on those; one bound
  // to a single core (collectiverun --bind-to core) says nothing about its peers'.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 1) cores = CPU_COUNT(&set);
  return cores > 0 && local > cores;
}

std::map<int, std::unique_ptr<Link>> Connector::makeLinks() {
  std::map<int, std::unique_ptr<Link>> links;
  const bool adaptive = opt_.adaptiveCopy && !oversubscribed();
  for (Pair& p : pairs_) {
    LinkParams lp;
    lp.rank = ctx_.rank;
    lp.peer = p.peer;
    lp.peerPid = p.seg.side(1 - p.side)->pid;
    lp.sameProcess = lp.peerPid == getpid();
    lp.singleCopyRecv = p.seg.side(p.side)->cmaFromPeer == kCmaOk;
    lp.singleCopySend = p.seg.side(1 - p.side)->cmaFromPeer == kCmaOk;
    lp.singleCopyMin = opt_.singleCopyMin;
    lp.copyChunk = opt_.copyChunk;
    lp.stageChunk = opt_.stageChunk;
    lp.coopMin = opt_.singleCopy ? opt_.coopMin : 0;
    lp.coopPiece = opt_.coopPiece;
    lp.mappedPiece = opt_.mappedPiece;
    lp.adaptiveCopy = adaptive;
    lp.copyProbeNs = opt_.copyProbeNs;
    COLL_TRACE("shm: rank %d <-> rank %d (pid %d): segment %s, ring %zu, single-copy send %d recv %d, "
               "chosen by measurement %d", ctx_.rank, p.peer, lp.peerPid, p.seg.name().c_str(),
               p.seg.ringBytes(), lp.singleCopySend, lp.singleCopyRecv, lp.adaptiveCopy);
    int side = p.side;
    links[p.peer] = std::make_unique<ShmLink>(std::move(p.seg), side, lp);
  }
  return links;
}

std::vector<uint32_t> Connector::okOf(const std::vector<Hello>& hello) {
  std::vector<uint32_t> ok;
  for (const Hello& h : hello) ok.push_back(h.ok);
  return ok;
}

std::vector<uint32_t> Connector::gatherOk() {
  uint32_t mine = err_ ? 0u : 1u;
  std::vector<uint8_t> raw = ctx_.bootstrap->allGather(&mine, sizeof mine);
  COLL_ENFORCE_EQ(raw.size(), sizeof(uint32_t) * ctx_.nranks, collInternalError,
                  "shm connect: all-gather returned the wrong size");
  std::vector<uint32_t> ok(ctx_.nranks);
  std::memcpy(ok.data(), raw.data(), raw.size());
  return ok;
}

void Connector::checkPeersOk(const std::vector<uint32_t>& ok) {
  for (const Pair& p : pairs_)
    if (ok[p.peer] != 1)
      COLL_THROW(collRemoteError, "shm connect: rank ", p.peer, " failed while setting up "
                 "shared memory (see that rank's error); this is rank ", ctx_.rank);
}

std::string Connector::segName(int lo, int hi, uint64_t nonce) const {
  // Names must be one path component; keep only characters that are safe everywhere.
  std::string tag;
  for (char c : ctx_.jobTag)
    if ((isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') && tag.size() < 48) tag += c;
  if (tag.empty()) tag = "job";
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(nonce));
  return strCat("/coll-", tag, "-", lo, "-", hi, "-", hex);
}

int Connector::expectedPid(int peer) const {
  return peer < static_cast<int>(ctx_.pids.size()) ? ctx_.pids[peer] : 0;
}

void Connector::fillSide(Pair& p) {
  SideCtl* s = p.seg.side(p.side);
  s->pid = getpid();
  s->rank = ctx_.rank;
  s->probeAddr = reinterpret_cast<uint64_t>(&probeWord_);
  s->probeValue = probeWord_;
  s->cmaFromPeer = kCmaUnknown;
  s->cpu = -1;
  s->status = kSideAttaching;
}

void Connector::createSegments() {
  for (Pair& p : pairs_) {
    if (p.side != 0) continue;
    p.seg = Segment::create(segName(ctx_.rank, p.peer, nonce_), opt_.ringBytes);
    fillSide(p);
  }
}

void Connector::openSegments(const std::vector<Hello>& hello, const std::vector<uint32_t>& ok) {
  checkPeersOk(ok);
  for (Pair& p : pairs_) {
    if (p.side != 1) continue;
    p.seg = Segment::open(segName(p.peer, ctx_.rank, hello[p.peer].nonce), static_cast<int>(hello[p.peer].pid));
    checkPeerSide(p);
    fillSide(p);
    probe(p);
    // Release: our side's fields are complete before the creator sees us active (it
    // reads them only after the next all-gather, which orders them anyway).
    std::atomic_ref<uint32_t>(p.seg.side(1)->status).store(kSideActive, std::memory_order_release);
  }
}

void Connector::finishCreated(const std::vector<uint32_t>& ok) {
  checkPeersOk(ok);
  for (Pair& p : pairs_) {
    if (p.side != 0) continue;
    checkPeerSide(p);
    probe(p);
    std::atomic_ref<uint32_t>(p.seg.side(0)->status).store(kSideActive, std::memory_order_release);
  }
}

// The peer's side must name the rank and process the bootstrap told us about.
void Connector::checkPeerSide(const Pair& p) const {
  const SideCtl* s = p.seg.side(1 - p.side);
  int want = expectedPid(p.peer);
  if (s->rank != p.peer || s->pid <= 0 || (want > 0 && s->pid != want))
    COLL_THROW(collRemoteError, "shm connect: segment ", p.seg.name(), " names rank ", s->rank,
               " pid ", s->pid, " but rank ", p.peer, " has pid ", want);
}

// Can we, as the receiver, read the peer's memory? Decided once per direction here.
void Connector::probe(Pair& p) {
  SideCtl* mine = p.seg.side(p.side);
  const SideCtl* peer = p.seg.side(1 - p.side);
  if (!opt_.singleCopy || peer->pid == getpid()) {
    // A peer thread needs no kernel help: its buffers are ours (memcpy).
    mine->cmaFromPeer = opt_.singleCopy ? kCmaOk : kCmaOff;
    return;
  }
  uint64_t got = 0;
  iovec local{&got, sizeof got};
  iovec remote{reinterpret_cast<void*>(peer->probeAddr), sizeof got};
  ssize_t n = process_vm_readv(peer->pid, &local, 1, &remote, 1, 0);
  int err = errno;
  if (n == static_cast<ssize_t>(sizeof got) && got == peer->probeValue) {
    mine->cmaFromPeer = kCmaOk;
    return;
  }
  mine->cmaFromPeer = kCmaOff;
  if (!loggedRefusal_) {
    loggedRefusal_ = true;
    COLL_INFO("shm: single-copy reads (process_vm_readv) of rank %d (pid %d) refused: %s; "
              "large messages use pipelined copies through the ring",
              p.peer, peer->pid, n < 0 ? sysErrorText(err).c_str() : "probe read wrong data");
  }
}

}  // namespace coll::shm
