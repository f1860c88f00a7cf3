#include "base/error.hpp"

#include <sys/resource.h>

#include <cstring>

namespace coll {

std::string sysErrorText(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (which may not be buf).
  const char* msg = strerror_r(err, buf, sizeof(buf));
  std::string text = strCat(msg, " (errno ", err, ")");
  // Every rank holds a socket per peer and stream: a job of many ranks can pass a limit
  // that was ample for a small one, and "Too many open files" alone does not say which.
  rlimit rl{};
  if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    text += strCat(": this process may have ", rl.rlim_cur, " open files (RLIMIT_NOFILE, `ulimit -n`; hard limit ",
                   rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_max), ")");
  else if (err == ENFILE)
    text += ": the system-wide limit of open files is reached (fs.file-max)";
  return text;
}

}  // namespace coll
