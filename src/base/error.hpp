// Typed errors inside the library. Every failure is a coll::Error carrying the C result
// code and a message that says what, where and the values involved; the C boundary turns
// it into a collResult_t plus a last-error string.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "collective.h"

namespace coll {

class Error : public std::runtime_error {
 public:
  Error(collResult_t code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  collResult_t code() const { return code_; }

 private:
  collResult_t code_;
};

template <typename... Args>
std::string strCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// A failure that this rank's transport saw on a link and that the peer may never notice
// (a network backend's queue pair broke: the NIC does not tell the other end). A remote
// error by its nature, but Comm::operationFailed reports it to the job like a failure of
// this rank's own, so that ranks still waiting on this one fail too.
class LinkError : public Error {
 public:
  using Error::Error;
};

// errno text for system errors.
std::string sysErrorText(int err);

}  // namespace coll

#define COLL_THROW(code, ...) throw ::coll::Error((code), ::coll::strCat(__VA_ARGS__))

// Argument check at the API edge: names the argument in the message.
#define COLL_CHECK_ARG(cond, ...)                                  \
  do {                                                             \
    if (!(cond)) COLL_THROW(collInvalidArgument, __VA_ARGS__);     \
  } while (0)

// Equality that must hold (for example between what two ranks sent): prints both values.
#define COLL_ENFORCE_EQ(a, b, code, ...)                                                  \
  do {                                                                                    \
    auto coll_a_ = (a);                                                                   \
    auto coll_b_ = (b);                                                                   \
    if (!(coll_a_ == coll_b_))                                                            \
      COLL_THROW(code, __VA_ARGS__, " (" #a " = ", coll_a_, ", " #b " = ", coll_b_, ")"); \
  } while (0)

// A failed system call: message plus errno text.
#define COLL_SYSCHECK(expr, what)                                                       \
  do {                                                                                  \
    if ((expr) < 0) {                                                                   \
      int coll_errno_ = errno;                                                          \
      COLL_THROW(collSystemError, what, ": ", ::coll::sysErrorText(coll_errno_));       \
    }                                                                                   \
  } while (0)
