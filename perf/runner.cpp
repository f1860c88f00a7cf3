#include "runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_memory.hpp"
#include "check.hpp"
#include "json_report.hpp"

extern char** environ;

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
  // -I: every timed iteration's time on this rank and the maximum over ranks (us).
  std::vector<double> iterUs;
  std::vector<double> iterMaxUs;
  std::vector<double> allRanksUs;  // rank 0 only: nranks rows of iters, for the JSON report
};

// nccl-tests' per-iteration summary of -I (nearest-rank percentiles).
struct IterStats {
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0;
};
IterStats iterStats(std::vector<double> t) {
  IterStats s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  auto pct = [&](int p) {
    size_t rank = (static_cast<size_t>(p) * n + 99) / 100;  // ceil(p/100 * n), 1-based
    return t[std::min(n, std::max<size_t>(rank, 1)) - 1];
  };
  s.min = t.front();
  s.max = t.back();
  s.p50 = t[n / 2];
  s.p95 = pct(95);
  s.p99 = pct(99);
  double sum = 0;
  for (double v : t) sum += v;
  s.avg = sum / static_cast<double>(n);
  double var = 0;
  for (double v : t) var += (v - s.avg) * (v - s.avg);
  s.stdev = std::sqrt(var / static_cast<double>(n));
  return s;
}

// The number in at most `width` characters, as nccl-tests' columns print it.
std::string fitNumber(double v, int width) {
  char buf[64];
  for (const char* f : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(buf, sizeof buf, f, width, v) <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

std::string nowText() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Resident memory of this process (/proc/self/status), for -M. 0 where unknown.
int64_t statusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':')
      return std::atoll(line.c_str() + len + 1) * 1024;
  }
  return 0;
}

std::string memText(int64_t bytes) {
  double v = static_cast<double>(bytes);
  const char* unit = " B";
  if (std::fabs(v) >= 1024.0 * 1024 * 1024) v /= 1024.0 * 1024 * 1024, unit = " GB";
  else if (std::fabs(v) >= 1024.0 * 1024) v /= 1024.0 * 1024, unit = " MB";
  else if (std::fabs(v) >= 1024.0) v /= 1024.0, unit = " KB";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", std::fabs(v) < 10 ? 2 : std::fabs(v) < 100 ? 1 : 0, v,
                unit);
  return buf;
}

// Variables never copied into the JSON report's "env" (nccl-tests copies them all).
bool secretVariable(const char* entry) {
  std::string name(entry, std::strcspn(entry, "="));
  for (const char* word : {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY"})
    if (name.find(word) != std::string::npos) return true;
  return false;
}

// -T: ends the process when the run has not finished in time. The library's own waits
// are bounded by COLL_TIMEOUT; this bounds the whole run, as nccl-tests' -T does.
class Watchdog {
 public:
  Watchdog(double seconds, const char* prog) {
    if (seconds <= 0) return;
    thread_ = std::thread([this, seconds, prog] {
      std::unique_lock<std::mutex> lk(mu_);
      if (cv_.wait_for(lk, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
      std::fprintf(stderr, "%s: -T %g: the test did not finish within %g s; ending it\n", prog,
                   seconds, seconds);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(3);
    });
  }
  ~Watchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

struct MemoryUse {
  int64_t beforeInit = 0, afterInit = 0, afterBuffers = 0;
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
  Bench(const Options& o, const ToolDesc& t, collComm_t comm, std::vector<std::string> args);
  ~Bench();
  // Picks this rank's GPU (with -g 1) and allocates the buffers.
  void setup();
  // Rank 0 opens the -J report; false on every rank when it cannot (rank 0 says why).
  bool openReport(const char* prog);
  void printHeader(const char* prog);
  void sweep();
  int finish(const char* prog, const MemoryUse& mem);

 private:
  void runCase(collDataType_t dt, collRedOp_t op, int root);
  Result measure(const Counts& k, collDataType_t dt, collRedOp_t op, int root, bool inPlace,
                 IterCount ic);
  void prepare(const Counts& k, const Pattern& p, bool inPlace, size_t typeSize);
  std::vector<RankInfo> gatherInfo(const RankInfo& mine);
  // The calls of one iteration (agg of them) as -z asks; nonblocking requests join pending_.
  void issueIteration(const CallArgs& a, int agg);
  // Waits for every pending request and the stream.
  void complete();
  void warmup(const CallArgs& a, int iters);
  double combineTime(double localUs);
  uint64_t maxOverRanks(uint64_t v);
  void perIterTimes(Result* r);
  std::string halfRow(const Result& r, size_t bytes, bool outOfPlace);
  bool nonblocking() const;

  const Options& opts_;
  const ToolDesc& tool_;
  collComm_t comm_;
  std::vector<std::string> args_;
  int rank_ = 0;
  int nranks_ = 1;
  bool printer_ = false;
  int device_ = -1;
  size_t offsetBytes_ = 0;  // -u, in bytes of the current type
  std::unique_ptr<BenchMemory> mem_;
  std::deque<collRequest_t> pending_;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  uint64_t wrongTotal_ = 0;
  FILE* jsonFile_ = nullptr;
  std::unique_ptr<JsonWriter> json_;
};

// At most this many nonblocking requests are outstanding in a timed loop; the oldest is
// waited for before another is issued.
constexpr size_t kMaxPending = 1024;

Bench::Bench(const Options& o, const ToolDesc& t, collComm_t comm, std::vector<std::string> args)
    : opts_(o), tool_(t), comm_(comm), args_(std::move(args)) {
  checkCall(collCommUserRank(comm_, &rank_), "collCommUserRank", comm_);
  checkCall(collCommCount(comm_, &nranks_), "collCommCount", comm_);
  printer_ = rank_ == 0;
}

Bench::~Bench() {
  // Requests are left only by a failed loop: the communicator is aborted next
  // (CommHandle), which ends them; waiting here would wait for the peers' timeout.
  if (json_) json_->closeAll();
  if (jsonFile_) std::fclose(jsonFile_);
}

bool Bench::nonblocking() const {
  const bool hasI = (opts_.native ? tool_.nativeIcall : tool_.icall) != nullptr;
  return hasI && !opts_.deviceBuffers && (opts_.blocking == 0 || opts_.blocking == 3);
}

bool Bench::openReport(const char* prog) {
  if (opts_.outputFile.empty()) return true;
  int ok = 1;
  if (printer_) {
    std::string opened, why;
    jsonFile_ = openReportFile(opts_.outputFile, &opened, &why);
    if (jsonFile_) {
      std::printf("# Writing JSON output to %s\n", opened.c_str());
      json_ = std::make_unique<JsonWriter>(jsonFile_);
    } else {
      std::fprintf(stderr, "%s: -J %s: %s\n", prog, opts_.outputFile.c_str(), why.c_str());
      ok = 0;
    }
  }
  checkCall(collBroadcast(&ok, &ok, 1, collInt32, 0, comm_, nullptr), "collBroadcast(-J)", comm_);
  if (!json_) return ok != 0;
  int version = 0;
  collGetVersion(&version);
  JsonWriter& j = *json_;
  j.beginObject();
  j.key("version");
  j.integer(3);
  j.key("start_time");
  j.str(nowText());
  j.key("args");
  j.beginList();
  j.str(prog);
  for (const std::string& a : args_) j.str(a);
  j.endList();
  j.key("env");
  j.beginList();
  for (char** e = environ; e && *e; ++e)
    if (!secretVariable(*e)) j.str(*e);
  j.endList();
  j.key("nccl_version");
  j.integer(version);
  return true;
}

std::vector<RankInfo> Bench::gatherInfo(const RankInfo& mine) {
  std::vector<RankInfo> all(static_cast<size_t>(nranks_));
  checkCall(collAllGather(&mine, all.data(), sizeof mine, collUint8, comm_, nullptr),
            "collAllGather(rank info)", comm_);
  return all;
}

void Bench::setup() {
  // Every type's buffers fit in maxBytes (countsFor never exceeds the byte size), -u
  // elements of the largest type on top.
  const size_t bytes = opts_.maxBytes + static_cast<size_t>(opts_.unalign) * 8;
  if (bytes < opts_.maxBytes) throw std::runtime_error("cannot allocate " + std::to_string(opts_.maxBytes) + " bytes");
  if (!opts_.deviceBuffers) {
    mem_ = opts_.sharedBuffers ? makeSharedMemory(bytes) : makeHostMemory(bytes);
    // -M counts the buffers as resident memory: touch every page once.
    if (opts_.memoryReport) {
      std::memset(mem_->hostSend(), 0, bytes);
      std::memset(mem_->hostRecv(), 0, bytes);
    }
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
  mem_ = makeDeviceMemory(bytes);
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
  // nccl-tests' preamble, line for line; then what is this library's own.
  std::printf("# libcollective perf tools (nccl-tests compatible) version %d.%d.%d library=%d\n",
              version / 10000, version / 100 % 100, version % 100, version);
  std::printf("# Collective test starting: %s\n", prog);
  std::printf("# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: ", opts_.deviceBuffers ? 1 : 0,
              opts_.minBytes, opts_.maxBytes);
  if (opts_.additiveSteps) std::printf("%zu(bytes)", opts_.stepBytes);
  else std::printf("%g(factor)", opts_.stepFactor);
  std::printf(" warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0 unalign: %d\n",
              opts_.warmup, opts_.iters, opts_.aggIters, opts_.check, opts_.unalign);
  if (opts_.blocking == 1) std::printf("# Blocking Enabled: wait and barrier after each inner iteration (-m)\n");
  if (opts_.blocking == 2) std::printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier\n");
  if (opts_.blocking == 3)
    std::printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier\n");
  if (nonblocking())
    std::printf("# -z %d: nonblocking collI* calls, waited for at the end of each %s\n", opts_.blocking,
                opts_.blocking == 0 ? "timed loop" : "iteration");
  if ((opts_.blocking == 0 || opts_.blocking == 3) && !opts_.deviceBuffers && !nonblocking())
    std::printf("# -z %d: %s has no nonblocking form (grouped send/recv calls): each call returns when done\n",
                opts_.blocking, collName(tool_.coll));
  if (opts_.perIterTiming) {
    std::printf("# Per-Iteration Report: each iteration timed alone (waited for); i_* uses max over ranks");
    if (opts_.perIterSkip) std::printf("; summary skips first %d iterations", opts_.perIterSkip);
    std::printf("\n");
  }
  if (opts_.parallelInit) std::printf("# Parallel Init Enabled: one rank per process, each initialised by its own process\n");
  std::printf("# nranks %d collective %s average: %d(%s) cycles: %d\n", nranks_, collName(tool_.coll),
              static_cast<int>(opts_.average), avgModeName(opts_.average), opts_.cycles);
  if (!opts_.itersGiven || !opts_.warmupGiven)
    std::printf("# default -n/-w are scaled down for sizes above %zu bytes\n", kScaleAboveBytes);
  if (opts_.native) std::printf("# --native 1: timing the library's %s\n", tool_.nativeName);
  if (const char* t = std::getenv("COLL_TRANSPORT")) std::printf("# COLL_TRANSPORT=%s\n", t);
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < nranks_; ++r) {
    const RankInfo& ri = all[static_cast<size_t>(r)];
    std::printf("#  Rank %2d Group  0 Pid %6d on %10.*s device %2d [%.*s]\n", r, ri.pid,
                static_cast<int>(sizeof ri.host), ri.host, ri.device < 0 ? 0 : ri.device,
                static_cast<int>(sizeof ri.deviceName), ri.deviceName);
  }
  if (opts_.sharedBuffers) std::printf("#  Buffers: collMemAlloc (shared with same-host peers)\n");
  if (json_) {
    JsonWriter& j = *json_;
    j.key("config");
    j.beginObject();
    j.key("nthreads"); j.integer(1);
    j.key("ngpus"); j.integer(opts_.deviceBuffers ? 1 : 0);
    j.key("minimum_bytes"); j.integer(static_cast<long long>(opts_.minBytes));
    j.key("maximum_bytes"); j.integer(static_cast<long long>(opts_.maxBytes));
    if (opts_.additiveSteps) {
      j.key("step_bytes"); j.integer(static_cast<long long>(opts_.stepBytes));
    } else {
      j.key("step_factor"); j.integer(static_cast<long long>(opts_.stepFactor));
    }
    j.key("warmup_iters"); j.integer(opts_.warmup);
    j.key("iterations"); j.integer(opts_.iters);
    j.key("aggregated_iterations"); j.integer(opts_.aggIters);
    j.key("validation"); j.integer(opts_.check);
    j.key("graph"); j.integer(0);
    j.key("blocking_collectives"); j.boolean(opts_.blocking > 0);
    j.key("per_iter_timing"); j.boolean(opts_.perIterTiming);
    j.key("per_iter_skip"); j.integer(opts_.perIterSkip);
    j.key("parallel_init"); j.boolean(opts_.parallelInit);
    j.key("devices");
    j.beginList();
    for (int r = 0; r < nranks_; ++r) {
      const RankInfo& ri = all[static_cast<size_t>(r)];
      j.beginObject();
      j.key("rank"); j.integer(r);
      j.key("group"); j.integer(0);
      j.key("pid"); j.integer(ri.pid);
      j.key("hostname"); j.str(std::string(ri.host, strnlen(ri.host, sizeof ri.host)));
      j.key("device"); j.integer(ri.device < 0 ? 0 : ri.device);
      j.key("device_hex"); j.str("0000:00:00");
      j.key("device_info"); j.str(std::string(ri.deviceName, strnlen(ri.deviceName, sizeof ri.deviceName)));
      j.endObject();
    }
    j.endList();
    j.endObject();
  }
  const char* timeLabel = opts_.reportCpuTime ? "cputime" : "time";
  const bool pi = opts_.perIterTiming;
  std::printf("#\n#%61s%s%s%*s%s%s\n", "", "out-of-place", pi ? " (+ per-iteration)" : "",
              pi ? 44 : 26, "", "in-place", pi ? " (+ per-iteration)" : "");
  const char* f = "  %8s  %7s  %7s  %6s";
  const char* fi = "  %7s  %7s  %7s  %7s";
  std::printf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int half = 0; half < 2; ++half) {
    std::printf(f, timeLabel, "algbw", "busbw", "#wrong");
    if (pi) std::printf(fi, "i_min", "i_max", "i_p99", "i_cv%");
  }
  if (opts_.reportTimestamps) std::printf("  %19s", "timestamp");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int half = 0; half < 2; ++half) {
    std::printf(f, "(us)", "(GB/s)", "(GB/s)", "");
    if (pi) std::printf(fi, "(us)", "(us)", "(us)", "(%)");
  }
  if (opts_.reportTimestamps) std::printf("  %19s", "(Y-m-d H:M:S)");
  std::printf("\n");
  std::fflush(stdout);
  if (json_) {
    json_->key("results");
    json_->beginList();
  }
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
  offsetBytes_ = static_cast<size_t>(opts_.unalign) * ts;
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
    const int shownRoot = collHasRoot(tool_.coll) ? root : -1;
    const char* opText = collHasOp(tool_.coll) ? opName(op) : "none";
    if (json_) {
      char rootText[32];
      std::snprintf(rootText, sizeof rootText, "%6i", shownRoot);
      json_->beginObject();
      json_->key("size"); json_->integer(static_cast<long long>(printedBytes));
      json_->key("count"); json_->integer(static_cast<long long>(k.paramCount));
      json_->key("type"); json_->str(typeName(dt));
      json_->key("redop"); json_->str(opText);
      json_->key("root"); json_->str(rootText);
    }
    std::string row = halfRow(outOfPlace, printedBytes, true);
    row += halfRow(inPlace, printedBytes, false);
    if (opts_.reportTimestamps) row += "  " + nowText();
    std::printf("%12zu  %12zu  %8s  %6s  %6d%s\n", printedBytes, k.paramCount, typeName(dt), opText,
                shownRoot, row.c_str());
    if (json_) {
      json_->key("actual_iterations"); json_->integer(ic.iters);
      json_->key("experiment_name"); json_->str("");
      json_->endObject();
    }
    std::fflush(stdout);
  }
}

std::string Bench::halfRow(const Result& r, size_t bytes, bool outOfPlace) {
  double algBw = r.timeUs > 0 ? static_cast<double>(bytes) / r.timeUs / 1e3 : 0.0;
  double busBw = algBw * busBwFactor(tool_.coll, nranks_);
  busBwSum_ += busBw;
  ++busBwCount_;
  char time[32], wrong[32], out[256];
  std::snprintf(time, sizeof time, r.timeUs < 1e4 ? "%.2f" : (r.timeUs < 1e5 ? "%.1f" : "%.0f"),
                r.timeUs);
  if (opts_.check) std::snprintf(wrong, sizeof wrong, "%llu", (unsigned long long)r.wrong);
  else std::snprintf(wrong, sizeof wrong, "N/A");
  std::snprintf(out, sizeof out, "  %8s  %7.2f  %7.2f  %6s", time, algBw, busBw, wrong);
  std::string text = out;
  if (json_) {
    json_->key(outOfPlace ? "out_of_place" : "in_place");
    json_->beginObject();
    json_->key(opts_.reportCpuTime ? "cpu_time" : "time"); json_->num(r.timeUs);
    json_->key("alg_bw"); json_->num(algBw);
    json_->key("bus_bw"); json_->num(busBw);
    json_->key("nwrong");
    if (opts_.check) json_->num(static_cast<double>(r.wrong));
    else json_->null();
    json_->endObject();
  }
  if (opts_.perIterTiming) {
    const size_t skip = std::min(r.iterMaxUs.size(), static_cast<size_t>(opts_.perIterSkip));
    IterStats st = iterStats(std::vector<double>(r.iterMaxUs.begin() + static_cast<long>(skip),
                                                 r.iterMaxUs.end()));
    const double cv = st.avg > 0 ? st.stdev / st.avg * 100.0 : 0.0;
    text += "  " + fitNumber(st.min, 7) + "  " + fitNumber(st.max, 7) + "  " + fitNumber(st.p99, 7) +
            "  " + fitNumber(cv, 7);
    if (json_) {
      JsonWriter& j = *json_;
      j.key(outOfPlace ? "out_of_place_per_iter" : "in_place_per_iter");
      j.beginObject();
      j.key("skipped_iterations"); j.integer(static_cast<long long>(skip));
      j.key("min_us"); j.num(st.min);
      j.key("max_us"); j.num(st.max);
      j.key("avg_us"); j.num(st.avg);
      j.key("p50_us"); j.num(st.p50);
      j.key("p95_us"); j.num(st.p95);
      j.key("p99_us"); j.num(st.p99);
      j.key("stdev_us"); j.num(st.stdev);
      j.key("cv_pct"); j.num(cv);
      j.key("times_us");
      j.beginList();
      for (double t : r.iterMaxUs) j.num(t);
      j.endList();
      if (nranks_ > 1 && !r.allRanksUs.empty()) {
        j.key("per_process_max_times_us");
        j.beginList();
        const size_t n = r.iterMaxUs.size();
        for (int rank = 0; rank < nranks_; ++rank) {
          j.beginList();
          for (size_t i = 0; i < n; ++i) j.num(r.allRanksUs[static_cast<size_t>(rank) * n + i]);
          j.endList();
        }
        j.endList();
      }
      j.endObject();
    }
  }
  return text;
}

void Bench::prepare(const Counts& k, const Pattern& p, bool inPlace, size_t typeSize) {
  // 0xFF bytes are NaN or -1/max in every type: never a value the pattern expects.
  const size_t off = offsetBytes_;
  if (inPlace) {
    std::memset(mem_->hostRecv() + off, 0xFF, k.printedCount() * typeSize);
    fillInput(mem_->hostRecv() + off + k.sendInplaceOffset * typeSize, k.sendCount, p, rank_);
    mem_->upload(0, off + k.printedCount() * typeSize);
  } else {
    fillInput(mem_->hostSend() + off, k.sendCount, p, rank_);
    std::memset(mem_->hostRecv() + off, 0xFF, k.recvCount * typeSize);
    mem_->upload(off + k.sendCount * typeSize, off + k.recvCount * typeSize);
  }
}

void Bench::complete() {
  while (!pending_.empty()) {
    collRequest_t r = pending_.front();
    pending_.pop_front();
    checkCall(collWait(&r), "collWait", comm_);
  }
  mem_->sync();
}

void Bench::issueIteration(const CallArgs& a, int agg) {
  const int z = opts_.blocking;
  if (nonblocking()) {
    ICallFn icall = opts_.native ? tool_.nativeIcall : tool_.icall;
    for (int j = 0; j < agg; ++j) {
      while (pending_.size() + kMaxRequests > kMaxPending) {
        collRequest_t r = pending_.front();
        pending_.pop_front();
        checkCall(collWait(&r), "collWait", comm_);
      }
      collRequest_t reqs[kMaxRequests] = {};
      int n = 0;
      collResult_t res = icall(a, reqs, &n);
      for (int i = 0; i < n; ++i) pending_.push_back(reqs[i]);
      checkCall(res, collName(tool_.coll), comm_);
    }
    return;
  }
  // -z 1 and 2 wait after each call, so the calls of an iteration cannot share a group.
  const bool group = agg > 1 && z != 1 && z != 2;
  if (group) checkCall(collGroupStart(), "collGroupStart", comm_);
  for (int j = 0; j < agg; ++j) {
    checkCall(tool_.call(a), collName(tool_.coll), comm_);
    if (z == 1 || z == 2) mem_->sync();
    if (z == 1) checkCall(collBarrier(comm_), "collBarrier", comm_);
  }
  if (group) checkCall(collGroupEnd(), "collGroupEnd", comm_);
}

void Bench::warmup(const CallArgs& a, int iters) {
  for (int i = 0; i < iters; ++i) {
    issueIteration(a, opts_.aggIters);
    if (opts_.blocking == 3) complete();
  }
  complete();
}

Result Bench::measure(const Counts& k, collDataType_t dt, collRedOp_t op, int root,
                      bool inPlace, IterCount ic) {
  using Clock = std::chrono::steady_clock;
  using Micros = std::chrono::duration<double, std::micro>;
  size_t ts = typeBytes(dt);
  const size_t off = offsetBytes_;
  char* send = inPlace ? mem_->recv() + off + k.sendInplaceOffset * ts : mem_->send() + off;
  char* recv = inPlace ? mem_->recv() + off + k.recvInplaceOffset * ts : mem_->recv() + off;
  CallArgs a{send, recv, k.paramCount, dt, op, root, rank_, nranks_, comm_, mem_->stream()};
  Pattern pattern(dt, collHasOp(tool_.coll) ? op : kNoOp, nranks_);

  prepare(k, pattern, inPlace, ts);
  warmup(a, ic.warmup);
  checkCall(collBarrier(comm_), "collBarrier", comm_);
  Result r;
  if (opts_.perIterTiming) r.iterUs.reserve(static_cast<size_t>(ic.iters));
  Micros excluded{0};  // -z 3: the barriers after each iteration
  auto start = Clock::now();
  for (int i = 0; i < ic.iters; ++i) {
    auto iterStart = Clock::now();
    issueIteration(a, opts_.aggIters);
    if (opts_.perIterTiming || opts_.blocking == 3) complete();
    if (opts_.perIterTiming) r.iterUs.push_back(Micros(Clock::now() - iterStart).count());
    if (opts_.blocking == 3) {
      auto b = Clock::now();
      checkCall(collBarrier(comm_), "collBarrier", comm_);
      excluded += Clock::now() - b;
    }
  }
  // -C: the time the calls took to return; otherwise until their work is done (stream-
  // ordered and nonblocking calls return before).
  auto issued = Clock::now();
  complete();
  Micros elapsed = (opts_.reportCpuTime ? issued : Clock::now()) - start - excluded;
  r.timeUs = combineTime(elapsed.count() / (static_cast<double>(ic.iters) * opts_.aggIters));
  if (opts_.perIterTiming) perIterTimes(&r);

  // Fresh single calls: the timed loop reduced in place over and over.
  for (int c = 0; c < opts_.check; ++c) {
    prepare(k, pattern, inPlace, ts);
    checkCall(tool_.call(a), collName(tool_.coll), comm_);
    mem_->sync();
    mem_->download(off + (inPlace ? k.printedCount() : k.recvCount) * ts);
    const char* out = mem_->hostRecv() + off + (inPlace ? k.recvInplaceOffset * ts : 0);
    r.wrong += maxOverRanks(countWrong(tool_.coll, pattern, k, nranks_, rank_, root, out));
  }
  return r;
}

// Each iteration's time as the slowest rank saw it (nccl-tests: "max over process rows"),
// and every rank's own times for the JSON report.
void Bench::perIterTimes(Result* r) {
  const size_t n = r->iterUs.size();
  r->iterMaxUs = r->iterUs;
  if (n == 0) return;
  checkCall(collAllReduce(r->iterMaxUs.data(), r->iterMaxUs.data(), n, collDouble, collMax, comm_, nullptr),
            "collAllReduce(per-iteration times)", comm_);
  // Every rank joins the all-gather; only rank 0 keeps what it gathers.
  std::vector<double> all(n * static_cast<size_t>(nranks_));
  checkCall(collAllGather(r->iterUs.data(), all.data(), n, collDouble, comm_, nullptr),
            "collAllGather(per-iteration times)", comm_);
  if (printer_) r->allRanksUs = std::move(all);
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

int Bench::finish(const char* prog, const MemoryUse& mem) {
  // Every rank takes part in the peak, rank 0 prints the largest.
  int64_t peak = statusBytes("VmHWM");
  int64_t collective = std::max<int64_t>(0, peak - mem.afterBuffers);
  int64_t use[3] = {mem.afterInit - mem.beforeInit, mem.afterBuffers - mem.afterInit, collective};
  if (opts_.memoryReport)
    checkCall(collAllReduce(use, use, 3, collInt64, collMax, comm_, nullptr), "collAllReduce(memory)", comm_);
  if (printer_) {
    const double avg = busBwCount_ ? busBwSum_ / busBwCount_ : 0.0;
    if (json_) json_->endList();
    std::printf("# %-20s : %llu %s\n", "Out of bounds values", (unsigned long long)wrongTotal_,
                wrongTotal_ ? "FAILED" : "OK");
    std::printf("# %-20s : %g\n#\n", "Avg bus bandwidth", avg);
    std::printf("# Collective test concluded: %s\n", prog);
    if (opts_.memoryReport) {
      // Resident memory (VmRSS, VmHWM) of the rank that used most; GPU memory with -g 1 is
      // not part of it.
      std::printf("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n",
                  "Host memory usage", memText(use[0]).c_str(), memText(use[1]).c_str(),
                  memText(use[2]).c_str(), memText(use[0] + use[1] + use[2]).c_str());
    }
    std::printf("#\n");
    if (json_) {
      JsonWriter& j = *json_;
      j.key("out_of_bounds");
      j.beginObject();
      j.key("count"); j.integer(static_cast<long long>(wrongTotal_));
      j.key("okay"); j.boolean(wrongTotal_ == 0);
      j.endObject();
      j.key("average_bus_bandwidth");
      j.beginObject();
      j.key("bandwidth"); j.num(avg);
      j.key("okay"); j.str("unchecked");
      j.endObject();
      j.key("errors");
      j.beginList();
      j.endList();
      j.key("end_time");
      j.str(nowText());
      j.closeAll();
    }
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
  // -T bounds the library's waits too, unless COLL_TIMEOUT says otherwise.
  if (opts.timeoutSec > 0 && !std::getenv("COLL_TIMEOUT"))
    setenv("COLL_TIMEOUT", std::to_string(static_cast<long long>(opts.timeoutSec)).c_str(), 0);
  Watchdog watchdog(opts.timeoutSec, prog);
  MemoryUse mem;
  mem.beforeInit = statusBytes("VmRSS");
  collComm_t comm = nullptr;
  collResult_t res = collCommInitFromEnv(&comm);
  mem.afterInit = statusBytes("VmRSS");
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
    Bench bench(opts, timed, comm, std::vector<std::string>(argv + 1, argv + argc));
    bench.setup();
    mem.afterBuffers = statusBytes("VmRSS");
    if (!bench.openReport(prog)) return 2;
    bench.printHeader(prog);
    for (int c = 0; opts.cycles == 0 || c < opts.cycles; ++c) bench.sweep();
    return bench.finish(prog, mem);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", prog, rank, e.what());
    handle.markFailed();
    return 1;
  }
}

}  // namespace perf
