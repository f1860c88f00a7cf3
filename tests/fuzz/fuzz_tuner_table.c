/* The example tuner plugin's table (COLL_TUNER_TABLE, a string from the user's
 * environment): every input either parses or fails init, and a table that parses answers
 * every query with an index in range or -1. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/tuner/table_tuner.c"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (memchr(data, 0, size)) return 0; /* not an environment string */
  char* spec = malloc(size + 1);
  if (!spec) return 0;
  memcpy(spec, data, size);
  spec[size] = 0;
  setenv("COLL_TUNER_TABLE", spec, 1);
  free(spec);
  void* ctx = NULL;
  if (table_init(NULL, &ctx) != 0) return 0;
  static const char* const algos[] = {"rd", "ring", "hier", "chain", "tree"};
  static const double cost[] = {1, 2, 3, 4, 5};
  const size_t sizes[] = {0, 1, 4096, (size_t)1 << 20, SIZE_MAX};
  for (int coll = 0; coll < 6; ++coll)
    for (int s = 0; s < 5; ++s) {
      collTunerQuery_t q;
      memset(&q, 0, sizeof q);
      q.coll = (collTunerColl_t)coll;
      q.bytes = sizes[s];
      q.numAlgorithms = 5;
      q.algorithms = algos;
      q.costUs = cost;
      int choice = -2;
      table_get(ctx, &q, &choice);
      if (choice < -1 || choice >= 5) abort();
    }
  table_finalize(ctx);
  return 0;
}
