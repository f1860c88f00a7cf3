// What the size of a job costs: starts N ranks as processes of this host (optionally
// spread over H simulated hosts with COLL_HOST_ID) and reports, for that N, the
// communicator's init, split and destroy times, each rank's descriptors, threads and
// memory after a ring-sized all-reduce, the first all-reduce's extra latency, and what
// went through the rendezvous root (which this process hosts).
//
//   scale_bench --ranks N [--hosts H] [--count C] [--timeout S] [--header]
//               [--fault absent:R | --fault mismatch:R | --fault dies:R]
//
// --fault (a check, not a measurement): rank R never calls init (absent) or calls it with
// N + 1 ranks (mismatch). Every rank's init must then fail within COLL_TIMEOUT + 10 s
// with an error naming R as missing (R itself: its size), holding no more
// descriptors than before. dies: rank R kills itself (SIGKILL) after init, before the
// first all-reduce; every other rank must then fail (in the all-reduce, or in its init
// when that was still making links) within COLL_TIMEOUT / 2 + 5 s, naming a rank (some
// name R), and destroy must release what the communicator held. Exits 0 when all of
// that holds.
//
// Prints one table row (--header: the column names first). Times in milliseconds:
// init_med/init_max the median and slowest rank's collCommInitRank, init_cpu the CPU time
// (user + system, all threads) the median rank spent in it; split_med collCommSplit into
// two halves; destroy collCommDestroy; ar1_extra how much longer the first all-reduce
// (C floats, checked) took than the median of the next five. fds/fdsmax descriptors a
// rank opened (median, most), threads, rss/anon/shm its resident memory (VmRSS, RssAnon,
// RssShmem) after those all-reduces; leaked the most descriptors a rank still held after
// destroy; rootcon, root_msgs, root_in_B and root_out_B what the rendezvous root carried.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "collective.h"

namespace {

struct Rec {
  double initMs = 0, initCpuMs = 0, splitMs = 0, destroyMs = 0, firstArMs = 0, nextArMs = 0;
  int fds = 0, threads = 0, fdsLeft = 0;
  long rssKb = 0, anonKb = 0, shmKb = 0;
  int ok = 0;
  int code = 0;  // collResult_t of the failing call
  char err[1024] = {};
};

double cpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double nowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int countFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

long statusField(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t k = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, k) == 0 && line[k] == ':') { v = atol(line + k + 1); break; }
  fclose(f);
  return v;
}

bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k <= 0) return;
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void fail(Rec* r, const char* what, collResult_t rc, collComm_t comm) {
  r->code = rc;
  snprintf(r->err, sizeof r->err, "%s: %s", what, collGetLastError(comm));
}

enum class Fault { None, Absent, Mismatch, Dies };

// One rank: everything it measures goes back through `out`.
void rankMain(int rank, int nranks, int hosts, size_t count, int idFd, int out, Fault fault, int victim) {
  Rec r;
  if (hosts > 1) {
    std::string h = "simhost" + std::to_string(static_cast<long>(rank) * hosts / nranks);
    setenv("COLL_HOST_ID", h.c_str(), 1);
  }
  collUniqueId id;
  if (!readAll(idFd, &id, sizeof id)) _exit(3);
  const int fdsBefore = countFds();
  collComm_t comm = nullptr;
  if (fault == Fault::Absent && rank == victim) {
    r.ok = 1;
    snprintf(r.err, sizeof r.err, "absent");
    writeAll(out, &r, sizeof r);
    _exit(0);
  }
  const int asked = fault == Fault::Mismatch && rank == victim ? nranks + 1 : nranks;
  const double c0 = cpuMs();
  double t0 = nowMs();
  collResult_t rc = collCommInitRank(&comm, asked, id, rank);
  r.initMs = nowMs() - t0;
  r.initCpuMs = cpuMs() - c0;
  if (rc != collSuccess) {
    fail(&r, "init", rc, nullptr);
    r.fdsLeft = countFds() - fdsBefore;
    writeAll(out, &r, sizeof r);
    _exit(1);
  }
  if (fault == Fault::Dies && rank == victim) raise(SIGKILL);
  if (fault == Fault::Absent || fault == Fault::Mismatch) {
    snprintf(r.err, sizeof r.err, "init succeeded although rank %d %s", victim,
             fault == Fault::Absent ? "never joined" : "asked for another size");
    collCommDestroy(comm);
    writeAll(out, &r, sizeof r);
    _exit(1);
  }
  std::vector<float> buf(count), res(count);
  auto allReduce = [&](double* ms) {
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1);
    double s = nowMs();
    collResult_t e = collAllReduce(buf.data(), res.data(), count, collFloat32, collSum, comm, nullptr);
    *ms = nowMs() - s;
    if (e != collSuccess) return fail(&r, "allreduce", e, comm), false;
    const float want = static_cast<float>(static_cast<double>(nranks) * (nranks + 1) / 2);
    for (size_t i = 0; i < count; ++i)
      if (res[i] != want) return snprintf(r.err, sizeof r.err, "allreduce: element %zu is %g, not %g", i, res[i], want), false;
    return true;
  };
  bool ok = allReduce(&r.firstArMs);
  std::vector<double> next;
  for (int k = 0; ok && k < 5; ++k) {
    double ms = 0;
    ok = allReduce(&ms);
    next.push_back(ms);
  }
  if (ok) {
    std::sort(next.begin(), next.end());
    r.nextArMs = next[next.size() / 2];
    r.fds = countFds() - fdsBefore;
    r.threads = static_cast<int>(statusField("Threads"));
    r.rssKb = statusField("VmRSS");
    r.anonKb = statusField("RssAnon");
    r.shmKb = statusField("RssShmem");
    collComm_t sub = nullptr;
    t0 = nowMs();
    rc = collCommSplit(comm, rank % 2, rank, &sub);
    r.splitMs = nowMs() - t0;
    if (rc != collSuccess) ok = false, fail(&r, "split", rc, comm);
    else if (sub) collCommDestroy(sub);
  }
  t0 = nowMs();
  rc = collCommDestroy(comm);
  r.destroyMs = nowMs() - t0;
  if (ok && rc != collSuccess) ok = false, fail(&r, "destroy", rc, nullptr);
  // A rendezvous root that this process hosts (the split's) serves until its last rank
  // has left: give it a moment before counting what is left.
  r.fdsLeft = countFds() - fdsBefore;
  for (int k = 0; k < 200 && r.fdsLeft > 0; ++k) {
    usleep(10 * 1000);
    r.fdsLeft = countFds() - fdsBefore;
  }
  if (rank == 0 && getenv("SCALE_BENCH_SHOW_FDS")) {  // what is still open after destroy
    DIR* d = opendir("/proc/self/fd");
    while (dirent* e = d ? readdir(d) : nullptr) {
      char path[64], target[256] = {};
      snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
      if (e->d_name[0] != '.' && readlink(path, target, sizeof target - 1) > 0) fprintf(stderr, "fd %s -> %s\n", e->d_name, target);
    }
    if (d) closedir(d);
  }
  r.ok = ok;
  writeAll(out, &r, sizeof r);
  _exit(ok ? 0 : 1);
}

double pick(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

// Every rank but an absent victim failed init promptly, naming the victim, and let go
// of what it had opened.
int checkFault(const std::vector<Rec>& recs, Fault fault, int victim, double wallMs) {
  const char* t = getenv("COLL_TIMEOUT");
  const double limitMs = ((t ? atof(t) : 300) + 10) * 1e3;  // Dies: half of it
  // The root's notice ("missing ranks: R"), or a rank that gave up first and left, whose
  // notice says whom the job still waited for.
  const std::string missing = "missing ranks: " + std::to_string(victim);
  const std::string waited = "rank " + std::to_string(victim) + " to join";
  const std::string died = "rank " + std::to_string(victim) + " (";
  int bad = 0, named = 0;
  for (int r = 0; r < static_cast<int>(recs.size()); ++r) {
    const Rec& x = recs[r];
    if ((fault == Fault::Absent || fault == Fault::Dies) && r == victim) continue;
    std::string why;
    const std::string err = x.err;
    if (fault == Fault::Dies) {
      // Its peers see it go (a link, the bootstrap); the others hear of it from the root.
      // A rank may still be in its init when the victim goes (links of other pairs
      // being made), and a rank that fails tells its neighbours by closing its links,
      // so an error may name the neighbour that left instead of the victim.
      const double ms = err.rfind("init", 0) == 0 ? x.initMs : x.firstArMs;
      if (x.ok || x.code == 0) why = err.empty() ? "no report" : err;
      else if (err.rfind("allreduce", 0) != 0 && err.rfind("init", 0) != 0)
        why = "failed elsewhere than in init or the first all-reduce";
      else if (ms > limitMs / 2) why = "noticed only after " + std::to_string(ms) + " ms";
      else if (x.fdsLeft > 0) why = "still holds " + std::to_string(x.fdsLeft) + " descriptors after destroy";
      else if (err.find("rank ") == std::string::npos) why = "the error names no rank";
      if (err.find(died) != std::string::npos) ++named;
      if (!why.empty() && bad++ < 5) fprintf(stderr, "rank %d: %s (%s)\n", r, why.c_str(), err.c_str());
      continue;
    }
    if (x.ok || x.code == 0) why = err.empty() ? "no report" : err;
    else if (x.initMs > limitMs) why = "failed only after " + std::to_string(x.initMs) + " ms";
    else if (x.fdsLeft > 0) why = "still holds " + std::to_string(x.fdsLeft) + " descriptors";
    else if (r == victim && err.find(std::to_string(recs.size() + 1)) == std::string::npos)
      why = "the error does not name its size";
    else if (r != victim && err.find(missing) == std::string::npos && err.find(waited) == std::string::npos &&
             err.find("timed out after") == std::string::npos)
      why = "the error neither names rank " + std::to_string(victim) + " as missing nor is a timeout";
    if (r != victim && (err.find(missing) != std::string::npos || err.find(waited) != std::string::npos)) ++named;
    if (!why.empty() && bad++ < 5) fprintf(stderr, "rank %d after %.0f ms: %s (%s)\n", r, x.initMs, why.c_str(), err.c_str());
  }
  // A rank whose own deadline passes before the root's notice reaches it can only say
  // it timed out; the others must have been told whom the job waited for.
  if (!named && bad++ < 5) fprintf(stderr, "no rank's error names rank %d\n", victim);
  printf("fault %s:%d: %zu ranks, %s in %.0f ms; e.g. rank %d: %s\n",
         fault == Fault::Absent ? "absent" : fault == Fault::Mismatch ? "mismatch" : "dies",
         victim, recs.size(), bad ? "FAILED" : "every rank failed as it should", wallMs, victim == 0 ? 1 : 0,
         recs[victim == 0 ? 1 : 0].err);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 8, hosts = 1, timeout = 170;
  size_t count = 1024;
  bool header = false;
  Fault fault = Fault::None;
  int victim = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&] {
      if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", a.c_str()); exit(2); }
      return argv[++i];
    };
    if (a == "--ranks") nranks = atoi(val());
    else if (a == "--hosts") hosts = atoi(val());
    else if (a == "--count") count = strtoull(val(), nullptr, 10);
    else if (a == "--timeout") timeout = atoi(val());
    else if (a == "--header") header = true;
    else if (a == "--fault") {
      std::string f = val();
      size_t colon = f.find(':');
      std::string kind = f.substr(0, colon);
      fault = kind == "absent" ? Fault::Absent : kind == "mismatch" ? Fault::Mismatch
            : kind == "dies" ? Fault::Dies : Fault::None;
      victim = colon == std::string::npos ? -1 : atoi(f.c_str() + colon + 1);
      if (fault == Fault::None || victim < 0) { fprintf(stderr, "--fault absent:R, mismatch:R or dies:R\n"); return 2; }
    }
    else { fprintf(stderr, "usage: %s --ranks N [--hosts H] [--count C] [--timeout S] [--header]\n", argv[0]); return 2; }
  }
  if (nranks < 1 || hosts < 1 || hosts > nranks || count < 1 || victim >= nranks) {
    fprintf(stderr, "scale_bench: need 1 <= hosts <= ranks and count >= 1\n");
    return 2;
  }
  if (header)
    printf("%6s %5s %9s %9s %8s %9s %9s %9s %6s %6s %7s %8s %8s %8s %7s %7s %9s %10s %10s %s\n", "ranks", "hosts",
           "init_med", "init_max", "init_cpu", "split_med", "destroy", "ar1_extra", "fds", "fdsmax", "threads", "rss_kB",
           "anon_kB", "shm_kB", "leaked", "rootcon", "root_msgs", "root_in_B", "root_out_B", "wall_ms");
  // Ranks are forked before this process starts any thread (the root's).
  std::vector<pid_t> pids(nranks);
  std::vector<int> idPipes(nranks), outPipes(nranks);
  for (int r = 0; r < nranks; ++r) {
    int a[2], b[2];
    if (pipe(a) || pipe(b)) { perror("pipe"); return 1; }
    pid_t p = fork();
    if (p < 0) { perror("fork"); return 1; }
    if (p == 0) {
      alarm(static_cast<unsigned>(timeout));
      close(a[1]);
      close(b[0]);
      for (int k = 0; k < r; ++k) { close(idPipes[k]); close(outPipes[k]); }
      rankMain(r, nranks, hosts, count, a[0], b[1], fault, victim);
    }
    close(a[0]);
    close(b[1]);
    pids[r] = p;
    idPipes[r] = a[1];
    outPipes[r] = b[0];
  }
  collUniqueId id;
  if (const char* t = getenv("SCALE_BENCH_ROOT_TIMEOUT")) setenv("COLL_TIMEOUT", t, 1);  // the root's only
  if (collGetUniqueId(&id) != collSuccess) { fprintf(stderr, "collGetUniqueId failed\n"); return 1; }
  const double t0 = nowMs();
  for (int r = 0; r < nranks; ++r) { writeAll(idPipes[r], &id, sizeof id); close(idPipes[r]); }
  std::vector<Rec> recs(nranks);
  int bad = 0;
  for (int r = 0; r < nranks; ++r) {
    if (!readAll(outPipes[r], &recs[r], sizeof(Rec))) {
      recs[r].ok = 0;
      snprintf(recs[r].err, sizeof recs[r].err, "died without a report");
    }
    close(outPipes[r]);
  }
  const double wall = nowMs() - t0;
  if (fault != Fault::None) {
    for (int r = 0; r < nranks; ++r) waitpid(pids[r], nullptr, 0);
    return checkFault(recs, fault, victim, wall);
  }
  for (int r = 0; r < nranks; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!recs[r].ok) {
      if (bad++ < 5) fprintf(stderr, "rank %d: %s (status %d)\n", r, recs[r].err, st);
    }
  }
  std::vector<double> init, initCpu, split, destroy, extra, fds, threads, rss, anon, shm, left;
  for (const Rec& x : recs) {
    init.push_back(x.initMs);
    initCpu.push_back(x.initCpuMs);
    split.push_back(x.splitMs);
    destroy.push_back(x.destroyMs);
    extra.push_back(x.firstArMs - x.nextArMs);
    fds.push_back(x.fds);
    threads.push_back(x.threads);
    rss.push_back(x.rssKb);
    anon.push_back(x.anonKb);
    shm.push_back(x.shmKb);
    left.push_back(x.fdsLeft);
  }
  // Let the root thread finish its last answers before reading its counters.
  usleep(100 * 1000);
  const coll::RendezvousRoot::Stats rs = coll::RendezvousRoot::stats();
  printf("%6d %5d %9.1f %9.1f %8.1f %9.1f %9.1f %9.2f %6.0f %6.0f %7.0f %8.0f %8.0f %8.0f %7.0f %7llu %9llu %10llu %10llu %.0f%s\n",
         nranks, hosts, pick(init, 0.5), pick(init, 1), pick(initCpu, 0.5), pick(split, 0.5), pick(destroy, 0.5), pick(extra, 0.5),
         pick(fds, 0.5), pick(fds, 1), pick(threads, 0.5), pick(rss, 0.5), pick(anon, 0.5), pick(shm, 0.5),
         pick(left, 1), static_cast<unsigned long long>(rs.connections),
         static_cast<unsigned long long>(rs.framesIn + rs.framesOut), static_cast<unsigned long long>(rs.bytesIn),
         static_cast<unsigned long long>(rs.bytesOut), wall, bad ? "  FAILED" : "");
  if (bad) fprintf(stderr, "scale_bench: %d of %d ranks failed\n", bad, nranks);
  return bad ? 1 : 0;
}
