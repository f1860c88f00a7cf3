#include "train/elastic.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "collective/hvd.hpp"
#include "train/trainer.hpp"

namespace collective::frontend {

namespace {

bool errorCode(const std::exception& e, collResult_t* code) {
  if (const auto* c = dynamic_cast<const coll::Error*>(&e)) {
    *code = c->code();
    return true;
  }
  if (const auto* h = dynamic_cast<const hvd::Error*>(&e)) {
    *code = h->code();
    return true;
  }
  return false;
}

int envRanks(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  COLL_CHECK_ARG(*end == '\0' && n >= 1 && n <= 65536, name, " '", v,
                 "' is not a rank count in [1, 65536]");
  return static_cast<int>(n);
}

std::string joined(const std::vector<int>& v) {
  std::ostringstream s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

// Shrinks the revoked `world` to the ranks alive; the survivors agree on who is gone
// through collCommShrink itself, which refuses mismatched sets.
OwnedComm shrink(OwnedComm world, const std::string& failure, int minNp, FILE* log) {
  const int oldRank = commRank(world.get()), oldSize = commSize(world.get());
  collResult_t rc = collInternalError;
  collComm_t smaller = nullptr;
  std::vector<int> dead;
  for (int attempt = 0; attempt < 5 && rc != collSuccess; ++attempt) {
    dead = settledFailedRanks(world.get());
    if (dead.empty())
      COLL_THROW(collRemoteError, "--elastic: a collective failed but no rank is found dead, "
                 "so there is nothing to shrink: ", failure);
    if (oldSize - static_cast<int>(dead.size()) < minNp)
      COLL_THROW(collRemoteError, "--elastic: lost rank(s) ", joined(dead), " of ", oldSize,
                 ": ", oldSize - static_cast<int>(dead.size()),
                 " rank(s) left, fewer than the minimum ", minNp,
                 " (COLL_ELASTIC_MIN_NP); first failure: ", failure);
    rc = collCommShrink(world.get(), dead.data(), static_cast<int>(dead.size()), &smaller);
  }
  collCheck(rc, world.get(), "collCommShrink");
  OwnedComm next(smaller);
  if (log) {
    std::ostringstream why;
    for (int r : dead) why << "; rank " << r << ": " << collCommFailureReason(world.get(), r);
    std::fprintf(log, "elastic: rank %d of %d: lost rank(s) %s, shrunk %d -> %d ranks, now rank "
                 "%d%s\n", oldRank, oldSize, joined(dead).c_str(), oldSize, commSize(next.get()),
                 commRank(next.get()), why.str().c_str());
    std::fflush(log);
  }
  return next;
}

// Asks collectiverun --elastic (COLL_ELASTIC_DIR) for the ranks that bring `world` back
// to COLL_ELASTIC_MAX_NP and grows it with them (doc/recovery.md). The new ranks run
// this program too: their collCommInitFromEnv joins (COLL_JOIN_ID) and their trainer
// takes rank 0's commit.
OwnedComm growBack(OwnedComm world, FILE* log) {
  const char* dir = std::getenv("COLL_ELASTIC_DIR");
  const int size = commSize(world.get()), rank = commRank(world.get());
  const int want = envRanks("COLL_ELASTIC_MAX_NP", size);
  if (!dir || !*dir || want <= size) return world;
  if (rank == 0) {
    collUniqueId id;
    collCheck(collCommGetGrowId(world.get(), &id), world.get(), "collCommGetGrowId");
    static const char* kHex = "0123456789abcdef";
    std::string hex;
    for (char c : id.internal) {
      hex.push_back(kHex[(static_cast<unsigned char>(c) >> 4) & 15]);
      hex.push_back(kHex[static_cast<unsigned char>(c) & 15]);
    }
    const std::string base = std::string(dir) + "/";
    const std::string name = "grow-" + std::to_string(getpid()) + "-" +
        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    const std::string tmp = base + "." + name;
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) COLL_THROW(collSystemError, "--elastic-grow: cannot write ", tmp);
    std::fprintf(f, "%d %d %s\n", want - size, want, hex.c_str());
    const bool written = std::fclose(f) == 0;
    if (!written || std::rename(tmp.c_str(), (base + name).c_str()) != 0)
      COLL_THROW(collSystemError, "--elastic-grow: cannot hand ", base + name, " to the launcher");
  }
  collComm_t grown = nullptr;
  collCheck(collCommGrow(world.get(), want - size, &grown), world.get(), "collCommGrow");
  OwnedComm next(grown);
  if (log) {
    std::fprintf(log, "elastic: rank %d: grew %d -> %d ranks\n", rank, size, commSize(next.get()));
    std::fflush(log);
  }
  return next;
}

}  // namespace

std::vector<int> settledFailedRanks(collComm_t comm) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto since = t0;
  std::vector<int> last;
  bool first = true;
  for (;;) {
    std::vector<int> now(1024);
    int n = 0;
    collCheck(collCommGetFailedRanks(comm, now.data(), static_cast<int>(now.size()), &n), comm,
              "collCommGetFailedRanks");
    now.resize(static_cast<size_t>(std::min<int>(n, static_cast<int>(now.size()))));
    const auto t = Clock::now();
    if (first || now != last) {
      last = now;
      since = t;
      first = false;
    } else if (!now.empty() && t - since >= std::chrono::milliseconds(100)) {
      return now;
    }
    if (t - t0 >= std::chrono::seconds(10)) return now;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool isPeerFailure(const std::exception& error, collComm_t comm) {
  collResult_t code = collSuccess;
  if (!errorCode(error, &code)) return false;
  if (code == collRemoteError || code == collTimeout || code == collRevoked) return true;
  if (code == collInvalidArgument || comm == nullptr) return false;
  int rank = 0, n = 0;
  return collCommGetFailedRanks(comm, &rank, 1, &n) == collSuccess && n > 0;
}

void runElastic(const TrainOptions& o, OwnedComm world, const Dataset& train,
                const Dataset& test, FILE* log) {
  const int minNp = envRanks("COLL_ELASTIC_MIN_NP", 1);
  const int startSize = commSize(world.get());
  // Up to where the job may grow back (a replacement rank joins a job of that size).
  const int topSize = o.elasticGrow ? std::max(startSize, envRanks("COLL_ELASTIC_MAX_NP", startSize))
                                    : startSize;
  // The global batch stays the same whatever the number of ranks, so that the run takes
  // the steps an uninterrupted one would: every size it may shrink to must divide it.
  for (int r = std::min(minNp, startSize); r <= topSize; ++r)
    COLL_CHECK_ARG(o.globalBatch % r == 0, "--elastic: --batch-size ", o.globalBatch,
                   " must split evenly over every number of ranks the job may run on (",
                   std::min(minNp, startSize), " to ", topSize,
                   ", from COLL_ELASTIC_MIN_NP", o.elasticGrow ? " to COLL_ELASTIC_MAX_NP" : "",
                   "), not over ", r);
  ElasticCommit commit;
  const char* joinId = std::getenv("COLL_JOIN_ID");
  commit.joining = joinId != nullptr && *joinId != '\0';
  if (commit.joining && log) {
    std::fprintf(log, "elastic: joined the job as rank %d of %d\n", commRank(world.get()),
                 startSize);
    std::fflush(log);
  }
  for (int generation = 0;; ++generation) {
    OwnedComm aux;
    std::unique_ptr<hvd::Context> ctx;
    std::unique_ptr<Trainer> trainer;
    std::string failure;
    try {
      // Split before the engine starts: afterwards its thread owns traffic on `world`.
      aux = OwnedComm::duplicate(world.get());
      ctx = hvd::Context::from_comm(world.get(), false);
      if (generation == 0 && ctx->rank() == 0 && log) {
        std::fprintf(log,
                     "train_fashion_mnist: %d rank(s), %lld train / %lld test images, local batch "
                     "%lld, elastic (at least %d rank(s), commit every %lld steps)\n",
                     ctx->size(), static_cast<long long>(train.count),
                     static_cast<long long>(test.count),
                     static_cast<long long>(o.globalBatch / ctx->size()), minNp,
                     static_cast<long long>(o.commitEvery));
        std::fflush(log);
      }
      trainer = std::make_unique<Trainer>(o, *ctx, aux.get(), train, test, log);
      trainer->setCommit(&commit);
      trainer->run();
      trainer.reset();
      ctx->shutdown();
      return;
    } catch (const std::exception& e) {
      if (!isPeerFailure(e, world.get())) throw;
      failure = e.what();
    }
    // Every survivor's collectives on these communicators fail from now on, wherever
    // they wait, and all of them come here.
    collCommRevoke(world.get());
    if (aux.get()) collCommRevoke(aux.get());
    trainer.reset();
    ctx.reset();  // the engine stops at once on the revoked communicator
    aux = OwnedComm();
    if (log) {
      std::fprintf(log, "elastic: rank %d: a collective failed: %s\n", commRank(world.get()),
                   failure.c_str());
      std::fflush(log);
    }
    world = shrink(std::move(world), failure, minNp, log);
    if (o.elasticGrow) world = growBack(std::move(world), log);
  }
}

}  // namespace collective::frontend
