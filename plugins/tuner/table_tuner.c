/* Example tuner plugin: a size-range table from the environment.
 *
 *   COLL_TUNER_PLUGIN=libcoll_tuner_table.so
 *   COLL_TUNER_TABLE="allreduce:0-64K=rd;allreduce:64K-=hier;broadcast:1M-=chain"
 *
 * Each rule is COLLECTIVE:LO-HI=ALGORITHM with sizes in bytes (K, M, G suffixes: powers
 * of two), HI exclusive, optional and above LO. The first rule that matches the call and
 * names an algorithm that can run it wins; otherwise the cost model's choice stands. The
 * table is read once per communicator: give every rank the same value.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_tuner.h"

#define MAX_RULES 64

typedef struct {
  int coll;
  size_t lo, hi; /* hi == SIZE_MAX: no upper bound */
  char algo[32];
} rule_t;

typedef struct {
  int count;
  rule_t rules[MAX_RULES];
} table_t;

static const char* const kColls[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"};

/* Parses a size like "64K"; returns 0 on success, -1 for a size that does not fit a
 * size_t (it would wrap, and the rule would cover other sizes than it says). */
static int parse_size(const char* s, size_t len, size_t* out) {
  if (len == 0) return -1;
  size_t v = 0, i = 0;
  for (; i < len && isdigit((unsigned char)s[i]); ++i) {
    size_t d = (size_t)(s[i] - '0');
    if (v > (SIZE_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (i == 0) return -1;
  if (i < len) {
    int shift = s[i] == 'K' || s[i] == 'k' ? 10 : s[i] == 'M' || s[i] == 'm' ? 20 : s[i] == 'G' || s[i] == 'g' ? 30 : -1;
    if (shift < 0 || i + 1 != len || v > (SIZE_MAX >> shift)) return -1;
    v <<= shift;
  }
  *out = v;
  return 0;
}

/* One rule "coll:lo-hi=algo" of length len; returns 0 if it parsed. */
static int parse_rule(const char* s, size_t len, rule_t* r) {
  const char* colon = memchr(s, ':', len);
  const char* dash = colon ? memchr(colon, '-', len - (size_t)(colon - s)) : NULL;
  const char* eq = dash ? memchr(dash, '=', len - (size_t)(dash - s)) : NULL;
  if (!eq) return -1;
  r->coll = -1;
  for (int c = 0; c < 6; ++c)
    if ((size_t)(colon - s) == strlen(kColls[c]) && strncmp(s, kColls[c], (size_t)(colon - s)) == 0) r->coll = c;
  if (r->coll < 0) return -1;
  if (parse_size(colon + 1, (size_t)(dash - colon - 1), &r->lo) != 0) return -1;
  r->hi = SIZE_MAX;
  if (eq > dash + 1 && parse_size(dash + 1, (size_t)(eq - dash - 1), &r->hi) != 0) return -1;
  if (r->hi <= r->lo) return -1; /* an empty range: a typo, not a rule */
  size_t alen = len - (size_t)(eq + 1 - s);
  if (alen == 0 || alen >= sizeof r->algo) return -1;
  memcpy(r->algo, eq + 1, alen);
  r->algo[alen] = 0;
  return 0;
}

static int table_init(const collTunerJob_t* job, void** context) {
  (void)job;
  table_t* t = calloc(1, sizeof *t);
  if (!t) return 1;
  const char* spec = getenv("COLL_TUNER_TABLE");
  while (spec && *spec) {
    size_t len = strcspn(spec, ";,");
    if (len > 0) {
      if (t->count == MAX_RULES || parse_rule(spec, len, &t->rules[t->count]) != 0) {
        free(t);
        return 2; /* a bad table is an error the library reports, not a silent no-op */
      }
      ++t->count;
    }
    spec += len + (spec[len] ? 1 : 0);
  }
  *context = t;
  return 0;
}

static int table_get(void* context, const collTunerQuery_t* q, int* choice) {
  const table_t* t = context;
  *choice = -1;
  for (int i = 0; i < t->count; ++i) {
    const rule_t* r = &t->rules[i];
    if (r->coll != (int)q->coll || q->bytes < r->lo || q->bytes >= r->hi) continue;
    for (int a = 0; a < q->numAlgorithms; ++a)
      if (strcmp(q->algorithms[a], r->algo) == 0) {
        *choice = a;
        return 0;
      }
  }
  return 0;
}

static void table_finalize(void* context) { free(context); }

__attribute__((visibility("default"))) const collTunerPlugin_v1_t collTunerPlugin_v1 = {
    COLL_TUNER_PLUGIN_VERSION, "table", table_init, table_get, table_finalize,
};
