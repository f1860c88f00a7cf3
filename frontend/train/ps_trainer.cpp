#include "train/ps_trainer.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <sstream>
#include <thread>

#include "comm.hpp"
#include "base/error.hpp"
#include "model.hpp"
#include "sgd.hpp"

namespace collective::frontend {

namespace {

// Idle polling: 20 us at first, doubling up to 200 us, so that a waiting server or worker
// leaves the CPU to the ranks that compute.
struct Backoff {
  int idle = 0;
  void reset() { idle = 0; }
  void pause() {
    const int us = std::min(200, 20 << std::min(idle, 4));
    ++idle;
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Message header, in front of every payload (floats: the counts stay far below 2^24).
enum Kind { kPull = 0, kPush = 1, kDone = 2 };
constexpr size_t kHeader = 4;  // kind, clock (worker steps), version read, unused

}  // namespace

// One (server, worker) pair: rank 0 of `comm` is the server.
struct PsTrainer::Link {
  collComm_t comm = nullptr;
  int peer = -1;        // world rank at the other end
  bool alive = true, done = false;
  std::vector<float> in;  // server: the next message from the worker
  collRequest_t req = nullptr;
  int64_t clock = 0;    // server: gradients received from this worker
  bool owesReply = false, pushed = false;
  int64_t readVersion = 0;
  double lastHeard = 0;

  void abort() {
    if (comm) collCommAbort(comm);
    comm = nullptr;
    req = nullptr;
    alive = false;
  }
  ~Link() {
    if (comm) collCommDestroy(comm);
  }
};

PsTrainer::PsTrainer(const TrainOptions& options, collComm_t world, const Dataset& train,
                     const Dataset& test, FILE* log, PsFaults faults)
    : o_(options),
      world_(world),
      train_(train),
      test_(test),
      faults_(faults),
      rank_(commRank(world)),
      size_(commSize(world)),
      servers_(options.servers),
      workers_(size_ - options.servers),
      timeout_(options.psTimeout) {
  COLL_CHECK_ARG(workers_ >= 1, "--mode ps: ", size_, " rank(s) for --servers ", servers_,
                 ": at least one rank must be a worker");
  COLL_CHECK_ARG(o_.globalBatch % workers_ == 0, "--batch-size ", o_.globalBatch,
                 " must be a multiple of the number of workers ", workers_);
  COLL_CHECK_ARG(test_.count > 0, "ps: no test images to evaluate on");
  COLL_CHECK_ARG(train_.count >= workers_, "ps: ", train_.count, " training image(s) for ",
                 workers_, " workers");
  log_ = rank_ == servers_ ? log : nullptr;  // the first worker reports
  // Every pair gets its own communicator; each split is collective over the world.
  for (int s = 0; s < servers_; ++s)
    for (int w = servers_; w < size_; ++w) {
      const bool member = rank_ == s || rank_ == w;
      collComm_t c = nullptr;
      collCheck(collCommSplit(world, member ? 0 : COLL_SPLIT_NOCOLOR, rank_ == s ? 0 : 1, &c),
                world, "collCommSplit(ps pair)");
      if (!member) continue;
      auto link = std::make_unique<Link>();
      link->comm = c;
      link->peer = rank_ == s ? w : s;
      links_.push_back(std::move(link));
    }
  ModelOptions mo;
  mo.seed = o_.seed;
  model_ = makeFashionCnn(mo);
  size_t total = 0;
  for (Param* p : model_->parameters()) total += static_cast<size_t>(p->value.numel());
  for (int s = 0; s <= servers_; ++s) shardStart_.push_back(total * s / servers_);
  versions_.assign(servers_, 0);
}

PsTrainer::~PsTrainer() = default;

std::vector<EpochResult> PsTrainer::run() {
  if (isServer()) {
    serve();
    return {};
  }
  return work();
}

// ---- server ----

void PsTrainer::serve() {
  const int s = rank_;
  const size_t lo = shardStart_[s], len = shardStart_[s + 1] - lo;
  // The shard's values (from the common seed) and its optimizer.
  Param shard{"shard" + std::to_string(s), Tensor({static_cast<int64_t>(len)}),
              Tensor({static_cast<int64_t>(len)})};
  {
    std::vector<float> flat;
    for (Param* p : model_->parameters())
      flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
    std::copy(flat.begin() + lo, flat.begin() + lo + len, shard.value.data());
  }
  Sgd sgd({&shard}, SgdOptions{o_.lr, o_.momentum, o_.weightDecay});
  DistributedSampler sampler(train_.count, 0, workers_, o_.seed);
  int64_t stepsPerEpoch = sampler.steps(o_.globalBatch / workers_);
  if (o_.maxSteps > 0) stepsPerEpoch = std::min(stepsPerEpoch, o_.maxSteps);
  const int64_t totalSteps = stepsPerEpoch * o_.epochs * (o_.psAsync ? workers_ : 1);
  std::vector<float> out(kHeader + len), sum(len, 0.0f);
  int64_t version = 0;
  Link* first = nullptr;  // the first worker: gets the statistics at the end
  for (auto& l : links_) {
    if (l->peer == servers_) first = l.get();
    l->in.resize(kHeader + len);
    l->lastHeard = now();
  }
  auto post = [&](Link& l) {
    collResult_t r = collIrecv(l.in.data(), l.in.size(), collFloat32, 1, l.comm, &l.req);
    if (r != collSuccess) l.abort();
  };
  auto reply = [&](Link& l) {
    out[0] = static_cast<float>(version);
    std::copy(shard.value.data(), shard.value.data() + len, out.begin() + kHeader);
    collRequest_t req = nullptr;
    collResult_t r = collIsend(out.data(), out.size(), collFloat32, 1, l.comm, &req);
    if (r == collSuccess) r = collWait(&req);
    l.owesReply = false;
    l.lastHeard = now();
    if (r != collSuccess) {
      l.abort();
      ++stats_.deadWorkers;
    }
  };
  auto update = [&](const float* grad, float scale) {
    for (size_t i = 0; i < len; ++i) shard.grad[static_cast<int64_t>(i)] = grad[i] * scale;
    sgd.setLr(o_.lrAt(version, totalSteps));
    sgd.step();
    ++version;
    ++stats_.updates;
  };
  auto live = [&](const Link& l) { return l.alive && !l.done; };
  for (auto& l : links_) post(*l);
  Backoff backoff;
  for (;;) {
    if (faults_.serverDiesAfter >= 0 && stats_.updates >= faults_.serverDiesAfter) {
      for (auto& l : links_) l->abort();
      return;
    }
    bool any = false, progressed = false;
    for (auto& lp : links_) {
      Link& l = *lp;
      if (!live(l)) continue;
      any = true;
      int flag = 0;
      const collResult_t r = collTest(&l.req, &flag);
      if (r != collSuccess && r != collInProgress) {
        l.abort();
        ++stats_.deadWorkers;
        continue;
      }
      if (!flag) {
        // Silent while it owes us a message (we owe it nothing): dead after the timeout.
        if (!l.owesReply && now() - l.lastHeard > timeout_) {
          l.abort();
          ++stats_.deadWorkers;
        }
        continue;
      }
      progressed = true;
      l.lastHeard = now();
      const int kind = static_cast<int>(l.in[0]);
      if (kind == kDone) {
        l.done = true;
        continue;
      }
      if (kind == kPull) {
        reply(l);
      } else {
        l.readVersion = static_cast<int64_t>(l.in[2]);
        ++l.clock;
        if (o_.psAsync) {
          ++stats_.staleness[version - l.readVersion];
          update(l.in.data() + kHeader, 1.0f);
        } else {
          for (size_t i = 0; i < len; ++i) sum[i] += l.in[kHeader + i];
          l.pushed = true;
        }
        l.owesReply = true;
      }
      post(l);
    }
    if (!any) break;
    if (!o_.psAsync) {
      // A round is complete when every live worker has pushed.
      int pushed = 0, waiting = 0;
      for (auto& l : links_)
        if (live(*l)) (l->pushed ? pushed : waiting)++;
      if (pushed > 0 && waiting == 0) {
        ++stats_.staleness[0];
        update(sum.data(), 1.0f / static_cast<float>(pushed));
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (auto& l : links_)
          if (live(*l) && l->pushed) {
            l->pushed = false;
            reply(*l);
          }
        progressed = true;
      }
    } else {
      // Answer every worker that is at most K steps ahead of the slowest live one.
      int64_t slowest = INT64_MAX;
      for (auto& l : links_)
        if (live(*l)) slowest = std::min(slowest, l->clock);
      for (auto& l : links_)
        if (live(*l) && l->owesReply && l->clock <= slowest + o_.maxStaleness) {
          reply(*l);
          progressed = true;
        }
    }
    if (progressed)
      backoff.reset();
    else
      backoff.pause();
  }
  // Statistics to the first worker (it reports): updates, dead workers, histogram.
  if (first && first->comm && s == 0) {
    std::vector<double> msg{static_cast<double>(stats_.updates),
                            static_cast<double>(stats_.deadWorkers)};
    for (const auto& [k, v] : stats_.staleness) {
      msg.push_back(static_cast<double>(k));
      msg.push_back(static_cast<double>(v));
    }
    msg.resize(256, -1.0);
    collRequest_t req = nullptr;
    if (collIsend(msg.data(), msg.size(), collFloat64, 1, first->comm, &req) == collSuccess)
      collWait(&req);
  }
}

// ---- worker ----

void PsTrainer::waitFor(collRequest_t& req, Link& link, const char* what) {
  // A live server may itself wait up to the timeout for a dead worker before it answers
  // a round, so a worker gives it twice that.
  const double limit = 2 * timeout_;
  const double deadline = now() + limit;
  Backoff backoff;
  for (;;) {
    int flag = 0;
    const collResult_t r = collTest(&req, &flag);
    if (r != collSuccess && r != collInProgress) {
      link.abort();
      COLL_THROW(collRemoteError, "parameter server rank ", link.peer, " failed while ", what,
                 ": ", collGetErrorString(r));
    }
    if (flag) return;
    if (now() > deadline) {
      link.abort();
      COLL_THROW(collTimeout, "parameter server rank ", link.peer, " did not answer within ",
                 limit, " s while ", what, " (2 x --ps-timeout): it has died or hangs");
    }
    backoff.pause();
  }
}

void PsTrainer::pullAll(bool push, int64_t clock) {
  const auto params = model_->parameters();
  std::vector<float> flat;
  if (push)
    for (Param* p : params) flat.insert(flat.end(), p->grad.data(), p->grad.data() + p->grad.numel());
  std::vector<std::vector<float>> msgs(servers_), replies(servers_);
  std::vector<collRequest_t> sends(servers_, nullptr), recvs(servers_, nullptr);
  for (int s = 0; s < servers_; ++s) {
    Link& l = *links_[s];
    const size_t lo = shardStart_[s], len = shardStart_[s + 1] - lo;
    msgs[s].assign(kHeader + len, 0.0f);
    msgs[s][0] = push ? kPush : kPull;
    msgs[s][1] = static_cast<float>(clock);
    msgs[s][2] = static_cast<float>(versions_[s]);
    if (push) std::copy(flat.begin() + lo, flat.begin() + lo + len, msgs[s].begin() + kHeader);
    replies[s].resize(kHeader + len);
    if (collIrecv(replies[s].data(), replies[s].size(), collFloat32, 0, l.comm, &recvs[s]) !=
            collSuccess ||
        collIsend(msgs[s].data(), msgs[s].size(), collFloat32, 0, l.comm, &sends[s]) != collSuccess)
      COLL_THROW(collRemoteError, "parameter server rank ", l.peer, ": cannot post to it");
  }
  for (int s = 0; s < servers_; ++s) {
    waitFor(sends[s], *links_[s], push ? "pushing gradients" : "pulling parameters");
    waitFor(recvs[s], *links_[s], "pulling parameters");
  }
  // Replies into the parameters.
  std::vector<float> values(shardStart_.back());
  for (int s = 0; s < servers_; ++s) {
    versions_[s] = static_cast<int64_t>(replies[s][0]);
    std::copy(replies[s].begin() + kHeader, replies[s].end(), values.begin() + shardStart_[s]);
  }
  size_t at = 0;
  for (Param* p : params) {
    std::copy(values.begin() + at, values.begin() + at + p->value.numel(), p->value.data());
    at += static_cast<size_t>(p->value.numel());
  }
}

double PsTrainer::evaluate() {
  model_->setTraining(false);
  const int64_t total = o_.testLimit > 0 ? std::min(o_.testLimit, test_.count) : test_.count;
  std::vector<int64_t> idx;
  Tensor x;
  std::vector<int32_t> labels;
  int64_t correct = 0;
  for (int64_t b = 0; b < total; b += o_.evalBatch) {
    idx.resize(static_cast<size_t>(std::min(o_.evalBatch, total - b)));
    std::iota(idx.begin(), idx.end(), b);
    gatherBatch(test_, idx, x, labels);
    correct += countCorrect(model_->forward(x), labels);
  }
  model_->setTraining(true);
  return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
}

std::vector<EpochResult> PsTrainer::work() {
  const int w = rank_ - servers_;
  const int64_t local = o_.globalBatch / workers_;
  DistributedSampler sampler(train_.count, w, workers_, o_.seed);
  const bool reporter = rank_ == servers_;
  if (log_)
    std::fprintf(log_, "parameter server: %d server(s), %d worker(s), %s%s\n", servers_, workers_,
                 o_.psAsync ? "async, max staleness " : "sync",
                 o_.psAsync ? std::to_string(o_.maxStaleness).c_str() : "");
  pullAll(false, 0);
  std::vector<EpochResult> results;
  int64_t clock = 0;
  Tensor x;
  std::vector<int32_t> labels;
  for (int64_t epoch = 0; epoch < o_.epochs; ++epoch) {
    const std::vector<int64_t> order = sampler.indices(epoch);
    int64_t steps = sampler.steps(local);
    if (o_.maxSteps > 0) steps = std::min(steps, o_.maxSteps);
    const int64_t mine = static_cast<int64_t>(order.size());
    double lossSum = 0;
    int64_t seen = 0;
    const double start = now();
    for (int64_t s = 0; s < steps; ++s) {
      if (faults_.workerDiesAfter >= 0 && clock >= faults_.workerDiesAfter) {
        for (auto& l : links_) l->abort();
        return results;
      }
      const int64_t begin = s * local, n = std::min(local, mine - begin);
      gatherBatch(train_, std::span(order).subspan(begin, n), x, labels);
      lossSum += static_cast<double>(loss_.forward(model_->forward(x), labels)) * n;
      model_->backward(loss_.backward());
      pullAll(true, ++clock);
      seen += n;
    }
    EpochResult r;
    r.epoch = epoch;
    r.seconds = now() - start;
    r.trainLoss = seen ? lossSum / seen : 0.0;
    r.images = seen * workers_;
    if (reporter) {
      r.testAccuracy = evaluate();
      if (log_)
        std::fprintf(log_,
                     "epoch %lld/%lld: train loss %.4f (this worker), test accuracy %.2f%%, "
                     "%.2f s (%.0f img/s)\n",
                     static_cast<long long>(epoch + 1), static_cast<long long>(o_.epochs),
                     r.trainLoss, 100.0 * r.testAccuracy, r.seconds,
                     r.seconds > 0 ? r.images / r.seconds : 0.0);
    }
    results.push_back(r);
  }
  for (auto& l : links_) {
    std::vector<float> done(kHeader + shardStart_[1] - shardStart_[0], 0.0f);
    // The server's receive is sized for its shard.
    const int s = static_cast<int>(&l - &links_[0]);
    done.resize(kHeader + shardStart_[s + 1] - shardStart_[s]);
    done[0] = kDone;
    collRequest_t req = nullptr;
    if (collIsend(done.data(), done.size(), collFloat32, 0, l->comm, &req) == collSuccess)
      waitFor(req, *l, "leaving");
  }
  if (reporter) {
    std::vector<double> msg(256);
    collRequest_t req = nullptr;
    if (collIrecv(msg.data(), msg.size(), collFloat64, 0, links_[0]->comm, &req) == collSuccess)
      waitFor(req, *links_[0], "collecting the statistics");
    stats_.updates = static_cast<int64_t>(msg[0]);
    stats_.deadWorkers = static_cast<int64_t>(msg[1]);
    for (size_t i = 2; i + 1 < msg.size() && msg[i] >= 0; i += 2)
      stats_.staleness[static_cast<int64_t>(msg[i])] = static_cast<int64_t>(msg[i + 1]);
    if (log_ && !results.empty()) {
      std::ostringstream secs, accs, hist;
      double mean = 0;
      for (size_t i = 0; i < results.size(); ++i) {
        secs << (i ? "," : "") << results[i].seconds;
        accs << (i ? "," : "") << results[i].testAccuracy;
        mean += results[i].seconds / static_cast<double>(results.size());
      }
      bool firstEntry = true;
      for (const auto& [k, v] : stats_.staleness) {
        hist << (firstEntry ? "" : ", ") << "\"" << k << "\": " << v;
        firstEntry = false;
      }
      const int64_t elements = static_cast<int64_t>(shardStart_.back());
      std::fprintf(log_,
                   "summary: parameter server %s, %d server(s), %d worker(s): final test "
                   "accuracy %.2f%%, mean epoch %.2f s, server 0: %lld updates, %lld dead "
                   "worker(s), staleness histogram {%s}\n",
                   o_.psAsync ? "async" : "sync", servers_, workers_,
                   100.0 * results.back().testAccuracy, mean,
                   static_cast<long long>(stats_.updates),
                   static_cast<long long>(stats_.deadWorkers), hist.str().c_str());
      std::fprintf(log_,
                   "RESULT {\"ranks\": %d, \"mode\": \"ps\", \"servers\": %d, \"async\": %s, "
                   "\"max_staleness\": %lld, \"global_batch\": %lld, \"sync_bn\": false, "
                   "\"compression\": \"none\", \"precision\": \"fp32\", \"epoch_seconds\": [%s], "
                   "\"test_accuracy\": [%s], \"mean_epoch_seconds\": %.4f, "
                   "\"final_test_accuracy\": %.6f, \"bytes_per_step\": %lld, "
                   "\"pull_bytes_per_step\": %lld, \"staleness\": {%s}}\n",
                   size_, servers_, o_.psAsync ? "true" : "false",
                   static_cast<long long>(o_.maxStaleness),
                   static_cast<long long>(o_.globalBatch), secs.str().c_str(),
                   accs.str().c_str(), mean, results.back().testAccuracy,
                   static_cast<long long>(4 * elements), static_cast<long long>(4 * elements),
                   hist.str().c_str());
      std::fflush(log_);
    }
  }
  return results;
}

}  // namespace collective::frontend
