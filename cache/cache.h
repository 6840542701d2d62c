/* cache.h: the cache's internal state, private to cache/ (memory,
 * admission, eviction, reclamation, invalidation). The query path (fusion/)
 * sees it through query_side.h; users see only the opaque fl_cache of
 * include/fleche.h. */
#ifndef FL_CACHE_CACHE_H
#define FL_CACHE_CACHE_H

#include <pthread.h>
#include <stdatomic.h>

#include "cache/admit_rule.h"
#include "cache/admit_shift.h"
#include "cache/index.h"
#include "cache/pool.h"
#include "cache/query_side.h"
#include "cache/reclaim.h"
#include "common/parallel.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How long the answerer spins for the next launched run before it sleeps:
 * a server's next batch is usually that close, and a wake-up costs more. */
#define FL_ANSWER_SPIN_NS 200000ull

/* One index plus one pool. The flat layout has one part serving every table;
 * the per-table baseline has one part per table. */
typedef struct fl_part {
  fl_index_view index;   /* arrays in device (CUDA) or host memory */
  fl_pool pool;          /* slab pool over pool_mem */
  void *index_mem;       /* one allocation holding the index arrays */
  void *pool_mem;        /* the slab region */
  uint64_t index_bytes, pool_bytes;
  uint64_t slots;        /* index capacity */
  uint64_t entries;      /* live cached vectors (host-side count; CUDA: as of the
                            last settled admission round) */
  uint64_t dram_entries; /* live unified-index pointers into the store */
  uint64_t reserved_bytes; /* pool bytes of free slots on the CUDA reservoirs */
  struct fl_admit_round *round; /* CUDA admission rounds (admit_round.h), NULL on host */
  /* FL_ADMIT_TINYLFU (admit_rule.h): the part's frequency sketch and its
   * state, one allocation in the backend's memory (admit_freq.c); word and
   * freq NULL under the coin. */
  fl_sketch_view sketch;
  fl_admit_freq *freq;
  uint64_t sketch_sample;  /* additions between halvings */
  fl_admit_shift shift;    /* its shift detector (host memory; admit_shift.h), and */
  _Atomic uint64_t quiet_lookups;  /* lookups it has not taken yet: of all-hit batches, */
  _Atomic uint64_t missed_lookups, missed_of; /* of batches with misses, and their misses */
  /* Missed positions per lookup of the part's recent CUDA batches, a
   * running average in units of 2^-20 (fl_phase_prewake): of its queries
   * [0] and of its prefetches [1], which miss far more (their queries then
   * hit). */
  _Atomic uint32_t miss_share[2];
} fl_part;

typedef struct fl_table_counters {
  _Atomic uint64_t lookups, hits, dram_hits, misses;
} fl_table_counters;

typedef struct fl_cuda_state fl_cuda_state; /* cache/cuda_state.h */

struct fl_cache {
  fl_cache_fixed fixed;       /* config, backend, store, tables, parts, threads */
  fl_encoding *encoding;
  fl_part *parts;             /* fixed.n_parts */
  fl_admit_rule rule;         /* the admission policy and the coin's threshold */
  int subscription;           /* store change-log subscription id */

  /* Guards index mutations, pools, reclamation, generations and the CUDA
   * scratch lists. Lookups (probes, copies) run outside it. */
  pthread_mutex_t lock;
  fl_reclaim reclaim;
  uint64_t *generation;       /* per table: bumped by every store change */
  uint64_t batch;             /* batch counter: LRU clock and coin input */

  /* CUDA: prepares and launches each batch's admission round, one at a
   * time, after its query returned (admit_job.c). Whoever needs the rounds
   * launched (sync, clear, destroy, a prepared query reusing its scratch)
   * waits for it to be idle, never under the lock, which its job takes. */
  struct fl_courier *courier;

  _Atomic uint64_t stat[FL_STAT_COUNT];
  fl_table_counters *counters;
};

/* --- memory of the resolved backend (device or host) --- */
fl_status fl_cache_mem_alloc(fl_cache *c, uint64_t bytes, void **out);
void fl_cache_mem_free(fl_cache *c, void *p);

/* --- index maintenance, under c->lock; backend-specific (cache/maint_*.c) --- */
/* Resets a part's index to all-empty. */
fl_status fl_maint_index_reset(fl_cache *c, fl_part *p);
/* Counts entries of `kind` per age bucket. */
fl_status fl_maint_age_histogram(fl_cache *c, fl_part *p, fl_entry_kind kind, uint32_t now,
                                 uint64_t hist[FL_AGE_BUCKETS]);
/* Tombstones entries of `kind` older than bucket `b`, and up to `quota`
 * entries of bucket b; writes their locations to locs (capacity p->slots).
 * Then compacts the index and sweeps its tombstones (index.h). */
fl_status fl_maint_evict(fl_cache *c, fl_part *p, fl_entry_kind kind, uint32_t now, uint32_t b,
                         uint64_t quota, uint64_t *locs, uint64_t *n_locs);
/* Erases keys (host array); writes the removed slab addresses (0 = none).
 * Each erase sweeps the run of tombstones it ends (fl_index_erase). */
fl_status fl_maint_erase(fl_cache *c, fl_part *p, const uint64_t *keys, uint64_t n,
                         uint64_t *locs);

/* Adds part p's slots to out (fl_cache_index_health), miss_probe as the
 * sum over home slots. */
fl_status fl_maint_census(fl_cache *c, fl_part *p, fl_index_health *out);

/* --- TinyLFU's frequency state, per part (cache/admit_freq.c) --- */
/* Allocates and zeroes the part's sketch (sized from the vectors its pool
 * holds at the mean slot `mean_slot`) when the policy is TinyLFU. */
fl_status fl_freq_create(fl_cache *c, fl_part *p, double mean_slot);
void fl_freq_destroy(fl_cache *c, fl_part *p);
/* Host backend, under c->lock: halves the sketch as the batch's additions
 * (added to p->freq->additions) call for. */
void fl_freq_age_host(fl_part *p);
/* Host backend: ends an eviction that took victim_n entries whose estimates
 * sum to victim_sum: they are the new victim frequency. */
void fl_freq_evicted_host(fl_part *p, uint64_t victim_sum, uint64_t victim_n);
/* TinyLFU: the part's shift detector takes the lookups counted since it last
 * did (fl_cache_count_shift): those of all-hit batches first, then those of
 * batches with misses, the batch about to be admitted's included (with a
 * batch whose round was shed). A caller's all-hit batches ran before its
 * batch with misses; concurrent callers' batches interleave, and the short
 * window's rise from this order is the kind its peak learns
 * (admit_shift.h). 1 when the batch's admission is open (admit_shift.h);
 * 0 under the coin. Under c->lock. */
int fl_freq_shift_open(fl_cache *c, fl_part *p);
/* A cleared part's TinyLFU victim goes back to 0, a new cache's (admit_rule.h:
 * until a part first evicts, every missed row wins a place): its pool is
 * empty, and the rows the clear took are no victims of admission. Its shift
 * detector starts again (admit_shift.h: a refill's misses are no shift). Device
 * memory on CUDA (the maintenance stream, waited for). Under c->lock, no
 * round in flight. */
fl_status fl_freq_reset_victim(fl_cache *c, fl_part *p);

/* --- eviction and reclamation, under c->lock (cache/evict.c) --- */
/* Frees reclaimable slabs, trims unified entries, then evicts down to the
 * low watermark if part p is above the high watermark, or `starved` (a
 * class found no slot and no page). */
fl_status fl_cache_make_room(fl_cache *c, uint32_t part, int starved);
/* Cached entries part p may still take before its index passes max_load
 * (less the slots unified entries may take): the host's admissions stop
 * there. A CUDA round admits what its reservoirs hold, and evicts first
 * for the index (fl_cache_evict_want): its index may pass max_load by up
 * to a batch's admissions, until the next round. The reservoirs are not
 * bounded by this room: a class holding more slots than it uses would keep
 * the others from filling (ChurnRecyclesEverySlab under memcheck). */
uint64_t fl_cache_index_room(const fl_cache *c, uint32_t part);
/* Bytes of index per slot (key, location, version, timestamp) for the
 * cache's key and location widths. */
uint64_t fl_cache_slot_bytes(const fl_cache *c);
/* CUDA, for fl_cache_reserve: the admission rounds' reservoirs and
 * eviction rings (fl_round_reserve; `fill`: a batch's most new slots) and
 * the maintenance buffers, sized ahead for a full pool's evictions. Takes
 * c->lock. */
fl_status fl_cache_reserve_maintenance(fl_cache *c, uint64_t fill);
/* The cached entries make_room would evict from part p now (0: none). */
uint64_t fl_cache_evict_want(const fl_cache *c, uint32_t part, int starved);
/* The most cached entries one eviction of part p asks when its pool is
 * full (as fl_cache_evict_want counts them, every vector at the smallest
 * slot): what a round's eviction ring and reservoir must hold. */
uint64_t fl_cache_evict_burst(const fl_cache *c, uint32_t part);
/* Accounts for entries of `kind` just removed from part p's index (the
 * removal complete), their locations in locs (FL_LOC_NONE skipped; locs is
 * reordered): counts, statistics when `evicted`, and slabs to reclamation. */
fl_status fl_cache_retire_removed(fl_cache *c, uint32_t part, fl_entry_kind kind, uint64_t *locs,
                                  uint64_t n, int evicted);
/* Frees what no running query can read. */
void fl_cache_collect(fl_cache *c);
/* fl_reclaim_horizon of the cache's reclamation: slabs marked in an earlier
 * epoch are free to reuse. */
uint64_t fl_cache_horizon(fl_cache *c);
/* Drops the coldest unified entries of part p above its share. */
fl_status fl_cache_trim_unified(fl_cache *c, uint32_t part);

#ifdef __cplusplus
}
#endif
#endif
