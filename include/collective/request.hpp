// collective::Request: a nonblocking operation in flight (move-only, RAII).
//
// wait() blocks until the operation finished (at most COLL_TIMEOUT) and throws
// collective::Error if it failed; test() polls. The destructor waits too, because the
// library may still be writing the buffers, but it cannot report a failure: call wait()
// when the outcome matters. A Request must finish before its Communicator is destroyed.
#pragma once

#include <utility>

#include "collective.h"
#include "collective/error.hpp"

namespace collective {

class Request {
 public:
  Request() noexcept = default;
  // Takes ownership of a request from the C API; comm is where its errors are recorded.
  Request(collRequest_t request, collComm_t comm) noexcept : req_(request), comm_(comm) {}

  Request(Request&& other) noexcept
      : req_(std::exchange(other.req_, nullptr)), comm_(other.comm_) {}
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      finishQuietly();
      req_ = std::exchange(other.req_, nullptr);
      comm_ = other.comm_;
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { finishQuietly(); }

  // True while the operation has not been waited for or seen complete by test().
  bool pending() const noexcept { return req_ != nullptr; }

  void wait() {
    if (!req_) return;
    finish(collWait(&req_), "collWait");
  }

  // True once the operation finished (then the Request is empty); throws if it failed.
  bool test() {
    if (!req_) return true;
    int done = 0;
    const collResult_t rc = collTest(&req_, &done);
    if (rc == collInProgress) return false;
    finish(rc, "collTest");
    return done != 0;
  }

 private:
  // The library releases the request once it has completed, successfully or not, and
  // records a failed operation's text on the communicator; when it kept the request,
  // the call itself failed (a timeout, for instance) and the text is the thread's.
  void finish(collResult_t rc, const char* call) {
    if (rc != collSuccess) detail::check(rc, call, req_ ? nullptr : comm_);
  }

  void finishQuietly() noexcept {
    if (req_) (void)collWait(&req_);
    req_ = nullptr;
  }

  collRequest_t req_ = nullptr;
  collComm_t comm_ = nullptr;
};

}  // namespace collective
