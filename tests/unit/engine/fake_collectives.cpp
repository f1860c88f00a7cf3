#include "fake_collectives.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <thread>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll::engine::testing {
namespace {

// Nonblocking calls run at issue time: every rank issues in the same order, so the
// blocking exchange cannot deadlock, and the caller's schedule is still exercised.
class DonePending final : public PendingOp {
 public:
  void wait() override {}
};

// FakeWorld::setDeferredAllreduce: the all-reduce runs when waited on. Every rank waits
// in issue order, as it issued, so this cannot deadlock either.
class DeferredPending final : public PendingOp {
 public:
  explicit DeferredPending(std::function<void()> run) : run_(std::move(run)) {}
  void wait() override {
    if (run_) {
      auto run = std::move(run_);
      run_ = nullptr;
      run();
    }
  }

 private:
  std::function<void()> run_;
};

class FakeCollectives final : public Collectives {
 public:
  FakeCollectives(std::shared_ptr<FakeWorld> w, int rank) : w_(std::move(w)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_->size(); }

  void allreduce(const void* s, void* r, size_t n, collDataType_t dt, collRedOp_t op) override {
    size_t bytes = n * typeSize(dt);
    if (auto d = w_->allreduceDelay(); d.count() > 0) std::this_thread::sleep_for(d);
    std::vector<uint8_t> mine(static_cast<const uint8_t*>(s), static_cast<const uint8_t*>(s) + bytes);
    auto all = w_->exchange(rank_, mine.data());
    std::vector<uint8_t> acc(static_cast<const uint8_t*>(all[0]), static_cast<const uint8_t*>(all[0]) + bytes);
    collRedOp_t combine = op == collAvg ? collSum : op;
    for (int k = 1; k < size(); ++k) reduceBuffers(acc.data(), acc.data(), all[k], n, dt, combine);
    w_->done();
    if (op == collAvg) finishAverage(acc.data(), n, dt, size());
    if (bytes) std::memcpy(r, acc.data(), bytes);
  }
  void allgather(const void* s, void* r, size_t n, collDataType_t dt) override {
    size_t bytes = n * typeSize(dt);
    std::vector<uint8_t> mine(static_cast<const uint8_t*>(s), static_cast<const uint8_t*>(s) + bytes);
    auto all = w_->exchange(rank_, mine.data());
    std::vector<uint8_t> out(bytes * size());
    for (int k = 0; k < size(); ++k) if (bytes) std::memcpy(out.data() + k * bytes, all[k], bytes);
    w_->done();
    if (bytes) std::memcpy(r, out.data(), out.size());
  }
  void broadcast(const void* s, void* r, size_t n, collDataType_t dt, int root) override {
    size_t bytes = n * typeSize(dt);
    std::vector<uint8_t> mine;
    if (rank_ == root) mine.assign(static_cast<const uint8_t*>(s), static_cast<const uint8_t*>(s) + bytes);
    auto all = w_->exchange(rank_, mine.data());
    std::vector<uint8_t> out(static_cast<const uint8_t*>(all[root]), static_cast<const uint8_t*>(all[root]) + bytes);
    w_->done();
    if (bytes) std::memcpy(r, out.data(), bytes);
  }
  void alltoall(const void* s, void* r, size_t n, collDataType_t dt) override {
    size_t bytes = n * typeSize(dt);
    std::vector<uint8_t> mine(static_cast<const uint8_t*>(s), static_cast<const uint8_t*>(s) + bytes * size());
    auto all = w_->exchange(rank_, mine.data());
    std::vector<uint8_t> out(bytes * size());
    for (int k = 0; k < size(); ++k)
      if (bytes) std::memcpy(out.data() + k * bytes, static_cast<const uint8_t*>(all[k]) + rank_ * bytes, bytes);
    w_->done();
    if (bytes) std::memcpy(r, out.data(), out.size());
  }
  void reduceScatter(const void* s, void* r, size_t n, collDataType_t dt, collRedOp_t op) override {
    std::vector<uint8_t> full(n * typeSize(dt) * size());
    allreduce(s, full.data(), n * size(), dt, op);
    std::memcpy(r, full.data() + rank_ * n * typeSize(dt), n * typeSize(dt));
  }
  void alltoallv(const void* send, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                 void* recv, const std::vector<size_t>& rc, const std::vector<size_t>& rd) override {
    struct Post { const uint8_t* base; const std::vector<size_t>* sc; const std::vector<size_t>* sd; };
    size_t total = 0;
    for (int k = 0; k < size(); ++k) total = std::max(total, sd[k] + sc[k]);
    std::vector<uint8_t> mine(static_cast<const uint8_t*>(send), static_cast<const uint8_t*>(send) + total);
    Post p{mine.data(), &sc, &sd};
    auto all = w_->exchange(rank_, &p);
    std::vector<std::vector<uint8_t>> parts(size());
    for (int k = 0; k < size(); ++k) {
      const Post& q = *static_cast<const Post*>(all[k]);
      size_t len = (*q.sc)[rank_];
      if (len != rc[k]) COLL_THROW(collInvalidUsage, "fake alltoallv: rank ", k, " sends ", len, " bytes, rank ", rank_, " expects ", rc[k]);
      parts[k].assign(q.base + (*q.sd)[rank_], q.base + (*q.sd)[rank_] + len);
    }
    w_->done();
    for (int k = 0; k < size(); ++k)
      if (!parts[k].empty()) std::memcpy(static_cast<uint8_t*>(recv) + rd[k], parts[k].data(), parts[k].size());
  }
  std::unique_ptr<PendingOp> iallreduce(const void* s, void* r, size_t n, collDataType_t dt,
                                        collRedOp_t op) override {
    if (w_->deferredAllreduce())
      return std::make_unique<DeferredPending>([this, s, r, n, dt, op] { allreduce(s, r, n, dt, op); });
    allreduce(s, r, n, dt, op);
    return std::make_unique<DonePending>();
  }
  std::unique_ptr<PendingOp> ialltoall(const void* s, void* r, size_t n, collDataType_t dt) override {
    alltoall(s, r, n, dt);
    return std::make_unique<DonePending>();
  }
  std::unique_ptr<PendingOp> iallgather(const void* s, void* r, size_t n, collDataType_t dt) override {
    allgather(s, r, n, dt);
    return std::make_unique<DonePending>();
  }
  void barrier() override {
    w_->exchange(rank_, nullptr);
    w_->done();
  }
  std::unique_ptr<Collectives> split(int color, int key) override {
    int mine[2] = {color, key};
    auto all = w_->exchange(rank_, mine);
    std::vector<std::pair<int, int>> ck(size());  // (color, key) of every rank
    for (int k = 0; k < size(); ++k) ck[k] = {static_cast<const int*>(all[k])[0], static_cast<const int*>(all[k])[1]};
    w_->done();
    // Members of my color ordered by (key, old rank); the first one creates the world.
    std::vector<int> members;
    for (int k = 0; k < size(); ++k)
      if (ck[k].first == color && color != COLL_SPLIT_NOCOLOR) members.push_back(k);
    std::sort(members.begin(), members.end(), [&](int a, int b) {
      return std::make_pair(ck[a].second, a) < std::make_pair(ck[b].second, b);
    });
    if (!members.empty() && members[0] == rank_)
      w_->splitSlots()[rank_] = FakeWorld::create(static_cast<int>(members.size()));
    w_->exchange(rank_, nullptr);  // slots written before anyone reads them
    w_->done();
    std::unique_ptr<Collectives> out;
    if (!members.empty()) {
      int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
      out = w_->splitSlots()[members[0]]->member(newRank);
    }
    w_->exchange(rank_, nullptr);  // everyone read its slot before the next split reuses it
    w_->done();
    return out;
  }

 private:
  std::shared_ptr<FakeWorld> w_;
  int rank_;
};

}  // namespace

std::shared_ptr<FakeWorld> FakeWorld::create(int n, double timeoutSeconds) {
  return std::shared_ptr<FakeWorld>(new FakeWorld(n, timeoutSeconds));
}

std::unique_ptr<Collectives> FakeWorld::member(int rank) {
  return std::make_unique<FakeCollectives>(shared_from_this(), rank);
}

void FakeWorld::barrier() {
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  if (!cv_.wait_for(lk, std::chrono::duration<double>(timeout_), [&] { return generation_ != gen; }))
    COLL_THROW(collTimeout, "fake collective: not every rank arrived within ", timeout_, " s");
}

std::vector<const void*> FakeWorld::exchange(int rank, const void* mine) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    posts_[rank] = mine;
  }
  barrier();
  std::lock_guard<std::mutex> lk(mu_);
  return posts_;
}

void FakeWorld::done() { barrier(); }

void runRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace coll::engine::testing
