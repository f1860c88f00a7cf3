#include "core/error.hpp"

#include <cstring>

namespace coll {

std::string sysErrorText(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (which may not be buf).
  const char* msg = strerror_r(err, buf, sizeof(buf));
  return strCat(msg, " (errno ", err, ")");
}

}  // namespace coll
