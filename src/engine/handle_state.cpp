#include "engine/handle_state.hpp"

#include <algorithm>
#include <chrono>

#include "base/error.hpp"
#include "engine/collectives.hpp"

namespace collective::hvd::detail {

void HandleState::finish(collResult_t result, const std::string& msg) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (result != collSuccess && code == collSuccess) {
      code = result;
      message = msg;
    }
    if (--remaining > 0) return;
    done = true;
  }
  cv.notify_all();
}

bool HandleState::isDone() {
  std::lock_guard<std::mutex> lk(mu);
  return done;
}

void HandleState::wait() {
  const auto start = std::chrono::steady_clock::now();
  auto left = [&] {
    return std::chrono::duration<double>(timeoutSeconds) -
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  };
  // Outside mu: the engine completes handles under its own locks.
  if (drive)
    while (!isDone() && (timeoutSeconds <= 0 || left().count() > 0) && drive()) {
    }
  if (nudge && !isDone()) nudge();
  std::unique_lock<std::mutex> lk(mu);
  if (timeoutSeconds > 0) {
    if (!cv.wait_for(lk, std::max(left(), std::chrono::duration<double>(0)), [&] { return done; }))
      throw Error(collTimeout, coll::strCat("synchronize: operation not finished after ",
                                            timeoutSeconds, " s (COLL_SYNCHRONIZE_TIMEOUT)"));
  } else {
    cv.wait(lk, [&] { return done; });
  }
  if (code != collSuccess) throw Error(code, message);
}

}  // namespace collective::hvd::detail

namespace collective::hvd {

bool Handle::poll() const {
  if (!state_) throw Error(collInvalidArgument, "poll: invalid (empty) handle");
  return state_->isDone();
}

void Handle::wait() const {
  if (!state_) throw Error(collInvalidArgument, "synchronize: invalid (empty) handle");
  state_->wait();
}

const Output& Handle::output() const {
  if (!state_) throw Error(collInvalidArgument, "output: invalid (empty) handle");
  return state_->output;
}

}  // namespace collective::hvd
