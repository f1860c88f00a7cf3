// The header line of a record in a shm ring (shm_link.hpp describes the kinds of record)
// and the checks a receiver makes of one before it acts on it. The peer, another
// process, writes these bytes: nothing in a header is used until checkRecordHeader has
// accepted it. The checks are inline and allocate nothing (they run once per message);
// only the text of a refusal is built out of line.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/shared_mem.hpp"
#include "collective.h"
#include "transport/shm/shm_segment.hpp"

namespace coll::shm {

// In-ring record header; payloads of data records up to kInlineMax bytes follow it at
// kInlineOffset in the same line.
struct Record {
  uint32_t tag;
  uint32_t seq;    // low 32 bits of the record's index in its direction
  uint64_t bytes;  // message size
  uint64_t call;   // the call's signature (Xfer::call)
  uint64_t addr;   // single-copy: the sender's buffer
  RegionRef region;  // single-copy: the collMemAlloc region holding it, if any
};
static_assert(sizeof(Record) <= kLine);
constexpr uint32_t kTagData = 0xC011DA7Au;
constexpr uint32_t kTagSingle = 0xC0115C01u;
constexpr uint32_t kTagPush = 0xC0115C02u;
constexpr uint32_t kTagWhole = 0xC011DA7Bu;
// A streamed payload like kTagData, written into the ring with streaming stores: received
// alike; the tag tells the receiving side which way its peer chose (followsPeer).
constexpr uint32_t kTagStream = 0xC011DA7Cu;
inline bool knownTag(uint32_t tag) {
  return tag == kTagData || tag == kTagWhole || tag == kTagSingle || tag == kTagPush || tag == kTagStream;
}
// A header that names the sender's buffer instead of carrying the payload.
inline bool singleCopyTag(uint32_t tag) { return tag == kTagSingle || tag == kTagPush; }
// The first word of a header as it sits in the ring.
inline uint64_t sealWord(uint32_t tag, uint32_t seq, uint64_t key) {
  return ((static_cast<uint64_t>(seq) << 32) | tag) ^ key;
}
constexpr size_t kInlineOffset = 24;
constexpr size_t kInlineMax = kLine - kInlineOffset;
static_assert(kInlineOffset >= sizeof(uint32_t) * 2 + sizeof(uint64_t), "inline payload overlaps the size");

inline uint64_t roundUpLine(uint64_t n) { return (n + kLine - 1) & ~uint64_t{kLine - 1}; }

// What the receiver knows when the next header arrives: its own position and settings
// and the front receive's. All of it is this process's own state.
struct RecordExpect {
  uint64_t index = 0;      // the record's index in its direction; a header carries its low 32 bits
  uint64_t offset = 0;     // ring position of the header (for messages)
  uint64_t ringBytes = 0;  // the ring's size: a power of two, at least kMinRingBytes
  uint64_t bytes = 0;      // the posted receive's size
  uint64_t call = 0;       // its call signature (0: any)
  bool singleCopyRecv = false;  // single-copy was negotiated: we may read the peer's buffers
  bool peerMayWrite = false;    // the peer may write into this process (push records)
  bool reduces = false;         // the receive reduces what arrives into its buffer
  int rank = 0;                 // ours and the peer's, for messages
  int peer = 0;
};

// Why a header was refused; the first check that fails, in this order.
enum class RecordFault : uint8_t {
  kNone = 0,
  kTagOrSeq,             // unknown tag, or not the sequence number expected next
  kSingleNotNegotiated,  // a single-copy or push record where single-copy was not negotiated
  kPushNotAllowed,       // a push record from a peer that may not write into this process
  kCallMismatch,         // the record belongs to another call than the receive
  kSizeMismatch,         // its size is not the receive's
  kWholeSize,            // a whole record whose payload cannot lie behind its header in the ring
  kBadBuffer,            // single-copy: a null address, or one whose end wraps
  kOutsideRegion,        // single-copy: the buffer is not inside the region it names
  kPushIntoReduce,       // a push record into a receive that reduces
};

// Whether the receiver may act on header `r` (its tag and seq as unsealed), and if not,
// why. A whole record's payload must fit in the ring behind the header, which a size
// close to 2^64 would pass if written as kLine + roundUpLine(bytes) <= ringBytes (the sum
// wraps); ringBytes is a multiple of kLine, so comparing the size itself is the same test.
inline RecordFault checkRecordHeader(const Record& r, const RecordExpect& e) {
  if (!knownTag(r.tag) || r.seq != static_cast<uint32_t>(e.index)) return RecordFault::kTagOrSeq;
  const bool single = singleCopyTag(r.tag);
  if (single && !e.singleCopyRecv) return RecordFault::kSingleNotNegotiated;
  if (r.tag == kTagPush && !e.peerMayWrite) return RecordFault::kPushNotAllowed;
  // Before the sizes: calls that differ usually differ in size too, and this says how.
  if (r.call != e.call && r.call && e.call) return RecordFault::kCallMismatch;
  if (r.bytes != e.bytes) return RecordFault::kSizeMismatch;
  if (r.tag == kTagWhole && (r.bytes <= kInlineMax || r.bytes > e.ringBytes - kLine)) return RecordFault::kWholeSize;
  if (single && r.bytes && (r.addr == 0 || r.addr + r.bytes < r.addr)) return RecordFault::kBadBuffer;
  if (single && r.region.valid() && !r.region.contains(r.addr, r.bytes)) return RecordFault::kOutsideRegion;
  if (r.tag == kTagPush && e.reduces) return RecordFault::kPushIntoReduce;
  return RecordFault::kNone;
}

// The error a link raises for a refused header: collInvalidUsage where the calls differ
// (a bug in the application, not in the peer), else collRemoteError.
inline collResult_t recordFaultCode(RecordFault f) {
  return f == RecordFault::kCallMismatch ? collInvalidUsage : collRemoteError;
}
// The message for fault f (not kNone) of header r: the field and the values involved.
std::string recordFaultText(RecordFault f, const Record& r, const RecordExpect& e);

// Where an accepted whole record's payload lies in the ring: `bytes` from ring position
// `start` to at most the ring's end, then the rest from the ring's start; the header and
// its payload take `advance` bytes of the ring.
struct RingSpans {
  uint64_t start;
  uint64_t first;   // bytes at start
  uint64_t second;  // bytes at ring position 0
  uint64_t advance;
};
// The payload follows the header line; like a streamed one it wraps only at a line
// boundary, so both pieces are whole elements. `tail` is the header's stream position.
inline RingSpans wholeRecordSpans(uint64_t tail, uint64_t bytes, uint64_t ringBytes) {
  const uint64_t start = (tail + kLine) & (ringBytes - 1);
  const uint64_t first = std::min<uint64_t>(bytes, ringBytes - start);
  return RingSpans{start, first, bytes - first, kLine + roundUpLine(bytes)};
}

}  // namespace coll::shm
