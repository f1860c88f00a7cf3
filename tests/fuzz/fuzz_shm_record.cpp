// A record header in a shm ring as the receiver finds it (the peer, another process,
// wrote it): checkRecordHeader must refuse it with a message or accept only what the
// receiver can act on within bounds: an inline payload inside the header's line, a whole
// payload inside the ring and not over its own header, a single-copy buffer whose every
// piece has an end that does not wrap and lies in the region it names.
// Input: byte 0 = the receiver's settings (bits 0-2: single-copy negotiated, peer may
// write here, receive reduces; bits 3-4: ring of 4, 8, 16 or 64 KiB), then u64 record
// index, u64 ring position of the header, u64 receive size, u64 call signature (little
// endian), then the header line (64 bytes, zeros where the input ends), its first word
// as unsealed (tag, seq).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/shm/shm_record.hpp"

using namespace coll;
using namespace coll::shm;

namespace {

uint64_t take64(const uint8_t*& p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

void check(bool ok) {
  if (!ok) abort();
}

// The receiver's single-copy steps over [addr, addr + bytes): the first and the last
// piece of `chunk` bytes (readSingle), each a copy the kernel or a mapping is asked for.
void checkPieces(const Record& r, uint64_t chunk) {
  if (r.bytes == 0) return;
  const uint64_t lastOff = (r.bytes - 1) / chunk * chunk;
  for (uint64_t off : {uint64_t{0}, lastOff}) {
    const uint64_t n = std::min(chunk, r.bytes - off);
    const uint64_t at = r.addr + off;
    check(at >= r.addr && at != 0 && at + n >= at);  // neither wraps nor starts at 0
    if (r.region.valid()) check(r.region.contains(at, n));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHead = 1 + 4 * sizeof(uint64_t);
  if (size < kHead) return 0;
  static const uint64_t kRings[] = {4096, 8192, 16384, 65536};
  const uint8_t* p = data;
  const uint8_t flags = *p++;
  RecordExpect e;
  e.singleCopyRecv = flags & 1;
  e.peerMayWrite = flags & 2;
  e.reduces = flags & 4;
  e.ringBytes = kRings[(flags >> 3) & 3];
  e.index = take64(p);
  e.offset = take64(p) & ~uint64_t{kLine - 1};  // the receiver's tail moves by whole lines
  e.bytes = take64(p);
  e.call = take64(p);
  e.rank = 1;
  e.peer = 0;
  // The ring, exactly its size (AddressSanitizer sees a read past either end), with the
  // header line at the receiver's position.
  std::vector<uint8_t> ring(e.ringBytes);
  const uint64_t at = e.offset & (e.ringBytes - 1);
  std::memcpy(ring.data() + at, p, std::min<size_t>(kLine, size - kHead));
  Record r;
  std::memcpy(&r, ring.data() + at, sizeof r);  // as startRecord snapshots it

  const RecordFault f = checkRecordHeader(r, e);
  check(checkRecordHeader(r, e) == f);
  if (f != RecordFault::kNone) {
    const collResult_t code = recordFaultCode(f);
    check(code == collRemoteError || (code == collInvalidUsage && f == RecordFault::kCallMismatch));
    check(!recordFaultText(f, r, e).empty());
    return 0;
  }
  check(knownTag(r.tag) && r.seq == static_cast<uint32_t>(e.index) && r.bytes == e.bytes);
  if (singleCopyTag(r.tag)) {
    check(e.singleCopyRecv && (r.tag != kTagPush || (e.peerMayWrite && !e.reduces)));
    for (uint64_t chunk : {uint64_t{1} << 17, uint64_t{1} << 20}) checkPieces(r, chunk);
  } else if (r.tag == kTagWhole) {
    // The payload behind the header, in the ring, not reaching back over the header.
    const RingSpans s = wholeRecordSpans(e.offset, r.bytes, e.ringBytes);
    check(s.first + s.second == r.bytes && s.start % kLine == 0 && s.start + s.first <= e.ringBytes);
    check(s.second == 0 || (s.start + s.first == e.ringBytes && s.second <= at));
    check(s.advance <= e.ringBytes && s.advance % kLine == 0);
    std::vector<uint8_t> out(r.bytes);
    std::memcpy(out.data(), ring.data() + s.start, s.first);
    if (s.second) std::memcpy(out.data() + s.first, ring.data(), s.second);
  } else if (r.bytes <= kInlineMax) {
    // Inline: the payload is in the header's own line.
    std::vector<uint8_t> out(r.bytes);
    if (r.bytes) std::memcpy(out.data(), ring.data() + at + kInlineOffset, r.bytes);
  }
  // A streamed payload (data or stream records above kInlineMax) comes in pieces that the
  // ring's head counter bounds, not the header: nothing more to check of it here.
  return 0;
}
