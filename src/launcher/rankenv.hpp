// What each rank is told: the COLL_* variables (the contract with the library's
// environment detection, see doc/launch.md) and, for ranks on other hosts, the remote
// shell command line that recreates that environment there.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher/options.hpp"
#include "launcher/placement.hpp"

namespace coll::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kSecretVar = "COLL_JOB_SECRET";
constexpr const char* kRootAddrVar = "COLL_ROOT_ADDR";
constexpr size_t kSecretBytes = 32;  // 64 hex characters, as the bootstrap expects
constexpr size_t kJobIdBytes = 8;

struct JobIdentity {
  std::string rootAddr;  // host:port of the rendezvous root (rank 0)
  std::string secret;    // hex
  std::string jobId;     // hex
};

// Hex of `bytes` bytes from /dev/urandom; throws collSystemError.
std::string randomHex(size_t bytes);
// A TCP port that was free a moment ago on every local address (bind port 0, close).
int pickFreePort();

// The name other ranks use to reach rank 0: 127.0.0.1 when the whole job is local, the
// -H name of a remote rank 0, else this machine's host name (a loopback alias written
// in -H would point remote ranks at themselves).
std::string rootHost(const std::vector<RankPlace>& places, const std::string& myHostname);

// Fresh secret and id; the root address is `userRootAddr` when the user set one, else
// rootHost plus a free port (rank 0 here) or a random high port (rank 0 elsewhere).
JobIdentity makeJobIdentity(const std::vector<RankPlace>& places, const std::string& myHostname,
                            const char* userRootAddr);

// COLL_RANK ... COLL_JOB_ID for one rank, secret included.
EnvList rankVariables(const RankPlace& p, int np, const JobIdentity& job);

// -x values: "VAR=value" as given, "VAR" from `environ` (skipped, with a name in
// `missing`, when the launcher does not have it).
EnvList exportedVariables(const std::vector<EnvExport>& exports, char** environ,
                          std::vector<std::string>* missing);
// The launcher's own COLL_* variables (tunables such as COLL_DEBUG), which remote ranks
// get too; the job's identity variables are left out because each rank gets its own.
EnvList collVariables(char** environ);

// `base` with `overrides` applied (later entries win), as NAME=value strings.
std::vector<std::string> mergeEnvironment(char** base, const EnvList& overrides);

// Single-quotes `s` for a POSIX shell unless it is made only of safe characters.
std::string shellQuote(const std::string& s);

// argv for the remote shell. The remote side reads the job secret from its stdin (so it
// never shows on a command line), runs the program with stdin from /dev/null, and kills
// it when the connection's stdin closes, i.e. when the launcher kills or loses the ssh
// process. `vars` must not contain the secret.
std::vector<std::string> remoteCommand(const std::vector<std::string>& ssh,
                                       const std::string& host, const std::string& cwd,
                                       const EnvList& vars,
                                       const std::vector<std::string>& program);

}  // namespace coll::launcher
