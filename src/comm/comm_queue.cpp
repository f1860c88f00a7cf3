// Nonblocking operations: the communicator's queue, the worker thread that runs it, and
// the requests that report completion.
#include <chrono>
#include <mutex>

#include "algorithms/exec.hpp"
#include "base/call_sig.hpp"
#include "comm/comm.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/types.hpp"

namespace coll {

std::shared_ptr<Request> Comm::submit(std::vector<OpArgs> ops) {
  auto req = std::make_shared<Request>(std::move(ops));
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (stopping_) COLL_THROW(collInvalidUsage, "communicator is being destroyed");
    queue_.push_back(req);
    pending_.fetch_add(1, std::memory_order_release);
    if (!worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  }
  queueCv_.notify_one();
  return req;
}

void Comm::runQueued(const std::shared_ptr<Request>& req) {
  try {
    if (asyncError_.load() != collSuccess)
      COLL_THROW(asyncError_.load(), "communicator is unusable after an earlier error: ",
                 asyncErrorText());
    std::lock_guard<std::mutex> exec(execMu_);
    executeOps(req->ops.data(), req->ops.size());
    req->finish(collSuccess, "");
  } catch (const Error& e) {
    req->finish(e.code(), e.what());
  } catch (const std::exception& e) {
    req->finish(collInternalError, e.what());
  }
}

namespace {
// A request with a send to self or a receive from self (collIallToAllv's own part) runs
// as one group in issue order (executeOps pairs them), not in the progress loop.
bool isP2POnly(const Request& r, int rank) {
  for (const OpArgs& op : r.ops)
    if (!op.isP2P() || op.root == rank) return false;
  return !r.ops.empty();
}
}  // namespace

// Nonblocking sends and receives must progress together (a rank may post a receive and
// then the matching send), so the worker admits every point-to-point request that
// reaches the head of the queue into one progress loop instead of running them in turn.
void Comm::runQueuedP2P() {
  struct Active {
    std::shared_ptr<Request> req;
    std::unique_ptr<Xfer[]> xs;
  };
  std::lock_guard<std::mutex> exec(execMu_);
  // Aborted (the links are gone) or failed earlier: fail what is queued instead of using
  // the links, as runQueued does for collectives.
  if (closed_ || asyncError_.load() != collSuccess) {
    const collResult_t code = closed_ ? collRemoteError : asyncError_.load();
    const std::string why = closed_ ? std::string("communicator aborted")
                                    : strCat("communicator is unusable after an earlier error: ", asyncErrorText());
    std::lock_guard<std::mutex> lock(queueMu_);
    while (!queue_.empty() && isP2POnly(*queue_.front(), rank_)) {
      queue_.front()->finish(code, why);
      queue_.pop_front();
      pending_.fetch_sub(1, std::memory_order_release);
    }
    return;
  }
  std::vector<Active> active;
  try {
    callSig_ = p2pSignature();
    Progress pg(*this, "nonblocking send/recv");
    for (;;) {
      bool acted = false;
      {
        std::lock_guard<std::mutex> lock(queueMu_);
        while (!queue_.empty() && isP2POnly(*queue_.front(), rank_)) {
          // Active before its transfers are posted: a link that has failed throws from
          // the post, and the request must then fail with the others, not be dropped
          // (its caller would wait in collWait until the timeout).
          active.push_back(Active{queue_.front(), nullptr});
          queue_.pop_front();
          pending_.fetch_sub(1, std::memory_order_release);
          Active& a = active.back();
          a.xs.reset(new Xfer[a.req->ops.size()]);
          for (size_t i = 0; i < a.req->ops.size(); ++i) {
            const OpArgs& op = a.req->ops[i];
            size_t bytes = op.count * typeSize(op.dtype);
            if (op.kind == OpKind::Send) pg.send(op.root, op.sendbuf, bytes, &a.xs[i]);
            else pg.recv(op.root, op.recvbuf, bytes, &a.xs[i], true);
          }
          acted = true;
        }
      }
      if (active.empty()) return;
      acted |= pg.poll();
      for (size_t k = 0; k < active.size();) {
        bool done = true;
        for (size_t i = 0; i < active[k].req->ops.size(); ++i) done &= active[k].xs[i].complete;
        if (done) {
          active[k].req->finish(collSuccess, "");
          active.erase(active.begin() + k);
          acted = true;
        } else {
          ++k;
        }
      }
      if (acted) pg.progressed();
      else pg.idle();
    }
  } catch (const Error& e) {
    operationFailed(e);
    for (auto& a : active) a.req->finish(e.code(), e.what());
  }
}

void Comm::workerLoop() {
  LogRankScope logScope(rank_);
  for (;;) {
    std::shared_ptr<Request> req;
    {
      std::unique_lock<std::mutex> lock(queueMu_);
      queueCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      req = queue_.front();
    }
    if (isP2POnly(*req, rank_)) {
      runQueuedP2P();
      continue;
    }
    runQueued(req);
    std::lock_guard<std::mutex> lock(queueMu_);
    queue_.pop_front();
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

void Request::finish(collResult_t code, std::string msg) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load()) return;
    result_ = code;
    message_ = std::move(msg);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool Request::wait(double timeoutSec) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeoutSec), [&] { return done_.load(); });
}

}  // namespace coll
