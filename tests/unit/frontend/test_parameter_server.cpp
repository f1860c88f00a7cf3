// Parameter server, ranks as threads: sync workers stay identical and see no staleness,
// the async staleness bound holds, a dead worker does not stop the server, a dead server
// is an error on the worker that names it.
#include <gtest/gtest.h>

#include <mutex>
#include <string>

#include "base/error.hpp"
#include "rank_threads.hpp"
#include "synthetic_data.hpp"
#include "train/ps_trainer.hpp"

namespace collective::frontend {
namespace {

// timeout: how long a silent peer may take before it counts as dead; short where a test
// kills one, long elsewhere so that a loaded machine cannot make a live one look dead.
TrainOptions psOptions(int servers, bool async, int64_t staleness = 4, double timeout = 30) {
  TrainOptions o = TrainOptions::parse({"--mode", "ps", "--servers", std::to_string(servers),
                                        "--epochs", "1", "--batch-size", "32", "--ps-timeout",
                                        std::to_string(timeout), "--max-staleness",
                                        std::to_string(staleness)});
  o.psAsync = async;
  o.progress = false;
  return o;
}

struct Outcome {
  std::vector<std::vector<float>> workerParams;
  PsServerStats server0;
  std::vector<std::string> errors;  // per rank, "" when it returned normally
  double accuracy = 0;
};

Outcome runPs(int ranks, const TrainOptions& o, PsFaults faults = {}, int faultyRank = -1) {
  const Dataset data = testing::patchData(320, 3), test = testing::patchData(60, 4);
  Outcome out;
  out.errors.resize(ranks);
  std::mutex mu;
  testing::runRanks(ranks, [&](int rank, collComm_t world) {
    PsTrainer t(o, world, data, test, nullptr, rank == faultyRank ? faults : PsFaults{});
    std::vector<EpochResult> r;
    try {
      r = t.run();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      out.errors[rank] = e.what();
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) out.server0 = t.serverStats();
    if (!t.isServer() && rank != faultyRank) {
      std::vector<float> flat;
      for (Param* p : t.model().parameters())
        flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
      out.workerParams.push_back(flat);
    }
    if (rank == o.servers && !r.empty()) out.accuracy = r.back().testAccuracy;
  });
  return out;
}

TEST(ParameterServer, SyncWorkersStayIdenticalWithoutStaleness) {
  const Outcome r = runPs(4, psOptions(2, false));
  for (const auto& e : r.errors) EXPECT_EQ(e, "");
  ASSERT_EQ(r.workerParams.size(), 2u);
  EXPECT_EQ(r.workerParams[0], r.workerParams[1]);
  EXPECT_EQ(r.server0.updates, 10);  // 320 images / 2 workers / 16 per step
  EXPECT_EQ(r.server0.staleness, (std::map<int64_t, int64_t>{{0, 10}}));
  EXPECT_GE(r.accuracy, 0.5);  // it learns (10 steps on an easy set)
}

TEST(ParameterServer, AsyncStalenessStaysWithinTheBound) {
  const Outcome r = runPs(3, psOptions(1, true, 0));
  for (const auto& e : r.errors) EXPECT_EQ(e, "");
  int64_t total = 0;
  for (const auto& [staleness, count] : r.server0.staleness) {
    // K = 0: a worker waits until the other caught up, so at most the other's one
    // gradient lands between its pull and its push.
    EXPECT_LE(staleness, 1);
    total += count;
  }
  EXPECT_EQ(total, 20);  // every gradient of both workers applied
  EXPECT_EQ(r.server0.updates, 20);
}

TEST(ParameterServer, DeadWorkerDoesNotStopTheServer) {
  PsFaults f;
  f.workerDiesAfter = 3;
  const Outcome r = runPs(3, psOptions(1, false, 4, 2), f, 2);
  for (const auto& e : r.errors) EXPECT_EQ(e, "");
  EXPECT_EQ(r.server0.deadWorkers, 1);
  EXPECT_EQ(r.server0.updates, 10);  // the live worker finished its epoch
  ASSERT_EQ(r.workerParams.size(), 1u);
}

TEST(ParameterServer, DeadServerIsAClearError) {
  PsFaults f;
  f.serverDiesAfter = 2;
  const Outcome r = runPs(2, psOptions(1, false, 4, 2), f, 0);
  EXPECT_NE(r.errors[1].find("parameter server rank 0"), std::string::npos) << r.errors[1];
  std::printf("worker error: %s\n", r.errors[1].c_str());
}

}  // namespace
}  // namespace collective::frontend
