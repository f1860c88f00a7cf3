// Launch environment detection for collCommInitFromEnv.
//
// ---- The collectiverun contract (what the launcher sets for every rank) ----------------
//   COLL_RANK          this rank, in [0, COLL_SIZE)                                 required
//   COLL_SIZE          number of ranks, >= 1                                        required
//   COLL_LOCAL_RANK    rank among the ranks on this host, in [0, COLL_LOCAL_SIZE)  optional
//   COLL_LOCAL_SIZE    number of ranks on this host                                 optional
//   COLL_ROOT_ADDR     host:port (or [v6]:port) of the rendezvous. Rank 0 serves it:
//                      it binds the port on every local address (SO_REUSEADDR) before it
//                      connects; other ranks connect to it, retrying until COLL_TIMEOUT,
//                      so the launcher may start ranks in any order. The launcher picks a
//                      port that is free on rank 0's host.                          required
//   COLL_JOB_SECRET    64 hex characters (32 random bytes), the same on every rank;
//                      proves membership of the job on every connection. Never logged.
//                                                                                   required
//   COLL_JOB_ID        any text naming the job; hashed into the job nonce shown in logs
//                                                                                   optional
// Precedence: collectiverun (COLL_RANK) > Open MPI (OMPI_COMM_WORLD_RANK) > Slurm
// (SLURM_PROCID). Under Open MPI or Slurm, COLL_ROOT_ADDR + COLL_JOB_SECRET, when set,
// name the rendezvous instead of MPI_Bcast or the Slurm-derived address.
// -----------------------------------------------------------------------------------------
#include <arpa/inet.h>
#include <errno.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/env_internal.hpp"
#include "coll_config.h"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/socket.hpp"
#include "base/sha256.hpp"

namespace coll {
namespace {

const char* envStr(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : nullptr;
}

// Reads an integer variable in [lo, hi]; `fallback` when unset and not required.
int envInt(const char* name, int lo, int hi, bool required, int fallback = -1) {
  const char* v = envStr(name);
  if (!v) {
    COLL_CHECK_ARG(!required, name, " is not set");
    return fallback;
  }
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  COLL_CHECK_ARG(*end == 0 && x >= lo && x <= hi, name, "='", v, "' is not an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(x);
}

uint64_t envU64(const char* name, bool required, uint64_t fallback) {
  const char* v = envStr(name);
  if (!v) {
    COLL_CHECK_ARG(!required, name, " is not set");
    return fallback;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  COLL_CHECK_ARG(*end == 0 && errno == 0 && v[0] != '-', name, "='", v, "' is not a non-negative integer");
  return x;
}

uint64_t hashToNonce(const std::string& text) {
  uint8_t d[32];
  sha256(text.data(), text.size(), d);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(d[i]) << (8 * i);
  return v;
}

void checkRanks(const char* src, int rank, int nranks, int localRank, int localSize) {
  COLL_CHECK_ARG(rank < nranks, src, ": rank ", rank, " is not below the job size ", nranks);
  COLL_CHECK_ARG(localRank < 0 || localSize <= 0 || localRank < localSize, src, ": local rank ", localRank,
                 " is not below the local size ", localSize);
}

// Rank 0 serves the rendezvous on the advertised port, on every local address of that
// family (the advertised host name may resolve to any of this host's interfaces).
void startRootIfRankZero(const EnvLaunch& e, double timeoutSec) {
  if (e.rank != 0) return;
  sockaddr_storage any{};
  any.ss_family = e.id.root.ss_family;
  if (any.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(any).sin6_addr = in6addr_any;
  else reinterpret_cast<sockaddr_in&>(any).sin_addr.s_addr = htonl(INADDR_ANY);
  setAddrPort(&any, addrPort(e.id.root));
  RendezvousRoot::start(any, e.nranks, e.id.secret, timeoutSec);
  COLL_INFO("%s: rank 0 serves the rendezvous at %s", e.source.c_str(), addrToString(e.id.root).c_str());
}

// COLL_ROOT_ADDR + COLL_JOB_SECRET (+ COLL_JOB_ID) into out->id.
void idFromCollVars(EnvLaunch* out) {
  const char* root = envStr("COLL_ROOT_ADDR");
  const char* secret = envStr("COLL_JOB_SECRET");
  COLL_CHECK_ARG(root, out->source, ": COLL_ROOT_ADDR is not set (host:port of the rendezvous served by rank 0)");
  COLL_CHECK_ARG(secret, out->source, ": COLL_JOB_SECRET is not set (64 hex characters shared by all ranks)");
  out->id.root = parseAddr(root);
  COLL_CHECK_ARG(addrPort(out->id.root) != 0, out->source, ": COLL_ROOT_ADDR='", root, "' has port 0");
  parseHexSecret(secret, out->id.secret, "COLL_JOB_SECRET");
  const char* job = envStr("COLL_JOB_ID");
  out->id.jobNonce = hashToNonce(strCat("job:", job ? job : "", "@", root));
}

bool fromCollectiverun(EnvLaunch* out, double timeoutSec) {
  out->source = "collectiverun";
  out->nranks = envInt("COLL_SIZE", 1, 1 << 24, true);
  out->rank = envInt("COLL_RANK", 0, 1 << 24, true);
  out->localRank = envInt("COLL_LOCAL_RANK", 0, 1 << 24, false, -1);
  out->localSize = envInt("COLL_LOCAL_SIZE", 1, 1 << 24, false, 0);
  checkRanks("collectiverun", out->rank, out->nranks, out->localRank, out->localSize);
  idFromCollVars(out);
  startRootIfRankZero(*out, timeoutSec);
  return true;
}

bool fromOpenMpi(EnvLaunch* out, double timeoutSec) {
  out->source = "openmpi";
  out->nranks = envInt("OMPI_COMM_WORLD_SIZE", 1, 1 << 24, true);
  out->rank = envInt("OMPI_COMM_WORLD_RANK", 0, 1 << 24, true);
  out->localRank = envInt("OMPI_COMM_WORLD_LOCAL_RANK", 0, 1 << 24, false, -1);
  out->localSize = envInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1 << 24, false, 0);
  checkRanks("openmpi", out->rank, out->nranks, out->localRank, out->localSize);
  if (envStr("COLL_ROOT_ADDR") && envStr("COLL_JOB_SECRET")) {
    idFromCollVars(out);
    startRootIfRankZero(*out, timeoutSec);
    return true;
  }
#if COLL_HAVE_MPI
  return detectMpiLaunch(out, timeoutSec);
#else
  COLL_THROW(collInvalidUsage,
             "launched by Open MPI (OMPI_COMM_WORLD_RANK=", out->rank, ") but libcollective was built without "
             "MPI: rebuild with MPI, launch with collectiverun, or set COLL_ROOT_ADDR=host:port (served by "
             "rank 0) and COLL_JOB_SECRET=<64 hex characters> on every rank");
#endif
}

bool fromSlurm(EnvLaunch* out, double timeoutSec) {
  out->source = "slurm";
  out->rank = envInt("SLURM_PROCID", 0, 1 << 24, true);
  out->nranks = envStr("SLURM_STEP_NUM_TASKS") ? envInt("SLURM_STEP_NUM_TASKS", 1, 1 << 24, true)
                                               : envInt("SLURM_NTASKS", 1, 1 << 24, true);
  out->localRank = envInt("SLURM_LOCALID", 0, 1 << 24, false, -1);
  const char* tpn = envStr("SLURM_STEP_TASKS_PER_NODE") ? envStr("SLURM_STEP_TASKS_PER_NODE")
                                                        : envStr("SLURM_TASKS_PER_NODE");
  int node = envInt("SLURM_NODEID", 0, 1 << 24, false, -1);
  if (tpn && node >= 0) out->localSize = tasksOnNode(tpn, node);
  checkRanks("slurm", out->rank, out->nranks, out->localRank, out->localSize);
  if (envStr("COLL_ROOT_ADDR")) {
    COLL_CHECK_ARG(envStr("COLL_JOB_SECRET"), "slurm: COLL_ROOT_ADDR is set but COLL_JOB_SECRET is not");
    idFromCollVars(out);
    startRootIfRankZero(*out, timeoutSec);
    return true;
  }
  const char* nodes = envStr("SLURM_STEP_NODELIST") ? envStr("SLURM_STEP_NODELIST") : envStr("SLURM_JOB_NODELIST");
  COLL_CHECK_ARG(nodes, "slurm: neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set, and COLL_ROOT_ADDR "
                 "is not set either");
  uint64_t jobId = envU64("SLURM_JOB_ID", true, 0);
  uint64_t stepId = envU64("SLURM_STEP_ID", false, 0);
  // Slurm places task 0 on the first node of the step.
  std::string first = expandHostlist(nodes).front();
  out->id.root = parseAddr(strCat(first, ":", slurmRootPort(jobId, stepId)));
  if (const char* secret = envStr("COLL_JOB_SECRET")) {
    parseHexSecret(secret, out->id.secret, "COLL_JOB_SECRET");
  } else {
    COLL_WARN("slurm: COLL_JOB_SECRET is not set; deriving the job secret from the job and step ids, "
              "which anyone on the cluster can guess: set COLL_JOB_SECRET to keep strangers out");
    std::string seed = strCat("libcollective slurm job ", jobId, ".", stepId);
    sha256(seed.data(), seed.size(), out->id.secret);
  }
  out->id.jobNonce = hashToNonce(strCat("slurm:", jobId, ".", stepId));
  if (out->rank == 0) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::string me(host);
    if (me.substr(0, me.find('.')) != first.substr(0, first.find('.')))
      COLL_WARN("slurm: rank 0 runs on %s but the step's first node is %s; other ranks will look for the "
                "rendezvous there (set COLL_ROOT_ADDR if the placement is unusual)", host, first.c_str());
  }
  startRootIfRankZero(*out, timeoutSec);
  return true;
}

}  // namespace

void parseHexSecret(const std::string& hex, uint8_t* secret, const char* what) {
  COLL_CHECK_ARG(hex.size() == 2 * kSecretBytes, what, " must be ", 2 * kSecretBytes,
                 " hex characters, got ", hex.size(), " characters");
  for (size_t i = 0; i < kSecretBytes; ++i) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = hex[2 * i + k];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      COLL_CHECK_ARG(d >= 0, what, " has a non-hex character at position ", 2 * i + k);
      v = v * 16 + d;
    }
    secret[i] = static_cast<uint8_t>(v);
  }
}

int slurmRootPort(uint64_t jobId, uint64_t stepId) {
  // Below Linux's ephemeral range (32768+), so outgoing connections never hold it.
  return 12000 + static_cast<int>((jobId * 97 + stepId) % 20000);
}

bool detectEnvLaunch(EnvLaunch* out, double timeoutSec) {
  COLL_CHECK_ARG(out, "detectEnvLaunch: out is null");
  *out = EnvLaunch{};
  if (envStr("COLL_RANK")) return fromCollectiverun(out, timeoutSec);
  if (envStr("OMPI_COMM_WORLD_RANK")) return fromOpenMpi(out, timeoutSec);
  if (envStr("SLURM_PROCID")) return fromSlurm(out, timeoutSec);
  // Half a collectiverun contract is a mistake, not a program started on its own: running
  // it as a job of one would hide that its ranks never meet.
  for (const char* v : {"COLL_SIZE", "COLL_ROOT_ADDR", "COLL_JOB_SECRET"})
    COLL_CHECK_ARG(!envStr(v), v, " is set but COLL_RANK is not: set both (or neither, to run "
                   "as a job of one rank)");
  return false;
}

}  // namespace coll
