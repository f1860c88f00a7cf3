// The CPUs this process may run on.
#include <sched.h>

#include <cerrno>
#include <vector>

#include "base/error.hpp"
#include "topology/topology.hpp"

namespace coll {

std::vector<int> boundCpus() {
  // The kernel rejects a mask smaller than its own CPU count (EINVAL): grow until it fits.
  for (int ncpus = 1024; ncpus <= (1 << 20); ncpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    if (!set) COLL_THROW(collSystemError, "topology: out of memory for a CPU mask of ", ncpus, " CPUs");
    size_t bytes = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(bytes, set);
    int rc = sched_getaffinity(0, bytes, set);
    int err = errno;
    std::vector<int> cpus;
    if (rc == 0)
      for (int c = 0; c < ncpus; ++c)
        if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(c);
    CPU_FREE(set);
    if (rc == 0) return cpus;
    if (err != EINVAL) COLL_THROW(collSystemError, "topology: sched_getaffinity failed: ", sysErrorText(err));
  }
  COLL_THROW(collSystemError, "topology: sched_getaffinity rejected every CPU mask size up to 2^20");
}

}  // namespace coll
