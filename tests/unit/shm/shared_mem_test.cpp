// collMemAlloc memory: the process's table of regions (base/shared_mem.hpp), a peer's
// mappings of them (transport/shm/peer_regions.hpp; this process plays the peer through
// its own /proc/<pid>/fd), and the C calls' handling of bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collective.h"
#include "base/error.hpp"
#include "base/shared_mem.hpp"
#include "transport/shm/peer_regions.hpp"

namespace coll {
namespace {

SharedAllocations& table() { return SharedAllocations::instance(); }

TEST(SharedMem, AllocationIsZeroedPageAlignedAndFound) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<uint8_t*>(table().allocate(3 * page - 100));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
  for (size_t i = 0; i < 3 * page; ++i) ASSERT_EQ(p[i], 0) << "byte " << i;
  RegionRef r = table().find(p + 100, 50);
  ASSERT_TRUE(r.valid());
  EXPECT_EQ(r.base, reinterpret_cast<uint64_t>(p));
  EXPECT_EQ(r.bytes, 3 * page);
  EXPECT_TRUE(table().find(p, 3 * page).valid()) << "the whole region";
  EXPECT_FALSE(table().find(p + 3 * page - 1, 2).valid()) << "past the end";
  EXPECT_FALSE(table().find(p - 1, 1).valid()) << "before the start";
  int onStack = 0;
  EXPECT_FALSE(table().find(&onStack, sizeof onStack).valid());
  table().release(p);
  EXPECT_FALSE(table().find(p, 1).valid()) << "freed";
}

TEST(SharedMem, ReleaseRefusesPointersItDidNotReturn) {
  auto* p = static_cast<uint8_t*>(table().allocate(100));
  const size_t before = table().count();
  try {
    table().release(p + 1);
    FAIL() << "an interior pointer was released";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not returned by collMemAlloc"), std::string::npos) << e.what();
  }
  EXPECT_EQ(table().count(), before) << "nothing was released";
  table().release(p);
  EXPECT_THROW(table().release(p), Error) << "double free";
}

TEST(SharedMem, CallsValidateTheirArguments) {
  EXPECT_EQ(collMemAlloc(nullptr, 64), collInvalidArgument);
  EXPECT_NE(std::string(collGetLastError(nullptr)).find("collMemAlloc: ptr is NULL"), std::string::npos)
      << collGetLastError(nullptr);
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(collMemAlloc(&p, 0), collInvalidArgument);
  EXPECT_EQ(p, nullptr) << "a failed allocation leaves NULL behind";
  EXPECT_EQ(collMemAlloc(&p, SIZE_MAX), collInvalidArgument);
  // Past what an off_t holds the file cannot be sized: too large, not a system error.
  EXPECT_EQ(collMemAlloc(&p, SIZE_MAX / 2 + 1), collInvalidArgument);
  EXPECT_NE(std::string(collGetLastError(nullptr)).find("is too large"), std::string::npos)
      << collGetLastError(nullptr);
  EXPECT_EQ(collMemFree(nullptr), collSuccess);
  int onStack = 0;
  EXPECT_EQ(collMemFree(&onStack), collInvalidArgument);
  EXPECT_NE(std::string(collGetLastError(nullptr)).find("collMemFree: pointer"), std::string::npos)
      << collGetLastError(nullptr);
  ASSERT_EQ(collMemAlloc(&p, 1 << 20), collSuccess);
  std::memset(p, 7, 1 << 20);
  EXPECT_EQ(collMemFree(p), collSuccess);
  EXPECT_EQ(collMemFree(p), collInvalidArgument) << "double free";
}

TEST(PeerRegions, MapsARegionAndTranslatesOffsets) {
  auto* p = static_cast<uint8_t*>(table().allocate(1 << 20));
  RegionRef ref = table().find(p, 1 << 20);
  shm::PeerRegions peer(getpid());
  uint8_t* at = peer.translate(ref, ref.base + 4096);
  ASSERT_NE(at, nullptr);
  EXPECT_NE(at, p + 4096) << "a mapping of its own";
  at[0] = 42;
  EXPECT_EQ(p[4096], 42) << "the same pages";
  p[(1 << 20) - 1] = 9;
  EXPECT_EQ(peer.translate(ref, ref.base + (1 << 20) - 1)[0], 9);
  EXPECT_EQ(peer.mapped(), 1u) << "mapped once";
  table().release(p);
}

TEST(PeerRegions, RefusesWhatIsNotTheNamedRegion) {
  auto* p = static_cast<uint8_t*>(table().allocate(8192));
  RegionRef ref = table().find(p, 1);
  shm::PeerRegions peer(getpid());
  EXPECT_EQ(peer.translate(RegionRef{}, 0x1000), nullptr) << "no region";
  RegionRef otherInode = ref;
  otherInode.ino += 1;
  EXPECT_EQ(peer.translate(otherInode, ref.base), nullptr);
  RegionRef tooLong = ref;
  tooLong.bytes = uint64_t{1} << 40;
  EXPECT_EQ(peer.translate(tooLong, ref.base), nullptr) << "larger than the file";
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  RegionRef plainFile = ref;
  plainFile.fd = fileno(f);
  EXPECT_EQ(peer.translate(plainFile, ref.base), nullptr) << "not a collMemAlloc file";
  fclose(f);
  RegionRef closed = ref;
  closed.fd = 100000;
  EXPECT_EQ(peer.translate(closed, ref.base), nullptr) << "no such descriptor";
  EXPECT_EQ(peer.mapped(), 0u);
  EXPECT_NE(peer.translate(ref, ref.base), nullptr) << "the real one still maps";
  table().release(p);
}

TEST(PeerRegions, AFreeElsewhereDropsCachedMappingsAndOldOnesAreEvicted) {
  std::vector<uint8_t*> bufs;
  shm::PeerRegions peer(getpid());
  for (size_t i = 0; i < shm::PeerRegions::kMaxMaps + 3; ++i) {
    bufs.push_back(static_cast<uint8_t*>(table().allocate(4096)));
    ASSERT_NE(peer.translate(table().find(bufs.back(), 1), reinterpret_cast<uint64_t>(bufs.back())), nullptr);
  }
  EXPECT_EQ(peer.mapped(), shm::PeerRegions::kMaxMaps) << "the oldest were unmapped";
  table().release(bufs.back());
  bufs.pop_back();
  RegionRef first = table().find(bufs.front(), 1);  // carries the new count of frees
  uint8_t* at = peer.translate(first, first.base);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(peer.mapped(), 1u) << "a free since the last look drops every mapping";
  bufs.front()[0] = 5;
  EXPECT_EQ(at[0], 5);
  for (uint8_t* b : bufs) table().release(b);
}

}  // namespace
}  // namespace coll
