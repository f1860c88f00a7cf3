// The shared-memory segment of one pair of ranks and its layout.
//
// One anonymous memory file (memfd) per pair, created by the lower rank ("side 0") and mapped by
// both. It holds two one-way channels: channel c carries bytes from side c to side 1-c.
//
//   offset 0      SegHeader  (immutable after creation: magic, version, sizes, the
//                             channels' record keys)
//   64, 128       SideCtl[2] (one line per side: futex word, status, pid, probe)
//   192 ..        ChanCtl[2] (per channel: head line written by the sender,
//                             tail/acks line written by the receiver, and the two
//                             lines of a cooperative single-copy transfer)
//   4096          ring of channel 0, then ring of channel 1 (ringBytes each)
//
// Counters live on their own cache lines so that the producer's and the consumer's
// stores never fight over a line (false sharing would add a transfer per message).
// Nothing the peer can write is trusted: every value read from the segment is copied
// out once and checked before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/shared_mem.hpp"

namespace coll::shm {

constexpr uint64_t kSegMagic = 0x314d48534c4c4f43ull;  // "COLLSHM1" little-endian
constexpr uint32_t kSegVersion = 5;
constexpr size_t kLine = 64;
constexpr size_t kRingOffset = 4096;
constexpr size_t kMinRingBytes = 4096;
constexpr size_t kMaxRingBytes = size_t{1} << 30;

// Written once by the creator before the segment name is published.
struct alignas(kLine) SegHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t lineBytes;
  uint64_t ringBytes;
  uint64_t segBytes;
  // Per channel, random: the first word of every record header is sealed with it
  // (shm_link.hpp), so that stale bytes left in the ring cannot pass for a new record.
  uint64_t recordKey[2];
};

enum SideStatus : uint32_t { kSideAttaching = 0, kSideActive = 1, kSideClosed = 2, kSideFailed = 3 };
enum CmaState : uint32_t { kCmaUnknown = 0, kCmaOk = 1, kCmaOff = 2 };

// One line per side. The owner writes everything except `bell`, which the peer bumps
// (only when `sleeping` is set, so none of these lines is touched per message).
struct alignas(kLine) SideCtl {
  uint32_t bell;         // futex word the owner sleeps on
  uint32_t sleeping;     // owner: 1 while it is about to or does sleep on `bell`
  uint32_t status;       // SideStatus
  uint32_t cmaFromPeer;  // CmaState: can the owner, as receiver, read the peer's memory?
  int32_t pid;
  int32_t rank;
  uint64_t probeAddr;    // address of a word in the owner's memory holding probeValue
  uint64_t probeValue;
  // The CPU the owner last waited on (-1: not known yet), rewritten only when it changes:
  // a waiter whose peer shares its CPU stops spinning (see Link::peerSharesCpu).
  int32_t cpu;
};

// Cooperative single-copy: for a large single-copy record the receiver offers the
// message to the sender too, which then pushes pieces into the receiver's buffer
// (process_vm_writev) while the receiver pulls others (process_vm_readv), so two cores
// copy instead of one. Both claim pieces from coopClaim by compare-and-swap:
//   bits 63..32  low 32 bits of the record's sequence number (a stale claim fails)
//   bit 31       open: the receiver offered this record
//   bits 30..0   next piece to claim
// The receiver writes dst/bytes/piece/region before it opens the claim word (release).
constexpr uint64_t kCoopOpen = uint64_t{1} << 31;
constexpr uint64_t kCoopIndexMask = kCoopOpen - 1;

struct ChanCtl {
  alignas(kLine) uint64_t head;  // sender: stream bytes written (multiple of kLine)
  alignas(kLine) uint64_t tail;  // receiver: stream bytes consumed (multiple of kLine)
  uint64_t acks;                 // receiver: single-copy records finished
  alignas(kLine) uint64_t coopClaim;  // both: see above
  uint64_t coopDst;                   // receiver: its buffer for the offered record
  uint64_t coopBytes;                 // receiver: the record's size
  uint64_t coopPiece;                 // receiver: bytes per piece
  RegionRef coopRegion;               // receiver: the collMemAlloc region holding coopDst, if any
  alignas(kLine) uint64_t coopDone;   // both: bytes of the offered record copied so far
};

static_assert(sizeof(SegHeader) == kLine && sizeof(SideCtl) == kLine);
static_assert(sizeof(ChanCtl) == 4 * kLine);
static_assert(kLine + 2 * sizeof(SideCtl) + 2 * sizeof(ChanCtl) <= kRingOffset);

inline size_t segmentBytesFor(size_t ringBytes) { return kRingOffset + 2 * ringBytes; }
// Empty when ringBytes is usable (power of two within limits), else why not.
std::string checkRingBytes(uint64_t ringBytes);

// Owns a mapping of one segment and, on the creator's side until unlink(), the anonymous
// memory file (memfd) behind it. No segment ever has a name in /dev/shm, so none can be
// left there by a process that is killed.
class Segment {
 public:
  // A memfd called `name` (for /proc and error messages), allocated, mapped, header
  // initialised. Throws collSystemError.
  static Segment create(const std::string& name, size_t ringBytes);
  // Opens the segment `name` that process `creatorPid` created and still holds (through
  // /proc/<pid>/fd) and validates its header against the object's size.
  // Throws collSystemError (cannot open/map) or collRemoteError (bad header).
  static Segment open(const std::string& name, int creatorPid);

  Segment() = default;
  Segment(Segment&& o) noexcept { *this = static_cast<Segment&&>(o); }
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() { reset(); }

  // Creator: closes the descriptor the peer opens the segment through, once it has (or
  // never will). Idempotent; a no-op on the opener's side.
  void unlink();
  // Empty if the header still says what it said when the segment was mapped.
  std::string checkHeader() const;

  uint8_t* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  size_t ringBytes() const { return ringBytes_; }
  const std::string& name() const { return name_; }
  SegHeader* header() const { return reinterpret_cast<SegHeader*>(base_); }
  SideCtl* side(int s) const { return reinterpret_cast<SideCtl*>(base_ + kLine * (1 + s)); }
  // Channel c's record key, as read when the segment was made or opened.
  uint64_t recordKey(int c) const { return keys_[c]; }
  ChanCtl* chan(int c) const {
    return reinterpret_cast<ChanCtl*>(base_ + kLine * 3 + sizeof(ChanCtl) * c);
  }
  uint8_t* ring(int c) const { return base_ + kRingOffset + ringBytes_ * c; }

 private:
  void reset();
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  size_t ringBytes_ = 0;
  uint64_t keys_[2] = {0, 0};
  std::string name_;
  int fd_ = -1;  // creator: the memfd, held until the peer has opened it
};

}  // namespace coll::shm
