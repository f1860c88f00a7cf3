// Receives that reduce as they land (Xfer::with) between two real processes, on every
// data path of the shm link, and the sends a reducing receiver takes (Xfer::intoReduction).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "shm_fork_util.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shmtest {
namespace {

// Floats that sum exactly: what rank `me` contributes to element i of message k.
float contribution(int me, size_t k, size_t i) {
  return static_cast<float>((i * 7 + k * 13) % 1024) + (me ? 0.5f : 0.25f);
}

// Both directions at once, every size (in floats) posted as one window of reducing
// receives (Xfer::with, sum): half of them in place; the sends marked
// Xfer::intoReduction when asked. Returns wrong messages.
int exchangeReducing(Link* link, int me, const std::vector<size_t>& counts, bool sharedBuffers,
                     bool intoReduction = false) {
  std::vector<size_t> bytes;
  for (size_t n : counts) bytes.push_back(n * sizeof(float) + 64);
  std::optional<SharedWindow> sOut, sIn;
  std::vector<std::vector<float>> out(counts.size()), in(counts.size());
  if (sharedBuffers) sOut.emplace(bytes), sIn.emplace(bytes);
  std::vector<Xfer> sx(counts.size()), rx(counts.size());
  std::vector<float*> mine(counts.size()), result(counts.size());
  std::vector<Xfer*> all;
  for (size_t k = 0; k < counts.size(); ++k) {
    out[k].resize(counts[k]);
    in[k].resize(counts[k]);
    float* o = sharedBuffers ? reinterpret_cast<float*>(sOut->at(k)) : out[k].data();
    float* r = sharedBuffers ? reinterpret_cast<float*>(sIn->at(k)) : in[k].data();
    for (size_t i = 0; i < counts[k]; ++i) o[i] = contribution(me, k, i);
    const bool inPlace = k % 2 == 1;
    // The send of message k reads `o`; an in-place receive writes its sum over a copy of
    // it (the send of the same buffer is in flight), as the ring's reduce steps do.
    if (inPlace) std::memcpy(r, o, counts[k] * sizeof(float));
    mine[k] = o;
    result[k] = r;
    sx[k] = Xfer{o, counts[k] * sizeof(float)};
    sx[k].hints.intoReduction = intoReduction;
    rx[k] = Xfer{r, counts[k] * sizeof(float)};
    rx[k].hints.with = inPlace ? r : o;
    rx[k].hints.dtype = collFloat32;
    rx[k].hints.op = collSum;
    postPair(link, &sx[k], &rx[k], all);
  }
  drive({link}, all);
  int bad = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    for (size_t i = 0; i < counts[k]; ++i) {
      if (result[k][i] != contribution(0, k, i) + contribution(1, k, i)) {
        fprintf(stderr, "rank %d: message %zu (%zu floats) element %zu: %g\n", me, k, counts[k], i,
                static_cast<double>(result[k][i]));
        ++bad;
        break;
      }
    }
  }
  return bad;
}

// Receives that reduce as they land, on every data path: inline records, whole records
// (payload written before the header is sealed), pieces staged through the ring (wrapping), single-copy reads through the kernel (into a
// bounce buffer, step by step) and through mappings of collMemAlloc memory; in and out of place.
TEST(ShmFork, ReducingReceivesOnEveryPath) {
  struct Case {
    const char* name;
    const char* cma;
    bool tinyRing, shared;
  };
  for (const Case& cs : {Case{"single-copy", "1", false, false}, Case{"staged", "0", false, false},
                         Case{"tiny ring", "0", true, false}, Case{"mapped", "1", false, true},
                         Case{"chosen by measurement", "auto", false, false}}) {
    SCOPED_TRACE(cs.name);
    Config cfg = Config::fromEnv();
    cfg.set("COLL_SHM_CMA", cs.cma);
    if (cs.tinyRing) {
      cfg.set("COLL_SHM_RING_BYTES", "4K");
      cfg.set("COLL_SHM_STAGE_CHUNK", "1K");
    }
    const size_t t = cfg.getSize("COLL_SHM_CMA_THRESHOLD") / sizeof(float);
    // 0, inline (up to 12 floats), whole (13 and, but for the tiny ring's 1K stage
    // chunk, 1000), streamed, around the single-copy threshold, and more than one
    // single-copy step.
    const std::vector<size_t> counts = {0, 1, 12, 13, 1000, t - 1, t, t + 1, (1u << 20) + 3, 5};
    std::string tag = uniqueTag();
    pid_t parent = getpid();
    Child c = forkChild([&](int fd) {
      auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
      return exchangeReducing(link.get(), 1, counts, cs.shared);
    });
    ASSERT_GT(c.pid, 0);
    auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    ASSERT_NE(shm, nullptr);
    // Asked for where the peer's data is read in place (collMemAlloc memory) or comes
    // through the ring: always with COLL_SHM_CMA=0, by measurement with auto (unless the
    // host has more ranks than cores, which makes every large message single-copy); not
    // where the kernel copies every large message.
    std::vector<float> plain(16);
    SharedWindow sharedOne({64});
    const bool staged = std::string(cs.cma) == "0" || (std::string(cs.cma) == "auto" && shm->chooser() != nullptr);
    EXPECT_EQ(link->reducesOnReceive(plain.data(), 64), staged);
    EXPECT_TRUE(link->reducesOnReceive(sharedOne.at(0), 64));
    EXPECT_EQ(exchangeReducing(link.get(), 0, counts, cs.shared), 0);
    EXPECT_EQ(shm->mappedBytes() > 0, cs.shared) << "mapped reads only for collMemAlloc buffers";
    closePair(link, c, tag);
  }
}

// Sends to a reducing receiver (the sends of a reduce toward its root) go through the
// ring where the way is chosen by measurement, whatever the chooser would pick: the
// sender copies in while the receiver reduces out. Unmarked sends of the same sizes are
// the chooser's, and with COLL_SHM_CMA=1 every large send stays single-copy.
TEST(ShmFork, ReductionSendsGoThroughTheRing) {
  for (const char* cma : {"auto", "1"}) {
    SCOPED_TRACE(cma);
    Config cfg = Config::fromEnv();
    cfg.set("COLL_SHM_CMA", cma);
    const size_t t = cfg.getSize("COLL_SHM_CMA_THRESHOLD") / sizeof(float);
    // Two below the single-copy threshold (always staged, not counted), four above it.
    const std::vector<size_t> counts = {16, t - 1, t, 3 * t + 5, size_t{1} << 18, (size_t{1} << 20) + 3};
    const uint64_t large = 4;
    std::string tag = uniqueTag();
    pid_t parent = getpid();
    // The child checks its own counter (0: as expected) and its results.
    Child c = forkChild([&](int fd) {
      auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
      auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
      if (!shm) return 20;
      const uint64_t want = shm->chooser() ? large : 0;
      int bad = exchangeReducing(link.get(), 1, counts, false, true);
      if (shm->reductionSendsStaged() != want) return 21;
      bad += exchangeReducing(link.get(), 1, counts, false, false);
      if (shm->reductionSendsStaged() != want) return 22;
      return bad;
    });
    ASSERT_GT(c.pid, 0);
    auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    ASSERT_NE(shm, nullptr);
    // auto measures unless the host has more ranks than cores (then single-copy, as "1").
    const uint64_t want = shm->chooser() ? large : 0;
    if (std::string(cma) == "1") {
      EXPECT_EQ(shm->chooser(), nullptr);
    }
    EXPECT_EQ(exchangeReducing(link.get(), 0, counts, false, true), 0);
    EXPECT_EQ(shm->reductionSendsStaged(), want);
    EXPECT_EQ(exchangeReducing(link.get(), 0, counts, false, false), 0);
    EXPECT_EQ(shm->reductionSendsStaged(), want) << "unmarked sends are the chooser's";
    closePair(link, c, tag);
  }
}

// A reducing receive must be whole elements; a push record (a send with a mirror, whose
// sender writes into the receive buffer) cannot be reduced and is refused, not stored.
TEST(ShmFork, ReducingReceiveRefusesPartElementsAndPushes) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "1");
  const size_t big = 2 * cfg.getSize("COLL_SHM_CMA_THRESHOLD");
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    std::vector<uint8_t> data(big, 1), mirror(big);
    Xfer s{data.data(), big};
    s.hints.mirror = mirror.data();
    link->postSend(&s);
    // The parent fails the link instead of completing the send: wait until it has gone.
    char byte;
    while (::read(fd, &byte, 1) < 0 && errno == EINTR) {
    }
    return 0;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  std::vector<float> buf(big / sizeof(float)), with(big / sizeof(float));
  Xfer odd{buf.data(), 6};
  odd.hints.with = with.data();
  try {
    link->postRecv(&odd);
    ADD_FAILURE() << "6 bytes of float32 were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("whole number"), std::string::npos) << e.what();
  }
  Xfer r{buf.data(), big};
  r.hints.with = with.data();
  link->postRecv(&r);
  Error e = driveUntilError(link.get(), {&r});
  EXPECT_EQ(e.code(), collRemoteError);
  EXPECT_NE(std::string(e.what()).find("pushed"), std::string::npos) << e.what();
  link.reset();
  ::close(c.fd);
  EXPECT_EQ(reap(c.pid), 0);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

}  // namespace
}  // namespace coll::shmtest
