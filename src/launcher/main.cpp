// collectiverun: starts the ranks of a libcollective job on this host and, through ssh,
// on others; tags their output; ends the whole job when any rank fails. See
// doc/launch.md for the environment each rank gets.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include "base/error.hpp"
#include "launcher/job.hpp"
#include "launcher/options.hpp"
#include "launcher/placement.hpp"
#include "launcher/rankenv.hpp"

namespace coll::launcher {
namespace {

// BatchMode: fail instead of prompting for a password nobody can type (stdin is ours).
constexpr const char* kDefaultSsh = "ssh -o BatchMode=yes -T -x";
constexpr int kNotFoundExit = 127;

std::string currentDir() {
  std::vector<char> buf(4096);
  return ::getcwd(buf.data(), buf.size()) ? std::string(buf.data()) : std::string(".");
}

// The CPUs this launcher may use, in order.
std::vector<int> launcherCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

RankLaunch localLaunch(const Options& o, const RankPlace& p, const EnvList& exports,
                       const JobIdentity& job, int localIndex, int localRanks) {
  RankLaunch l;
  l.rank = p.rank;
  static const std::vector<int> cpus = launcherCpus();
  l.request.cpus = bindingFor(o.bindTo, localIndex, localRanks, cpus);
  EnvList overrides = exports;
  for (auto& kv : rankVariables(p, o.np, job)) overrides.push_back(std::move(kv));
  l.request.argv = o.program;
  l.request.env = mergeEnvironment(environ, overrides);
  l.request.pipeOutput = o.tagOutput;
  return l;
}

RankLaunch remoteLaunch(const Options& o, const RankPlace& p, const EnvList& exports,
                        const JobIdentity& job, const std::string& cwd) {
  RankLaunch l;
  l.rank = p.rank;
  l.host = p.host;
  l.remote = true;
  EnvList vars = collVariables(environ);
  for (const auto& kv : exports) vars.push_back(kv);
  for (auto& kv : rankVariables(p, o.np, job))
    if (kv.first != kSecretVar) vars.push_back(std::move(kv));
  l.request.argv = remoteCommand(o.sshCommand, p.host, cwd, vars, o.program);
  l.request.env = mergeEnvironment(environ, {});
  l.request.pipeOutput = o.tagOutput;
  l.request.stdinPipe = true;
  l.stdinLine = job.secret + "\n";
  return l;
}

int runJob(const Options& o) {
  LocalIdentity me = LocalIdentity::probe();
  std::vector<RankPlace> places =
      placeRanks(o.np, o.hosts, [&me](const std::string& h) { return me.isLocal(h); });
  bool anyLocal = false;
  for (const RankPlace& p : places) anyLocal = anyLocal || p.local;
  if (anyLocal && findProgram(o.program[0], std::getenv("PATH")).empty()) {
    bool isPath = o.program[0].find('/') != std::string::npos;
    std::fprintf(stderr, "collectiverun: program '%s' %s\n", o.program[0].c_str(),
                 isPath ? "is not an executable file" : "was not found in PATH");
    return kNotFoundExit;
  }
  std::vector<std::string> missing;
  EnvList exports = exportedVariables(o.exports, environ, &missing);
  for (const std::string& name : missing)
    std::fprintf(stderr, "collectiverun: warning: -x %s: not set here, not forwarded\n",
                 name.c_str());
  JobIdentity job = makeJobIdentity(places, me.hostname, std::getenv(kRootAddrVar));
  std::string cwd = currentDir();
  std::vector<RankLaunch> launches;
  int localRanks = 0;
  for (const RankPlace& p : places) localRanks += p.local;
  int localIndex = 0;
  for (const RankPlace& p : places)
    launches.push_back(p.local ? localLaunch(o, p, exports, job, localIndex++, localRanks)
                               : remoteLaunch(o, p, exports, job, cwd));
  std::string elasticDir;
  if (o.elastic) {
    // The ranks leave grow requests here (ElasticPolicy); they learn the bounds too.
    char tmpl[] = "/tmp/collectiverun-elastic-XXXXXX";
    if (!::mkdtemp(tmpl)) COLL_THROW(collSystemError, "mkdtemp for --elastic: ", std::strerror(errno));
    elasticDir = tmpl;
    const int minNp = o.minNp ? o.minNp : 1, maxNp = o.maxNp ? o.maxNp : o.np;
    for (RankLaunch& l : launches)
      for (const auto& kv : EnvList{{"COLL_ELASTIC_DIR", elasticDir},
                                    {"COLL_ELASTIC_MIN_NP", std::to_string(minNp)},
                                    {"COLL_ELASTIC_MAX_NP", std::to_string(maxNp)}})
        l.request.env.push_back(kv.first + "=" + kv.second);
  }
  Job j(std::move(launches), o.timeoutSec);
  if (o.elastic) {
    ElasticPolicy e;
    e.minNp = o.minNp ? o.minNp : 1;
    e.maxNp = o.maxNp ? o.maxNp : o.np;
    e.dir = elasticDir;
    // Joiners start on this host, with the environment of a local rank.
    RankPlace here{};
    here.rank = 0;
    here.local = true;
    here.localSize = 1;
    e.joiner = localLaunch(o, here, exports, job, 0, 1);
    for (const auto& kv : EnvList{{"COLL_ELASTIC_DIR", elasticDir},
                                  {"COLL_ELASTIC_MIN_NP", std::to_string(e.minNp)},
                                  {"COLL_ELASTIC_MAX_NP", std::to_string(e.maxNp)}})
      e.joiner.request.env.push_back(kv.first + "=" + kv.second);
    j.setElastic(std::move(e));
  }
  const int rc = j.run();
  if (!elasticDir.empty()) {
    if (DIR* d = ::opendir(elasticDir.c_str())) {
      while (dirent* ent = ::readdir(d))
        if (ent->d_name[0] != '.' || (std::strcmp(ent->d_name, ".") && std::strcmp(ent->d_name, "..")))
          ::unlink((elasticDir + "/" + ent->d_name).c_str());
      ::closedir(d);
    }
    ::rmdir(elasticDir.c_str());
  }
  return rc;
}

}  // namespace
}  // namespace coll::launcher

int main(int argc, char** argv) {
  using namespace coll::launcher;
  // A closed stdout must not kill the launcher and orphan the ranks; writes report EPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // A closed stdin, stdout or stderr would be reused for the launcher's own pipes or
  // signalfd, and rank output written there (or waited for: one never polls writable).
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) (void)::open("/dev/null", O_RDWR);
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* sshEnv = std::getenv("COLLECTIVERUN_SSH");
  Options o;
  try {
    o = parseOptions(args, sshEnv && *sshEnv ? sshEnv : kDefaultSsh);
  } catch (const coll::Error& e) {
    std::fprintf(stderr, "collectiverun: %s\n\n%s", e.what(), shortUsage().c_str());
    return 2;
  }
  if (o.help) {
    std::fputs(usageText().c_str(), stdout);
    return 0;
  }
  try {
    return runJob(o);
  } catch (const coll::Error& e) {
    std::fprintf(stderr, "collectiverun: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Each rank's launch holds a copy of the environment: a huge -np can exhaust memory.
    std::fprintf(stderr, "collectiverun: out of memory while preparing or running %d rank(s)\n", o.np);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectiverun: %s\n", e.what());
    return 1;
  }
}
