#include "launcher/rankenv.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "base/error.hpp"

namespace coll::launcher {
namespace {

// Remote rank 0: we cannot probe its ports, so pick below Linux's default ephemeral
// range (32768-60999) where outgoing connections would otherwise collide.
constexpr int kRemotePortLow = 20000;
constexpr int kRemotePortHigh = 32767;

[[noreturn]] void throwSys(const std::string& what) {
  int err = errno;
  COLL_THROW(collSystemError, what, ": ", std::strerror(err), " (errno ", err, ")");
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void randomBytes(unsigned char* out, size_t n) {
  Fd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throwSys("open /dev/urandom");
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd.get(), out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throwSys("read /dev/urandom");
    got += static_cast<size_t>(r);
  }
}

bool isSafeShellChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("_@%+=:,./-", c) != nullptr;
}

}  // namespace

std::string randomHex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  randomBytes(raw.data(), raw.size());
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

int pickFreePort() {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) throwSys("socket (choosing COLL_ROOT_ADDR's port)");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0)
    throwSys("bind port 0 (choosing COLL_ROOT_ADDR's port)");
  socklen_t len = sizeof a;
  if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) < 0)
    throwSys("getsockname (choosing COLL_ROOT_ADDR's port)");
  return ntohs(a.sin_port);
}

std::string rootHost(const std::vector<RankPlace>& places, const std::string& myHostname) {
  const RankPlace& r0 = places.at(0);
  if (!r0.local) return r0.host;
  bool allLocal = true;
  for (const RankPlace& p : places) allLocal = allLocal && p.local;
  if (allLocal) return "127.0.0.1";
  if (!r0.host.empty() && !isLoopbackName(r0.host)) return r0.host;
  return myHostname;
}

JobIdentity makeJobIdentity(const std::vector<RankPlace>& places, const std::string& myHostname,
                            const char* userRootAddr) {
  JobIdentity job;
  job.secret = randomHex(kSecretBytes);
  job.jobId = randomHex(kJobIdBytes);
  if (userRootAddr && *userRootAddr) {
    job.rootAddr = userRootAddr;
    return job;
  }
  int port = 0;
  if (places.at(0).local) {
    port = pickFreePort();
  } else {
    unsigned char r[2];
    randomBytes(r, sizeof r);
    port = kRemotePortLow + (r[0] << 8 | r[1]) % (kRemotePortHigh - kRemotePortLow + 1);
  }
  std::string host = rootHost(places, myHostname);
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6 literal
  job.rootAddr = strCat(host, ":", port);
  return job;
}

EnvList rankVariables(const RankPlace& p, int np, const JobIdentity& job) {
  return {{"COLL_RANK", std::to_string(p.rank)},
          {"COLL_SIZE", std::to_string(np)},
          {"COLL_LOCAL_RANK", std::to_string(p.localRank)},
          {"COLL_LOCAL_SIZE", std::to_string(p.localSize)},
          {kRootAddrVar, job.rootAddr},
          {kSecretVar, job.secret},
          {"COLL_JOB_ID", job.jobId}};
}

EnvList exportedVariables(const std::vector<EnvExport>& exports, char** environ,
                          std::vector<std::string>* missing) {
  std::map<std::string, std::string> current;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) current.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  EnvList out;
  for (const EnvExport& x : exports) {
    if (x.value) {
      out.emplace_back(x.name, *x.value);
    } else if (auto it = current.find(x.name); it != current.end()) {
      out.emplace_back(x.name, it->second);
    } else if (missing) {
      missing->push_back(x.name);
    }
  }
  return out;
}

EnvList collVariables(char** environ) {
  static const char* const kPerRank[] = {"COLL_RANK",       "COLL_SIZE",  "COLL_LOCAL_RANK",
                                         "COLL_LOCAL_SIZE", kRootAddrVar, kSecretVar,
                                         "COLL_JOB_ID"};
  EnvList out;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq || std::strncmp(*e, "COLL_", 5) != 0) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    bool perRank = false;
    for (const char* k : kPerRank) perRank = perRank || name == k;
    if (!perRank) out.emplace_back(name, eq + 1);
  }
  return out;
}

std::vector<std::string> mergeEnvironment(char** base, const EnvList& overrides) {
  std::map<std::string, std::string> final;
  std::vector<std::string> order;  // keep the inherited order; new names go last
  auto put = [&](const std::string& name, const std::string& value) {
    if (final.find(name) == final.end()) order.push_back(name);
    final[name] = value;
  };
  for (char** e = base; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) put(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  for (const auto& [name, value] : overrides) put(name, value);
  std::vector<std::string> out;
  out.reserve(order.size());
  for (const std::string& name : order) out.push_back(name + "=" + final[name]);
  return out;
}

std::string shellQuote(const std::string& s) {
  bool safe = !s.empty();
  for (char c : s) safe = safe && isSafeShellChar(c);
  if (safe) return s;
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

std::vector<std::string> remoteCommand(const std::vector<std::string>& ssh,
                                       const std::string& host, const std::string& cwd,
                                       const EnvList& vars,
                                       const std::vector<std::string>& program) {
  std::string run = "env";
  for (const auto& [name, value] : vars) run.append(" ").append(shellQuote(name + "=" + value));
  for (const std::string& arg : program) run.append(" ").append(shellQuote(arg));
  // A non-interactive shell gives background jobs /dev/null as stdin, so the watcher
  // reads the connection through fd 3. Its output goes to /dev/null so that sshd does not
  // wait for it after the rank is done.
  std::string script =
      "read -r COLL_JOB_SECRET || exit 255; export COLL_JOB_SECRET; exec 3<&0; "
      "cd " + shellQuote(cwd) + " 2>/dev/null; " +
      run + " </dev/null 3<&- & p=$!; "
      "(cat >/dev/null; kill -TERM $p; sleep 3; kill -KILL $p) <&3 >/dev/null 2>&1 & w=$!; "
      "exec 3<&-; wait $p; s=$?; kill $w 2>/dev/null; exit $s";
  std::vector<std::string> argv = ssh;
  argv.push_back(host);
  argv.push_back("sh -c " + shellQuote(script));
  return argv;
}

}  // namespace coll::launcher
