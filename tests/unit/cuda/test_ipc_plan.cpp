// Pure logic of the CUDA IPC path: eligibility, slices, steps that fit the scratch and
// cover the op, and the records the ranks exchange.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "algorithms/device/ipc_plan.hpp"
#include "transport/cuda_ipc/ipc_records.hpp"

using namespace coll::cuda;
using coll::OpKind;

namespace {

const OpKind kServed[] = {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce, OpKind::AllGather,
                          OpKind::ReduceScatter};

StreamOpSpec spec(size_t sendBytes, bool sendDev, size_t recvBytes, bool recvDev) {
  StreamOpSpec s;
  s.sendBytes = sendBytes;
  s.sendOnDevice = sendDev;
  s.recvBytes = recvBytes;
  s.recvOnDevice = recvDev;
  return s;
}

coll::OpArgs op(OpKind k, size_t count, collDataType_t dt = collFloat32, collRedOp_t r = collSum,
                int root = 0) {
  coll::OpArgs a;
  a.kind = k;
  a.count = count;
  a.dtype = dt;
  a.op = r;
  a.root = root;
  return a;
}

std::vector<IpcOpHeader> headers(const coll::OpArgs& a, int n) {
  std::vector<IpcOpHeader> v;
  for (int r = 0; r < n; ++r) v.push_back(makeHeader(a, r, true));
  return v;
}

}  // namespace

TEST(IpcEligibility, OneHostSeveralRanksAndEnabled) {
  EXPECT_TRUE(ipcCommEligible(2, 1, true));
  EXPECT_TRUE(ipcCommEligible(8, 1, true));
  EXPECT_FALSE(ipcCommEligible(1, 1, true)) << "one rank has no peer";
  EXPECT_FALSE(ipcCommEligible(4, 2, true)) << "ranks on another host";
  EXPECT_FALSE(ipcCommEligible(4, 1, false)) << "COLL_CUDA_IPC=0";
}

TEST(IpcEligibility, ServedCollectives) {
  for (OpKind k : kServed) EXPECT_TRUE(ipcServes(k)) << coll::opKindName(k);
  EXPECT_FALSE(ipcServes(OpKind::AllToAll));
  EXPECT_FALSE(ipcServes(OpKind::Gather));  // staged through host memory instead
  EXPECT_FALSE(ipcServes(OpKind::Scatter));
  EXPECT_FALSE(ipcServes(OpKind::Send));
  EXPECT_FALSE(ipcServes(OpKind::Recv));
  EXPECT_FALSE(ipcServes(OpKind::Barrier));
}

TEST(IpcEligibility, EverySideUsedIsOnTheDevice) {
  EXPECT_TRUE(ipcBuffersOnDevice(spec(64, true, 64, true)));
  EXPECT_FALSE(ipcBuffersOnDevice(spec(64, false, 64, true)));
  EXPECT_FALSE(ipcBuffersOnDevice(spec(64, true, 64, false)));
  // A broadcast's non-root reads no send buffer; a reduce's non-root writes no recv.
  EXPECT_TRUE(ipcBuffersOnDevice(spec(0, false, 64, true)));
  EXPECT_TRUE(ipcBuffersOnDevice(spec(64, true, 0, false)));
  EXPECT_FALSE(ipcBuffersOnDevice(spec(0, false, 0, false))) << "count 0: nothing says device";
}

TEST(IpcSlices, CoverTheRangeInOrderAndDifferByAtMostOne) {
  for (size_t n : {0u, 1u, 2u, 3u, 7u, 8u, 1000u, 1001u})
    for (int parts : {1, 2, 3, 4, 7, 8}) {
      size_t next = 0, lo = SIZE_MAX, hi = 0;
      for (int i = 0; i < parts; ++i) {
        const ElemRange s = sliceOf(n, parts, i);
        EXPECT_EQ(s.offset, next) << n << "/" << parts << " slice " << i;
        next += s.count;
        lo = std::min(lo, s.count);
        hi = std::max(hi, s.count);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1u);
    }
  EXPECT_THROW(sliceOf(10, 0, 0), coll::Error);
  EXPECT_THROW(sliceOf(10, 2, 2), coll::Error);
}

TEST(IpcPlan, StepsFitTheScratchAndCoverTheOp) {
  const size_t scratch = 64 << 10;
  for (OpKind k : kServed)
    for (int n : {2, 3, 4, 8})
      for (size_t es : {1u, 2u, 4u, 8u})
        for (size_t count : {1u, 5u, 255u, 4096u, 100000u, 1234567u}) {
          const IpcPlan p = planIpc(k, count, es, n, scratch);
          SCOPED_TRACE(testing::Message() << coll::opKindName(k) << " n=" << n << " es=" << es
                                          << " count=" << count);
          ASSERT_GE(p.stepElems, 1u);
          EXPECT_LE(p.scratchUsed, scratch);
          EXPECT_EQ(p.steps, (count + p.stepElems - 1) / p.stepElems);
          // Regions hold what they must and do not overlap.
          EXPECT_GE(p.inSlotBytes, p.stepElems * es);
          EXPECT_EQ(p.gatherOffset, p.inSlots * p.inSlotBytes);
          EXPECT_EQ(p.inSlotBytes % kIpcAlign, 0u);
          if (k == OpKind::AllReduce || k == OpKind::Reduce) {
            EXPECT_EQ(p.inSlots, 1u);
            EXPECT_GE(p.slotBytes, sliceOf(p.stepElems, n, 0).count * es);
            EXPECT_EQ(p.outOffset, p.gatherOffset + n * p.slotBytes);
            EXPECT_EQ(p.scratchUsed, p.outOffset + p.slotBytes);
          } else if (k == OpKind::ReduceScatter) {
            EXPECT_EQ(p.inSlots, static_cast<size_t>(n));
            EXPECT_GE(p.slotBytes, p.stepElems * es);
            EXPECT_EQ(p.scratchUsed, p.gatherOffset + n * p.slotBytes);
          } else {
            EXPECT_EQ(p.scratchUsed, p.inSlotBytes);
          }
          size_t covered = 0;
          for (size_t s = 0; s < p.steps; ++s) {
            const ElemRange r = p.step(s, count);
            EXPECT_EQ(r.offset, covered);
            EXPECT_GE(r.count, 1u);
            covered += r.count;
          }
          EXPECT_EQ(covered, count);
          if (p.steps > 1) {
            EXPECT_EQ(p.stepElems * es % kIpcAlign, 0u) << "steps start aligned";
          }
        }
}

TEST(IpcPlan, UsesMostOfTheScratch) {
  const size_t scratch = 32 << 20;
  const IpcPlan ag = planIpc(OpKind::AllGather, 100 << 20, 4, 4, scratch);
  EXPECT_EQ(ag.stepElems * 4, scratch);
  const IpcPlan ar = planIpc(OpKind::AllReduce, 100 << 20, 4, 4, scratch);
  // Input, a slot per rank and the result: about 2 + 1/n times the step.
  EXPECT_GT(ar.stepElems * 4, scratch * 4 / 10);
  EXPECT_LE(ar.scratchUsed, scratch);
  const IpcPlan one = planIpc(OpKind::AllReduce, 1000, 4, 4, scratch);
  EXPECT_EQ(one.steps, 1u);
  EXPECT_EQ(one.stepElems, 1000u);
}

TEST(IpcPlan, CountZeroHasNoStepsAndTooSmallAScratchIsAnError) {
  const IpcPlan p = planIpc(OpKind::AllReduce, 0, 4, 2, 1 << 20);
  EXPECT_EQ(p.steps, 0u);
  try {
    planIpc(OpKind::ReduceScatter, 10, 8, 8, 1024);
    ADD_FAILURE() << "a scratch of 1 KiB cannot hold 16 slots";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("COLL_CUDA_IPC_BUFFER"), std::string::npos) << e.what();
  }
  EXPECT_THROW(planIpc(OpKind::AllToAll, 10, 4, 2, 1 << 20), coll::Error);
}

TEST(IpcHeaders, AgreeOnIpcOnlyWhenEveryRankCan) {
  const coll::OpArgs a = op(OpKind::AllReduce, 1000);
  auto h = headers(a, 4);
  EXPECT_TRUE(agreeHeaders(h, a));
  h[2].ipc = 0;  // e.g. its buffers are in host memory, or its set-up failed
  EXPECT_FALSE(agreeHeaders(h, a));
}

TEST(IpcHeaders, DisagreementNamesTheRankAndBothValues) {
  const coll::OpArgs a = op(OpKind::Reduce, 1000, collFloat32, collMax, 1);
  auto expectUsage = [&](std::vector<IpcOpHeader> h, const char* what) {
    try {
      agreeHeaders(h, a);
      ADD_FAILURE() << "accepted " << what;
    } catch (const coll::Error& e) {
      EXPECT_EQ(e.code(), collInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto h = headers(a, 4);
  h[3].count = 999;
  expectUsage(h, "999");
  h = headers(a, 4);
  h[3].root = 0;
  expectUsage(h, "root");
  h = headers(a, 4);
  h[3].op = collMin;
  expectUsage(h, "min");
  h = headers(a, 4);
  h[3].dtype = collInt32;
  expectUsage(h, "datatype");
  h = headers(a, 4);
  h[3].kind = static_cast<int32_t>(OpKind::AllGather);
  expectUsage(h, "called");
  // A root or op that the collective does not use may differ.
  const coll::OpArgs ag = op(OpKind::AllGather, 10);
  h = headers(ag, 3);
  h[1].root = 2;
  h[1].op = collMax;
  EXPECT_TRUE(agreeHeaders(h, ag));
}

TEST(IpcHeaders, GarbageIsARemoteError) {
  const coll::OpArgs a = op(OpKind::AllReduce, 8);
  auto h = headers(a, 2);
  std::memset(static_cast<void*>(&h[1]), 0x5a, sizeof h[1]);  // the bytes of some other collective
  try {
    agreeHeaders(h, a);
    ADD_FAILURE();
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collRemoteError);
  }
  h = headers(a, 2);
  h[1].rank = 0;
  EXPECT_THROW(agreeHeaders(h, a), coll::Error);
}

TEST(IpcRecords, ValidationAndAgreement) {
  std::vector<IpcScratchRecord> all(3);
  for (int r = 0; r < 3; ++r) {
    all[r].rank = r;
    all[r].ok = 1;
    all[r].device = 0;
    all[r].bytes = (32u << 20) - r * 4096;
    all[r].address = 0x7f0000000000ull + r;
  }
  for (int r = 0; r < 3; ++r) EXPECT_NO_THROW(validateRecord(all[r], r));
  EXPECT_EQ(firstRecordFailure(all), "");
  EXPECT_EQ(agreedScratchBytes(all), (32u << 20) - 2 * 4096);
  EXPECT_THROW(validateRecord(all[1], 2), coll::Error);
  IpcScratchRecord bad = all[0];
  bad.magic = 0;
  EXPECT_THROW(validateRecord(bad, 0), coll::Error);
  bad = all[0];
  std::memset(bad.error, 'x', sizeof bad.error);
  EXPECT_THROW(validateRecord(bad, 0), coll::Error);
  bad = all[0];
  bad.bytes = 0;
  EXPECT_THROW(validateRecord(bad, 0), coll::Error);

  setRecordError(all[1], "cudaIpcGetMemHandle: operation not supported" + std::string(300, '!'));
  EXPECT_NO_THROW(validateRecord(all[1], 1)) << "a failed record is well-formed";
  const std::string why = firstRecordFailure(all);
  EXPECT_EQ(why.rfind("rank 1: cudaIpcGetMemHandle: operation not supported", 0), 0u) << why;
  EXPECT_LT(why.size(), 140u);
}
