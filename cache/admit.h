/* admit.h: admission as the query path (fusion/) hands it a batch's unique
 * misses; for fusion/, the one header of the module it uses.
 *
 * The admission module (cache/admit_*) owns the policies (admit_rule.h: the
 * coin of admit_coin.h, TinyLFU over the sketch of admit_sketch.h, whose
 * memory admit_freq.c keeps), the host backend's admission (admit_host.c),
 * and the CUDA backend's rounds:
 * the courier's jobs that prepare and launch a batch's round once its query
 * returned (admit_job.c), the rounds' host half (admit_round.c) and their
 * kernels (admit_kernels.cu). Both backends admit the same rows: the rule's
 * winners, most frequent in the batch first, while the pool has slots, then
 * unified-index pointers for store misses that stayed out, while the part's
 * share of the unified index has room. Rows of tables the store changed
 * since the batch's fetch are never admitted (fl_cache_stale). */
#ifndef FL_CACHE_ADMIT_H
#define FL_CACHE_ADMIT_H

#include <stdint.h>

#include "batch/miss_set.h"
#include "cache/admit_rule.h"
#include "cache/index.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fl_cache;
struct fl_scratch;

/* A batch's unique misses as a round reads them; device pointers (uniq_refs
 * in m is pinned host memory). */
typedef struct fl_admit_batch {
  fl_index_view v;
  const fl_code *codes;        /* per table */
  const uint32_t *table_cls;   /* per table: slab class in the part's pool */
  const fl_batch_arg *args;
  const uint64_t *key_offsets; /* the args' first positions */
  uint32_t n_args;
  uint64_t n_keys;             /* uids are [0, n_keys) */
  fl_miss_out m;
  const uint64_t *stage_base;  /* per arg: its rows' byte offset in staging */
  const uint8_t *staging;      /* the unique rows fetched from the store */
  uint32_t *choice;            /* per uid: scratch for the round */
  fl_admit_rule rule;          /* the policy and the coin (cache/admit_rule.h) */
  uint32_t now;                /* batch counter: the coin's input, the LRU clock */
  uint64_t pointer_room;       /* unified-index pointers the part may still take */
} fl_admit_batch;

/* Host backend: one batch's unique rows, in host memory, as the host engine
 * leaves them (batch/miss_set.h). */
typedef struct fl_admit_host_batch {
  uint32_t part, now;         /* the part; the batch counter (coin input, LRU clock) */
  const fl_batch_arg *args;
  uint32_t n_args;
  const uint32_t *per_arg;    /* FL_MISS_COUNTERS per arg */
  fl_miss_set set;
  const uint32_t *uniq_slot;  /* per uid: its set slot */
  const uint64_t *uniq_refs;  /* per uid: its store reference (0: none) */
  const uint8_t *staging;     /* the unique rows, arg a's at stage_base[a] */
  const uint64_t *stage_base;
  const uint64_t *gen;        /* generations read before the fetch (fl_cache_generations) */
  int force;                  /* a prefetch's: every row wins (fl_admit_rule.force) */
} fl_admit_host_batch;

/* Admits the batch's rows (see the top), making room first and, when a slab
 * class ran out, after. Takes the cache lock. */
fl_status fl_admit_host(struct fl_cache *c, const fl_admit_host_batch *b);

/* CUDA backend: a batch's round, prepared and launched by the cache's
 * courier once fl_query has returned (settling the last round, eviction,
 * the reservoirs' top-up and the launch are off the answer's path; rounds
 * run one at a time in the courier's order). The job owns the batch's
 * scratch until the round's last use of it is recorded (admit_done). */
typedef struct fl_admit_job fl_admit_job;

/* A job for the batch whose misses b describes in device memory (the job
 * fills v, rule and pointer_room at launch, keeping b->rule.force: a
 * prefetch's batch admits every row); args (host) and
 * per_arg size what the round may take from the pool; n_miss: its missed
 * positions; *gen: the generations its fetch saw (taken, *gen set NULL);
 * have_refs: the fetch brought store references, so pointers may be
 * published; x: the scratch the round reads, given back after the round
 * when release_x (a one-off query's). NULL when out of memory. */
fl_admit_job *fl_admit_job_new(struct fl_cache *c, uint32_t part, const fl_admit_batch *b,
                               const fl_batch_arg *args, const uint32_t *per_arg, uint64_t n_miss,
                               uint64_t **gen, int have_refs, struct fl_scratch *x, int release_x);
/* Hands the job to the courier, once nothing else touches its scratch: a
 * newer round of the part may shed it at once. */
void fl_admit_job_post(struct fl_cache *c, fl_admit_job *j);
/* A prefetch's job, on the calling thread instead of the courier's (no
 * newer round can shed it): launches its round and orders `stream` (a
 * cudaStream_t) after it, so that work there from now on sees its rows.
 * Returns the launch's failure; one of the round on the device is reported
 * by a later call, as a query's round's is. Frees the job. */
fl_status fl_admit_job_run(fl_admit_job *j, void *stream);
/* Frees a job never posted. */
void fl_admit_job_free(fl_admit_job *j);

#ifdef __cplusplus
}
#endif
#endif
