// Logging: COLL_DEBUG=WARN|INFO|TRACE, COLL_DEBUG_FILE=path (%h host, %p pid allowed).
// Every line is prefixed with host:pid:rank. The rank comes from the calling thread's
// log context, which the communicator sets while it works.
#pragma once

#include <cstdarg>

namespace coll {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel logLevel();
void logMessage(LogLevel level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Rank shown in this thread's log lines (-1: unknown).
void setLogRank(int rank);
int logRank();
// Sets it and returns the previous one: one thread-local access (each costs a call into
// the dynamic linker in a shared library), which a small operation notices.
int exchangeLogRank(int rank);

// Sets the rank for the scope, restoring the previous one afterwards.
class LogRankScope {
 public:
  explicit LogRankScope(int rank) : rank_(rank), prev_(exchangeLogRank(rank)) {}
  ~LogRankScope() {
    if (prev_ != rank_) setLogRank(prev_);
  }
  LogRankScope(const LogRankScope&) = delete;
  LogRankScope& operator=(const LogRankScope&) = delete;

 private:
  int rank_;
  int prev_;
};

}  // namespace coll

#define COLL_LOG_(lvl, ...)                                                       \
  do {                                                                            \
    if (static_cast<int>(::coll::logLevel()) >= static_cast<int>(lvl))            \
      ::coll::logMessage((lvl), __FILE__, __LINE__, __VA_ARGS__);                 \
  } while (0)
#define COLL_WARN(...) COLL_LOG_(::coll::LogLevel::Warn, __VA_ARGS__)
#define COLL_INFO(...) COLL_LOG_(::coll::LogLevel::Info, __VA_ARGS__)
#define COLL_TRACE(...) COLL_LOG_(::coll::LogLevel::Trace, __VA_ARGS__)
