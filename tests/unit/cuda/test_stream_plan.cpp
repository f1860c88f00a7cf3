// Pure planning of stream-ordered device collectives: chunking, staging layout (with the
// in-place aliasing of all-gather and reduce-scatter), host views and the bytes each
// collective touches per rank. No GPU involved.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "base/config.hpp"
#include "base/error.hpp"
#include "cuda/op_spec.hpp"
#include "cuda/stream_ops.hpp"
#include "cuda/stream_plan.hpp"

using namespace coll::cuda;

namespace {

char* at(std::vector<char>& v, size_t off) { return v.data() + off; }

StreamOpSpec deviceSpec(const void* send, size_t sendBytes, void* recv, size_t recvBytes,
                        size_t count, size_t es, bool elementwise) {
  StreamOpSpec s;
  s.send = send;
  s.sendBytes = sendBytes;
  s.sendOnDevice = true;
  s.recv = recv;
  s.recvBytes = recvBytes;
  s.recvOnDevice = true;
  s.count = count;
  s.elemSize = es;
  s.elementwise = elementwise;
  return s;
}

collResult_t codeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const coll::Error& e) {
    return e.code();
  }
  return collSuccess;
}

}  // namespace

TEST(PlanChunks, SplitsElementwiseOpsIntoEqualPiecesAndATail) {
  auto c = planChunks(10, 4, true, 16);  // 4 elements per chunk
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].offset, 0u);
  EXPECT_EQ(c[0].count, 4u);
  EXPECT_EQ(c[1].offset, 4u);
  EXPECT_EQ(c[1].count, 4u);
  EXPECT_EQ(c[2].offset, 8u);
  EXPECT_EQ(c[2].count, 2u);
}

TEST(PlanChunks, WholeOpWhenNotElementwiseOrChunkingOff) {
  for (auto c : {planChunks(1000, 4, false, 16), planChunks(1000, 4, true, 0)}) {
    ASSERT_EQ(c.size(), 1u);
    EXPECT_TRUE(c[0].whole());
  }
}

TEST(PlanChunks, EdgeCases) {
  auto empty = planChunks(0, 4, true, 16);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0].count, 0u);
  EXPECT_FALSE(empty[0].whole());
  auto tiny = planChunks(3, 8, true, 5);  // a chunk smaller than an element: one each
  ASSERT_EQ(tiny.size(), 3u);
  EXPECT_EQ(tiny[2].offset, 2u);
  auto exact = planChunks(8, 4, true, 16);
  ASSERT_EQ(exact.size(), 2u);
  EXPECT_EQ(exact[1].count, 4u);
}

TEST(PlanJob, InPlaceSharesOneRegion) {
  std::vector<char> dev(4096);
  auto p = planJob({deviceSpec(at(dev, 0), 400, at(dev, 0), 400, 100, 4, true)}, 0);
  EXPECT_EQ(p.stagingBytes, 400u);
  EXPECT_EQ(p.layouts[0].sendOffset, 0u);
  EXPECT_EQ(p.layouts[0].recvOffset, 0u);
}

TEST(PlanJob, InPlaceAllGatherKeepsTheSendSliceInsideRecv) {
  std::vector<char> dev(4096);
  // rank 2 of 4, 100 bytes each: send = recv + 200
  auto p = planJob({deviceSpec(at(dev, 200), 100, at(dev, 0), 400, 25, 4, false)}, 64);
  EXPECT_EQ(p.stagingBytes, 400u);
  EXPECT_EQ(p.layouts[0].recvOffset, 0u);
  EXPECT_EQ(p.layouts[0].sendOffset, 200u);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_TRUE(p.chunks[0].whole());
}

TEST(PlanJob, InPlaceReduceScatterKeepsTheRecvSliceInsideSend) {
  std::vector<char> dev(4096);
  auto p = planJob({deviceSpec(at(dev, 0), 400, at(dev, 300), 100, 25, 4, false)}, 0);
  EXPECT_EQ(p.stagingBytes, 400u);
  EXPECT_EQ(p.layouts[0].sendOffset, 0u);
  EXPECT_EQ(p.layouts[0].recvOffset, 300u);
}

TEST(PlanJob, DisjointBuffersGetAlignedRegions) {
  std::vector<char> dev(4096);
  auto p = planJob({deviceSpec(at(dev, 0), 100, at(dev, 1000), 100, 25, 4, true)}, 0);
  EXPECT_EQ(p.layouts[0].sendOffset, 0u);
  EXPECT_EQ(p.layouts[0].recvOffset, kStagingAlign);
  EXPECT_EQ(p.stagingBytes, kStagingAlign + 100);
}

TEST(PlanJob, HostSidesAreNotStaged) {
  std::vector<char> dev(4096), host(400);
  StreamOpSpec s = deviceSpec(host.data(), 400, at(dev, 0), 400, 100, 4, true);
  s.sendOnDevice = false;
  auto p = planJob({s}, 0);
  EXPECT_FALSE(p.layouts[0].sendStaged());
  EXPECT_EQ(p.layouts[0].recvOffset, 0u);
  EXPECT_EQ(p.stagingBytes, 400u);
  s.recvOnDevice = false;
  EXPECT_EQ(planJob({s}, 0).stagingBytes, 0u);
}

TEST(PlanJob, GroupPartsFollowEachOtherAlignedAndAreNotChunked) {
  std::vector<char> dev(8192);
  StreamOpSpec send = deviceSpec(at(dev, 0), 300, nullptr, 0, 75, 4, true);
  StreamOpSpec recv = deviceSpec(nullptr, 0, at(dev, 4096), 300, 75, 4, true);
  auto p = planJob({send, recv}, 64);
  EXPECT_EQ(p.layouts[0].sendOffset, 0u);
  EXPECT_FALSE(p.layouts[0].recvStaged());
  EXPECT_EQ(p.layouts[1].recvOffset, 2 * kStagingAlign);  // 300 rounds up to 512
  EXPECT_EQ(p.stagingBytes, 2 * kStagingAlign + 300);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_TRUE(p.chunks[0].whole());
}

// A group whose ops share device bytes stages them once: an all-reduce into y followed by
// an in-place broadcast of y reads the all-reduce's result, as it would on the device.
TEST(PlanJob, GroupPartsSharingABufferShareItsStaging) {
  std::vector<char> dev(8192);
  StreamOpSpec reduce = deviceSpec(at(dev, 0), 400, at(dev, 1024), 400, 100, 4, true);
  StreamOpSpec bcast = deviceSpec(at(dev, 1024), 400, at(dev, 1024), 400, 100, 4, true);
  auto p = planJob({reduce, bcast}, 0);
  EXPECT_EQ(p.layouts[0].sendOffset, 0u);
  EXPECT_EQ(p.layouts[0].recvOffset, 2 * kStagingAlign);
  EXPECT_EQ(p.layouts[1].sendOffset, 2 * kStagingAlign);
  EXPECT_EQ(p.layouts[1].recvOffset, 2 * kStagingAlign);
  EXPECT_EQ(p.stagingBytes, 2 * kStagingAlign + 400);
}

// Ranges that overlap only through a third one still end up in one region.
TEST(PlanJob, OverlapsChainIntoOneRegion) {
  std::vector<char> dev(8192);
  StreamOpSpec a = deviceSpec(at(dev, 0), 100, nullptr, 0, 25, 4, true);
  StreamOpSpec b = deviceSpec(nullptr, 0, at(dev, 200), 100, 25, 4, true);
  StreamOpSpec bridge = deviceSpec(at(dev, 50), 200, nullptr, 0, 50, 4, true);
  StreamOpSpec apart = deviceSpec(nullptr, 0, at(dev, 4000), 40, 10, 4, true);
  auto p = planJob({a, b, bridge, apart}, 0);
  EXPECT_EQ(p.layouts[0].sendOffset, 0u);
  EXPECT_EQ(p.layouts[1].recvOffset, 200u);
  EXPECT_EQ(p.layouts[2].sendOffset, 50u);
  EXPECT_EQ(p.layouts[3].recvOffset, 2 * kStagingAlign);  // the region [0, 300) rounds up to 512
  EXPECT_EQ(p.stagingBytes, 2 * kStagingAlign + 40);
}

TEST(PlanJob, RejectsBadSpecs) {
  std::vector<char> dev(4096);
  // Partial overlap.
  EXPECT_EQ(codeOf([&] { planJob({deviceSpec(at(dev, 0), 400, at(dev, 200), 400, 100, 4, true)}, 0); }),
            collInvalidArgument);
  // Element-wise with a side that is not count * elemSize.
  EXPECT_EQ(codeOf([&] { planJob({deviceSpec(at(dev, 0), 400, at(dev, 1000), 399, 100, 4, true)}, 0); }),
            collInvalidArgument);
  // Bytes without a pointer.
  EXPECT_EQ(codeOf([&] { planJob({deviceSpec(nullptr, 4, at(dev, 0), 4, 1, 4, true)}, 0); }),
            collInvalidArgument);
  EXPECT_EQ(codeOf([&] { planJob({}, 0); }), collInvalidArgument);
  try {
    planJob({deviceSpec(at(dev, 0), 400, at(dev, 1000), 399, 100, 4, true)}, 0);
  } catch (const coll::Error& e) {
    EXPECT_NE(std::string(e.what()).find("recvBytes = 399"), std::string::npos) << e.what();
  }
}

TEST(ViewOf, ChunksPointIntoStagingAtTheirElementOffsets) {
  std::vector<char> dev(4096), staging(4096);
  StreamOpSpec s = deviceSpec(at(dev, 0), 400, at(dev, 1024), 400, 100, 4, true);
  auto p = planJob({s}, 64);  // 16 elements per chunk
  ASSERT_EQ(p.chunks.size(), 7u);
  HostView v = viewOf(s, p.layouts[0], p.chunks[2], staging.data());
  EXPECT_EQ(v.offset, 32u);
  EXPECT_EQ(v.count, 16u);
  EXPECT_EQ(v.send, staging.data() + 128);
  EXPECT_EQ(v.recv, staging.data() + 2 * kStagingAlign + 128);  // 400 bytes round up to 512
  HostView last = viewOf(s, p.layouts[0], p.chunks[6], staging.data());
  EXPECT_EQ(last.count, 4u);
  ByteRange r = chunkRange(s, p.chunks[6], s.recvBytes);
  EXPECT_EQ(r.offset, 384u);
  EXPECT_EQ(r.bytes, 16u);
}

TEST(ViewOf, UnusedSideIsNullAndHostSideIsTheCallersPointer) {
  std::vector<char> dev(4096), host(400), staging(4096);
  // Broadcast non-root: a device send pointer the op does not read must not leak out.
  StreamOpSpec s = deviceSpec(at(dev, 0), 0, at(dev, 0), 400, 100, 4, true);
  auto p = planJob({s}, 0);
  HostView v = viewOf(s, p.layouts[0], p.chunks[0], staging.data());
  EXPECT_EQ(v.send, nullptr);
  EXPECT_EQ(v.recv, staging.data());
  EXPECT_EQ(v.count, 100u);
  StreamOpSpec h = deviceSpec(host.data(), 400, at(dev, 0), 400, 100, 4, true);
  h.sendOnDevice = false;
  auto ph = planJob({h}, 0);
  EXPECT_EQ(viewOf(h, ph.layouts[0], ph.chunks[0], staging.data()).send, host.data());
}

TEST(SpecForOp, BytesPerSideFollowTheCollective) {
  std::vector<char> a(4096), b(4096);
  coll::OpArgs op;
  op.sendbuf = a.data();
  op.recvbuf = b.data();
  op.count = 10;
  op.dtype = collFloat64;
  struct Case {
    coll::OpKind kind;
    int rank;
    size_t send, recv;
    bool elementwise;
  };
  const Case cases[] = {
      {coll::OpKind::AllReduce, 1, 80, 80, true},     {coll::OpKind::Broadcast, 0, 80, 80, true},
      {coll::OpKind::Broadcast, 1, 0, 80, true},      {coll::OpKind::Reduce, 0, 80, 80, true},
      {coll::OpKind::Reduce, 2, 80, 0, true},         {coll::OpKind::AllGather, 1, 80, 320, false},
      {coll::OpKind::ReduceScatter, 1, 320, 80, false}, {coll::OpKind::AllToAll, 3, 320, 320, false},
      {coll::OpKind::Send, 1, 80, 0, true},           {coll::OpKind::Recv, 1, 0, 80, true},
      {coll::OpKind::Gather, 0, 80, 320, false},      {coll::OpKind::Gather, 2, 80, 0, false},
      {coll::OpKind::Scatter, 0, 320, 80, false},     {coll::OpKind::Scatter, 3, 0, 80, false},
  };
  for (const Case& c : cases) {
    op.kind = c.kind;
    op.root = 0;
    StreamOpSpec s = specForOp(op, 4, c.rank, true, false, 3);
    EXPECT_EQ(s.sendBytes, c.send) << coll::opKindName(c.kind) << " rank " << c.rank;
    EXPECT_EQ(s.recvBytes, c.recv) << coll::opKindName(c.kind) << " rank " << c.rank;
    EXPECT_EQ(s.elementwise, c.elementwise) << coll::opKindName(c.kind);
    EXPECT_EQ(s.elemSize, 8u);
    EXPECT_EQ(s.count, 10u);
    EXPECT_EQ(s.device, 3);
    EXPECT_TRUE(s.sendOnDevice);
    EXPECT_FALSE(s.recvOnDevice);
  }
  op.dtype = static_cast<collDataType_t>(42);
  EXPECT_EQ(codeOf([&] { specForOp(op, 4, 0, true, true, 0); }), collInvalidArgument);
}

TEST(StreamOptions, ReadFromTheEnvironment) {
  setenv("COLL_CUDA_STAGE_CHUNK", "1M", 1);
  setenv("COLL_CUDA_STAGE_CACHE", "64M", 1);
  StreamOptions o = StreamOptions::fromConfig(coll::Config::fromEnv(), 12.5);
  unsetenv("COLL_CUDA_STAGE_CHUNK");
  unsetenv("COLL_CUDA_STAGE_CACHE");
  EXPECT_EQ(o.chunkBytes, size_t{1} << 20);
  EXPECT_EQ(o.cacheBytes, size_t{64} << 20);
  EXPECT_EQ(o.timeoutSec, 12.5);
  StreamOptions d = StreamOptions::fromConfig(coll::Config::fromEnv(), 1);
  EXPECT_EQ(d.chunkBytes, size_t{4} << 20);
}
