// The shm link facing a broken or hostile peer: size mismatches, garbage in the segment
// header, the ring and the counters, and a peer that closes early. Each must end in a
// collRemoteError that says what happened, never a crash or a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "shm_test_util.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shmtest {
namespace {

using shm::ShmLink;

struct Pair {
  Config cfg;
  std::string tag = uniqueTag();
  LinkTable links;
  Link* a;  // rank 0 -> 1
  Link* b;  // rank 1 -> 0
  explicit Pair(Config c) : cfg(std::move(c)) {
    links = connectAll(2, cfg, tag);
    a = links[0][1].get();
    b = links[1][0].get();
  }
  ShmLink* shmA() { return dynamic_cast<ShmLink*>(a); }
};

void expectRemoteError(const Error& e, const std::string& needle) {
  EXPECT_EQ(e.code(), collRemoteError) << e.what();
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
      << "message '" << e.what() << "' lacks '" << needle << "'";
}

TEST(ShmFault, SizeMismatchNamesBothSizes) {
  Pair p(Config::fromEnv());
  std::vector<uint8_t> out(100, 1), in(99);
  Xfer s{out.data(), 100}, r{in.data(), 99};
  p.a->postSend(&s);
  p.b->postRecv(&r);
  Error e = driveUntilError(p.b, {&r});
  expectRemoteError(e, "rank 0 sent 100 bytes but rank 1 posted a receive of 99 bytes");
  // The error is sticky, and the sender learns about it instead of waiting forever.
  EXPECT_THROW(p.b->progress(), Error);
  std::vector<uint8_t> back(8);
  Xfer r2{back.data(), 8};
  p.a->postRecv(&r2);
  expectRemoteError(driveUntilError(p.a, {&r2}), "peer rank 1 failed");
}

TEST(ShmFault, SizeMismatchOnSingleCopyPath) {
  Pair p(Config::fromEnv());
  std::vector<uint8_t> out(1 << 20), in((1 << 20) + 64);
  Xfer s{out.data(), out.size()}, r{in.data(), in.size()};
  p.a->postSend(&s);
  p.b->postRecv(&r);
  expectRemoteError(driveUntilError(p.b, {&r}), "sent 1048576 bytes but rank 1 posted a receive of 1048640");
}

TEST(ShmFault, GarbageRecordInRing) {
  Pair p(Config::fromEnv());
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();  // the channel rank 0 writes
  std::memset(seg.ring(ch), 0xAB, 256);
  std::atomic_ref<uint64_t>(seg.chan(ch)->head).store(256, std::memory_order_release);
  std::vector<uint8_t> in(8);
  Xfer r{in.data(), 8};
  p.b->postRecv(&r);
  expectRemoteError(driveUntilError(p.b, {&r}), "corrupt record in the shm ring");
}

TEST(ShmFault, GarbageHeadCounter) {
  Pair p(Config::fromEnv());
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();
  std::atomic_ref<uint64_t>(seg.chan(ch)->head).store(~uint64_t{0} - 5, std::memory_order_release);
  std::vector<uint8_t> in(8);
  Xfer r{in.data(), 8};
  p.b->postRecv(&r);
  expectRemoteError(driveUntilError(p.b, {&r}), "corrupt ring head");
}

TEST(ShmFault, GarbageTailCounter) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "0");  // so a large send must wait for ring space
  Pair p(cfg);
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();
  // A tail beyond anything the sender published.
  std::atomic_ref<uint64_t>(seg.chan(ch)->tail).store(1 << 30, std::memory_order_release);
  std::vector<uint8_t> out(3 << 20, 7);
  Xfer s{out.data(), out.size()};
  Error e(collSuccess, "no error");
  try {
    p.a->postSend(&s);  // writes what fits, then needs the tail
    drive({p.a}, {&s}, 5);
  } catch (const Error& x) {
    e = x;
  }
  expectRemoteError(e, "corrupt ring tail");
}

TEST(ShmFault, GarbageAckCounter) {
  Pair p(Config::fromEnv());
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();
  std::vector<uint8_t> out(3 << 20, 7);
  Xfer big{out.data(), out.size()};
  p.a->postSend(&big);  // single-copy: waits for an ack
  std::atomic_ref<uint64_t>(seg.chan(ch)->acks).store(7, std::memory_order_release);
  expectRemoteError(driveUntilError(p.a, {&big}), "corrupt ack counter");
}

// A receiver that copies a single-copy message, acknowledges it and closes the link at
// once (it finished its part of the collective and left) has not failed: the sender
// must complete the send, even when it notices the close between two looks at the ack
// counter. Repeated, since that is a race between two threads.
TEST(ShmFault, ReceiverThatAcksAndClosesAtOnce) {
  Config cfg = Config::fromEnv();
  std::vector<uint8_t> out(1 << 20), in(out.size());
  fillPattern(out, 0, 1, 0);
  for (int round = 0; round < 300; ++round) {
    LinkTable links = connectAll(2, cfg, uniqueTag());
    Xfer s{out.data(), out.size()}, r{in.data(), in.size()};
    links[0][1]->postSend(&s);
    std::thread receiver([&] {
      links[1][0]->postRecv(&r);
      drive({links[1][0].get()}, {&r});
      links[1].clear();  // closes its side of the link
    });
    Error failure(collSuccess, "");
    try {
      drive({links[0][1].get()}, {&s});
    } catch (const Error& e) {
      failure = e;
    }
    receiver.join();
    ASSERT_EQ(failure.code(), collSuccess) << "round " << round << ": " << failure.what();
    ASSERT_EQ(firstMismatch(in, 0, 1, 0), -1) << "round " << round;
  }
}

// Back-to-back cooperative receives of different sizes: the receiver finishes a record
// and offers the next while the sender, not yet aware of the first's ack, may be reading
// the first offer's descriptor. It must retry, not take the new descriptor for a corrupt
// one (as it once did: "peer offered a corrupt cooperative copy").
TEST(ShmCoop, NextOfferWhileTheSenderReadsTheLast) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_COOP_PIECE", "64K");
  const size_t sizes[2] = {(512 << 10) + 64, (300 << 10) + 8};
  std::vector<uint8_t> out[2], in[2];
  for (int k = 0; k < 2; ++k) {
    out[k].resize(sizes[k]);
    fillPattern(out[k], 0, 1, k);
    in[k].resize(sizes[k]);
  }
  LinkTable links = connectAll(2, cfg, uniqueTag());
  Link* a = links[0][1].get();
  Link* b = links[1][0].get();
  constexpr int kMessages = 2000;
  Error failure(collSuccess, "");
  // Every send posted at once, so the sender has the next records out while the receiver
  // works on the current one; the receiver takes them one by one.
  std::vector<Xfer> sends(kMessages), recvs(kMessages);
  std::thread receiver([&] {
    try {
      for (int m = 0; m < kMessages; ++m) {
        recvs[m] = Xfer{in[m % 2].data(), sizes[m % 2]};
        recvs[m].hints.assist = true;
        b->postRecv(&recvs[m]);
        drive({b}, {&recvs[m]});
      }
    } catch (const Error& e) {
      failure = e;
    }
  });
  Error sendFailure(collSuccess, "");
  try {
    std::vector<Xfer*> all;
    for (int m = 0; m < kMessages; ++m) {
      sends[m] = Xfer{out[m % 2].data(), sizes[m % 2]};
      a->postSend(&sends[m]);
      all.push_back(&sends[m]);
    }
    drive({a}, all);
  } catch (const Error& e) {
    sendFailure = e;
  }
  receiver.join();
  EXPECT_EQ(sendFailure.code(), collSuccess) << sendFailure.what();
  EXPECT_EQ(failure.code(), collSuccess) << failure.what();
  for (int k = 0; k < 2; ++k) EXPECT_EQ(firstMismatch(in[k], 0, 1, k), -1);
}

// Cooperative single-copy: the receiver offers a large message and takes one piece;
// the sender, progressed alone, pushes every remaining piece; the receiver then sees all
// of it and completes. Pieces of the offer are claimed exactly once each.
TEST(ShmCoop, SenderPushesTheRemainingPieces) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_COOP_PIECE", "64K");
  Pair p(cfg);
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();
  const size_t n = (3 << 20) + 5;
  const uint64_t pieces = (n + (64 << 10) - 1) / (64 << 10);
  std::vector<uint8_t> out(n), in(n, 0);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 131 + 7);
  Xfer s{out.data(), n}, r{in.data(), n};
  r.hints.assist = true;
  p.a->postSend(&s);
  p.b->postRecv(&r);
  p.b->progress();  // record, offer, first piece
  auto claim = std::atomic_ref<uint64_t>(seg.chan(ch)->coopClaim);
  ASSERT_TRUE(claim.load() & shm::kCoopOpen) << "the receiver did not offer the message";
  EXPECT_EQ(claim.load() & shm::kCoopIndexMask, 1u);
  for (int i = 0; i < 10000 && (claim.load() & shm::kCoopIndexMask) < pieces; ++i) p.a->progress();
  EXPECT_EQ(claim.load() & shm::kCoopIndexMask, pieces) << "the sender did not push the rest";
  EXPECT_FALSE(s.complete) << "a send completes only on the receiver's ack";
  drive({p.a, p.b}, {&s, &r});
  EXPECT_EQ(in, out);
  EXPECT_EQ(std::atomic_ref<uint64_t>(seg.chan(ch)->coopDone).load(), n);
  // Without assist the same message is pulled by the receiver alone.
  std::fill(in.begin(), in.end(), 0);
  Xfer s2{out.data(), n}, r2{in.data(), n};
  p.a->postSend(&s2);
  p.b->postRecv(&r2);
  drive({p.a, p.b}, {&s2, &r2});
  EXPECT_EQ(in, out);
}

// A send with a mirror goes as a push record: the receiver offers its buffer but claims
// no piece, the sender writes every piece and copies each into the mirror, and the send
// completes only on the receiver's ack.
TEST(ShmPush, SenderCopiesEveryPieceAndTheMirror) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_COOP_PIECE", "64K");
  Pair p(cfg);
  ASSERT_TRUE(p.a->copiesMirror());
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();
  const size_t n = (3 << 20) + 5;
  const uint64_t pieces = (n + (64 << 10) - 1) / (64 << 10);
  std::vector<uint8_t> out(n), in(n, 0), mirror(n, 0);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 131 + 7);
  Xfer s{out.data(), n}, r{in.data(), n};
  s.hints.mirror = mirror.data();
  p.a->postSend(&s);
  p.b->postRecv(&r);
  for (int i = 0; i < 5; ++i) p.b->progress();  // record, offer; then only waiting
  auto claim = std::atomic_ref<uint64_t>(seg.chan(ch)->coopClaim);
  ASSERT_TRUE(claim.load() & shm::kCoopOpen) << "the receiver did not offer its buffer";
  EXPECT_EQ(claim.load() & shm::kCoopIndexMask, 0u) << "the receiver of a push claims nothing";
  for (uint64_t i = 0; i < pieces + 5; ++i) p.a->progress();
  EXPECT_EQ(claim.load() & shm::kCoopIndexMask, pieces) << "the sender did not push every piece";
  EXPECT_EQ(mirror, out) << "every pushed piece is in the mirror";
  EXPECT_FALSE(s.complete) << "a send completes only on the receiver's ack";
  drive({p.a, p.b}, {&s, &r});
  EXPECT_EQ(in, out);
}

// A 4 MiB message that rank 1 has just offered to rank 0 for a cooperative copy.
struct OfferedCoop {
  Pair p{Config::fromEnv()};
  std::vector<uint8_t> out = std::vector<uint8_t>(4 << 20, 3), in = std::vector<uint8_t>(4 << 20);
  Xfer s{out.data(), out.size()}, r{in.data(), in.size()};
  shm::ChanCtl* chan;  // the channel rank 0 sends on
  OfferedCoop() {
    chan = p.shmA()->segment().chan(p.shmA()->side());
    r.hints.assist = true;
    p.a->postSend(&s);
    p.b->postRecv(&r);
    p.b->progress();  // record, offer, first piece
  }
};

TEST(ShmCoop, OverwrittenClaimWordIsAnError) {
  OfferedCoop c;
  std::atomic_ref<uint64_t>(c.chan->coopClaim).store((uint64_t{77} << 32) | shm::kCoopOpen);
  expectRemoteError(driveUntilError(c.p.b, {&c.r}), "overwrote the cooperative copy's claim word");
}

TEST(ShmCoop, CorruptOfferIsAnErrorOnTheSender) {
  OfferedCoop c;
  std::atomic_ref<uint64_t>(c.chan->coopBytes).store(uint64_t{1} << 40);
  expectRemoteError(driveUntilError(c.p.a, {&c.s}), "corrupt cooperative copy");
}

// Rank 0 writes `rec` as the next record of its ring by hand; rank 1's receive of 4096
// bytes must fail with a message containing `needle`.
void expectRecordRefused(Pair& p, const shm::Record& rec, const std::string& needle) {
  const shm::Segment& seg = p.shmA()->segment();
  int ch = p.shmA()->side();
  std::memcpy(seg.ring(ch), &rec, sizeof rec);
  // Sealed as the sender seals it, so that only the field under test is wrong.
  const uint64_t word = shm::sealWord(rec.tag, rec.seq, seg.recordKey(ch));
  std::memcpy(seg.ring(ch), &word, sizeof word);
  std::atomic_ref<uint64_t>(seg.chan(ch)->head).store(64, std::memory_order_release);
  std::vector<uint8_t> in(4096);
  Xfer r{in.data(), in.size()};
  p.b->postRecv(&r);
  expectRemoteError(driveUntilError(p.b, {&r}), needle);
}

// A peer may neither ask us to read it nor announce pushes into us unless single-copy
// was negotiated.
TEST(ShmFault, SingleCopyRecordWhenNotNegotiated) {
  for (uint32_t tag : {shm::kTagSingle, shm::kTagPush}) {
    Config cfg = Config::fromEnv();
    cfg.set("COLL_SHM_CMA", "0");
    Pair p(cfg);
    expectRecordRefused(p, shm::Record{tag, 0, 4096, 0, 0x1000, RegionRef{}}, "single-copy was not negotiated");
  }
}

// A single-copy record whose buffer lies outside the collMemAlloc region it names would
// send a mapped copy past the region's end: refused before anything is mapped.
TEST(ShmFault, SingleCopyRecordOutsideItsRegion) {
  Pair p(Config::fromEnv());
  // The buffer's last half is past the region's end.
  expectRecordRefused(p, shm::Record{shm::kTagSingle, 0, 4096, 0, 0x100800, RegionRef{0x100000, 4096, 1, 3, 0}},
                      "outside the shared region it named");
}

TEST(ShmCoop, OfferOutsideItsRegionIsAnErrorOnTheSender) {
  OfferedCoop c;
  RegionRef bad{std::atomic_ref<uint64_t>(c.chan->coopDst).load() + 64, uint64_t{1} << 30, 1, 3, 0};
  shm::storeRegion(c.chan->coopRegion, bad);
  expectRemoteError(driveUntilError(c.p.a, {&c.s}), "outside the shared region it named");
}

// Rank 0's next header written by hand at ring offset `at`, sealed with `key` (its
// channel's key unless given), with `payload` inline or (whole) behind the header line.
void writeHeader(Pair& p, uint64_t at, uint32_t tag, uint32_t seq, const std::vector<uint8_t>& payload,
                 const uint64_t* key = nullptr) {
  const shm::Segment& seg = p.shmA()->segment();
  const int ch = p.shmA()->side();
  uint8_t* line = seg.ring(ch) + at;
  shm::Record rec{tag, seq, payload.size(), 0, 0, RegionRef{}};
  std::memcpy(line, &rec, sizeof rec);
  if (!payload.empty())
    std::memcpy(line + (tag == shm::kTagWhole ? shm::kLine : shm::kInlineOffset), payload.data(), payload.size());
  const uint64_t word = shm::sealWord(tag, seq, key ? *key : seg.recordKey(ch));
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(line)).store(word, std::memory_order_release);
}

// A receiver takes a sealed header at once, without waiting for the head counter: this
// is what saves small messages a cache-line transfer.
TEST(ShmFault, SealedRecordsAreTakenBeforeTheHeadMoves) {
  Pair p(Config::fromEnv());
  std::vector<uint8_t> small(8, 7), whole(200);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<uint8_t>(i * 3);
  writeHeader(p, 0, shm::kTagData, 0, small);
  writeHeader(p, shm::kLine, shm::kTagWhole, 1, whole);
  std::vector<uint8_t> in1(8), in2(200);
  Xfer r1{in1.data(), 8}, r2{in2.data(), 200};
  p.b->postRecv(&r1);
  p.b->postRecv(&r2);
  for (int i = 0; i < 100 && !r2.complete; ++i) p.b->progress();
  EXPECT_TRUE(r1.complete && r2.complete);
  EXPECT_EQ(in1, small);
  EXPECT_EQ(in2, whole);
  EXPECT_EQ(std::atomic_ref<uint64_t>(p.shmA()->segment().chan(p.shmA()->side())->head).load(), 0u);
}

// Bytes where the next header goes that are not sealed for it, with this channel's key,
// as the next record (an old header, a payload, the other channel's key) are not a
// record, however long the receiver looks. Once the head counter covers them they are
// a corrupt record.
TEST(ShmFault, StaleOrUnsealedLinesAreNotRecords) {
  Pair p(Config::fromEnv());
  const uint64_t otherKey = p.shmA()->segment().recordKey(1 - p.shmA()->side());
  const std::vector<uint8_t> payload(8, 9);
  std::vector<uint8_t> in(8);
  Xfer r{in.data(), 8};
  p.b->postRecv(&r);
  struct Stale {
    const char* what;
    uint32_t seq;
    const uint64_t* key;
    bool raw;
  };
  for (const Stale& st : {Stale{"unsealed", 0, nullptr, true}, Stale{"an older sequence number", 0xFFFFFFFFu, nullptr, false},
                          Stale{"a later sequence number", 1, nullptr, false}, Stale{"the other key", 0, &otherKey, false}}) {
    SCOPED_TRACE(st.what);
    writeHeader(p, 0, shm::kTagData, st.seq, payload, st.key);
    if (st.raw) {
      shm::Record rec{shm::kTagData, st.seq, payload.size(), 0, 0, RegionRef{}};
      std::memcpy(p.shmA()->segment().ring(p.shmA()->side()), &rec, 8);
    }
    for (int i = 0; i < 1000; ++i) p.b->progress();
    EXPECT_FALSE(r.complete);
  }
  std::atomic_ref<uint64_t>(p.shmA()->segment().chan(p.shmA()->side())->head).store(64, std::memory_order_release);
  expectRemoteError(driveUntilError(p.b, {&r}), "corrupt record in the shm ring");
}

// A whole record claims its payload sits in the ring: one larger than the ring is refused.
TEST(ShmFault, WholeRecordLargerThanTheRing) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_RING_BYTES", "4K");
  cfg.set("COLL_SHM_STAGE_CHUNK", "1K");
  Pair p(cfg);
  writeHeader(p, 0, shm::kTagWhole, 0, {});
  const shm::Segment& seg = p.shmA()->segment();
  const uint64_t big = 8192;
  std::memcpy(seg.ring(p.shmA()->side()) + 8, &big, sizeof big);  // the size field
  std::vector<uint8_t> in(big);
  Xfer r{in.data(), big};
  p.b->postRecv(&r);
  expectRemoteError(driveUntilError(p.b, {&r}), "cannot be in a ring of 4096 bytes");
}

TEST(ShmFault, OverwrittenHeaderIsNoticedWhileWaiting) {
  Pair p(Config::fromEnv());
  const shm::Segment& seg = p.shmA()->segment();
  std::memset(seg.base(), 0x5A, sizeof(shm::SegHeader));
  std::vector<uint8_t> in(8);
  Xfer r{in.data(), 8};
  p.b->postRecv(&r);
  expectRemoteError(driveUntilError(p.b, {&r}, 5), "header was overwritten");
}

TEST(ShmFault, PeerClosedWithReceivePending) {
  Pair p(Config::fromEnv());
  // What the peer sent before closing is still delivered...
  std::vector<uint8_t> out(5000, 9), in(5000), in2(8);
  Xfer s{out.data(), out.size()};
  p.a->postSend(&s);
  drive({p.a}, {&s});
  p.links[0].clear();
  Xfer r{in.data(), in.size()}, r2{in2.data(), 8};
  p.b->postRecv(&r);
  p.b->postRecv(&r2);
  // ...then the receive it can never satisfy fails.
  Error e = driveUntilError(p.b, {&r, &r2});
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(in, out);
  expectRemoteError(e, "closed the link");
}

TEST(ShmFault, WaitActivityReturnsWhenPeerPublishes) {
  Pair p(Config::fromEnv());
  std::vector<uint8_t> in(8), out(8, 3);
  Xfer r{in.data(), 8};
  p.b->postRecv(&r);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Xfer s{out.data(), 8};
    p.a->postSend(&s);
  });
  auto t0 = std::chrono::steady_clock::now();
  while (!r.complete && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    if (!p.b->progress()) p.b->waitActivity(2000);
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  sender.join();
  EXPECT_TRUE(r.complete);
  EXPECT_LT(ms, 1000) << "the futex wake must cut the 2 s wait short";
  EXPECT_EQ(in, out);
}

}  // namespace
}  // namespace coll::shmtest
