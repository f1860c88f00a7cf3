// Device-buffer collectives among the ranks of one host over CUDA IPC, on a real GPU.
// Ranks are threads of this process, all on device 0 (several ranks per GPU); the
// multi-process case (handles opened with cudaIpcOpenMemHandle) runs in
// tests/unit/perf (test_perf_gpu_flag: collectiverun + *_perf -g 1). Every served
// collective, in and out of place, is compared with the same collective on host buffers
// (the host path is the reference); inputs are small integers, so every type and every
// reduction order gives exact, comparable bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../collectives/harness.hpp"
#include "comm/handles.hpp"
#include "base/reduce.hpp"
#include "gpu_util.hpp"

namespace {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter };
const Coll kColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter};
const char* name(Coll c) {
  static const char* names[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter"};
  return names[static_cast<int>(c)];
}
bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

const collDataType_t kTypes[] = {collUint8, collInt32, collInt64, collFloat16, collFloat32, collFloat64,
                                 collBfloat16};
const collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};

using gputest::Stream;

// 1..3: sums of 4 ranks and products (81) are exact in every type, half and bf16 included.
std::vector<uint8_t> smallInts(collDataType_t dt, size_t n, int rank, int salt) {
  const size_t es = collTypeSize(dt);
  std::vector<uint8_t> out(n * es);
  for (size_t i = 0; i < n; ++i) {
    const int k = 1 + static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3 + static_cast<size_t>(salt)) % 3);
    uint8_t* p = out.data() + i * es;
    switch (dt) {
      case collUint8: *p = static_cast<uint8_t>(k); break;
      case collInt32: { int32_t v = k; std::memcpy(p, &v, es); break; }
      case collInt64: { int64_t v = k; std::memcpy(p, &v, es); break; }
      case collFloat16: { uint16_t v = coll::floatToHalf(static_cast<float>(k)); std::memcpy(p, &v, es); break; }
      case collBfloat16: { uint16_t v = coll::floatToBf16(static_cast<float>(k)); std::memcpy(p, &v, es); break; }
      case collFloat32: { float v = static_cast<float>(k); std::memcpy(p, &v, es); break; }
      case collFloat64: { double v = k; std::memcpy(p, &v, es); break; }
      default: ADD_FAILURE() << "type " << dt;
    }
  }
  return out;
}

collResult_t call(Coll c, const void* s, void* r, size_t count, collDataType_t dt, collRedOp_t op, int root,
                  collComm_t comm, cudaStream_t stream) {
  switch (c) {
    case Coll::AllReduce: return collAllReduce(s, r, count, dt, op, comm, stream);
    case Coll::Broadcast: return collBroadcast(s, r, count, dt, root, comm, stream);
    case Coll::Reduce: return collReduce(s, r, count, dt, op, root, comm, stream);
    case Coll::AllGather: return collAllGather(s, r, count, dt, comm, stream);
    case Coll::ReduceScatter: return collReduceScatter(s, r, count, dt, op, comm, stream);
  }
  return collInternalError;
}

// One case on one rank: the buffers' layout (in place as collective.h defines it), the
// host reference, the device run, and the comparison. Returns mismatching bytes.
struct Case {
  Coll coll;
  collDataType_t dt;
  collRedOp_t op;
  size_t count;
  int root;
  bool inPlace;
};

size_t runCase(const Case& k, int rank, int n, collComm_t comm, Stream& stream, int salt) {
  const size_t es = collTypeSize(k.dt);
  const size_t un = static_cast<size_t>(n);
  const size_t sendElems = k.coll == Coll::ReduceScatter ? k.count * un : k.count;
  const size_t recvElems = k.coll == Coll::AllGather ? k.count * un : k.count;
  // In place: one buffer of the larger size; send and recv at collective.h's offsets.
  const size_t bufElems = k.inPlace ? std::max(sendElems, recvElems) : 0;
  const size_t sendOff = k.inPlace && k.coll == Coll::AllGather ? static_cast<size_t>(rank) * k.count : 0;
  const size_t recvOff = k.inPlace && k.coll == Coll::ReduceScatter ? static_cast<size_t>(rank) * k.count : 0;
  const std::vector<uint8_t> input = smallInts(k.dt, sendElems, rank, salt);
  const bool outputHere = k.coll != Coll::Reduce || rank == k.root;

  // Host reference (host buffers, no stream: the host path).
  std::vector<uint8_t> hostBuf(std::max<size_t>(1, (k.inPlace ? bufElems : sendElems + recvElems) * es), 0xEE);
  uint8_t* hSend = hostBuf.data() + sendOff * es;
  uint8_t* hRecv = k.inPlace ? hostBuf.data() + recvOff * es : hostBuf.data() + sendElems * es;
  std::memcpy(hSend, input.data(), input.size());
  EXPECT_EQ(call(k.coll, hSend, hRecv, k.count, k.dt, k.op, k.root, comm, nullptr), collSuccess)
      << collGetLastError(comm);

  // The same on device buffers, on the stream.
  gputest::DeviceMemory dev(hostBuf.size());
  std::vector<uint8_t> init(hostBuf.size(), 0xEE);
  std::memcpy(init.data() + sendOff * es, input.data(), input.size());
  dev.upload(init);
  uint8_t* dSend = dev.as<uint8_t>() + sendOff * es;
  uint8_t* dRecv = k.inPlace ? dev.as<uint8_t>() + recvOff * es : dev.as<uint8_t>() + sendElems * es;
  EXPECT_EQ(call(k.coll, dSend, dRecv, k.count, k.dt, k.op, k.root, comm, stream.get()), collSuccess)
      << collGetLastError(comm);
  stream.sync();
  const std::vector<uint8_t> got = dev.download<uint8_t>(hostBuf.size());
  if (!outputHere) return 0;
  size_t wrong = 0;
  const size_t recvBytes = recvElems * es;
  const size_t base = static_cast<size_t>(hRecv - hostBuf.data());
  for (size_t b = 0; b < recvBytes; ++b) wrong += got[base + b] != hostBuf[base + b];
  return wrong;
}

void sweep(int n, const std::vector<size_t>& counts) {
  // A small scratch: the larger counts take several steps.
  testing_coll::ScopedEnv scratch("COLL_CUDA_IPC_BUFFER", "64K");
  testing_coll::Job job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](int rank, collComm_t comm) {
    COLL_CUDA_CHECK(cudaSetDevice(0));
    Stream stream;
    int salt = 0;
    for (Coll c : kColls)
      for (collDataType_t dt : kTypes)
        for (collRedOp_t op : kOps) {
          if (!reduces(c) && op != collSum) continue;
          for (size_t count : counts)
            for (bool inPlace : {false, true})
              for (int root : {0, n - 1}) {
                if (root != 0 && c != Coll::Broadcast && c != Coll::Reduce) continue;
                const Case k{c, dt, op, count, root, inPlace};
                const size_t wrong = runCase(k, rank, n, comm, stream, ++salt);
                ASSERT_EQ(wrong, 0u) << "rank " << rank << " of " << n << ": " << name(c) << " type " << dt
                                     << " op " << op << " count " << count << " root " << root
                                     << (inPlace ? " in place" : "");
              }
        }
    collResult_t async = collSuccess;
    ASSERT_EQ(collCommGetAsyncError(comm, &async), collSuccess);
    EXPECT_EQ(async, collSuccess) << collGetLastError(comm);
    EXPECT_TRUE(comm->ipc && comm->ipc->connected()) << "the ops did not run over CUDA IPC";
  });
}

}  // namespace

TEST(GpuIpc, TwoRanksOnOneGpuEveryCollectiveTypeAndOp) {
  COLL_REQUIRE_GPU();
  sweep(2, {0, 1, 5, 1000, 40000});
}

TEST(GpuIpc, FourRanksOnOneGpuEveryCollectiveTypeAndOp) {
  COLL_REQUIRE_GPU();
  sweep(4, {0, 3, 777, 20011});
}

// Work queued on the stream before the collective (a memset held back behind a slow
// host function) is what it reads; a copy queued after it sees its result.
TEST(GpuIpc, StreamOrderBeforeAndAfter) {
  COLL_REQUIRE_GPU();
  const int n = 2;
  testing_coll::Job job(n);
  ASSERT_TRUE(job.ok());
  const size_t count = 300000;
  job.run([&](int rank, collComm_t comm) {
    Stream s;
    gputest::DeviceMemory buf(count);
    COLL_CUDA_CHECK(cudaMemset(buf.get(), 0, count));
    uint8_t* pinned = nullptr;
    COLL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), count));
    std::memset(pinned, 0xAB, count);
    // Delay the stream, so that the memset is still pending when the collective is issued.
    COLL_CUDA_CHECK(cudaLaunchHostFunc(s.get(), [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }, nullptr));
    COLL_CUDA_CHECK(cudaMemsetAsync(buf.get(), rank + 1, count, s.get()));
    ASSERT_EQ(collAllReduce(buf.get(), buf.get(), count, collUint8, collSum, comm, s.get()), collSuccess)
        << collGetLastError(comm);
    COLL_CUDA_CHECK(cudaMemcpyAsync(pinned, buf.get(), count, cudaMemcpyDeviceToHost, s.get()));
    s.sync();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(pinned[i], 3) << "rank " << rank << " element " << i;
    COLL_CUDA_CHECK(cudaFreeHost(pinned));
    EXPECT_TRUE(comm->ipc && comm->ipc->connected());
  });
}

// A rank whose buffers are in host memory (with a stream) cannot take part in IPC: the
// header exchange sends every rank through host memory, with correct results.
TEST(GpuIpc, ARankWithHostBuffersSendsEveryRankThroughTheHost) {
  COLL_REQUIRE_GPU();
  testing_coll::Job job(2);
  ASSERT_TRUE(job.ok());
  const size_t count = 5000;
  job.run([&](int rank, collComm_t comm) {
    Stream s;
    std::vector<float> x(count, static_cast<float>(rank + 1)), y(count, 0.0f);
    if (rank == 0) {
      ASSERT_EQ(collAllReduce(x.data(), y.data(), count, collFloat32, collSum, comm, s.get()), collSuccess);
      s.sync();
    } else {
      gputest::DeviceMemory d(count * 4);
      d.upload(x);
      ASSERT_EQ(collAllReduce(d.get(), d.get(), count, collFloat32, collSum, comm, s.get()), collSuccess);
      s.sync();
      y = d.download<float>(count);
    }
    for (float v : y) ASSERT_EQ(v, 3.0f) << "rank " << rank;
    collResult_t async = collSuccess;
    ASSERT_EQ(collCommGetAsyncError(comm, &async), collSuccess);
    EXPECT_EQ(async, collSuccess) << collGetLastError(comm);
  });
}

// Ranks that disagree on the count fail, every one of them, with a message; none hangs.
TEST(GpuIpc, MismatchedCountsFailOnEveryRank) {
  COLL_REQUIRE_GPU();
  testing_coll::Job job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int rank, collComm_t comm) {
    Stream s;
    gputest::DeviceMemory d(4096);
    ASSERT_EQ(collAllReduce(d.get(), d.get(), 100 + static_cast<size_t>(rank), collFloat32, collSum, comm, s.get()),
              collSuccess);
    s.sync();
    collResult_t async = collSuccess;
    ASSERT_EQ(collCommGetAsyncError(comm, &async), collSuccess);
    EXPECT_EQ(async, collInvalidUsage);
  });
}

TEST(GpuIpc, DisabledByEnvironmentStillCorrect) {
  COLL_REQUIRE_GPU();
  testing_coll::ScopedEnv off("COLL_CUDA_IPC", "0");
  testing_coll::Job job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int rank, collComm_t comm) {
    Stream s;
    std::vector<int32_t> x(1000, rank + 1);
    gputest::DeviceMemory d(4000);
    d.upload(x);
    ASSERT_EQ(collAllReduce(d.get(), d.get(), 1000, collInt32, collSum, comm, s.get()), collSuccess);
    s.sync();
    for (int32_t v : d.download<int32_t>(1000)) ASSERT_EQ(v, 3);
    EXPECT_EQ(comm->ipc, nullptr);
  });
}
