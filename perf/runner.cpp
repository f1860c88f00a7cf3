#include "runner.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_memory.hpp"
#include "check.hpp"

namespace perf {
namespace {

// A failed library call: the message carries the call, the result and the library's
// last-error text.
class LibError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void checkCall(collResult_t r, const char* what, collComm_t comm) {
  if (r == collSuccess) return;
  throw LibError(std::string(what) + " failed: " + collGetErrorString(r) + ": " +
                 collGetLastError(comm));
}

// Destroys the communicator on the way out, or aborts it when the run failed so that
// peers blocked in a collective are woken instead of waiting for their timeout.
class CommHandle {
 public:
  explicit CommHandle(collComm_t c) : comm_(c) {}
  ~CommHandle() { failed_ ? collCommAbort(comm_) : collCommDestroy(comm_); }
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  void markFailed() { failed_ = true; }

 private:
  collComm_t comm_;
  bool failed_ = false;
};

const char* avgModeName(AvgMode m) {
  static const char* names[] = {"rank0", "mean", "min", "max"};
  return names[static_cast<int>(m)];
}

struct Result {
  double timeUs = 0;
  uint64_t wrong = 0;
};

// Who each rank is, for the "# Using devices" header and the local rank.
struct RankInfo {
  int32_t pid;
  int32_t device;  // -1: host buffers
  char host[60];
  char deviceName[120];
};

class Bench {
 public:
  Bench(const Options& o, const ToolDesc& t, collComm_t comm);
  // Picks this rank's GPU (with -g 1) and allocates the buffers.
  void setup();
  void printHeader(const char* prog);
  void sweep();
  int finish();

 private:
  void runCase(collDataType_t dt, collRedOp_t op, int root);
  Result measure(const Counts& k, collDataType_t dt, collRedOp_t op, int root, bool inPlace,
                 IterCount ic);
  void prepare(const Counts& k, const Pattern& p, bool inPlace, size_t typeSize);
  std::vector<RankInfo> gatherInfo(const RankInfo& mine);
  void runIters(const CallArgs& a, int iters, int agg);
  double combineTime(double localUs);
  uint64_t maxOverRanks(uint64_t v);
  std::string halfRow(const Result& r, size_t bytes);

  const Options& opts_;
  const ToolDesc& tool_;
  collComm_t comm_;
  int rank_ = 0;
  int nranks_ = 1;
  bool printer_ = false;
  int device_ = -1;
  std::unique_ptr<BenchMemory> mem_;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  uint64_t wrongTotal_ = 0;
};

Bench::Bench(const Options& o, const ToolDesc& t, collComm_t comm)
    : opts_(o), tool_(t), comm_(comm) {
  checkCall(collCommUserRank(comm_, &rank_), "collCommUserRank", comm_);
  checkCall(collCommCount(comm_, &nranks_), "collCommCount", comm_);
  printer_ = rank_ == 0;
}

std::vector<RankInfo> Bench::gatherInfo(const RankInfo& mine) {
  std::vector<RankInfo> all(static_cast<size_t>(nranks_));
  checkCall(collAllGather(&mine, all.data(), sizeof mine, collUint8, comm_, nullptr),
            "collAllGather(rank info)", comm_);
  return all;
}

void Bench::setup() {
  // Every type's buffers fit in maxBytes (countsFor never exceeds the byte size).
  if (!opts_.deviceBuffers) {
    mem_ = opts_.sharedBuffers ? makeSharedMemory(opts_.maxBytes) : makeHostMemory(opts_.maxBytes);
    return;
  }
  // One GPU per rank of a host: the local rank is this rank's place among the ranks
  // whose host name is its own (whatever launched them).
  RankInfo mine{};
  gethostname(mine.host, sizeof mine.host - 1);
  std::vector<RankInfo> all = gatherInfo(mine);
  int localRank = 0;
  for (int r = 0; r < rank_; ++r)
    localRank += std::strncmp(all[static_cast<size_t>(r)].host, mine.host, sizeof mine.host) == 0;
  device_ = selectDevice(localRank);
  mem_ = makeDeviceMemory(opts_.maxBytes);
}

void Bench::printHeader(const char* prog) {
  RankInfo mine{};
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = device_;
  gethostname(mine.host, sizeof mine.host - 1);
  std::snprintf(mine.deviceName, sizeof mine.deviceName, "%s",
                device_ < 0 ? "cpu" : describeDevice(device_).c_str());
  std::vector<RankInfo> all = gatherInfo(mine);
  if (!printer_) return;
  int version = 0;
  collGetVersion(&version);
  std::printf("# %s (nccl-tests compatible), libcollective %d.%d.%d, %s\n", prog,
              version / 10000, version / 100 % 100, version % 100, collName(tool_.coll));
  std::printf("# nranks %d minBytes %zu maxBytes %zu step: ", nranks_, opts_.minBytes,
              opts_.maxBytes);
  if (opts_.additiveSteps) std::printf("%zu(bytes)", opts_.stepBytes);
  else std::printf("%g(factor)", opts_.stepFactor);
  std::printf(" warmup iters: %d iters: %d agg iters: %d validation: %d blocking: %d"
              " average: %d(%s) cycles: %d\n",
              opts_.warmup, opts_.iters, opts_.aggIters, opts_.check, opts_.blocking,
              static_cast<int>(opts_.average), avgModeName(opts_.average), opts_.cycles);
  if (!opts_.itersGiven || !opts_.warmupGiven)
    std::printf("# default -n/-w are scaled down for sizes above %zu bytes\n", kScaleAboveBytes);
  if (opts_.native) std::printf("# --native 1: timing the library's %s\n", tool_.nativeName);
  if (const char* t = std::getenv("COLL_TRANSPORT")) std::printf("# COLL_TRANSPORT=%s\n", t);
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < nranks_; ++r) {
    const RankInfo& ri = all[static_cast<size_t>(r)];
    std::printf("#  Rank %2d Pid %6d on %10.*s device %2d [%.*s]\n", r, ri.pid,
                static_cast<int>(sizeof ri.host), ri.host, ri.device < 0 ? 0 : ri.device,
                static_cast<int>(sizeof ri.deviceName), ri.deviceName);
  }
  if (opts_.sharedBuffers) std::printf("#  Buffers: collMemAlloc (shared with same-host peers)\n");
  std::printf("#\n#%61s%s%26s%s\n", "", "out-of-place", "", "in-place");
  const char* f = "# %10s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n";
  std::printf(f, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
              "time", "algbw", "busbw", "#wrong");
  std::printf(f, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
              "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void Bench::sweep() {
  for (collDataType_t dt : opts_.types) {
    std::vector<collRedOp_t> ops = collHasOp(tool_.coll) ? opts_.ops
                                                         : std::vector<collRedOp_t>{collSum};
    for (collRedOp_t op : ops) {
      if (isBitwiseOp(op) && isFloatingType(dt)) continue;  // "-o all" with a floating type
      if (!collHasRoot(tool_.coll)) {
        runCase(dt, op, 0);
      } else if (opts_.allRoots) {
        for (int root = 0; root < nranks_; ++root) runCase(dt, op, root);
      } else {
        runCase(dt, op, opts_.root);
      }
    }
  }
}

void Bench::runCase(collDataType_t dt, collRedOp_t op, int root) {
  size_t ts = typeBytes(dt);
  for (size_t bytes : sizeList(opts_)) {
    Counts k = countsFor(tool_.coll, bytes, ts, nranks_, rank_);
    IterCount ic = itersForSize(opts_, bytes);
    Result outOfPlace = measure(k, dt, op, root, false, ic);
    Result inPlace = measure(k, dt, op, root, true, ic);
    wrongTotal_ += outOfPlace.wrong + inPlace.wrong;
    if (!printer_) continue;
    // As nccl-tests: size is the larger buffer, count the count passed to the call (per
    // rank for all-gather, reduce-scatter and all-to-all).
    size_t printedBytes = k.printedCount() * ts;
    std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", printedBytes, k.paramCount,
                typeName(dt), collHasOp(tool_.coll) ? opName(op) : "none",
                collHasRoot(tool_.coll) ? root : -1, halfRow(outOfPlace, printedBytes).c_str(),
                halfRow(inPlace, printedBytes).c_str());
    std::fflush(stdout);
  }
}

std::string Bench::halfRow(const Result& r, size_t bytes) {
  double algBw = r.timeUs > 0 ? static_cast<double>(bytes) / r.timeUs / 1e3 : 0.0;
  double busBw = algBw * busBwFactor(tool_.coll, nranks_);
  busBwSum_ += busBw;
  ++busBwCount_;
  char time[32], wrong[32], out[128];
  std::snprintf(time, sizeof time, r.timeUs < 1e4 ? "%.2f" : (r.timeUs < 1e5 ? "%.1f" : "%.0f"),
                r.timeUs);
  if (opts_.check) std::snprintf(wrong, sizeof wrong, "%llu", (unsigned long long)r.wrong);
  else std::snprintf(wrong, sizeof wrong, "N/A");
  std::snprintf(out, sizeof out, "  %8s  %7.2f  %7.2f  %6s", time, algBw, busBw, wrong);
  return out;
}

void Bench::prepare(const Counts& k, const Pattern& p, bool inPlace, size_t typeSize) {
  // 0xFF bytes are NaN or -1/max in every type: never a value the pattern expects.
  if (inPlace) {
    std::memset(mem_->hostRecv(), 0xFF, k.printedCount() * typeSize);
    fillInput(mem_->hostRecv() + k.sendInplaceOffset * typeSize, k.sendCount, p, rank_);
    mem_->upload(0, k.printedCount() * typeSize);
  } else {
    fillInput(mem_->hostSend(), k.sendCount, p, rank_);
    std::memset(mem_->hostRecv(), 0xFF, k.recvCount * typeSize);
    mem_->upload(k.sendCount * typeSize, k.recvCount * typeSize);
  }
}

void Bench::runIters(const CallArgs& a, int iters, int agg) {
  for (int i = 0; i < iters; ++i) {
    if (agg > 1) checkCall(collGroupStart(), "collGroupStart", comm_);
    for (int j = 0; j < agg; ++j) checkCall(tool_.call(a), collName(tool_.coll), comm_);
    if (agg > 1) checkCall(collGroupEnd(), "collGroupEnd", comm_);
  }
}

Result Bench::measure(const Counts& k, collDataType_t dt, collRedOp_t op, int root,
                      bool inPlace, IterCount ic) {
  size_t ts = typeBytes(dt);
  char* send = inPlace ? mem_->recv() + k.sendInplaceOffset * ts : mem_->send();
  char* recv = inPlace ? mem_->recv() + k.recvInplaceOffset * ts : mem_->recv();
  CallArgs a{send, recv, k.paramCount, dt, op, root, rank_, nranks_, comm_, mem_->stream()};
  Pattern pattern(dt, collHasOp(tool_.coll) ? op : kNoOp, nranks_);

  prepare(k, pattern, inPlace, ts);
  runIters(a, ic.warmup, opts_.aggIters);
  mem_->sync();
  checkCall(collBarrier(comm_), "collBarrier", comm_);
  auto start = std::chrono::steady_clock::now();
  runIters(a, ic.iters, opts_.aggIters);
  // Stream-ordered calls return before their work is done: the time includes it.
  mem_->sync();
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  Result r;
  r.timeUs = combineTime(elapsed.count() / (static_cast<double>(ic.iters) * opts_.aggIters));

  if (opts_.check) {
    // A fresh single call: the timed loop reduced in place over and over.
    prepare(k, pattern, inPlace, ts);
    runIters(a, 1, 1);
    mem_->download((inPlace ? k.printedCount() : k.recvCount) * ts);
    const char* out = mem_->hostRecv() + (inPlace ? k.recvInplaceOffset * ts : 0);
    r.wrong = maxOverRanks(countWrong(tool_.coll, pattern, k, nranks_, rank_, root, out));
  }
  return r;
}

double Bench::combineTime(double localUs) {
  double t = localUs;
  switch (opts_.average) {
    case AvgMode::Rank0:
      checkCall(collBroadcast(&t, &t, 1, collDouble, 0, comm_, nullptr), "collBroadcast(time)",
                comm_);
      return t;
    case AvgMode::Mean:
      checkCall(collAllReduce(&t, &t, 1, collDouble, collSum, comm_, nullptr),
                "collAllReduce(time)", comm_);
      return t / nranks_;
    case AvgMode::Min:
      checkCall(collAllReduce(&t, &t, 1, collDouble, collMin, comm_, nullptr),
                "collAllReduce(time)", comm_);
      return t;
    case AvgMode::Max:
      break;
  }
  checkCall(collAllReduce(&t, &t, 1, collDouble, collMax, comm_, nullptr),
            "collAllReduce(time)", comm_);
  return t;
}

uint64_t Bench::maxOverRanks(uint64_t v) {
  checkCall(collAllReduce(&v, &v, 1, collUint64, collMax, comm_, nullptr),
            "collAllReduce(#wrong)", comm_);
  return v;
}

int Bench::finish() {
  if (printer_) {
    std::printf("# Out of bounds values : %llu %s\n", (unsigned long long)wrongTotal_,
                wrongTotal_ ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n#\n", busBwCount_ ? busBwSum_ / busBwCount_ : 0.0);
    std::fflush(stdout);
  }
  return wrongTotal_ ? 1 : 0;
}

const char* baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

int runTool(int argc, char** argv, const ToolDesc& tool) {
  const char* prog = baseName(argv[0]);
  Options opts;
  try {
    opts = parseArgs(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", prog, e.what(), usageText(prog).c_str());
    return 2;
  }
  if (opts.help) {
    std::fputs(usageText(prog).c_str(), stdout);
    return 0;
  }
  // Refused before joining the job: every rank fails alike, at once, and none waits for
  // peers that will never come.
  std::string unsupported = optionsProblem(tool.coll, opts);
  if (unsupported.empty() && opts.native && !tool.nativeCall)
    unsupported = "--native 1: this tool has no native call";
  if (!unsupported.empty()) {
    std::fprintf(stderr, "%s: %s\n", prog, unsupported.c_str());
    return 2;
  }
  if (opts.deviceBuffers) {
    const std::string why = deviceBuffersUnavailable();
    if (!why.empty()) {
      std::fprintf(stderr, "%s: -g 1: %s\n", prog, why.c_str());
      return 2;
    }
  }
  collComm_t comm = nullptr;
  collResult_t res = collCommInitFromEnv(&comm);
  if (res != collSuccess) {
    std::fprintf(stderr, "%s: collCommInitFromEnv failed: %s: %s\n", prog,
                 collGetErrorString(res), collGetLastError(nullptr));
    return 1;
  }
  CommHandle handle(comm);
  int rank = -1, nranks = 0;
  try {
    checkCall(collCommUserRank(comm, &rank), "collCommUserRank", comm);
    checkCall(collCommCount(comm, &nranks), "collCommCount", comm);
    // Every rank sees the same count, so every rank refuses alike. Rank 0 says why before
    // the barrier: a launcher that kills the job when the first rank exits would
    // otherwise often cut the message off.
    std::string refused = rankCountProblem(tool.coll, nranks);
    if (collHasRoot(tool.coll) && !opts.allRoots && opts.root >= nranks)
      refused = "-r " + std::to_string(opts.root) + " is not a rank of " + std::to_string(nranks);
    if (!refused.empty()) {
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", prog, refused.c_str());
      collBarrier(comm);
      return 2;
    }
    ToolDesc timed = tool;
    if (opts.native) timed.call = tool.nativeCall;
    Bench bench(opts, timed, comm);
    bench.setup();
    bench.printHeader(prog);
    for (int c = 0; opts.cycles == 0 || c < opts.cycles; ++c) bench.sweep();
    return bench.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", prog, rank, e.what());
    handle.markFailed();
    return 1;
  }
}

}  // namespace perf
