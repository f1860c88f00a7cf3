// algo_sweep: float32 sum all-reduce time per size for several algorithms in ONE job.
//
//   algo_sweep [--algos auto,ring,tree,hd,rd,oneshot,hier] [-b 8] [-e 256M] [-r 5] [--target-ms 20]
//              [--per-call N] [--grouped] [--samples]
//
// One process is one rank (collCommInitFromEnv). For every algorithm the tool makes its
// own communicator over the same ranks (collCommSplit with COLL_ALGO=allreduce:NAME set
// while it is made; "auto" leaves COLL_ALGO empty), then times every algorithm at every
// size in REPEATS rounds. A round goes through all sizes, and at each size through every
// algorithm, in an order rotated each round; the median of an algorithm's REPEATS times
// at a size is printed. Separate launches per algorithm on this VM differ by up to 50%
// in small-message latency (where the ranks land on the two cores); measured side by
// side in one job the algorithms meet the same conditions. Spreading a size's repeats
// over the whole run keeps a disturbance of a few seconds to one sample of each size
// (instead of every sample of a few sizes), and the median keeps a rare lucky sample out
// too. Each measurement runs enough calls for about --target-ms; its time is the slowest
// rank's. Every algorithm's result is checked against the exact sum after every
// measurement; a wrong value fails the run.
//
// --grouped takes all REPEATS rounds of one size before going on to the next (sizes in
// ascending order). Calls of a few MiB leave this VM's kernel slower for a while after
// them: with rounds spread over 512 KiB-2 MiB, hd at 512 KiB took 440-780 us with samples
// from 460 to 2100 us, measured alone 270-350 us, and two columns running the same
// algorithm differed by up to 25%. Grouped, each size is measured after smaller ones only,
// and such columns agreed within 1-9% (512 KiB-8 MiB). compare_algos.sh groups its band
// of large sizes.
//
// Back-to-back calls (the default, as the *_perf tools time them) let a call start on one
// rank before the previous one has finished on the others, so a pipelined algorithm's
// time per call can be less than one call's latency. --per-call N times N single calls
// per algorithm and size instead, each from a common start: rank 0 names an instant a few
// milliseconds ahead on the shared monotonic clock, every rank waits for it, makes the
// call and notes when it returned; the call's time is the last rank's return minus the
// start, and the median of the N is printed. This needs every rank on one kernel (one
// clock: the simulated hosts of network namespaces); ranks on different machines are
// refused (their /proc/sys/kernel/random/boot_id differ).
//
// Rank 0 prints "# bytes ALGO..." and one row of times (us) per size. --samples adds, after
// each row, one line per algorithm: "#samples BYTES ALGO t1 t2 ...", its times in the
// order they were taken (round 1, 2, ...), so that a script can compare two algorithms
// round by round (measured within a fraction of a second of each other) instead of by
// medians taken over the whole run.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sched.h>
#include <sys/prctl.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.h"

namespace {

struct Args {
  std::vector<std::string> algos{"auto", "ring", "tree", "hd", "rd", "oneshot", "hier"};
  size_t minBytes = 8, maxBytes = size_t{256} << 20;
  int repeats = 5;
  double targetMs = 20;
  int perCall = 0;  // > 0: median of this many single calls from a common start
  bool grouped = false;  // every round of a size before the next size
  bool samples = false;  // also print every measurement
};

const char* kUsage =
    "usage: algo_sweep [--algos auto,ring,tree,hd,rd,oneshot,hier] [-b MIN] [-e MAX] [-r REPEATS] [--target-ms MS]\n"
    "                  [--per-call N] [--grouped] [--samples]\n";

size_t parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suffix = end ? end : "";
  double mult = suffix.empty() ? 1 : suffix == "K" ? 1024.0 : suffix == "M" ? 1048576.0 : suffix == "G" ? 1073741824.0 : -1;
  if (end == s.c_str() || mult < 0 || v * mult < 4) throw std::invalid_argument("bad size '" + s + "' (at least 4 bytes; K, M, G suffixes)");
  return static_cast<size_t>(v * mult);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string o = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(o + " needs a value");
      return argv[++i];
    };
    if (o == "--algos") a.algos = splitList(val());
    else if (o == "-b") a.minBytes = parseBytes(val());
    else if (o == "-e") a.maxBytes = parseBytes(val());
    else if (o == "-r") a.repeats = std::atoi(val().c_str());
    else if (o == "--target-ms") a.targetMs = std::atof(val().c_str());
    else if (o == "--per-call") a.perCall = std::atoi(val().c_str());
    else if (o == "--grouped") a.grouped = true;
    else if (o == "--samples") a.samples = true;
    else throw std::invalid_argument("unknown argument '" + o + "'");
  }
  if (a.algos.empty() || a.repeats < 1 || a.targetMs <= 0 || a.minBytes > a.maxBytes || a.perCall < 0 ||
      a.perCall > 100000)
    throw std::invalid_argument("need at least one algorithm, -r >= 1, --target-ms > 0, -b <= -e and 0 <= --per-call <= 100000");
  return a;
}

void check(collResult_t r, const char* what, collComm_t comm) {
  if (r != collSuccess)
    throw std::runtime_error(std::string(what) + ": " + collGetErrorString(r) + ": " + collGetLastError(comm));
}

using Clock = std::chrono::steady_clock;

class Sweep {
 public:
  Sweep(const Args& a, collComm_t world) : a_(a), world_(world) {
    check(collCommUserRank(world, &rank_), "collCommUserRank", world);
    check(collCommCount(world, &nranks_), "collCommCount", world);
    const char* before = std::getenv("COLL_ALGO");
    std::string saved = before ? before : "";
    for (const auto& name : a.algos) {
      std::string algo = name == "auto" ? "" : "allreduce:" + name;
      setenv("COLL_ALGO", algo.c_str(), 1);
      collComm_t c = nullptr;
      check(collCommSplit(world, 0, rank_, &c), ("collCommSplit for " + name).c_str(), world);
      comms_.push_back(c);
    }
    if (before) setenv("COLL_ALGO", saved.c_str(), 1);
    else unsetenv("COLL_ALGO");
    const size_t n = a.maxBytes / sizeof(float);
    send_.assign(n, static_cast<float>(rank_ + 1));
    recv_.assign(n, 0.0f);
  }
  ~Sweep() {
    for (collComm_t c : comms_) collCommDestroy(c);
  }

  // Returns the number of wrong results.
  size_t run() {
    if (rank_ == 0) {
      std::printf("# %10s", "bytes");
      for (const auto& n : a_.algos) std::printf(" %10s", n.c_str());
      std::printf("\n");
    }
    size_t wrong = 0;
    const size_t A = comms_.size();
    if (a_.perCall > 0) startMarginNs_ = sameClockMargin();
    std::vector<std::vector<int>> itersAt;  // calls per measurement, per size and algorithm
    for (size_t bytes = a_.minBytes; bytes <= a_.maxBytes; bytes *= 2) {
      const size_t count = bytes / sizeof(float);
      if (a_.perCall > 0) {
        std::vector<std::vector<double>> samples(A);
        for (size_t j = 0; j < A; ++j) call(j, count);  // warm-up
        for (int i = 0; i < a_.perCall; ++i)
          for (size_t k = 0; k < A; ++k) {
            const size_t j = (k + static_cast<size_t>(i)) % A;
            samples[j].push_back(oneCallUs(j, count));
            if (i + 1 == a_.perCall) wrong += wrongValues(count);
          }
        printRow(bytes, samples);
        continue;
      }
      if (a_.grouped) {
        std::vector<std::vector<double>> samples(A);
        const std::vector<int> iters = calibrate(count);
        for (int rep = 0; rep < a_.repeats; ++rep) wrong += round(count, iters, static_cast<size_t>(rep), samples);
        printRow(bytes, samples);
        continue;
      }
      itersAt.push_back(calibrate(count));
    }
    if (a_.perCall > 0 || a_.grouped) return wrong;
    // samples[size index][algorithm]: one time per round.
    std::vector<std::vector<std::vector<double>>> samples(itersAt.size(), std::vector<std::vector<double>>(A));
    for (int rep = 0; rep < a_.repeats; ++rep) {
      size_t si = 0;
      for (size_t bytes = a_.minBytes; bytes <= a_.maxBytes; bytes *= 2, ++si)
        wrong += round(bytes / sizeof(float), itersAt[si], static_cast<size_t>(rep) + si, samples[si]);
    }
    size_t si = 0;
    for (size_t bytes = a_.minBytes; bytes <= a_.maxBytes; bytes *= 2, ++si) printRow(bytes, samples[si]);
    return wrong;
  }

 private:
  // Calls per measurement of each algorithm at `count`: about --target-ms worth.
  std::vector<int> calibrate(size_t count) {
    std::vector<int> iters(comms_.size());
    for (size_t j = 0; j < comms_.size(); ++j) {
      call(j, count);  // warm-up
      double one = slowest(timeCalls(j, count, 1));
      iters[j] = static_cast<int>(std::min(1000.0, std::max(1.0, a_.targetMs * 1e3 / std::max(one, 1e-3))));
    }
    return iters;
  }

  // One measurement of every algorithm at `count`, starting with the one `rotation`
  // names; appends to samples[algorithm] and returns the number of wrong values.
  size_t round(size_t count, const std::vector<int>& iters, size_t rotation, std::vector<std::vector<double>>& samples) {
    size_t wrong = 0;
    const size_t A = comms_.size();
    for (size_t k = 0; k < A; ++k) {
      const size_t j = (k + rotation) % A;
      call(j, count);  // the previous algorithm's waiters are asleep: wake this one's
      samples[j].push_back(slowest(timeCalls(j, count, iters[j])));
      wrong += wrongValues(count);
    }
    return wrong;
  }

  void printRow(size_t bytes, const std::vector<std::vector<double>>& samples) {
    if (rank_ != 0) return;
    std::printf("%12zu", bytes);
    for (const auto& s : samples) std::printf(" %10.1f", median(s));
    std::printf("\n");
    for (size_t j = 0; a_.samples && j < samples.size(); ++j) {
      std::printf("#samples %zu %s", bytes, a_.algos[j].c_str());
      for (double t : samples[j]) std::printf(" %.1f", t);
      std::printf("\n");
    }
    std::fflush(stdout);
  }

  // The middle value; of an even count, the mean of the two middle ones.
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  void call(size_t j, size_t count) {
    check(collAllReduce(send_.data(), recv_.data(), count, collFloat32, collSum, comms_[j], nullptr),
          ("collAllReduce with " + a_.algos[j]).c_str(), comms_[j]);
  }

  double timeCalls(size_t j, size_t count, int iters) {
    check(collBarrier(comms_[j]), "collBarrier", comms_[j]);
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) call(j, count);
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
  }

  static int64_t monoNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  // Per-call timing compares instants taken on different ranks, so they must share one
  // clock. Returns how far ahead of "now" rank 0 puts each common start: four barriers'
  // time (the start must reach every rank before it comes), at least 1 ms.
  int64_t sameClockMargin() {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(f, id);
    if (id.empty()) throw std::runtime_error("--per-call: cannot read /proc/sys/kernel/random/boot_id");
    uint64_t lo = std::hash<std::string>{}(id), hi = lo;
    check(collAllReduce(&lo, &lo, 1, collUint64, collMin, world_, nullptr), "collAllReduce(boot id)", world_);
    check(collAllReduce(&hi, &hi, 1, collUint64, collMax, world_, nullptr), "collAllReduce(boot id)", world_);
    if (lo != hi)
      throw std::runtime_error("--per-call needs every rank on one machine's clock (network namespaces of one "
                               "kernel); these ranks run on different machines");
    int64_t worst = 0;
    for (int i = 0; i < 5; ++i) {
      const int64_t t0 = monoNs();
      check(collBarrier(world_), "collBarrier", world_);
      worst = std::max(worst, monoNs() - t0);
    }
    check(collAllReduce(&worst, &worst, 1, collInt64, collMax, world_, nullptr), "collAllReduce(margin)", world_);
    return std::max<int64_t>(1000000, 4 * worst);
  }

  // One call from a common start; the last rank's return minus the start, in us. A start
  // that some rank saw too late (already past) is retried with twice the margin.
  static constexpr int64_t kSpinBeforeStartNs = 300000;

  double oneCallUs(size_t j, size_t count) {
    for (int attempt = 0;; ++attempt) {
      check(collBarrier(world_), "collBarrier", world_);
      int64_t start = rank_ == 0 ? monoNs() + startMarginNs_ : 0;
      check(collBroadcast(&start, &start, 1, collInt64, 0, world_, nullptr), "collBroadcast(start)", world_);
      const bool late = monoNs() >= start;
      // Sleep to just before the start, then yield until it: a timer wake-up on this VM
      // comes tens of microseconds late, and that lag is not the call's.
      const int64_t wake = start - kSpinBeforeStartNs;
      timespec at{time_t(wake / 1000000000), long(wake % 1000000000)};
      while (monoNs() < wake && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
      }
      while (monoNs() < start) sched_yield();
      call(j, count);
      double res[2] = {double(monoNs() - start) / 1e3, late ? 1.0 : 0.0};
      check(collAllReduce(res, res, 2, collFloat64, collMax, world_, nullptr), "collAllReduce(time)", world_);
      if (res[1] == 0) return res[0];
      if (attempt == 5) throw std::runtime_error("--per-call: a rank kept reaching the common start too late");
      startMarginNs_ *= 2;
    }
  }

  double slowest(double us) {
    check(collAllReduce(&us, &us, 1, collFloat64, collMax, world_, nullptr), "collAllReduce(time)", world_);
    return us;
  }

  // Every rank sends rank + 1: each element of the sum is n(n+1)/2, exactly.
  size_t wrongValues(size_t count) {
    const float want = static_cast<float>(nranks_ * (nranks_ + 1) / 2);
    uint64_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += recv_[i] != want;
    check(collAllReduce(&bad, &bad, 1, collUint64, collSum, world_, nullptr), "collAllReduce(check)", world_);
    std::fill(recv_.begin(), recv_.begin() + static_cast<long>(count), 0.0f);
    return bad;
  }

  const Args& a_;
  collComm_t world_;
  int rank_ = 0, nranks_ = 1;
  int64_t startMarginNs_ = 0;
  std::vector<collComm_t> comms_;
  std::vector<float> send_, recv_;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parseArgs(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "algo_sweep: %s\n%s", e.what(), kUsage);
    return 2;
  }
  if (a.perCall > 0) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake at the common start, not up to 50 us after
  collComm_t world = nullptr;
  if (collCommInitFromEnv(&world) != collSuccess) {
    std::fprintf(stderr, "algo_sweep: collCommInitFromEnv failed: %s\n", collGetLastError(nullptr));
    return 1;
  }
  try {
    size_t wrong = Sweep(a, world).run();
    int rank = 0;
    collCommUserRank(world, &rank);
    if (rank == 0) std::printf("# wrong values: %zu %s\n", wrong, wrong ? "FAILED" : "OK");
    collCommDestroy(world);
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "algo_sweep: %s\n", e.what());
    collCommAbort(world);
    return 1;
  }
}
