// Command line of collectiverun. Parsing is pure (no I/O) so it is unit-tested directly;
// a usage error is a coll::Error with collInvalidArgument, which main turns into exit 2.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace coll::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// One -x argument: "VAR" forwards the launcher's value, "VAR=value" sets it.
struct EnvExport {
  std::string name;
  std::optional<std::string> value;
};

struct Options {
  int np = 0;
  std::vector<HostSlots> hosts;   // empty: every rank on this host
  std::vector<EnvExport> exports;
  double timeoutSec = 0;          // 0: no time limit
  bool tagOutput = true;
  // Local ranks' CPU binding: "auto" (the default) gives each local rank a share of the
  // launcher's CPUs of its own when there are at least as many CPUs as local ranks, "core"
  // does so always (round robin when there are fewer CPUs), "none" leaves the launcher's
  // affinity. Unbound ranks that wake each other through the kernel end up on one CPU
  // (the scheduler places a woken task next to its waker) and stay there on a busy host.
  std::string bindTo = "auto";
  std::vector<std::string> sshCommand;  // the remote shell and its options
  std::vector<std::string> program;     // program followed by its arguments
  bool help = false;
  // --elastic: the job goes on while at least minNp ranks run, and the ranks may ask for
  // new ones up to maxNp (doc/recovery.md). 0: not given (then np).
  bool elastic = false;
  int minNp = 0;
  int maxNp = 0;
};

// `args` excludes argv[0]. `sshDefault` is the remote shell command (whitespace-separated
// words) used unless --ssh is given. Throws coll::Error(collInvalidArgument) on misuse.
Options parseOptions(const std::vector<std::string>& args, const std::string& sshDefault);

// "a:2,b,[::1]:4" -> hosts; a host without ":slots" has one slot.
std::vector<HostSlots> parseHostList(const std::string& text);

// Splits on blanks (no quoting: the ssh command is a plain word list).
std::vector<std::string> splitWords(const std::string& text);

// The CPUs of local rank `localRank` of `localRanks` under `bindTo`, from the launcher's
// CPUs `allowed` (in order); empty: no binding.
std::vector<int> bindingFor(const std::string& bindTo, int localRank, int localRanks,
                            const std::vector<int>& allowed);

std::string usageText();   // --help
std::string shortUsage();  // after a usage error

}  // namespace coll::launcher
