/* A framework's view of an installed libcollective: only <collective.h> (and the tuner
 * plugin and engine headers) from the installed include directory, linked with pkg-config's flags.
 * Built as C99 and C11 with -Wall -Wextra -pedantic -Werror by install_test.sh. */
#include <collective.h>
#include <collective/coll_tuner.h>
#include <collective/hvd.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  collUniqueId id;
  collComm_t comm = NULL;
  float x[3] = {1.0f, 2.0f, 3.0f};
  if (collGetVersion(&version) != collSuccess || version != COLL_VERSION_CODE) {
    fprintf(stderr, "collGetVersion says %d, the installed header %d\n", version, COLL_VERSION_CODE);
    return 1;
  }
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&comm, 1, id, 0) != collSuccess) {
    fprintf(stderr, "init: %s\n", collGetLastError(NULL));
    return 1;
  }
  if (collAllReduce(x, x, 3, collFloat32, collSum, comm, NULL) != collSuccess || x[2] != 3.0f) {
    fprintf(stderr, "allreduce: %s\n", collGetLastError(comm));
    return 1;
  }
  if (collCommDestroy(comm) != collSuccess) return 1;
  /* The engine's C interface links, and answers a call before init with a reason. */
  if (collHvdIsInitialized() != 0 || collHvdBarrier(0) != collInvalidUsage || !collHvdLastError()[0]) {
    fprintf(stderr, "engine interface: unexpected answer before init\n");
    return 1;
  }
  printf("C consumer: OK (version %d, tuner interface %d)\n", version, COLL_TUNER_PLUGIN_VERSION);
  return 0;
}
