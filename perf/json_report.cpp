#include "json_report.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

namespace perf {

std::string jsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

void JsonWriter::beforeValue() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!open_.empty()) {
    if (open_.back().hasItem) std::fputc(',', out_);
    open_.back().hasItem = true;
  }
}

void JsonWriter::beginObject() {
  beforeValue();
  std::fputc('{', out_);
  open_.push_back({true, false});
}
void JsonWriter::endObject() {
  if (afterKey_) null();
  std::fputc('}', out_);
  open_.pop_back();
}
void JsonWriter::beginList() {
  beforeValue();
  std::fputc('[', out_);
  open_.push_back({false, false});
}
void JsonWriter::endList() {
  std::fputc(']', out_);
  open_.pop_back();
}
void JsonWriter::key(const std::string& name) {
  if (afterKey_) null();
  beforeValue();
  std::fprintf(out_, "\"%s\":", jsonEscape(name).c_str());
  afterKey_ = true;
}
void JsonWriter::str(const std::string& value) {
  beforeValue();
  std::fprintf(out_, "\"%s\"", jsonEscape(value).c_str());
}
void JsonWriter::num(double value) {
  if (!std::isfinite(value)) return null();
  beforeValue();
  std::fprintf(out_, "%.17g", value);
}
void JsonWriter::integer(long long value) {
  beforeValue();
  std::fprintf(out_, "%lld", value);
}
void JsonWriter::boolean(bool value) {
  beforeValue();
  std::fputs(value ? "true" : "false", out_);
}
void JsonWriter::null() {
  beforeValue();
  std::fputs("null", out_);
}
void JsonWriter::closeAll() {
  while (!open_.empty()) {
    if (afterKey_) null();  // a key left without its value
    open_.back().object ? endObject() : endList();
  }
  std::fflush(out_);
}

FILE* openReportFile(const std::string& path, std::string* opened, std::string* why) {
  std::string tryPath = path;
  for (int n = 0; n < 1000; ++n) {
    int fd = ::open(tryPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      FILE* f = ::fdopen(fd, "w");
      if (!f) {
        *why = std::string("fdopen: ") + std::strerror(errno);
        ::close(fd);
        return nullptr;
      }
      *opened = tryPath;
      return f;
    }
    if (errno != EEXIST) {
      *why = "cannot create '" + tryPath + "': " + std::strerror(errno);
      return nullptr;
    }
    tryPath = path + "." + std::to_string(n);
  }
  *why = "'" + path + "' and path.0 .. path.999 all exist";
  return nullptr;
}

}  // namespace perf
