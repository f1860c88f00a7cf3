// The JSON report of the *_perf tools (-J file.json), with nccl-tests' field names so that
// scripts reading nccl-tests' reports read ours: a streaming writer (no document held in
// memory) that places the commas and escapes strings, and the file opening rule of
// nccl-tests (an existing file is never overwritten: path.0, path.1, ... are tried).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace perf {

class JsonWriter {
 public:
  explicit JsonWriter(FILE* out) : out_(out) {}
  void beginObject();
  void endObject();
  void beginList();
  void endList();
  void key(const std::string& name);
  void str(const std::string& value);
  void num(double value);  // non-finite values are written as null (JSON has no NaN)
  void integer(long long value);
  void boolean(bool value);
  void null();
  // Closes whatever is still open (a run that failed half way still leaves valid JSON).
  void closeAll();

 private:
  void beforeValue();
  FILE* out_;
  struct Level {
    bool object;   // else a list
    bool hasItem;  // a comma goes before the next item
  };
  std::vector<Level> open_;
  bool afterKey_ = false;
};

std::string jsonEscape(const std::string& s);

// Opens path for writing without replacing an existing file: path, then path.0, path.1...
// Returns null (and sets *why) when none can be created; *opened names the one used.
FILE* openReportFile(const std::string& path, std::string* opened, std::string* why);

}  // namespace perf
