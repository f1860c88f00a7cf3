// The checks of a shm record header (transport/shm/shm_record.hpp): each case below is a
// valid header with one field wrong, so that it is refused by that field's check alone,
// with a message naming it.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "transport/shm/shm_record.hpp"

using namespace coll;
using namespace coll::shm;

namespace {

constexpr uint64_t kRing = 4096;

// A receiver of 4096 bytes for call 77, record #5, single-copy negotiated both ways.
RecordExpect expect() {
  RecordExpect e;
  e.index = 5;
  e.offset = 320;
  e.ringBytes = kRing;
  e.bytes = 4096;
  e.call = 77;
  e.singleCopyRecv = true;
  e.peerMayWrite = true;
  e.reduces = false;
  e.rank = 1;
  e.peer = 0;
  return e;
}

Record record(uint32_t tag, uint64_t bytes = 4096) { return Record{tag, 5, bytes, 77, 0x10000, RegionRef{}}; }

// Refused with fault f and a message containing `needle`.
void expectRefused(const Record& r, const RecordExpect& e, RecordFault f, const std::string& needle,
                   collResult_t code = collRemoteError) {
  EXPECT_EQ(checkRecordHeader(r, e), f);
  EXPECT_EQ(recordFaultCode(f), code);
  EXPECT_NE(recordFaultText(f, r, e).find(needle), std::string::npos) << recordFaultText(f, r, e);
}

}  // namespace

TEST(ShmRecord, ValidHeadersOfEveryKindAreAccepted) {
  const RecordExpect e = expect();
  for (uint32_t tag : {kTagData, kTagStream, kTagSingle, kTagPush}) {
    SCOPED_TRACE(tag);
    EXPECT_EQ(checkRecordHeader(record(tag), e), RecordFault::kNone);
  }
  RecordExpect small = e;
  small.bytes = kInlineMax;
  EXPECT_EQ(checkRecordHeader(record(kTagData, kInlineMax), small), RecordFault::kNone);
  small.bytes = 0;
  EXPECT_EQ(checkRecordHeader(record(kTagData, 0), small), RecordFault::kNone);
  // A single-copy record of no bytes names no buffer.
  Record none = record(kTagSingle, 0);
  none.addr = 0;
  EXPECT_EQ(checkRecordHeader(none, small), RecordFault::kNone);
  // The largest whole record fills the ring: header line and payload.
  RecordExpect whole = e;
  whole.bytes = kRing - kLine;
  EXPECT_EQ(checkRecordHeader(record(kTagWhole, kRing - kLine), whole), RecordFault::kNone);
  whole.bytes = kInlineMax + 1;
  EXPECT_EQ(checkRecordHeader(record(kTagWhole, kInlineMax + 1), whole), RecordFault::kNone);
}

TEST(ShmRecord, SequenceNumberIsTheIndexsLow32Bits) {
  RecordExpect e = expect();
  e.index = (uint64_t{3} << 32) | 5;
  EXPECT_EQ(checkRecordHeader(record(kTagData), e), RecordFault::kNone);
}

TEST(ShmRecord, UnknownTagIsRefused) {
  Record r = record(0xC011DA7Du);
  expectRefused(r, expect(), RecordFault::kTagOrSeq, "corrupt record in the shm ring at offset 320 (tag 0xc011da7d");
  r.tag = 0;
  expectRefused(r, expect(), RecordFault::kTagOrSeq, "tag 0x0,");
}

TEST(ShmRecord, WrongSequenceNumberIsRefused) {
  for (uint32_t seq : {4u, 6u, 0xFFFFFFFFu}) {
    Record r = record(kTagData);
    r.seq = seq;
    expectRefused(r, expect(), RecordFault::kTagOrSeq, "seq " + std::to_string(seq) + "; expected seq 5)");
  }
}

TEST(ShmRecord, SingleCopyRecordWhenNotNegotiated) {
  RecordExpect e = expect();
  e.singleCopyRecv = false;
  for (uint32_t tag : {kTagSingle, kTagPush})
    expectRefused(record(tag), e, RecordFault::kSingleNotNegotiated, "single-copy was not negotiated");
  EXPECT_EQ(checkRecordHeader(record(kTagData), e), RecordFault::kNone);
}

TEST(ShmRecord, PushFromAPeerThatMayNotWriteHere) {
  RecordExpect e = expect();
  e.peerMayWrite = false;
  expectRefused(record(kTagPush), e, RecordFault::kPushNotAllowed, "push record but may not write into this process");
  EXPECT_EQ(checkRecordHeader(record(kTagSingle), e), RecordFault::kNone);
}

TEST(ShmRecord, OtherCallIsAUsageErrorAndComesBeforeTheSize) {
  Record r = record(kTagData, 8);  // another size too: the call is what is named
  r.call = 78;
  EXPECT_EQ(checkRecordHeader(r, expect()), RecordFault::kCallMismatch);
  EXPECT_EQ(recordFaultCode(RecordFault::kCallMismatch), collInvalidUsage);
  EXPECT_NE(recordFaultText(RecordFault::kCallMismatch, r, expect()).find("rank 0 sent a message of its"),
            std::string::npos);
  // A side without a signature matches any call.
  r = record(kTagData);
  r.call = 0;
  EXPECT_EQ(checkRecordHeader(r, expect()), RecordFault::kNone);
  RecordExpect e = expect();
  e.call = 0;
  r.call = 78;
  EXPECT_EQ(checkRecordHeader(r, e), RecordFault::kNone);
}

TEST(ShmRecord, SizeOtherThanTheReceivesIsRefused) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{4095}, uint64_t{4097}, ~uint64_t{0}})
    expectRefused(record(kTagData, bytes), expect(), RecordFault::kSizeMismatch,
                  "message size mismatch: rank 0 sent " + std::to_string(bytes) +
                      " bytes but rank 1 posted a receive of 4096 bytes (message #5 in this direction)");
}

TEST(ShmRecord, WholeRecordThatCannotBeBehindItsHeader) {
  RecordExpect e = expect();
  // Small enough to be inline: a sender never makes it whole.
  e.bytes = kInlineMax;
  expectRefused(record(kTagWhole, kInlineMax), e, RecordFault::kWholeSize,
                "offset 320: a whole 40-byte message cannot be in a ring of 4096 bytes");
  // One byte more than the ring holds behind the header line.
  e.bytes = kRing - kLine + 1;
  expectRefused(record(kTagWhole, e.bytes), e, RecordFault::kWholeSize, "a whole 4033-byte message");
  e.bytes = 8192;
  expectRefused(record(kTagWhole, e.bytes), e, RecordFault::kWholeSize, "cannot be in a ring of 4096 bytes");
  // Sizes whose round-up to a line wraps to 0 (header + payload would seem to take 64 bytes).
  for (uint64_t bytes : {~uint64_t{0}, ~uint64_t{0} - 62}) {
    e.bytes = bytes;
    expectRefused(record(kTagWhole, bytes), e, RecordFault::kWholeSize, "a whole " + std::to_string(bytes));
  }
}

TEST(ShmRecord, SingleCopyBufferAtNullOrWrapping) {
  for (uint32_t tag : {kTagSingle, kTagPush}) {
    Record r = record(tag);
    r.addr = 0;
    expectRefused(r, expect(), RecordFault::kBadBuffer, "bad buffer (address 0x0, 4096 bytes)");
    r.addr = ~uint64_t{0} - 4094;  // the last byte would be at 2^64
    expectRefused(r, expect(), RecordFault::kBadBuffer, "bad buffer (address 0xfffffffffffff001, 4096 bytes)");
    r.addr = ~uint64_t{0} - 4096;  // the last byte just below the top
    EXPECT_EQ(checkRecordHeader(r, expect()), RecordFault::kNone);
  }
}

TEST(ShmRecord, SingleCopyBufferOutsideTheRegionItNames) {
  const RegionRef region{0x100000, 8192, 1, 3, 0};
  Record r = record(kTagSingle);
  r.region = region;
  for (uint64_t addr : {uint64_t{0x100000}, uint64_t{0x101000}}) {  // first and last fit
    r.addr = addr;
    EXPECT_EQ(checkRecordHeader(r, expect()), RecordFault::kNone);
  }
  for (uint64_t addr : {uint64_t{0xFFFFF}, uint64_t{0x101001}, uint64_t{0x200000}}) {
    r.addr = addr;
    expectRefused(r, expect(), RecordFault::kOutsideRegion,
                  "outside the shared region it named (0x100000, 8192 bytes)");
  }
  // A region smaller than the buffer, wherever they lie.
  r.addr = 0x100000;
  r.region.bytes = 4095;
  expectRefused(r, expect(), RecordFault::kOutsideRegion, "peer published a buffer (0x100000, 4096 bytes)");
  // A region with a huge size does not make a wrapping end fit.
  r.region = RegionRef{0x1000, ~uint64_t{0}, 1, 3, 0};
  r.addr = ~uint64_t{0} - 100;
  EXPECT_NE(checkRecordHeader(r, expect()), RecordFault::kNone);
}

TEST(ShmRecord, PushIntoAReceiveThatReduces) {
  RecordExpect e = expect();
  e.reduces = true;
  expectRefused(record(kTagPush), e, RecordFault::kPushIntoReduce,
                "rank 0 pushed a 4096-byte message into a receive that reduces it (message #6 in this direction)");
  for (uint32_t tag : {kTagData, kTagStream, kTagSingle})
    EXPECT_EQ(checkRecordHeader(record(tag), e), RecordFault::kNone);
}

TEST(ShmRecord, FirstFailingCheckIsTheOneReported) {
  RecordExpect e = expect();
  e.singleCopyRecv = false;
  Record r = record(kTagSingle, 1);
  r.seq = 9;
  EXPECT_EQ(checkRecordHeader(r, e), RecordFault::kTagOrSeq);
  r.seq = 5;
  EXPECT_EQ(checkRecordHeader(r, e), RecordFault::kSingleNotNegotiated);
  e.singleCopyRecv = true;
  r.addr = 0;
  EXPECT_EQ(checkRecordHeader(r, e), RecordFault::kSizeMismatch);
}

TEST(ShmRecord, WholeRecordSpansStayInTheRing) {
  // Header in the middle: one piece behind it.
  RingSpans s = wholeRecordSpans(10 * kRing + 128, 200, kRing);
  EXPECT_EQ(s.start, 192u);
  EXPECT_EQ(s.first, 200u);
  EXPECT_EQ(s.second, 0u);
  EXPECT_EQ(s.advance, kLine + 256);
  // Header on the last line: the payload starts at the ring's start.
  s = wholeRecordSpans(kRing - kLine, kRing - kLine, kRing);
  EXPECT_EQ(s.start, 0u);
  EXPECT_EQ(s.first, kRing - kLine);
  EXPECT_EQ(s.second, 0u);
  EXPECT_EQ(s.advance, kRing);
  // Header two lines from the end: one line, then the rest from the start, which ends
  // where the header is.
  s = wholeRecordSpans(3 * kRing - 2 * kLine, kRing - kLine, kRing);
  EXPECT_EQ(s.start, kRing - kLine);
  EXPECT_EQ(s.first, kLine);
  EXPECT_EQ(s.second, kRing - 2 * kLine);
  EXPECT_EQ(s.advance, kRing);
}
