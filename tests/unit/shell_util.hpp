// Running a command line from a test and keeping what it printed.
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <string>

namespace testshell {

struct Result {
  int status = -1;  // exit status; -1 if it did not exit normally
  std::string out;  // stdout and stderr together
};

inline Result run(const std::string& cmd) {
  Result r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  if (st != -1 && WIFEXITED(st)) r.status = WEXITSTATUS(st);
  return r;
}

}  // namespace testshell
