// Tunables. Each one is declared once, on one line, next to the code that uses it:
//
//   COLL_PARAM(kTcpStreams, "COLL_TCP_STREAMS", "2", "TCP sockets per peer");
//
// A Config is a snapshot of every declared tunable, read from the environment when a
// communicator is made (so tests can change the environment between communicators).
// COLL_DEBUG=INFO prints the effective values once per process.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace coll {

struct ParamDecl {
  const char* env;
  const char* defaultValue;
  const char* help;
};

// Adds a declaration to the process-wide table of tunables (static initialisation only).
struct ParamRegistrar {
  ParamRegistrar(const char* env, const char* defaultValue, const char* help);
};
const std::vector<ParamDecl>& declaredParams();

#define COLL_PARAM(ident, env, def, help) \
  static const ::coll::ParamRegistrar ident##Registrar_{env, def, help}; \
  [[maybe_unused]] static constexpr const char* ident = env

// Tunables given by the program for one communicator (collConfig_t), NAME -> value, in
// place of the environment's.
using ConfigOverrides = std::vector<std::pair<std::string, std::string>>;

class Config {
 public:
  // Reads every declared tunable from the environment.
  static Config fromEnv();
  // The same, with `given` taking the place of the environment for the tunables it
  // names; a name no tunable declares is collInvalidArgument.
  static Config fromEnv(const ConfigOverrides& given);

  int64_t getInt(const char* env) const;
  double getDouble(const char* env) const;
  // Sizes accept K/M/G suffixes (powers of two).
  size_t getSize(const char* env) const;
  const std::string& getStr(const char* env) const;
  bool isSet(const char* env) const;  // given in the environment (not the default)
  void set(const char* env, const std::string& value);
  // "NAME=value (default d)" lines for every tunable.
  std::string describe() const;

 private:
  const std::string& raw(const char* env) const;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> fromUser_;
};

// Parses "64K", "128M", "1G", "4096" (powers of two); throws collInvalidArgument.
size_t parseSize(const std::string& text, const char* what);

}  // namespace coll
