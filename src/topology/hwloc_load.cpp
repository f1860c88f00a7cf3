// Loading a topology with hwloc (this machine or an XML file), annotating it from sysfs,
// and dumping it (COLL_TOPO_DUMP_FILE).
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/sha256.hpp"
#include "topology/hwloc_internal.hpp"

namespace coll {

COLL_PARAM(kTopoFile, "COLL_TOPO_FILE", "", "hwloc XML topology to use instead of discovering this machine");
COLL_PARAM(kTopoDump, "COLL_TOPO_DUMP_FILE", "", "write the topology used as hwloc XML (%h host, %p pid)");
COLL_PARAM(kTopoCache, "COLL_TOPO_CACHE", "auto",
           "directory where the processes of one machine share its discovered topology (auto: "
           "$XDG_RUNTIME_DIR, else /tmp; 0: every process discovers)");

namespace {

class Hwloc {
 public:
  Hwloc() {
    if (hwloc_topology_init(&t_) != 0)
      COLL_THROW(collSystemError, "topology: hwloc_topology_init failed: ", sysErrorText(errno));
  }
  ~Hwloc() { hwloc_topology_destroy(t_); }
  Hwloc(const Hwloc&) = delete;
  Hwloc& operator=(const Hwloc&) = delete;
  hwloc_topology_t get() const { return t_; }
  // Back to a fresh, unloaded topology (after a load that failed).
  void reset() {
    hwloc_topology_t fresh = nullptr;
    if (hwloc_topology_init(&fresh) != 0)
      COLL_THROW(collSystemError, "topology: hwloc_topology_init failed: ", sysErrorText(errno));
    hwloc_topology_destroy(t_);
    t_ = fresh;
  }

 private:
  hwloc_topology_t t_ = nullptr;
};

// The major version of an hwloc XML file's <topology version="M.m"> tag (near its start),
// or -1 when there is none to read.
int xmlMajorVersion(const std::string& path) {
  std::ifstream f(path);
  std::string head(4096, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  const std::string tag = "<topology version=\"";
  const size_t at = head.find(tag);
  if (at == std::string::npos) return -1;
  int major = 0;
  size_t i = at + tag.size();
  for (; i < head.size() && i < at + tag.size() + 4 && isdigit(static_cast<unsigned char>(head[i])); ++i)
    major = major * 10 + (head[i] - '0');
  return i > at + tag.size() && i < head.size() && head[i] == '.' ? major : -1;
}

// hwloc numbers the bits of a PU's cpuset and of a NUMA node's nodeset by the object's
// os_index, and gives an object without one the index 2^32 - 1: a file with a PU or NUMA
// node lacking it (or with an index near that) makes hwloc build bitmaps of 512 MB and
// spend seconds on each (found by fuzzing). Such a file is refused before hwloc reads it,
// as is one that would crash hwloc (below).
constexpr unsigned long kMaxOsIndex = 1ul << 20;

// Whether v is written the way hwloc writes a bitmap and hwloc_bitmap_sscanf can read
// it: "0xf...f" (every bit), or comma-separated hex words of at most 32 bits, each with
// its 0x, after an optional "0xf...f," (every bit above them). hwloc asserts (aborting the
// process) on some other strings, a leading comma for one (found by fuzzing).
bool plausibleBitmap(const std::string& v) {
  size_t i = 0;
  if (v.compare(0, 7, "0xf...f") == 0) {
    if (v.size() == 7) return true;
    if (v[7] != ',') return false;
    i = 8;
  }
  size_t words = 0;
  for (;;) {
    if (v.compare(i, 2, "0x") != 0) return false;
    i += 2;
    size_t digits = 0;
    while (i < v.size() && isxdigit(static_cast<unsigned char>(v[i]))) ++i, ++digits;
    if (digits == 0 || digits > 8 || ++words > kMaxOsIndex / 32) return false;
    if (i == v.size()) return true;
    if (v[i++] != ',') return false;
  }
}

void checkBeforeHwloc(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto lineOf = [&](size_t at) { return 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'); };
  // Every bitmap attribute (cpuset, complete_nodeset, allowed_cpuset, ...), wherever it is.
  for (size_t at = text.find("set=\""); at != std::string::npos; at = text.find("set=\"", at + 5)) {
    if (at == 0 || !(isalpha(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
    const size_t from = at + 5, to = text.find('"', from);
    size_t name = at;
    while (name > 0 && (isalpha(static_cast<unsigned char>(text[name - 1])) || text[name - 1] == '_')) --name;
    if (to == std::string::npos || !plausibleBitmap(text.substr(from, to - from)))
      COLL_THROW(collInvalidArgument, what, ": '", path, "' line ", lineOf(at), ": ", text.substr(name, at + 3 - name),
                 " is not a bitmap as hwloc writes one (0x-prefixed hex words separated by commas)");
  }
  for (size_t at = text.find("<object"); at != std::string::npos; at = text.find("<object", at + 7)) {
    const size_t end = text.find('>', at);
    const std::string tag = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    // hwloc dereferences an object's complete sets wherever its sets are given: one
    // missing is a crash inside hwloc_topology_load (found by fuzzing too).
    for (const char* set : {"cpuset", "nodeset"})
      if (tag.find(strCat(" ", set, "=\"")) != std::string::npos &&
          tag.find(strCat(" complete_", set, "=\"")) == std::string::npos)
        COLL_THROW(collInvalidArgument, what, ": '", path, "' line ", lineOf(at), ": an object with a ", set,
                   " but no complete_", set);
    if (tag.find(" type=\"PU\"") == std::string::npos && tag.find(" type=\"NUMANode\"") == std::string::npos) continue;
    const size_t k = tag.find(" os_index=\"");
    unsigned long idx = kMaxOsIndex;
    if (k != std::string::npos) {
      const char* digits = tag.c_str() + k + 11;
      char* stop = nullptr;
      idx = isdigit(static_cast<unsigned char>(*digits)) ? strtoul(digits, &stop, 10) : kMaxOsIndex;
      if (!stop || *stop != '"') idx = kMaxOsIndex;
    }
    if (idx >= kMaxOsIndex) {
      COLL_THROW(collInvalidArgument, what, ": '", path, "' line ", lineOf(at), ": a ",
                 tag.find("\"PU\"") != std::string::npos ? "PU" : "NUMA node",
                 " without a plausible os_index (a number below ", kMaxOsIndex, ")");
    }
  }
}

// hwloc drops IO objects unless asked. A file keeps everything its author wrote; the live
// machine keeps the devices that matter (GPUs, NICs, storage) and the bridges above them.
void loadXmlInto(Hwloc& h, const std::string& path, const char* what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    COLL_THROW(collInvalidArgument, what, ": cannot read the hwloc XML file '", path, "': ", sysErrorText(errno));
  COLL_CHECK_ARG(S_ISREG(st.st_mode), what, ": '", path, "' is not a regular file");
  // hwloc reports any failure as an unloadable file: tell a permission problem apart.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    COLL_THROW(collInvalidArgument, what, ": cannot read the hwloc XML file '", path, "': ", sysErrorText(errno));
  close(fd);
  checkBeforeHwloc(path, what);
  hwloc_topology_set_io_types_filter(h.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_set_xml(h.get(), path.c_str()) == 0 && hwloc_topology_load(h.get()) == 0) return;
  const unsigned api = hwloc_get_api_version();  // of the library loaded (an API number, not the release)
  const int major = xmlMajorVersion(path);
  if (major > static_cast<int>(api >> 16))
    COLL_THROW(collInvalidArgument, what, ": '", path, "' is an hwloc XML version ", major, " file (written by hwloc ",
               major, ".x), and the hwloc ", api >> 16, ".x this library runs with reads version 2: export it as version 2, "
               "with hwloc 3.x's 'lstopo --of v2xml FILE.xml' (or --export-xml-flags v2), or with hwloc 2.x's "
               "'lstopo FILE.xml'");
  COLL_THROW(collInvalidArgument, what, ": '", path,
             "' is not an hwloc XML topology that hwloc can load (write it with hwloc-ls --of xml; "
             "hwloc ", api >> 16, ".x reads XML v2)");
}

void loadThisMachine(Hwloc& h) {
  hwloc_topology_set_io_types_filter(h.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(h.get()) != 0)
    COLL_THROW(collSystemError, "topology: hwloc could not discover this machine: ", sysErrorText(errno));
}

std::string readLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// What hwloc does not record but sysfs knows: NIC speeds and the verbs link layer.
void annotateFromSysfs(hwloc_topology_t t) {
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o));) {
    uint64_t mbps = 0;
    if (rawEnum(o->attr->osdev.type) == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      std::string port = std::string("/sys/class/infiniband/") + o->name + "/ports/1/";
      mbps = parseIbRateMbps(readLine(port + "rate"));
      std::string layer = readLine(port + "link_layer");
      if (!layer.empty() && !hwloc_obj_get_info_by_name(o, kLinkLayerInfo))
        hwloc_obj_add_info(o, kLinkLayerInfo, layer.c_str());
    } else if (rawEnum(o->attr->osdev.type) == HWLOC_OBJ_OSDEV_NETWORK) {
      long v = strtol(readLine(std::string("/sys/class/net/") + o->name + "/speed").c_str(), nullptr, 10);
      mbps = v > 0 ? static_cast<uint64_t>(v) : 0;  // -1 or empty while the link is down
    }
    if (mbps && mbps <= kMaxSpeedMbps && !hwloc_obj_get_info_by_name(o, kSpeedInfo))
      hwloc_obj_add_info(o, kSpeedInfo, std::to_string(mbps).c_str());
  }
}

std::string expandDumpPath(std::string path) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  for (size_t i = 0; (i = path.find('%', i)) != std::string::npos;) {
    char c = i + 1 < path.size() ? path[i + 1] : 0;
    if (c != 'h' && c != 'p') {
      ++i;
      continue;
    }
    std::string with = c == 'h' ? std::string(host) : std::to_string(getpid());
    path.replace(i, 2, with);
    i += with.size();
  }
  return path;
}

// Written to a temporary name and renamed, so ranks of one host dumping to the same path
// never leave a file mixed from two writers. A failed dump is a warning, not a failed job.
void dump(hwloc_topology_t t, const std::string& pattern) {
  std::string path = expandDumpPath(pattern);
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  if (hwloc_topology_export_xml(t, tmp.c_str(), 0) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    COLL_WARN("%s=%s: could not write the topology to %s: %s", kTopoDump, pattern.c_str(), path.c_str(),
              sysErrorText(errno).c_str());
    unlink(tmp.c_str());
    return;
  }
  COLL_INFO("topology written to %s", path.c_str());
}

// ---------------------------------------------------------------- machine cache
//
// Discovery costs each process 10-20 ms of CPU here (and far more on a GPU server, where
// hwloc asks the drivers), the same answer in every process of the machine: hundreds of
// ranks starting on a few cores spend seconds on it. The first process writes what hwloc
// found (before the sysfs annotations, which are read afresh every time) as XML into a
// file of its user's; the others of the same machine load that instead, while it is
// fresh. The name holds a digest of everything the answer depends on: the boot, the
// host, the hwloc library, the process's cgroups (a container's or a job step's cpuset
// changes what hwloc reports), its network and mount namespaces and any HWLOC_*
// variable; a file not owned by this user, writable by others, or older than
// kCacheTtlSec is not used.

constexpr int kCacheTtlSec = 600;
constexpr int kCacheFormat = 1;  // bump when what is cached changes
// How long a process waits for another one that is discovering to publish the file.
constexpr int kCacheWaitMs = 2000;
constexpr int kCacheLockStaleSec = 10;

std::string readSmall(const char* path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string cacheDir(const Config& cfg) {
  const std::string& v = cfg.getStr(kTopoCache);
  if (v == "0" || v == "off" || v == "none") return "";
  if (v != "auto" && !v.empty()) return v;
  const char* run = getenv("XDG_RUNTIME_DIR");
  struct stat st {};
  if (run && *run && stat(run, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) return run;
  const char* tmp = getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

std::string cachePath(const std::string& dir) {
  std::string key = strCat("format ", kCacheFormat, "\nhwloc ", hwloc_get_api_version(), "\nboot ",
                           readSmall("/proc/sys/kernel/random/boot_id"), "\ncgroup ", readSmall("/proc/self/cgroup"));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  key += strCat("\nhost ", host);
  // A network namespace sees its own interfaces, a mount namespace (a container) its own
  // /sys: each gets its own file.
  for (const char* ns : {"/proc/self/ns/net", "/proc/self/ns/mnt"}) {
    char link[128] = {0};
    if (readlink(ns, link, sizeof link - 1) > 0) key += strCat("\nns ", link);
  }
  std::vector<std::string> hw;
  for (char** e = environ; e && *e; ++e)
    if (strncmp(*e, "HWLOC_", 6) == 0) hw.emplace_back(*e);
  std::sort(hw.begin(), hw.end());
  for (const auto& e : hw) key += "\nenv " + e;
  uint8_t digest[32];
  sha256(key.data(), key.size(), digest);
  char hex[17] = {0};
  for (int i = 0; i < 8; ++i) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return strCat(dir, "/collective-topo-", geteuid(), "-", hex, ".xml");
}

// Whether `path` is a cache file this process may trust: ours, not writable by others,
// a regular file (not followed through a link), and fresh.
bool usableCacheFile(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  const time_t now = time(nullptr);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    COLL_INFO("topology cache %s: not used (not a regular file of this user's, or writable by others)", path.c_str());
    return false;
  }
  return st.st_mtime <= now + 5 && now - st.st_mtime < kCacheTtlSec;
}

bool loadCached(Hwloc& h, const std::string& path) {
  if (!usableCacheFile(path)) return false;
  try {
    checkBeforeHwloc(path, "topology cache");
  } catch (const Error& e) {
    COLL_INFO("topology cache %s: not used: %s", path.c_str(), e.what());
    return false;
  }
  hwloc_topology_set_io_types_filter(h.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
  // The file describes this very machine: let hwloc treat it as such.
  hwloc_topology_set_flags(h.get(), HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
  if (hwloc_topology_set_xml(h.get(), path.c_str()) == 0 && hwloc_topology_load(h.get()) == 0) return true;
  COLL_INFO("topology cache %s: hwloc could not load it; discovering", path.c_str());
  h.reset();
  return false;
}

// Written whole under a private name, then renamed over the cache's: a reader sees the
// old file or the new one, never a part. Any failure only costs the next process a
// discovery.
void storeCached(hwloc_topology_t t, const std::string& path) {
  char* xml = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(t, &xml, &len, 0) != 0 || !xml || len <= 1) {
    COLL_INFO("topology cache %s: hwloc could not export the topology", path.c_str());
    return;
  }
  const std::string tmp = strCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  for (size_t done = 0, n = static_cast<size_t>(len - 1); ok && done < n;) {  // len counts the final NUL
    ssize_t w = write(fd, xml + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    done += ok ? static_cast<size_t>(w) : 0;
  }
  hwloc_free_xmlbuffer(t, xml);
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (ok && rename(tmp.c_str(), path.c_str()) == 0) {
    COLL_INFO("topology cache: wrote %s", path.c_str());
    return;
  }
  COLL_INFO("topology cache %s: not written: %s", path.c_str(), sysErrorText(errno).c_str());
  if (fd >= 0) unlink(tmp.c_str());
}

// One process of the machine discovers while the others wait for its file (they would
// only slow it down, discovering the same thing on the same cores). The lock is a file
// created exclusively; one older than kCacheLockStaleSec belongs to a process that died
// or hangs, and is ignored. Returns whether this process holds the lock.
bool lockOrWait(const std::string& path, Hwloc& h, bool* loaded) {
  const std::string lock = path + ".lock";
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCacheWaitMs);
  for (;;) {
    int fd = open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
      return true;
    }
    if (errno != EEXIST) return false;
    struct stat st {};
    if (lstat(lock.c_str(), &st) == 0 && time(nullptr) - st.st_mtime > kCacheLockStaleSec) {
      COLL_INFO("topology cache: ignoring the stale lock %s", lock.c_str());
      return false;
    }
    if (loadCached(h, path)) {
      *loaded = true;
      return false;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// This machine's topology, through the cache when one is configured. Returns where it
// came from, for the log.
std::string loadThisMachineCached(Hwloc& h, const Config& cfg) {
  const std::string dir = cacheDir(cfg);
  if (dir.empty()) {
    loadThisMachine(h);
    return "hwloc";
  }
  const std::string path = cachePath(dir);
  if (loadCached(h, path)) return "hwloc, cached in " + path;
  bool loaded = false;
  const bool locked = lockOrWait(path, h, &loaded);
  if (loaded) return "hwloc, cached in " + path;
  loadThisMachine(h);
  storeCached(h.get(), path);
  if (locked) unlink((path + ".lock").c_str());
  return "hwloc";
}

}  // namespace

HostTopo loadXml(const std::string& path) {
  Hwloc h;
  loadXmlInto(h, path, "topology");
  return extractHostTopo(h.get(), "xml " + path);
}

HostTopo discoverLocal(const Config& cfg) {
  Hwloc h;
  const std::string& file = cfg.getStr(kTopoFile);
  std::string source = "xml " + file;
  if (!file.empty()) {
    loadXmlInto(h, file, kTopoFile);
  } else {
    source = loadThisMachineCached(h, cfg);
    annotateFromSysfs(h.get());
  }
  if (!cfg.getStr(kTopoDump).empty()) dump(h.get(), cfg.getStr(kTopoDump));
  HostTopo topo = extractHostTopo(h.get(), source);
  if (topo.hostname.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    topo.hostname = host;
  }
  COLL_INFO("topology of %s from %s: %zu packages, %zu NUMA nodes, %d cores, %zu GPUs, %zu NICs",
            topo.hostname.c_str(), topo.source.c_str(), topo.packages.size(), topo.numas.size(), topo.cores,
            topo.gpus.size(), topo.nics.size());
  return topo;
}

}  // namespace coll
