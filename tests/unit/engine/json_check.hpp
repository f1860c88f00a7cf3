// A strict JSON syntax checker for tests (the timeline must load in chrome://tracing and
// Perfetto, which reject malformed JSON).
#pragma once

#include <cctype>
#include <string>

namespace coll::engine::testing {

class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  // True when the whole text is one valid JSON value; `objects` counts every object.
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }
  int objects = 0;

 private:
  bool value() {
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    return literal("true") || literal("false") || literal("null");
  }
  bool object() {
    ++i_;
    ++objects;
    ws();
    if (peek('}')) return ++i_, true;
    for (;;) {
      ws();
      if (!string()) return false;
      ws();
      if (!peek(':')) return false;
      ++i_;
      ws();
      if (!value()) return false;
      ws();
      if (peek(',')) { ++i_; continue; }
      if (peek('}')) return ++i_, true;
      return false;
    }
  }
  bool array() {
    ++i_;
    ws();
    if (peek(']')) return ++i_, true;
    for (;;) {
      ws();
      if (!value()) return false;
      ws();
      if (peek(',')) { ++i_; continue; }
      if (peek(']')) return ++i_, true;
      return false;
    }
  }
  bool string() {
    if (!peek('"')) return false;
    for (++i_; i_ < s_.size(); ++i_) {
      unsigned char c = s_[i_];
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k)
            if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool number() {
    size_t start = i_;
    if (peek('-')) ++i_;
    if (!digits()) return false;
    if (peek('.')) { ++i_; if (!digits()) return false; }
    if (peek('e') || peek('E')) {
      ++i_;
      if (peek('+') || peek('-')) ++i_;
      if (!digits()) return false;
    }
    return i_ > start;
  }
  bool digits() {
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start;
  }
  bool literal(const char* w) {
    std::string lw(w);
    if (s_.compare(i_, lw.size(), lw) != 0) return false;
    i_ += lw.size();
    return true;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void ws() { while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_; }
  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace coll::engine::testing
