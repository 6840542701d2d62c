/* policy_sim.h: the policy simulator (//tools:policy_sim, docs/POLICY_SIM.md):
 * how far a cache policy is from the best at a given number of resident
 * vectors. A trace that replay reads is loaded once into batches of distinct
 * keys with their next uses (sim_trace.c); each policy of sim_policy.h is
 * replayed over it by one driver (sim_run.c); fleche's own row is the real
 * library on its host backend (sim_fleche.c); sim_recovery.c measures how
 * fast a row recovers after the hot set moves; sim_report.c prints the table
 * and writes the JSON. */
#ifndef FL_TOOLS_POLICY_SIM_H
#define FL_TOOLS_POLICY_SIM_H

#include <stdio.h>

#include "tools/replay.h"
#include "tools/sim_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- trace */

typedef struct fl_sim_keymap fl_sim_keymap;

/* A trace in memory: per batch its distinct keys, most frequent first (ties:
 * the most recently looked up first). */
typedef struct fl_sim_trace {
  uint64_t n_batches;
  uint64_t n_keys;       /* distinct (table, id) pairs */
  uint64_t lookups;
  uint64_t n_entries;    /* distinct keys summed over batches */
  uint64_t first_use;    /* lookups in the batch that first looks their key up */
  uint64_t *first;       /* n_batches + 1: batch b is entry[first[b] .. first[b + 1]) */
  fl_sim_entry *entry;
  uint64_t cap_batches, cap_entries;
  fl_sim_keymap *map;    /* (table, id) -> key while the trace is built */
} fl_sim_trace;

/* Building: begin, one add per batch, end (which fills in the next uses and
 * drops the key map). Out of memory, or more than 2^32 - 2 batches or keys:
 * FL_ERR_OUT_OF_MEMORY / FL_ERR_INVALID_ARGUMENT. */
fl_status fl_sim_trace_begin(fl_sim_trace *t);
fl_status fl_sim_trace_add(fl_sim_trace *t, const fl_trace_batch *b);
fl_status fl_sim_trace_end(fl_sim_trace *t);
/* Loads `src` from its start, at most max_batches batches (0: all), and
 * rewinds it. Errors are printed. */
fl_status fl_sim_trace_read(fl_trace *src, uint64_t max_batches, fl_sim_trace *t);
void fl_sim_trace_free(fl_sim_trace *t);

/* ---------------------------------------------------------------- driver */

/* One row of the table. */
typedef struct fl_sim_result {
  const char *name;
  uint64_t capacity;    /* resident vectors at most */
  uint64_t budget_bytes; /* the library's cache budget (fleche), else 0 */
  uint64_t lookups, hits;
  uint64_t admissions, evictions;
  double seconds;       /* wall time of the replay */
  uint64_t batches;     /* replayed */
  double *batch_pct;    /* per replayed batch: its hit rate in %; owned */
} fl_sim_result;

/* Replays t through policy p with room for `capacity` (>= 1) keys. A policy
 * that breaks the rules of sim_policy.h fails the run with
 * FL_ERR_INVALID_ARGUMENT and a message in err. Whatever the status, r is
 * freed with fl_sim_result_free. */
fl_status fl_sim_run(const fl_sim_trace *t, const fl_sim_policy *p, uint64_t capacity, int quiet,
                     fl_sim_result *r, char *err, size_t err_len);
/* Frees what r owns; r zeroed (as {0} is) or filled by a run. */
void fl_sim_result_free(fl_sim_result *r);

/* -------------------------------------------------------------- recovery */

/* A row's recovery after the hot set moves at batch `from` (sim_recovery.c
 * gives the definition): its steady hit rate after the switch, the mean of
 * the last quarter of the batches from..n-1, and the batches from `from` until
 * its hit rate first comes within the tolerance of that, 0..n - from - 1. */
typedef struct fl_sim_recovery {
  uint64_t batches;
  double steady_pct;
} fl_sim_recovery;

/* The tolerance of policy_sim's recovery column, in points of hit rate. */
#define FL_SIM_RECOVERY_PTS 0.5

/* The recovery of the per-batch hit rates pct[0 .. n) (in %) from batch
 * `from` < n, within tol_pts points. */
fl_sim_recovery fl_sim_recovery_of(const double *pct, uint64_t n, uint64_t from, double tol_pts);

/* ---------------------------------------------------------------- fleche */

/* The vectors the slab pool of a flat host cache of `budget` bytes over
 * `store` holds (cache/'s own split of the budget into index and pool, at
 * the index load limit of `o`). */
fl_status fl_sim_vectors_of_budget(fl_store *store, const fl_replay_opts *o, uint64_t budget,
                                   uint64_t *vectors);
/* The least budget (to 256 bytes) whose pool holds at least `vectors`. */
fl_status fl_sim_budget_of_vectors(fl_store *store, const fl_replay_opts *o, uint64_t vectors,
                                   uint64_t *budget);
/* Replays the workload through the library: a flat cache on the host
 * backend sized by fl_sim_budget_of_vectors, fl_query per batch, hits,
 * admissions and evictions from fl_cache_stats, per-batch hit rates from
 * replay's runner. o gives the cache options (admission, load limit,
 * watermarks), threads and batches. Whatever the status, r is freed with
 * fl_sim_result_free. */
fl_status fl_sim_fleche(const fl_workload *w, const fl_replay_opts *o, uint64_t vectors,
                        fl_sim_result *r);

/* ---------------------------------------------------------------- report */

typedef struct fl_sim_report {
  const char *trace;    /* the trace's path, "<zipf>" for the generator */
  uint32_t batch;       /* --batch */
  uint64_t vectors;
  const char *sized_by; /* how vectors was chosen, for the reader */
  const fl_sim_trace *t;
  const fl_sim_result *rows;
  int n_rows;
  uint64_t recovery_from; /* the first batch after the hot set moves (0: none):
                             the recovery column, if the trace reaches it */
} fl_sim_report;

/* The row named "opt" and the best of the batched policies (not opt, not
 * fleche), or NULL. */
const fl_sim_result *fl_sim_report_opt(const fl_sim_report *r);
const fl_sim_result *fl_sim_report_best(const fl_sim_report *r);
void fl_sim_report_print(FILE *f, const fl_sim_report *r);
fl_status fl_sim_report_json(const char *path, const fl_sim_report *r);

#ifdef __cplusplus
}
#endif
#endif
