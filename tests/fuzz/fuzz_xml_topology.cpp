// The hwloc XML topology loader (COLL_TOPO_FILE, a file from outside the process): what
// hwloc accepts goes through the library's extraction (packages, NUMA parts, GPUs, NICs,
// NVLink, PCI paths), which must cope with any tree hwloc builds from it; what it does
// not is an error naming the file. The seeds include the topologies in tests/data/topo.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "base/error.hpp"
#include "topology/topology.hpp"

using namespace coll;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("HWLOC_XML_VERBOSE", "0", 1);
  setenv("HWLOC_HIDE_ERRORS", "1", 1);
  // hwloc loads its libxml2 reader as a plugin for each topology and unloads it after:
  // what leaks inside it is then reported from an unknown module, which no suppression
  // can name. Held open here (never unloaded), it keeps its name for tests/fuzz/lsan.supp.
  for (const char* plugin : {"/usr/lib/x86_64-linux-gnu/hwloc/hwloc_xml_libxml.so", "hwloc_xml_libxml.so"})
    if (dlopen(plugin, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE)) break;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("coll-fuzz-topo", MFD_CLOEXEC);
  if (fd < 0) abort();
  if (size && write(fd, data, size) != static_cast<ssize_t>(size)) abort();
  try {
    HostTopo t = loadXml("/proc/self/fd/" + std::to_string(fd));
    (void)cpuNumaCount(t);
    for (size_t g = 0; g < t.gpus.size(); ++g) (void)chooseNic(t, DevRef::gpu(static_cast<int>(g)), 0);
  } catch (const Error&) {
  }
  ::close(fd);
  return 0;
}
