// Barrier, communicator split and nonblocking collectives.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "mp_pattern.hpp"

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rank 0 arrives late: nobody may leave the barrier before it arrives.
void barrierCase(Ctx& ctx) {
  MP_CALL(ctx, collBarrier(ctx.comm));
  auto t0 = Clock::now();
  if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MP_CALL(ctx, collBarrier(ctx.comm));
  double waited = secondsSince(t0);
  // 300 ms of slack for ranks leaving the first barrier at different times (8 ranks on
  // 2 busy cores can be scheduled that far apart).
  if (waited < 0.2)
    throw Failure(cat("MISMATCH barrier: rank ", ctx.rank, " left after ", waited,
                      " s although rank 0 arrived 0.5 s late"));
  ++ctx.checks;
}

// Splits with `color` and `key`, then checks size, rank and order in the new
// communicator with an all-gather of old ranks and an all-reduce.
void splitCase(Ctx& ctx, int color, int key, const std::vector<int>& colors, const std::vector<int>& keys) {
  collComm_t sub = nullptr;
  MP_CALL(ctx, collCommSplit(ctx.comm, color, key, &sub));
  std::string what = cat("split color=", color, " key=", key, " (rank ", ctx.rank, " of ", ctx.nranks, ")");
  if (color == COLL_SPLIT_NOCOLOR) {
    if (sub != nullptr) throw Failure(cat("MISMATCH ", what, ": got a communicator for NOCOLOR"));
    return;
  }
  // Members ordered by key, then by old rank.
  std::vector<int> members;
  for (int r = 0; r < ctx.nranks; ++r)
    if (colors[r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  int wantRank = static_cast<int>(std::find(members.begin(), members.end(), ctx.rank) - members.begin());
  Ctx sc = ctx;
  sc.comm = sub;
  int count = 0, rank = -1;
  MP_CALL(sc, collCommCount(sub, &count));
  MP_CALL(sc, collCommUserRank(sub, &rank));
  if (count != static_cast<int>(members.size()) || rank != wantRank)
    throw Failure(cat("MISMATCH ", what, ": new communicator has ", count, " ranks and this is rank ",
                      rank, ", expected ", members.size(), " and ", wantRank));
  int32_t mine = ctx.rank;
  std::vector<int32_t> gathered(count, -1);
  MP_CALL(sc, collAllGather(&mine, gathered.data(), 1, collInt32, sub, nullptr));
  if (!std::equal(gathered.begin(), gathered.end(), members.begin()))
    throw Failure(cat("MISMATCH ", what, ": all-gather of old ranks is out of order"));
  int64_t v = ctx.rank + 1, sum = 0, want = 0;
  for (int m : members) want += m + 1;
  MP_CALL(sc, collAllReduce(&v, &sum, 1, collInt64, collSum, sub, nullptr));
  if (sum != want) throw Failure(cat("MISMATCH ", what, ": all-reduce gave ", sum, ", expected ", want));
  MP_CALL(sc, collCommDestroy(sub));
  ctx.checks += 3;
}

void splitTests(Ctx& ctx) {
  std::vector<int> colors(ctx.nranks), keys(ctx.nranks);
  for (int r = 0; r < ctx.nranks; ++r) {
    colors[r] = r % 2;
    keys[r] = -r;  // reversed order
  }
  splitCase(ctx, colors[ctx.rank], keys[ctx.rank], colors, keys);
  for (int r = 0; r < ctx.nranks; ++r) {
    colors[r] = r == ctx.nranks - 1 ? COLL_SPLIT_NOCOLOR : 7;  // the last rank sits out
    keys[r] = 0;
  }
  splitCase(ctx, colors[ctx.rank], keys[ctx.rank], colors, keys);
}

// Several nonblocking operations in flight at once; they complete in issue order.
void nonblockingCase(Ctx& ctx) {
  const size_t count = 1001;
  const int n = ctx.nranks;
  std::vector<ReducePattern> pats;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<collRequest_t> reqs(3, nullptr);
  for (int k = 0; k < 3; ++k) {
    pats.emplace_back(collInt32, kOps[k], n, mix(4000 + k, 4));
    bufs.push_back(buffer(count, collInt32, 0));
    pats[k].fillInput(bufs[k].data(), count, ctx.rank, 0);
    MP_CALL(ctx, collIallReduce(bufs[k].data(), bufs[k].data(), count, collInt32, kOps[k], ctx.comm, &reqs[k]));
  }
  std::vector<int32_t> mine(count), gathered(count * n, -1);
  for (size_t i = 0; i < count; ++i) mine[i] = static_cast<int32_t>(ctx.rank * 100000 + i);
  collRequest_t gq = nullptr, bq = nullptr;
  MP_CALL(ctx, collIallGather(mine.data(), gathered.data(), count, collInt32, ctx.comm, &gq));
  MP_CALL(ctx, collIbarrier(ctx.comm, &bq));
  int done = 0;
  auto t0 = Clock::now();
  while (!done) {
    collResult_t rc = collTest(&reqs[0], &done);
    if (rc != collSuccess && rc != collInProgress) checkResult(rc, "collTest", ctx.comm);
    if (!done && secondsSince(t0) > 60) throw Failure("collTest: the first all-reduce never finished");
  }
  for (int k = 1; k < 3; ++k) MP_CALL(ctx, collWait(&reqs[k]));
  MP_CALL(ctx, collWait(&gq));
  MP_CALL(ctx, collWait(&bq));
  auto want = buffer(count, collInt32, 0);
  for (int k = 0; k < 3; ++k) {
    pats[k].fillExpected(want.data(), count, 0);
    expectEqual(cat("nonblocking allreduce int32 ", opName(kOps[k]), " count=", count, " (rank ",
                    ctx.rank, ")"), want.data(), bufs[k].data(), count, collInt32);
  }
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      if (gathered[r * count + i] != static_cast<int32_t>(r * 100000 + i))
        throw Failure(cat("MISMATCH nonblocking allgather: element ", r * count + i, " is ",
                          gathered[r * count + i], " (rank ", ctx.rank, ")"));
  ctx.checks += 4;
}

}  // namespace

void runCommTests(Ctx& ctx) {
  barrierCase(ctx);
  splitTests(ctx);
  nonblockingCase(ctx);
}

}  // namespace mp
