/* The C interface of the Horovod-style engine (<collective/hvd.h>), one process per rank
 * under collectiverun: every call checked against values computed here, and bad input
 * answered with a code and a message. Written in C so that the header is checked as C. */
#include <collective/hvd.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int gRank = -1;
static int gFailures = 0;

#define EXPECT(cond, ...)                                            \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "rank %d: %s:%d: FAILED %s: ", gRank, __FILE__, \
              __LINE__, #cond);                                      \
      fprintf(stderr, __VA_ARGS__);                                  \
      fprintf(stderr, "\n");                                         \
      ++gFailures;                                                   \
    }                                                                \
  } while (0)

#define OK(call)                                                                          \
  do {                                                                                    \
    collResult_t r_ = (call);                                                             \
    if (r_ != collSuccess) {                                                              \
      fprintf(stderr, "rank %d: %s:%d: %s returned %d: %s\n", gRank, __FILE__, __LINE__, \
              #call, (int)r_, collHvdLastError());                                        \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static collHvdTensor_t view(void* data, collDataType_t dt, int ndim, const int64_t* shape) {
  collHvdTensor_t t;
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  t.shape = shape;
  t.deviceType = collHvdCPU;
  t.deviceIndex = 0;
  return t;
}

/* Expects `res` to be `code` with a message that mentions `word`. */
static void expectError(collResult_t res, collResult_t code, const char* word, const char* what) {
  const char* msg = collHvdLastError();
  EXPECT(res == code, "%s: got code %d (want %d), message '%s'", what, (int)res, (int)code, msg);
  EXPECT(msg && strstr(msg, word), "%s: message '%s' does not mention '%s'", what, msg, word);
}

static void testAllreduce(int rank, int size) {
  enum { N = 1000 };
  float* x = malloc(N * sizeof(float));
  float* y = malloc(N * sizeof(float));
  int64_t shape[2] = {10, 100};
  for (int i = 0; i < N; ++i) x[i] = (float)(rank + 1) * (float)(i % 7);
  collHvdTensor_t in = view(x, collFloat32, 2, shape), out = view(y, collFloat32, 2, shape);
  collHvdHandle_t h = 0;
  /* Average with prescale 2 and postscale 0.5: the plain average. */
  OK(collHvdAllreduceAsync(&in, &out, "c.avg", collHvdAverage, 2.0, 0.5, NULL, 0, &h));
  EXPECT(h > 0, "handle %lld", (long long)h);
  OK(collHvdWait(h));
  int done = 0;
  OK(collHvdPoll(h, &done));
  EXPECT(done == 1, "poll after wait says %d", done);
  const float ranksum = (float)size * (float)(size + 1) / 2.0f;
  int bad = 0;
  for (int i = 0; i < N; ++i)
    bad += fabsf(y[i] - ranksum * (float)(i % 7) / (float)size) > 1e-4f * (1.0f + y[i]);
  EXPECT(bad == 0, "%d wrong averages (y[1] = %g)", bad, y[1]);
  OK(collHvdRelease(h));

  /* In place, int32 Max. */
  int32_t v[5];
  int64_t five = 5;
  for (int i = 0; i < 5; ++i) v[i] = (i == rank % 5) ? 100 + rank : -i;
  collHvdTensor_t iv = view(v, collInt32, 1, &five);
  OK(collHvdAllreduceAsync(&iv, &iv, "c.max", collHvdMax, 1.0, 1.0, NULL, 0, &h));
  OK(collHvdWait(h));
  OK(collHvdRelease(h));
  for (int i = 0; i < 5; ++i) {
    int want = -i;
    for (int r = 0; r < size; ++r)
      if (i == r % 5 && 100 + r > want) want = 100 + r;
    EXPECT(v[i] == want, "max[%d] = %d, want %d", i, (int)v[i], want);
  }

  /* A scalar (ndim 0), Sum, fp16 compression on float32. */
  float s = 1.5f, sum = 0;
  collHvdTensor_t ts = view(&s, collFloat32, 0, NULL), tsum = view(&sum, collFloat32, 0, NULL);
  collHvdCompression_t fp16 = {collHvdCompressFP16, 256, 0, 0.01, 0};
  OK(collHvdAllreduceAsync(&ts, &tsum, "c.scalar", collHvdSum, 1.0, 1.0, &fp16, 0, &h));
  OK(collHvdWait(h));
  OK(collHvdRelease(h));
  EXPECT(sum == 1.5f * (float)size, "scalar sum %g", sum);

  /* Grouped: two tensors of different types finish together. */
  double d[3] = {rank, 2.0 * rank, 1};
  int64_t g[4] = {rank, rank, rank, 1};
  int64_t three = 3, four = 4;
  collHvdTensor_t ins[2] = {view(d, collFloat64, 1, &three), view(g, collInt64, 1, &four)};
  OK(collHvdGroupedAllreduceAsync(2, ins, ins, "c.group", collHvdSum, 1.0, 1.0, NULL, 0, &h));
  OK(collHvdWait(h));
  OK(collHvdRelease(h));
  const double rs = (double)size * (size - 1) / 2.0;
  EXPECT(d[0] == rs && d[1] == 2 * rs && d[2] == size, "grouped f64 %g %g %g", d[0], d[1], d[2]);
  EXPECT(g[0] == (int64_t)rs && g[3] == size, "grouped i64 %lld %lld", (long long)g[0],
         (long long)g[3]);
  free(x);
  free(y);
}

static void testBroadcastGather(int rank, int size) {
  /* Broadcast from the last rank, in place. */
  int64_t shape = 4;
  float b[4];
  for (int i = 0; i < 4; ++i) b[i] = (float)(rank * 10 + i);
  collHvdTensor_t tb = view(b, collFloat32, 1, &shape);
  collHvdHandle_t h;
  OK(collHvdBroadcastAsync(&tb, &tb, size - 1, "c.bcast", 0, &h));
  OK(collHvdWait(h));
  for (int i = 0; i < 4; ++i) EXPECT(b[i] == (float)((size - 1) * 10 + i), "bcast[%d] %g", i, b[i]);
  /* A broadcast has no output of its own. */
  int ndim = 0;
  int64_t dims[COLL_HVD_MAX_DIMS];
  expectError(collHvdOutputShape(h, &ndim, dims), collInvalidUsage, "broadcast",
              "output shape of a broadcast");
  void* none = (void*)&ndim;
  expectError(collHvdOutputTake(h, &none), collInvalidUsage, "broadcast", "take of a broadcast");
  EXPECT(none == NULL, "a refused take leaves *data %p", none);
  OK(collHvdRelease(h));

  /* Allgather: rank r gives r + 1 rows of 3. */
  int64_t gshape[2] = {rank + 1, 3};
  int32_t rows[3 * 8];
  for (int i = 0; i < 3 * (rank + 1); ++i) rows[i] = rank * 100 + i;
  collHvdTensor_t tg = view(rows, collInt32, 2, gshape);
  OK(collHvdAllgatherAsync(&tg, "c.gather", 0, &h));
  OK(collHvdWait(h));
  OK(collHvdOutputShape(h, &ndim, dims));
  const int64_t total = (int64_t)size * (size + 1) / 2;
  EXPECT(ndim == 2 && dims[0] == total && dims[1] == 3, "allgather shape %d [%lld %lld]", ndim,
         (long long)dims[0], (long long)dims[1]);
  int32_t* all = malloc((size_t)total * 3 * sizeof(int32_t));
  expectError(collHvdOutputCopy(h, all, 1), collInvalidArgument, "bytes", "copy of the wrong size");
  OK(collHvdOutputCopy(h, all, (size_t)total * 3 * sizeof(int32_t)));
  int k = 0, bad = 0;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 3 * (r + 1); ++i) bad += all[k++] != r * 100 + i;
  EXPECT(bad == 0, "%d wrong gathered values", bad);
  expectError(collHvdReceivedSplits(h, dims, size), collInvalidUsage, "alltoall",
              "received splits of an allgather");
  /* Taking the output instead: the same bytes, valid after the release until freed. */
  void* taken = NULL;
  expectError(collHvdOutputTake(h, NULL), collInvalidArgument, "data", "take into NULL");
  OK(collHvdOutputTake(h, &taken));
  EXPECT(taken != NULL, "no output taken");
  void* again = NULL;
  expectError(collHvdOutputTake(h, &again), collInvalidUsage, "taken already", "second take");
  EXPECT(again == NULL, "a refused take gave %p", again);
  OK(collHvdRelease(h));
  EXPECT(taken && memcmp(taken, all, (size_t)total * 3 * sizeof(int32_t)) == 0,
         "the taken output differs from the copy");
  OK(collHvdOutputFree(taken));
  expectError(collHvdOutputFree(taken), collInvalidArgument, "not an output", "double free");
  expectError(collHvdOutputFree(all), collInvalidArgument, "not an output", "free of foreign memory");
  OK(collHvdOutputFree(NULL));
  free(all);

  /* Alltoall: rank r sends j + 1 rows (of 2) to rank j; it receives r + 1 from each. */
  int64_t splits[8], nrows = 0;
  for (int j = 0; j < size; ++j) nrows += splits[j] = j + 1;
  int64_t ashape[2] = {nrows, 2};
  float* send = malloc((size_t)nrows * 2 * sizeof(float));
  k = 0;
  for (int j = 0; j < size; ++j)
    for (int i = 0; i < 2 * (j + 1); ++i) send[k++] = (float)(rank * 1000 + j * 10 + i);
  collHvdTensor_t ta = view(send, collFloat32, 2, ashape);
  OK(collHvdAlltoallAsync(&ta, splits, size, "c.alltoall", 0, &h));
  OK(collHvdWait(h));
  OK(collHvdOutputShape(h, &ndim, dims));
  EXPECT(ndim == 2 && dims[0] == (int64_t)size * (rank + 1) && dims[1] == 2,
         "alltoall shape [%lld %lld]", (long long)dims[0], (long long)dims[1]);
  float* recv = malloc((size_t)dims[0] * 2 * sizeof(float));
  OK(collHvdOutputCopy(h, recv, (size_t)dims[0] * 2 * sizeof(float)));
  int64_t got[8];
  OK(collHvdReceivedSplits(h, got, size));
  bad = 0;
  k = 0;
  for (int r = 0; r < size; ++r) {
    bad += got[r] != rank + 1;
    for (int i = 0; i < 2 * (rank + 1); ++i) bad += recv[k++] != (float)(r * 1000 + rank * 10 + i);
  }
  EXPECT(bad == 0, "%d wrong alltoall values or splits", bad);
  OK(collHvdRelease(h));
  free(send);
  free(recv);

  /* Reducescatter of 2 * size + 1 rows of 1: rank 0 gets 3 rows, the others 2. */
  const int64_t m = 2 * size + 1;
  float* rsIn = malloc((size_t)m * sizeof(float));
  for (int i = 0; i < m; ++i) rsIn[i] = (float)(i + rank);
  collHvdTensor_t tr = view(rsIn, collFloat32, 1, &m);
  OK(collHvdReducescatterAsync(&tr, "c.rs", collHvdSum, 1.0, 1.0, 0, &h));
  OK(collHvdWait(h));
  OK(collHvdOutputShape(h, &ndim, dims));
  const int64_t mine = rank == 0 ? 3 : 2, first = rank == 0 ? 0 : 3 + 2 * (rank - 1);
  EXPECT(ndim == 1 && dims[0] == mine, "reducescatter shape %lld", (long long)dims[0]);
  float part[3] = {0, 0, 0};
  OK(collHvdOutputCopy(h, part, (size_t)mine * sizeof(float)));
  for (int i = 0; i < mine; ++i) {
    const float want = (float)size * (float)(first + i) + (float)(size * (size - 1) / 2);
    EXPECT(part[i] == want, "reducescatter[%d] %g want %g", i, part[i], want);
  }
  OK(collHvdRelease(h));
  free(rsIn);
}

static void testBadInput(int rank, int size) {
  float x[2] = {1, 2};
  int64_t two = 2, neg = -1, big[COLL_HVD_MAX_DIMS + 1];
  collHvdTensor_t t = view(x, collFloat32, 1, &two);
  collHvdHandle_t h;
  expectError(collHvdAllreduceAsync(&t, &t, "c.bad", collHvdSum, 1, 1, NULL, 0, NULL),
              collInvalidArgument, "handle", "NULL handle pointer");
  expectError(collHvdAllreduceAsync(&t, &t, "c.bad", 9, 1, 1, NULL, 0, &h), collInvalidArgument,
              "op", "unknown op");
  expectError(collHvdAllreduceAsync(NULL, &t, "c.bad", collHvdSum, 1, 1, NULL, 0, &h),
              collInvalidArgument, "input", "NULL input");
  expectError(collHvdAllreduceAsync(&t, &t, NULL, collHvdSum, 1, 1, NULL, 0, &h),
              collInvalidArgument, "name", "NULL name");
  collHvdTensor_t bad = view(x, collFloat32, COLL_HVD_MAX_DIMS + 1, big);
  expectError(collHvdAllreduceAsync(&bad, &bad, "c.bad", collHvdSum, 1, 1, NULL, 0, &h),
              collInvalidArgument, "ndim", "too many dimensions");
  bad = view(x, collFloat32, 1, &neg);
  expectError(collHvdAllreduceAsync(&bad, &bad, "c.bad", collHvdSum, 1, 1, NULL, 0, &h),
              collInvalidArgument, "negative", "negative dimension");
  bad = view(x, collFloat32, 1, NULL);
  expectError(collHvdBroadcastAsync(&bad, &bad, 0, "c.bad", 0, &h), collInvalidArgument, "shape",
              "ndim without a shape");
  bad = view(x, collFloat32, 1, &two);
  bad.deviceType = 7;
  expectError(collHvdAllgatherAsync(&bad, "c.bad", 0, &h), collInvalidArgument, "device",
              "unknown device type");
  collHvdCompression_t weird = {42, 256, 0, 0.01, 0};
  expectError(collHvdAllreduceAsync(&t, &t, "c.bad", collHvdSum, 1, 1, &weird, 0, &h),
              collInvalidArgument, "compressor", "unknown compressor");
  expectError(collHvdAlltoallAsync(&t, NULL, 3, "c.bad", 0, &h), collInvalidArgument, "splits",
              "splits NULL with nsplits 3");
  expectError(collHvdBroadcastAsync(&t, &t, size + 3, "c.bad", 0, &h), collInvalidArgument, "root",
              "root out of range");
  expectError(collHvdAllreduceAsync(&t, &t, "c.bad", collHvdSum, 1, 1, NULL, 77, &h),
              collInvalidArgument, "process set", "unknown process set");
  int done;
  expectError(collHvdPoll(987654, &done), collInvalidArgument, "unknown handle", "poll of a bad handle");
  expectError(collHvdWait(987654), collInvalidArgument, "unknown handle", "wait on a bad handle");
  expectError(collHvdRelease(987654), collInvalidArgument, "unknown handle", "release of a bad handle");
  expectError(collHvdAddProcessSet(NULL, 2, &done), collInvalidArgument, "ranks", "NULL ranks");
  expectError(collHvdRemoveProcessSet(0), collInvalidArgument, "global", "removing the global set");
  EXPECT(strcmp(collHvdLastError(), "") != 0, "message cleared too early");
  OK(collHvdTopology(NULL, NULL, NULL, NULL, NULL, NULL));
  EXPECT(strcmp(collHvdLastError(), "") == 0, "message after a success: '%s'", collHvdLastError());

  /* The same name with different shapes on different ranks fails everywhere, naming it. */
  float y[3] = {0, 0, 0};
  int64_t n = rank == 0 ? 3 : 2;
  collHvdTensor_t m = view(y, collFloat32, 1, &n);
  OK(collHvdAllreduceAsync(&m, &m, "c.mismatch", collHvdSum, 1, 1, NULL, 0, &h));
  expectError(collHvdWait(h), collInvalidUsage, "c.mismatch", "shape mismatch across ranks");
  int ndim;
  int64_t dims[COLL_HVD_MAX_DIMS];
  expectError(collHvdOutputShape(h, &ndim, dims), collInvalidUsage, "allreduce",
              "output shape of an allreduce");
  OK(collHvdRelease(h));
  expectError(collHvdRelease(h), collInvalidArgument, "unknown handle", "double release");
}

static void testProcessSet(int rank, int size) {
  if (size < 3) return;
  int ranks[2] = {0, 2}, id = -1, psRank = -5, psSize = -5;
  OK(collHvdAddProcessSet(ranks, 2, &id));
  EXPECT(id > 0, "process set id %d", id);
  OK(collHvdProcessSetInfo(id, &psRank, &psSize));
  EXPECT(psSize == 2 && psRank == (rank == 0 ? 0 : rank == 2 ? 1 : -1), "set rank %d size %d",
         psRank, psSize);
  if (psRank >= 0) {
    float v = (float)rank, w = 0;
    collHvdTensor_t tv = view(&v, collFloat32, 0, NULL), tw = view(&w, collFloat32, 0, NULL);
    collHvdHandle_t h;
    OK(collHvdAllreduceAsync(&tv, &tw, "c.set", collHvdSum, 1, 1, NULL, id, &h));
    OK(collHvdWait(h));
    OK(collHvdRelease(h));
    EXPECT(w == 2.0f, "sum over ranks 0 and 2: %g", w);
  }
  OK(collHvdRemoveProcessSet(id));
}

/* The timeline switched at run time. Under COLL_TIMELINE the engine already records, so
 * a start is refused until a stop; then DIR/c.%r.json (COLL_HVD_TIMELINE_DIR, else the
 * working directory) records one allreduce. Bad input is answered with codes. */
static void testTimeline(int rank) {
  expectError(collHvdStartTimeline(NULL, 0), collInvalidArgument, "NULL", "timeline NULL path");
  expectError(collHvdStartTimeline("", 0), collInvalidArgument, "empty", "timeline empty path");
  if (getenv("COLL_TIMELINE"))
    expectError(collHvdStartTimeline("ignored.%r.json", 0), collInvalidUsage, "already being written",
                "start under COLL_TIMELINE");
  OK(collHvdStopTimeline());
  OK(collHvdStopTimeline());
  expectError(collHvdStartTimeline("/nonexistent-coll-dir/t.%r.json", 0), collSystemError, "cannot open",
              "timeline in a missing directory");
  const char* dir = getenv("COLL_HVD_TIMELINE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/c.%%r.json", dir && *dir ? dir : ".");
  OK(collHvdStartTimeline(path, 1));
  expectError(collHvdStartTimeline(path, 0), collInvalidUsage, "already being written", "second start");
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = (float)(rank + i);
  int64_t n = 64;
  collHvdTensor_t t = view(x, collFloat32, 1, &n);
  collHvdHandle_t h = 0;
  OK(collHvdAllreduceAsync(&t, &t, "c.timeline", collHvdSum, 1, 1, NULL, 0, &h));
  OK(collHvdWait(h));
  OK(collHvdRelease(h));
  OK(collHvdStopTimeline());
}

int main(void) {
  int rank = -1, size = -1, lr = -1, ls = -1, cr = -1, cs = -1;
  expectError(collHvdTopology(&rank, &size, NULL, NULL, NULL, NULL), collInvalidUsage,
              "not initialized", "topology before init");
  EXPECT(collHvdIsInitialized() == 0, "initialized before init");
  OK(collHvdInit());
  expectError(collHvdInit(), collInvalidUsage, "already", "second init");
  EXPECT(collHvdIsInitialized() == 1, "not initialized after init");
  OK(collHvdTopology(&rank, &size, &lr, &ls, &cr, &cs));
  gRank = rank;
  EXPECT(size >= 2 && rank >= 0 && rank < size, "rank %d size %d", rank, size);
  EXPECT(ls * cs == size && lr >= 0 && lr < ls && cr >= 0 && cr < cs,
         "local %d/%d cross %d/%d", lr, ls, cr, cs);

  testAllreduce(rank, size);
  testBroadcastGather(rank, size);
  testBadInput(rank, size);
  testProcessSet(rank, size);
  testTimeline(rank);
  OK(collHvdBarrier(0));
  int last = -1;
  OK(collHvdJoin(0, &last));
  EXPECT(last >= 0 && last < size, "join says the last rank was %d", last);

  OK(collHvdShutdown());
  EXPECT(collHvdIsInitialized() == 0, "initialized after shutdown");
  OK(collHvdShutdown());
  float v = 1;
  collHvdTensor_t tv = view(&v, collFloat32, 0, NULL);
  collHvdHandle_t h;
  expectError(collHvdAllreduceAsync(&tv, &tv, "c.late", collHvdSum, 1, 1, NULL, 0, &h),
              collInvalidUsage, "not initialized", "allreduce after shutdown");
  if (gFailures) {
    fprintf(stderr, "rank %d: %d checks failed\n", rank, gFailures);
    return 1;
  }
  printf("rank %d of %d: hvd C interface OK\n", rank, size);
  return 0;
}
