// collective::Error: what the C++ API throws when a libcollective call fails.
//
// It carries the C result code and the library's explanation (collGetLastError), so
//   catch (const collective::Error& e) { if (e.code() == collTimeout) ... e.what() ... }
// sees the same information a C caller would.
#pragma once

#include <stdexcept>
#include <string>

#include "collective.h"

namespace collective {

class Error : public std::runtime_error {
 public:
  // detail: the library's text (collGetLastError) or the wrapper's own explanation.
  Error(collResult_t code, const std::string& call, const std::string& detail)
      : std::runtime_error(call + " failed (" + collGetErrorString(code) + "): " + detail),
        code_(code),
        detail_(detail) {}

  collResult_t code() const noexcept { return code_; }
  // The explanation alone, without the call name and code.
  const std::string& detail() const noexcept { return detail_; }

 private:
  collResult_t code_;
  std::string detail_;
};

namespace detail {

// Throws for a failed C call. comm selects where the library recorded the text: the
// communicator's last error, or the calling thread's when comm is NULL.
inline void check(collResult_t rc, const char* call, collComm_t comm = nullptr) {
  if (rc != collSuccess) throw Error(rc, call, collGetLastError(comm));
}

// An argument the wrapper itself rejects before calling the library.
[[noreturn]] inline void invalidArgument(const char* call, const std::string& why) {
  throw Error(collInvalidArgument, call, why);
}

}  // namespace detail
}  // namespace collective
