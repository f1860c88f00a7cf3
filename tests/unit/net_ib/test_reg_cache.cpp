// The registration cache on its own (a registrar of the test's, no verbs): hits and
// misses, reuse of one entry by sends and receives, read-only memory, the page check
// that catches a freed and reused address (the stale-registration bug), entries
// invalidated while in use, eviction of idle ones, retry after running out of room, and
// the modes without a cache; then the real page-frame query against the kernel and the
// text of a failed registration.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "transport/net/ib/ib_mem.hpp"
#include "transport/net/ib/reg_cache.hpp"
#include "transport/net/ib/verbs_ops.hpp"

namespace coll::net::ib {
namespace {

constexpr size_t kPage = 4096;

// Registers anything, tracks what is registered, and has page frames the test changes.
class TestRegistrar : public Registrar {
 public:
  bool reg(uintptr_t addr, size_t len, bool write, MrKeys* out, int* err) override {
    calls++;
    if (write && readOnly.count(addr)) {
      *err = EFAULT;
      return false;
    }
    if (limit && pinned + len > limit) {
      *err = ENOMEM;
      return false;
    }
    out->mr = reinterpret_cast<void*>(uintptr_t(++next));
    out->lkey = out->rkey = next;
    out->writable = write;
    live[next] = len;
    pinned += len;
    return true;
  }
  void dereg(const MrKeys& k) override {
    auto it = live.find(k.lkey);
    ASSERT_NE(it, live.end()) << "deregistered twice or never registered";
    pinned -= it->second;
    live.erase(it);
  }
  bool frames(uintptr_t addr, size_t pages, uint64_t* out) override {
    if (!readable) return false;
    for (size_t i = 0; i < pages; ++i) out[i] = (addr + i * kPage) * 16 + gen[addr + i * kPage];
    return true;
  }
  void replace(uintptr_t addr, size_t len) {
    for (uintptr_t p = addr; p < addr + len; p += kPage) gen[p]++;
  }
  int calls = 0;
  uint32_t next = 0;
  size_t pinned = 0, limit = 0;
  bool readable = true;
  std::map<uint32_t, size_t> live;
  std::map<uintptr_t, uint64_t> gen;
  std::set<uintptr_t> readOnly;
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }
constexpr uintptr_t kA = 0x10000000, kB = 0x20000000;

TEST(RegCache, HitsMissesAndCoveringEntries) {
  TestRegistrar r;
  RegCache c(&r, CacheMode::kPageCheck, size_t(1) << 30, kPage);
  int err = 0;
  const auto* e1 = c.acquire(at(kA + 100), 3 * kPage, true, &err);
  ASSERT_NE(e1, nullptr);
  c.release(e1);
  // Inside the registered pages (page-rounded), for reading or writing: the same entry.
  const auto* e2 = c.acquire(at(kA + 5), 2 * kPage, false, &err);
  EXPECT_EQ(e2, e1);
  c.release(e2);
  // Past its end: a new one.
  const auto* e3 = c.acquire(at(kA), 5 * kPage, true, &err);
  ASSERT_NE(e3, nullptr);
  EXPECT_NE(e3, e1);
  c.release(e3);
  CacheStats s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(r.calls, 2);
  EXPECT_EQ(s.pinnedBytes, 4 * kPage + 5 * kPage);
}

TEST(RegCache, ReadOnlyMemoryGetsAReadOnlyEntryThatReceivesDoNotUse) {
  TestRegistrar r;
  r.readOnly.insert(kA);
  RegCache c(&r, CacheMode::kPageCheck, size_t(1) << 30, kPage);
  int err = 0;
  const auto* s = c.acquire(at(kA), kPage, false, &err);
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(RegCache::keys(s).writable);
  c.release(s);
  EXPECT_EQ(c.acquire(at(kA), kPage, true, &err), nullptr);  // a receive needs write access
  EXPECT_EQ(err, EFAULT);
  EXPECT_EQ(c.acquire(at(kA), kPage, false, &err), s);  // sends still hit
}

// The classic bug: free, reuse of the address with other pages. The check drops the old
// entry and registers the new pages.
TEST(RegCache, FreedAndReusedAddressIsRegisteredAgain) {
  TestRegistrar r;
  RegCache c(&r, CacheMode::kPageCheck, size_t(1) << 30, kPage);
  int err = 0;
  const auto* e1 = c.acquire(at(kA), 4 * kPage, true, &err);
  const uint32_t oldKey = RegCache::keys(e1).rkey;
  c.release(e1);
  r.replace(kA + 2 * kPage, kPage);  // one page of it replaced
  const auto* e2 = c.acquire(at(kA), 4 * kPage, true, &err);
  ASSERT_NE(e2, nullptr);
  EXPECT_NE(RegCache::keys(e2).rkey, oldKey);
  c.release(e2);
  CacheStats s = c.stats();
  EXPECT_EQ(s.invalidated, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.entries, 1u) << "the stale entry is deregistered";
  EXPECT_EQ(r.live.size(), 1u);
  // A part of the range whose pages did not change may hit the new entry.
  const auto* e3 = c.acquire(at(kA), kPage, true, &err);
  EXPECT_EQ(e3, e2);
  c.release(e3);
}

TEST(RegCache, EntryInvalidatedInUseIsDeregisteredWhenReleased) {
  TestRegistrar r;
  RegCache c(&r, CacheMode::kPageCheck, size_t(1) << 30, kPage);
  int err = 0;
  const auto* held = c.acquire(at(kA), 2 * kPage, true, &err);
  r.replace(kA, 2 * kPage);
  const auto* fresh = c.acquire(at(kA), 2 * kPage, true, &err);
  ASSERT_NE(fresh, held);
  EXPECT_EQ(r.live.size(), 2u) << "the old one is still in use: not deregistered under it";
  c.release(held);
  EXPECT_EQ(r.live.size(), 1u);
  c.release(fresh);
  EXPECT_EQ(r.live.size(), 1u) << "the valid one stays cached";
}

TEST(RegCache, IdleEntriesBeyondTheLimitAreEvictedOldestFirst) {
  TestRegistrar r;
  RegCache c(&r, CacheMode::kPageCheck, 8 * kPage, kPage);
  int err = 0;
  for (uintptr_t base : {kA, kB, kB + (1 << 20)}) c.release(c.acquire(at(base), 4 * kPage, true, &err));
  CacheStats s = c.stats();
  EXPECT_EQ(s.evicted, 1u);
  EXPECT_EQ(s.entries, 2u);
  // kA went first: it misses again, kB hits.
  c.release(c.acquire(at(kB), kPage, true, &err));
  EXPECT_EQ(c.stats().hits, 1u);
  c.release(c.acquire(at(kA), kPage, true, &err));
  EXPECT_EQ(c.stats().misses, 4u);
}

TEST(RegCache, OutOfRoomDropsIdleEntriesAndRetriesOnce) {
  TestRegistrar r;
  r.limit = 6 * kPage;
  RegCache c(&r, CacheMode::kPageCheck, size_t(1) << 30, kPage);
  int err = 0;
  c.release(c.acquire(at(kA), 4 * kPage, true, &err));
  const auto* e = c.acquire(at(kB), 4 * kPage, true, &err);
  ASSERT_NE(e, nullptr) << "the idle entry should have made room";
  EXPECT_EQ(c.stats().evicted, 1u);
  // In use, it cannot go: the next one fails with ENOMEM for the caller to report.
  EXPECT_EQ(c.acquire(at(kA), 4 * kPage, true, &err), nullptr);
  EXPECT_EQ(err, ENOMEM);
  c.release(e);
}

TEST(RegCache, UncachedRegistersEveryTimeAndKeepsNothing) {
  TestRegistrar r;
  RegCache c(&r, CacheMode::kUncached, size_t(1) << 30, kPage);
  int err = 0;
  for (int i = 0; i < 3; ++i) {
    const auto* e = c.acquire(at(kA), kPage, true, &err);
    ASSERT_NE(e, nullptr);
    c.release(e);
  }
  EXPECT_EQ(r.calls, 3);
  EXPECT_TRUE(r.live.empty());
  EXPECT_EQ(c.stats().hits, 0u);
}

TEST(RegCache, OnDemandPagingNeverChecksPages) {
  TestRegistrar r;
  RegCache c(&r, CacheMode::kOnDemand, size_t(1) << 30, kPage);
  int err = 0;
  c.release(c.acquire(at(kA), kPage, true, &err));
  r.replace(kA, kPage);  // the NIC follows the page tables: the entry stays right
  c.release(c.acquire(at(kA), kPage, true, &err));
  EXPECT_EQ(c.stats().checks, 0u);
  EXPECT_EQ(c.stats().hits, 1u);
}

TEST(RegCache, UnreadableFramesMakeAnEntrySingleUse) {
  TestRegistrar r;
  r.readable = false;
  RegCache c(&r, CacheMode::kPageCheck, size_t(1) << 30, kPage);
  int err = 0;
  c.release(c.acquire(at(kA), kPage, true, &err));
  EXPECT_TRUE(r.live.empty());
  c.release(c.acquire(at(kA), kPage, true, &err));
  EXPECT_EQ(r.calls, 2);
}

// The kernel's side of the page check: the same mapping keeps its frames; an munmap and
// a new mapping at the same address get others.
TEST(PageFrames, ReusedAddressHasOtherFrames) {
  const VerbsOps& v = realVerbsOps();
  PagemapFile pm;
  const int fd = pm.fd();
  ASSERT_GE(fd, 0);
  const size_t len = 16 * kPage;
  void* a = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(a, MAP_FAILED);
  memset(a, 1, len);
  std::vector<uint64_t> f1(16), f2(16), f3(16);
  int rc = v.page_frames(fd, reinterpret_cast<uintptr_t>(a), 16, f1.data());
  if (rc == EPERM) {
    munmap(a, len);
    GTEST_SKIP() << "page frames are hidden from this process (no CAP_SYS_ADMIN)";
  }
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(v.page_frames(fd, reinterpret_cast<uintptr_t>(a), 16, f2.data()), 0);
  EXPECT_EQ(f1, f2);
  for (uint64_t f : f1) EXPECT_NE(f, 0u);
  ASSERT_EQ(munmap(a, len), 0);
  void* b = mmap(a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (b != a) {
    if (b != MAP_FAILED) munmap(b, len);
    GTEST_SKIP() << "the address was taken before it could be reused";
  }
  memset(b, 2, len);
  ASSERT_EQ(v.page_frames(fd, reinterpret_cast<uintptr_t>(b), 16, f3.data()), 0);
  EXPECT_NE(f1, f3);
  munmap(b, len);
}

TEST(RegFailureText, NamesTheLimitAndTheFixes) {
  std::string t = regFailureText(ENOMEM, 64 << 20, reinterpret_cast<void*>(0x1000), true, "mlx5_0:1");
  EXPECT_NE(t.find("InfiniBand mlx5_0:1: registering the receive buffer (64 MiB at 0x1000)"), std::string::npos) << t;
  EXPECT_NE(t.find("ulimit -l: "), std::string::npos) << t;
  EXPECT_NE(t.find("ulimit -l unlimited"), std::string::npos) << t;
  EXPECT_NE(t.find("COLL_IB_ZCOPY=0"), std::string::npos) << t;
  std::string f = regFailureText(EFAULT, 100, nullptr, false, "mlx5_0:1");
  EXPECT_NE(f.find("not mapped"), std::string::npos) << f;
}

}  // namespace
}  // namespace coll::net::ib
