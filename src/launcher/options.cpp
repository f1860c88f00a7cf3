#include "launcher/options.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/error.hpp"

namespace coll::launcher {
namespace {

// Upper bounds that catch typos ("-np 40000000") before they turn into fd exhaustion.
constexpr long kMaxRanks = 1 << 20;
constexpr double kMaxTimeoutSec = 1e8;

long parseCount(const std::string& text, const char* what, long maxValue) {
  errno = 0;
  char* end = nullptr;
  long v = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  COLL_CHECK_ARG(!text.empty() && errno == 0 && *end == '\0', what,
                 " must be a whole number (got '", text, "')");
  COLL_CHECK_ARG(v >= 1 && v <= maxValue, what, " must be between 1 and ", maxValue,
                 " (got ", v, ")");
  return v;
}

double parseSeconds(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  COLL_CHECK_ARG(!text.empty() && errno == 0 && *end == '\0' && std::isfinite(v),
                 "--timeout must be a number of seconds (got '", text, "')");
  COLL_CHECK_ARG(v > 0 && v <= kMaxTimeoutSec, "--timeout must be > 0 and <= ",
                 kMaxTimeoutSec, " seconds (got ", text, ")");
  return v;
}

bool validEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

EnvExport parseExport(const std::string& text) {
  EnvExport e;
  size_t eq = text.find('=');
  e.name = text.substr(0, eq);
  if (eq != std::string::npos) e.value = text.substr(eq + 1);
  COLL_CHECK_ARG(validEnvName(e.name), "-x needs VAR or VAR=value with a valid variable name",
                 " (got '", text, "')");
  return e;
}

HostSlots parseHost(const std::string& item) {
  HostSlots h;
  std::string slots;
  if (!item.empty() && item[0] == '[') {  // [v6-address] or [v6-address]:slots
    size_t close = item.find(']');
    COLL_CHECK_ARG(close != std::string::npos, "-H: missing ']' in '", item, "'");
    h.name = item.substr(1, close - 1);
    std::string rest = item.substr(close + 1);
    COLL_CHECK_ARG(rest.empty() || rest[0] == ':', "-H: unexpected text after ']' in '",
                   item, "'");
    slots = rest.empty() ? std::string("1") : rest.substr(1);
  } else {
    size_t colon = item.find(':');
    COLL_CHECK_ARG(colon == item.rfind(':'),
                   "-H: write IPv6 addresses in brackets, e.g. [::1]:2 (got '", item, "')");
    h.name = item.substr(0, colon);
    slots = colon == std::string::npos ? "1" : item.substr(colon + 1);
  }
  COLL_CHECK_ARG(!h.name.empty(), "-H: empty host name in '", item, "'");
  // A leading '-' would reach ssh as an option.
  COLL_CHECK_ARG(h.name[0] != '-', "-H: host names cannot start with '-' (got '", h.name, "')");
  h.slots = static_cast<int>(parseCount(slots, "-H slot count", kMaxRanks));
  return h;
}

// Long options may be written "--name value" or "--name=value".
struct ArgCursor {
  const std::vector<std::string>& args;
  size_t i = 0;
  std::string value(const std::string& opt, const std::optional<std::string>& inlineValue) {
    if (inlineValue) return *inlineValue;
    COLL_CHECK_ARG(i + 1 < args.size(), "option ", opt, " needs a value");
    return args[++i];
  }
};

void validate(const Options& o) {
  COLL_CHECK_ARG(o.np > 0, "-np N is required (the number of ranks to start)");
  COLL_CHECK_ARG(!o.program.empty(), "no program given to run");
  COLL_CHECK_ARG(o.elastic || (o.minNp == 0 && o.maxNp == 0), "--min-np and --max-np need --elastic");
  if (o.elastic) {
    COLL_CHECK_ARG(o.minNp <= o.np, "--min-np ", o.minNp, " is more than -np ", o.np);
    COLL_CHECK_ARG(o.maxNp == 0 || o.maxNp >= o.np, "--max-np ", o.maxNp, " is less than -np ", o.np);
  }
  if (o.hosts.empty()) return;
  long slots = 0;
  for (const HostSlots& h : o.hosts) slots += h.slots;
  COLL_CHECK_ARG(slots >= o.np, "-np ", o.np, " needs more slots than -H gives (", slots,
                 " slot(s) in total)");
}

}  // namespace

std::vector<std::string> splitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

std::vector<HostSlots> parseHostList(const std::string& text) {
  std::vector<HostSlots> hosts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    hosts.push_back(parseHost(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return hosts;
}

Options parseOptions(const std::vector<std::string>& args, const std::string& sshDefault) {
  Options o;
  o.sshCommand = splitWords(sshDefault);
  ArgCursor cur{args};
  for (; cur.i < args.size(); ++cur.i) {
    std::string opt = args[cur.i];
    if (opt == "--") {
      ++cur.i;
      break;
    }
    if (opt.empty() || opt[0] != '-') break;  // the program
    std::optional<std::string> inl;
    size_t eq = opt.find('=');
    if (opt.rfind("--", 0) == 0 && eq != std::string::npos) {
      inl = opt.substr(eq + 1);
      opt = opt.substr(0, eq);
    }
    if (opt == "-np" || opt == "-n" || opt == "--np") {
      o.np = static_cast<int>(parseCount(cur.value(opt, inl), "-np", kMaxRanks));
    } else if (opt == "-H" || opt == "--host") {
      for (HostSlots& h : parseHostList(cur.value(opt, inl))) o.hosts.push_back(std::move(h));
    } else if (opt == "-x") {
      o.exports.push_back(parseExport(cur.value(opt, inl)));
    } else if (opt == "--timeout") {
      o.timeoutSec = parseSeconds(cur.value(opt, inl));
    } else if (opt == "--ssh") {
      o.sshCommand = splitWords(cur.value(opt, inl));
      COLL_CHECK_ARG(!o.sshCommand.empty(), "--ssh needs a command (got an empty one)");
    } else if (opt == "--bind-to") {
      o.bindTo = cur.value(opt, inl);
      COLL_CHECK_ARG(o.bindTo == "auto" || o.bindTo == "core" || o.bindTo == "none",
                     "--bind-to must be auto, core or none (got '", o.bindTo, "')");
    } else if (opt == "--elastic" && !inl) {
      o.elastic = true;
    } else if (opt == "--min-np") {
      o.minNp = static_cast<int>(parseCount(cur.value(opt, inl), "--min-np", kMaxRanks));
    } else if (opt == "--max-np") {
      o.maxNp = static_cast<int>(parseCount(cur.value(opt, inl), "--max-np", kMaxRanks));
    } else if (opt == "--tag-output" && !inl) {
      o.tagOutput = true;
    } else if (opt == "--no-tag-output" && !inl) {
      o.tagOutput = false;
    } else if ((opt == "-h" || opt == "--help") && !inl) {
      o.help = true;
      return o;
    } else {
      COLL_THROW(collInvalidArgument, "unknown option '", args[cur.i], "'");
    }
  }
  o.program.assign(args.begin() + static_cast<long>(cur.i), args.end());
  validate(o);
  return o;
}

std::vector<int> bindingFor(const std::string& bindTo, int localRank, int localRanks,
                            const std::vector<int>& allowed) {
  const int n = static_cast<int>(allowed.size());
  if (bindTo == "none" || n == 0 || localRanks <= 1 || localRank < 0 || localRank >= localRanks) return {};
  if (localRanks > n) {
    if (bindTo != "core") return {};  // auto: oversubscribed ranks are better left to the scheduler
    return {allowed[static_cast<size_t>(localRank % n)]};
  }
  // Contiguous, as equal as possible: ranks i gets [i*n/L, (i+1)*n/L).
  std::vector<int> mine(allowed.begin() + static_cast<long>(static_cast<int64_t>(localRank) * n / localRanks),
                        allowed.begin() + static_cast<long>(static_cast<int64_t>(localRank + 1) * n / localRanks));
  return mine;
}

std::string shortUsage() {
  return "usage: collectiverun -np N [-H host1:slots,host2:slots] [-x VAR[=value]]...\n"
         "                     [--timeout SECONDS] [--tag-output|--no-tag-output]\n"
         "                     [--bind-to auto|core|none] [--elastic [--min-np A] [--max-np B]]\n"
         "                     [--ssh 'ssh -p 2222'] [--] program [args...]\n"
         "(collectiverun --help describes the options)\n";
}

std::string usageText() {
  return "usage: collectiverun -np N [-H host1:slots,host2:slots] [-x VAR[=value]]...\n"
         "                     [--timeout SECONDS] [--tag-output|--no-tag-output]\n"
         "                     [--bind-to auto|core|none] [--elastic [--min-np A] [--max-np B]]\n"
         "                     [--ssh 'ssh -p 2222'] [--] program [args...]\n"
         "\n"
         "Starts N ranks of a libcollective program and waits for them.\n"
         "  -np, -n N          number of ranks (required)\n"
         "  -H, --host LIST    hosts and slots, filled in order (default: all ranks here);\n"
         "                     a host without ':slots' has one slot\n"
         "  -x VAR[=value]     set VAR for every rank, or forward the launcher's VAR to\n"
         "                     remote ranks (local ranks inherit the whole environment)\n"
         "  --timeout S        kill the job after S seconds and exit with 124\n"
         "  --tag-output       prefix every output line with [rank] (the default)\n"
         "  --no-tag-output    let ranks write straight to the launcher's stdout/stderr\n"
         "  --bind-to MODE     CPUs of the ranks on this host: auto (the default) gives each\n"
         "                     its own share of the launcher's CPUs when there are enough for\n"
         "                     all, core always (round robin), none leaves them unbound\n"
         "  --ssh CMD          remote shell for ranks on other hosts (default: $COLLECTIVERUN_SSH,\n"
         "                     else 'ssh -o BatchMode=yes -T -x')\n"
         "  --elastic          a rank that fails is reported and the others go on while at\n"
         "                     least --min-np A (default 1) run; ranks that ask for new ones\n"
         "                     (COLL_ELASTIC_DIR, doc/recovery.md) get them on this host, up\n"
         "                     to --max-np B (default N) running; exit status 0 when the\n"
         "                     ranks left all finish, else that of the rank that took the\n"
         "                     job below A\n"
         "  -h, --help         this text\n"
         "\n"
         "Each rank gets COLL_RANK, COLL_SIZE, COLL_LOCAL_RANK, COLL_LOCAL_SIZE,\n"
         "COLL_ROOT_ADDR, COLL_JOB_SECRET and COLL_JOB_ID. If a rank fails, the others are\n"
         "killed and collectiverun exits with that rank's status (128+signal if signalled).\n";
}

}  // namespace coll::launcher
