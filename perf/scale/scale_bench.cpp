// What the size of a job costs: starts N ranks as processes of this host (optionally
// spread over H simulated hosts with COLL_HOST_ID) and reports, for that N, the
// communicator's init, split and destroy times, each rank's descriptors, threads and
// memory after a ring-sized all-reduce, the first all-reduce's extra latency, and what
// went through the rendezvous root (which this process hosts).
//
//   scale_bench --ranks N [--hosts H] [--count C] [--timeout S] [--header]
//
// Prints one table row (--header: the column names first). Times in milliseconds.
#include <fcntl.h>
#include <signal.h>
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
  double initMs = 0, splitMs = 0, destroyMs = 0, firstArMs = 0, nextArMs = 0;
  int fds = 0, threads = 0, fdsLeft = 0;
  long rssKb = 0, anonKb = 0, shmKb = 0;
  int ok = 0;
  char err[256] = {};
};

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
  snprintf(r->err, sizeof r->err, "%s: %s", what, comm ? collGetLastError(comm) : collGetErrorString(rc));
}

// One rank: everything it measures goes back through `out`.
void rankMain(int rank, int nranks, int hosts, size_t count, int idFd, int out) {
  Rec r;
  if (hosts > 1) {
    std::string h = "simhost" + std::to_string(static_cast<long>(rank) * hosts / nranks);
    setenv("COLL_HOST_ID", h.c_str(), 1);
  }
  collUniqueId id;
  if (!readAll(idFd, &id, sizeof id)) _exit(3);
  const int fdsBefore = countFds();
  collComm_t comm = nullptr;
  double t0 = nowMs();
  collResult_t rc = collCommInitRank(&comm, nranks, id, rank);
  r.initMs = nowMs() - t0;
  if (rc != collSuccess) {
    fail(&r, "init", rc, nullptr);
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

}  // namespace

int main(int argc, char** argv) {
  int nranks = 8, hosts = 1, timeout = 170;
  size_t count = 1024;
  bool header = false;
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
    else { fprintf(stderr, "usage: %s --ranks N [--hosts H] [--count C] [--timeout S] [--header]\n", argv[0]); return 2; }
  }
  if (nranks < 1 || hosts < 1 || hosts > nranks || count < 1) {
    fprintf(stderr, "scale_bench: need 1 <= hosts <= ranks and count >= 1\n");
    return 2;
  }
  if (header)
    printf("%6s %5s %9s %9s %9s %9s %9s %6s %6s %7s %8s %8s %8s %7s %7s %9s %10s %10s %s\n", "ranks", "hosts",
           "init_med", "init_max", "split_med", "destroy", "ar1_extra", "fds", "fdsmax", "threads", "rss_kB",
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
      rankMain(r, nranks, hosts, count, a[0], b[1]);
    }
    close(a[0]);
    close(b[1]);
    pids[r] = p;
    idPipes[r] = a[1];
    outPipes[r] = b[0];
  }
  collUniqueId id;
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
  for (int r = 0; r < nranks; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!recs[r].ok) {
      if (bad++ < 5) fprintf(stderr, "rank %d: %s (status %d)\n", r, recs[r].err, st);
    }
  }
  std::vector<double> init, split, destroy, extra, fds, threads, rss, anon, shm, left;
  for (const Rec& x : recs) {
    init.push_back(x.initMs);
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
  printf("%6d %5d %9.1f %9.1f %9.1f %9.1f %9.2f %6.0f %6.0f %7.0f %8.0f %8.0f %8.0f %7.0f %7llu %9llu %10llu %10llu %.0f%s\n",
         nranks, hosts, pick(init, 0.5), pick(init, 1), pick(split, 0.5), pick(destroy, 0.5), pick(extra, 0.5),
         pick(fds, 0.5), pick(fds, 1), pick(threads, 0.5), pick(rss, 0.5), pick(anon, 0.5), pick(shm, 0.5),
         pick(left, 1), static_cast<unsigned long long>(rs.connections),
         static_cast<unsigned long long>(rs.framesIn + rs.framesOut), static_cast<unsigned long long>(rs.bytesIn),
         static_cast<unsigned long long>(rs.bytesOut), wall, bad ? "  FAILED" : "");
  if (bad) fprintf(stderr, "scale_bench: %d of %d ranks failed\n", bad, nranks);
  return bad ? 1 : 0;
}
