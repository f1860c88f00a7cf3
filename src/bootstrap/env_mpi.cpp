// Open MPI launch through MPI itself (built only when MPI is found): rank 0 makes the
// job id and serves the rendezvous, MPI_Bcast hands the id to everyone else.
// The C API is all we use; the deprecated C++ bindings only bring warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/env_internal.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/socket.hpp"

namespace coll {


namespace {

void finalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void mpiCheck(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  COLL_THROW(collSystemError, what, " failed: ", text);
}

}  // namespace

bool detectMpiLaunch(EnvLaunch* out, double timeoutSec) {
  int initialized = 0;
  mpiCheck(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    // We initialise MPI only to pass the id around, so we also finalise it; an
    // application that initialised MPI itself keeps that job.
    int provided = 0;
    mpiCheck(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    atexit(finalizeMpiAtExit);
  }
  int rank = 0, size = 0;
  mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  COLL_ENFORCE_EQ(rank, out->rank, collInvalidUsage, "MPI rank differs from OMPI_COMM_WORLD_RANK");
  COLL_ENFORCE_EQ(size, out->nranks, collInvalidUsage, "MPI size differs from OMPI_COMM_WORLD_SIZE");
  collUniqueId raw;
  memset(&raw, 0, sizeof(raw));
  if (rank == 0) {
    UniqueIdData id;
    randomSecret(id.secret, kSecretBytes);
    Config cfg = Config::fromEnv();
    // A job whose ranks all share this host needs no external interface.
    std::string ifname = cfg.getStr(kSocketIfnameEnv);
    if (ifname.empty() && out->localSize == size) ifname = "lo";
    id.root = RendezvousRoot::start(chooseLocalAddr(ifname), size, id.secret, timeoutSec);
    randomSecret(reinterpret_cast<uint8_t*>(&id.jobNonce), sizeof(id.jobNonce));
    raw = id.encode();
  }
  mpiCheck(MPI_Bcast(&raw, sizeof(raw), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast of the unique id");
  out->id = UniqueIdData::decode(raw);
  return true;
}

}  // namespace coll
