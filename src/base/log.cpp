#include "base/log.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace coll {
namespace {

// Serialises messages; constant-initialised, so usable before and after the logger.
std::mutex logMutex;

// The logger is process-wide by nature (one stderr, one debug file); it is set up once
// from the environment and never changes afterwards.
struct Logger {
  LogLevel level = LogLevel::Warn;
  FILE* out = stderr;
  char host[64] = {0};

  Logger() {
    const char* lv = getenv("COLL_DEBUG");
    if (lv) {
      if (!strcasecmp(lv, "NONE") || !strcasecmp(lv, "OFF")) level = LogLevel::None;
      else if (!strcasecmp(lv, "WARN")) level = LogLevel::Warn;
      else if (!strcasecmp(lv, "INFO")) level = LogLevel::Info;
      else if (!strcasecmp(lv, "TRACE")) level = LogLevel::Trace;
    }
    gethostname(host, sizeof(host) - 1);
    if (char* dot = strchr(host, '.')) *dot = 0;
    const char* file = getenv("COLL_DEBUG_FILE");
    if (file && *file) {
      std::string path;
      for (const char* c = file; *c; ++c) {
        if (c[0] == '%' && c[1] == 'h') { path += host; ++c; }
        else if (c[0] == '%' && c[1] == 'p') { path += std::to_string(getpid()); ++c; }
        else path += *c;
      }
      if (FILE* f = fopen(path.c_str(), "w")) out = f;
    }
    // A process that forks while another thread is writing a message (a bootstrap root
    // reporting a departed rank, say) would hand its child a held lock: the child's first
    // message (a DataLoader worker's, a forked launcher's) would then wait forever. Fork
    // takes the lock first, so the child starts with it free.
    pthread_atfork([] { logMutex.lock(); }, [] { logMutex.unlock(); }, [] { logMutex.unlock(); });
  }
};

Logger& logger() {
  static Logger instance;
  return instance;
}

// Built when the library loads, before any thread of the program can log: a fork while
// another thread was still building it would leave the child waiting on its guard.
const bool loggerBuiltAtLoad = (logger(), true);

thread_local int tlsRank = -1;

}  // namespace

LogLevel logLevel() { return logger().level; }
void setLogRank(int rank) { tlsRank = rank; }
int logRank() { return tlsRank; }
int exchangeLogRank(int rank) {
  const int prev = tlsRank;
  tlsRank = rank;
  return prev;
}

void logMessage(LogLevel level, const char* file, int line, const char* fmt, ...) {
  Logger& lg = logger();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* tag = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lock(logMutex);
  if (level == LogLevel::Trace)
    fprintf(lg.out, "%s:%d:%d [coll %s %s:%d] %s\n", lg.host, getpid(), tlsRank, tag, base, line, msg);
  else
    fprintf(lg.out, "%s:%d:%d [coll %s] %s\n", lg.host, getpid(), tlsRank, tag, msg);
  fflush(lg.out);
}

}  // namespace coll
