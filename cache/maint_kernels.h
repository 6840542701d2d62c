/* maint_kernels.h: launchers of the index maintenance kernels (CUDA backend).
 * Each enqueues on `stream` and returns a cudaError_t as int (0 = success). */
#ifndef FL_CACHE_MAINT_KERNELS_H
#define FL_CACHE_MAINT_KERNELS_H

#include "cache/admit_rule.h"
#include "cache/index.h"
#include "common/launch_to.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TinyLFU's victims (cache/admit_rule.h): an eviction of cached entries
 * adds their sketch estimates and their number to freq's victim_sum and
 * victim_n, which the next admission round folds into its victim
 * frequency. freq NULL: no tally (the coin). */
typedef struct fl_evict_tally {
  fl_sketch_view sketch;
  fl_admit_freq *freq;
} fl_evict_tally;

int fl_launch_index_reset(fl_index_view v, void *stream);
/* hist: FL_AGE_BUCKETS device counters of entries of `kind`, zeroed by the
 * launcher. */
int fl_launch_age_histogram(fl_index_view v, fl_entry_kind kind, uint32_t now,
                            unsigned long long *hist, void *stream);
/* counters[0] = entries taken, their slabs written to locs (capacity
 * v.slots) in claim order, counters[1] = quota claims in bucket b; zeroed by
 * the launcher. Cached entries taken are tallied (fl_evict_tally). Then the
 * index is compacted and its tombstones swept (index.h). */
int fl_launch_evict(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b,
                    uint64_t quota, uint64_t *locs, unsigned long long *counters,
                    fl_evict_tally tally, void *stream);
int fl_launch_erase(fl_index_view v, const uint64_t *keys, uint64_t n, uint64_t *locs,
                    void *stream);

/* An admission round's eviction and recycling (cache/admit_round.h), read
 * by its kernels from the round's input block. Evicted slabs wait in the
 * limbo ring until no query can read them; positions count up, slot
 * position % ring_cap holds the slab. */
typedef struct fl_evict_in {
  uint64_t want;         /* cached entries to evict, the coldest first (0: none) */
  uint64_t *ring;        /* pinned host memory, mapped: the limbo ring */
  uint64_t ring_cap;     /* its slots; [at, at + want) are free for this round */
  uint64_t at;           /* where this round's evicted slabs go */
  uint64_t recycle_from; /* single-class parts: the released slabs [from, from + n) */
  uint64_t recycle_n;    /*   go onto the reservoir, under its new slots */
  uint32_t now;          /* batch counter: an entry's age is now - its timestamp */
  uint32_t pad_;
} fl_evict_in;

/* The device state an eviction works in, zero between rounds. */
typedef struct fl_evict_dev {
  unsigned long long *hist;  /* FL_AGE_BUCKETS counters (the pick zeroes them) */
  unsigned long long *pick;  /* the picked bucket, its quota, claims of that quota */
  unsigned long long *taken; /* entries claimed, zero before the round: the index into
                                locs, which may pass want (those past it are not taken) */
  fl_evict_tally tally;
} fl_evict_dev;

/* Adds the eviction to `to` (a round's graph): the age histogram of cached
 * entries, the pick (evict_pick.h), the tombstoning of the picked entries,
 * their slabs written to the ring from in->at, and the compaction and
 * sweep of the index's tombstones (index.h). Does nothing when want is 0. */
int fl_launch_round_evict(fl_launch_to to, fl_index_view v, const fl_evict_in *in,
                          fl_evict_dev d);

/* Loads the maintenance kernels (fl_load_kernels); a cudaError_t. */
int fl_maint_kernels_load(void);

#ifdef __cplusplus
}
#endif
#endif
