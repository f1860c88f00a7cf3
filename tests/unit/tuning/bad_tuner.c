/* Broken tuner plugins for the loader's error paths, selected at build time:
 * BAD_VERSION exports a struct of an unknown version; otherwise init fails. */
#include "../../../plugins/tuner/coll_tuner.h"

static int init(const collTunerJob_t* job, void** ctx) {
  (void)job;
  *ctx = 0;
#ifdef BAD_VERSION
  return 0;
#else
  return 7;
#endif
}
static int get(void* ctx, const collTunerQuery_t* q, int* choice) {
  (void)ctx;
  (void)q;
  *choice = 0;
  return 0;
}
static void fin(void* ctx) { (void)ctx; }

#ifdef BAD_VERSION
const collTunerPlugin_v1_t collTunerPlugin_v1 = {99, "bad-version", init, get, fin};
#else
const collTunerPlugin_v1_t collTunerPlugin_v1 = {COLL_TUNER_PLUGIN_VERSION, "bad-init", init, get, fin};
#endif
