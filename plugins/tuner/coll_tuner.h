/* libcollective tuner plugin interface, version 1.
 *
 * A tuner plugin is a shared library named by COLL_TUNER_PLUGIN (a path, or a name that
 * dlopen finds). It exports one symbol, COLL_TUNER_SYMBOL, of type collTunerPlugin_v1_t.
 * For every collective call the library computes its cost model's estimate for each
 * algorithm that can run the call and asks the plugin; the plugin may pick one of them or
 * leave the model's choice.
 *
 * Every rank must pick the same algorithm for the same call. Ranks that run different
 * algorithms fail the call (a message size mismatch, or COLL_TIMEOUT) or, where their
 * messages happen to fit, return wrong results with success. When a communicator forms,
 * the ranks ask their plugins about a fixed grid of calls (each collective, 1 B to 16 GiB,
 * a few types and operations) and compare the answers: a difference fails the creation
 * with collInvalidArgument, naming a call and the ranks' picks. A plugin whose choices
 * differ only elsewhere, or change later, is not caught. So decide from the arguments
 * only (and from inputs that are the same on every rank, such as a file or environment
 * variable that the launcher gives all ranks alike), never from timings or per-rank
 * state.
 *
 * Versioning: the struct is versioned by its symbol name and its `version` field. A
 * future version 2 adds a new symbol; the library looks for the newest it understands.
 * Plugins must not assume anything about fields beyond those of their version.
 */
#ifndef COLL_TUNER_H_
#define COLL_TUNER_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_TUNER_PLUGIN_VERSION 1
#define COLL_TUNER_SYMBOL "collTunerPlugin_v1"

typedef enum {
  collTunerAllReduce = 0,
  collTunerBroadcast = 1,
  collTunerReduce = 2,
  collTunerAllGather = 3,
  collTunerReduceScatter = 4,
  collTunerAllToAll = 5,
} collTunerColl_t;

/* The communicator, as seen once when the plugin is initialised for it. */
typedef struct {
  int nranks;
  int nhosts;
  int maxLocalRanks; /* ranks on the most populated host */
} collTunerJob_t;

/* One call. bytes: the buffer for all-reduce, broadcast and reduce; one rank's block for
 * all-gather, reduce-scatter and all-to-all. datatype and redop are collDataType_t and
 * collRedOp_t values (collective.h). */
typedef struct {
  collTunerColl_t coll;
  size_t bytes;
  int datatype;
  int redop;
  int numAlgorithms;
  const char* const* algorithms; /* names as COLL_ALGO spells them: "ring", "tree", ... */
  const double* costUs;          /* the model's estimate per algorithm; may be +infinity */
  int modelChoice;               /* index the model would pick */
} collTunerQuery_t;

typedef struct {
  int version;      /* COLL_TUNER_PLUGIN_VERSION */
  const char* name; /* for logs */
  /* Called once per communicator, when it forms. Returns 0 on success; *context goes to
   * the other calls. Where init fails on any rank, no rank uses the plugin for that
   * communicator (the cost model decides everywhere). */
  int (*init)(const collTunerJob_t* job, void** context);
  /* Sets *choice to an index into query->algorithms, or to -1 to keep the model's choice.
   * Returns 0 on success; on failure the library keeps the model's choice and warns. */
  int (*getAlgorithm)(void* context, const collTunerQuery_t* query, int* choice);
  /* Called once when the communicator is destroyed. */
  void (*finalize)(void* context);
} collTunerPlugin_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* COLL_TUNER_H_ */
