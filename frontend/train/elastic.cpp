#include "train/elastic.hpp"

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

int minRanks() {
  const char* v = std::getenv("COLL_ELASTIC_MIN_NP");
  if (!v || !*v) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  COLL_CHECK_ARG(*end == '\0' && n >= 1 && n <= 65536, "COLL_ELASTIC_MIN_NP '", v,
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
  const int minNp = minRanks();
  const int startSize = commSize(world.get());
  // The global batch stays the same whatever the number of ranks, so that the run takes
  // the steps an uninterrupted one would: every size it may shrink to must divide it.
  for (int r = std::min(minNp, startSize); r <= startSize; ++r)
    COLL_CHECK_ARG(o.globalBatch % r == 0, "--elastic: --batch-size ", o.globalBatch,
                   " must split evenly over every number of ranks the job may shrink to (",
                   std::min(minNp, startSize), " to ", startSize,
                   ", from COLL_ELASTIC_MIN_NP), not over ", r);
  ElasticCommit commit;
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
  }
}

}  // namespace collective::frontend
