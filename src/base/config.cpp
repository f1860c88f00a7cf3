#include "base/config.hpp"

#include <cstdlib>
#include <sstream>

#include "base/error.hpp"

namespace coll {
namespace {
std::vector<ParamDecl>& table() {
  static std::vector<ParamDecl> decls;
  return decls;
}
}  // namespace

ParamRegistrar::ParamRegistrar(const char* env, const char* defaultValue, const char* help) {
  for (const auto& d : table())
    if (std::string(d.env) == env) return;  // declared in a header included twice
  table().push_back({env, defaultValue, help});
}

const std::vector<ParamDecl>& declaredParams() { return table(); }

Config Config::fromEnv() {
  Config c;
  for (const auto& d : table()) {
    const char* v = getenv(d.env);
    c.values_[d.env] = (v && *v) ? v : d.defaultValue;
    c.fromUser_[d.env] = v && *v;
  }
  return c;
}

Config Config::fromEnv(const ConfigOverrides& given) {
  Config c = fromEnv();
  for (const auto& [name, value] : given) {
    COLL_CHECK_ARG(c.values_.count(name), "'", name, "' is not a libcollective tunable (COLL_DEBUG=INFO lists them)");
    c.values_[name] = value;
    c.fromUser_[name] = true;
  }
  return c;
}

const std::string& Config::raw(const char* env) const {
  auto it = values_.find(env);
  if (it == values_.end()) COLL_THROW(collInternalError, "tunable ", env, " was never declared");
  return it->second;
}

int64_t Config::getInt(const char* env) const {
  const std::string& s = raw(env);
  char* end = nullptr;
  long long v = strtoll(s.c_str(), &end, 0);
  COLL_CHECK_ARG(end && *end == 0 && !s.empty(), env, "='", s, "' is not an integer");
  return v;
}

double Config::getDouble(const char* env) const {
  const std::string& s = raw(env);
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  COLL_CHECK_ARG(end && *end == 0 && !s.empty(), env, "='", s, "' is not a number");
  return v;
}

size_t Config::getSize(const char* env) const { return parseSize(raw(env), env); }

const std::string& Config::getStr(const char* env) const { return raw(env); }

bool Config::isSet(const char* env) const {
  auto it = fromUser_.find(env);
  return it != fromUser_.end() && it->second;
}

void Config::set(const char* env, const std::string& value) {
  raw(env);
  values_[env] = value;
  fromUser_[env] = true;
}

std::string Config::describe() const {
  std::ostringstream os;
  for (const auto& d : table()) {
    os << d.env << "=" << raw(d.env);
    if (isSet(d.env)) os << " (set; default " << d.defaultValue << ")";
    os << "\n";
  }
  return os.str();
}

size_t parseSize(const std::string& text, const char* what) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  COLL_CHECK_ARG(!text.empty() && text[0] != '-' && end != text.c_str() && errno == 0, what, ": '",
                 text, "' is not a size");
  unsigned long long mult = 1;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': mult = 1ull << 10; break;
      case 'm': case 'M': mult = 1ull << 20; break;
      case 'g': case 'G': mult = 1ull << 30; break;
      default: COLL_THROW(collInvalidArgument, what, ": '", text, "' has an unknown suffix");
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    COLL_CHECK_ARG(*end == 0, what, ": '", text, "' has trailing characters");
  }
  COLL_CHECK_ARG(v <= (~0ull) / mult, what, ": '", text, "' is too large");
  return static_cast<size_t>(v * mult);
}

}  // namespace coll
