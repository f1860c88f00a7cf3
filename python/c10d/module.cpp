// The extension module collective._c10d: makes the "collective" process group for
// torch.distributed (collective/distributed.py registers it as a backend).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "process_group.hpp"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> createProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, std::chrono::milliseconds timeout) {
  return c10::make_intrusive<collective_c10d::ProcessGroupCollective>(store, rank, size, timeout);
}

// Under a launcher (collectiverun, mpirun, srun): rank 0's `text` to every rank, through a
// communicator of the launcher's job (collCommInitFromEnv) made for this one broadcast.
std::string broadcastFromLauncherRoot(const std::string& text) {
  collComm_t comm = nullptr;
  auto fail = [&](collResult_t rc, const char* call) {
    std::string msg = std::string("collective: ") + call + " failed: " + collGetErrorString(rc) + ": " +
                      collGetLastError(comm);
    if (comm) collCommDestroy(comm);
    throw std::runtime_error(msg);
  };
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collSuccess) fail(rc, "collCommInitFromEnv");
  int rank = 0;
  collCommUserRank(comm, &rank);
  char buf[512] = {};
  if (rank == 0) {
    if (text.size() >= sizeof(buf)) {
      collCommDestroy(comm);
      throw std::runtime_error("collective: address text too long");
    }
    std::memcpy(buf, text.data(), text.size());
  }
  rc = collBroadcast(buf, buf, sizeof(buf), collInt8, 0, comm, nullptr);
  if (rc != collSuccess) fail(rc, "collBroadcast");
  collCommDestroy(comm);
  return std::string(buf);
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "libcollective's process group for torch.distributed";
  m.def("create_process_group", &createProcessGroup, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Makes a process group of `size` ranks over libcollective, rendezvousing through `store`.");
  m.def("broadcast_from_launcher_root", &broadcastFromLauncherRoot, py::arg("text"),
        py::call_guard<py::gil_scoped_release>(),
        "Rank 0's text on every rank of the job started by collectiverun, mpirun or srun.");
}
