/* admit_rule.h: which unique missed rows of a batch enter the cache, by the
 * cache's admission policy (fl_config.admit_policy), shared by both backends
 * (FL_HD: the host's admission and the CUDA round's choose kernel decide
 * with these functions).
 *
 * FL_ADMIT_COIN: the coin of admit_coin.h, probability p per missed lookup.
 *
 * FL_ADMIT_TINYLFU: TinyLFU's rule (Einziger, Friedman and Manes) adapted
 * to watermark eviction. Every batch's unique missed rows are added to the
 * part's frequency sketch (admit_sketch.h) with their counts in the batch,
 * the sketch ages, and then a row is admitted when its estimate (history
 * plus this batch) beats what it would displace by half a use
 * (FL_VICTIM_MARGIN). Watermark eviction does not pair a candidate with
 * one victim: it tombstones the oldest entries in bursts. So the victim is
 * the mean estimate of the entries the last eviction took (fl_admit_victim,
 * kept by the eviction): a row no more frequent than those would be evicted
 * before it pays back its copy. Until
 * the part first evicts, the victim is 0 and every missed row is admitted:
 * the pool has room. So it is too for a while after the part's hot set
 * moved, which its shift detector tells (admit_shift.h: fl_admit_rule.open):
 * the new hot rows need not miss twice. Either way, when the pool has fewer
 * free slots than winners, the rows most frequent in the batch go first
 * (fl_admit_bucket). */
#ifndef FL_CACHE_ADMIT_RULE_H
#define FL_CACHE_ADMIT_RULE_H

#include "cache/admit_coin.h"
#include "cache/admit_sketch.h"
#include "common/mutant.h"
#include "include/fleche.h"

/* A victim frequency's fixed point: 1/16 of a use. */
#define FL_VICTIM_ONE 16u
/* What a row must beat the victims by: half a use. Estimates are whole
 * uses and the victim a mean of them: a row merely as frequent as the
 * typical victim is not worth a slot (Criteo head: 0.3 to 0.5 points more
 * hits than no margin, replay's workload the same to 0.03; a whole use
 * left the pool underfilled). */
#define FL_VICTIM_MARGIN (FL_VICTIM_ONE / 2)

/* What a batch's decisions read. */
typedef struct fl_admit_rule {
  uint32_t policy;          /* fl_admit_policy */
  uint32_t open;            /* TinyLFU: the part's hot set moved (admit_shift.h): every row wins */
  uint64_t seed, threshold; /* the coin (admit_coin.h) */
  uint32_t force;           /* a prefetch's batch (fl_prefetch): every row wins, by any policy */
  uint32_t pad_;
} fl_admit_rule;

/* A part's TinyLFU state besides the sketch's counters: host memory (host
 * backend) or device memory (a CUDA part's round state). */
typedef struct fl_admit_freq {
  unsigned long long additions;  /* uses added since the last halving */
  unsigned long long victim_sum; /* the running eviction's victims: their estimates, */
  unsigned long long victim_n;   /*   and how many (zeroed when it ends) */
  uint32_t victim;               /* the last eviction's mean estimate, in FL_VICTIM_ONE */
  uint32_t pad_;
} fl_admit_freq;

/* The victim frequency once an eviction took n entries whose estimates sum
 * to sum; an eviction that took none leaves the last one. It stays below
 * the counters' ceiling, so that a saturated row always wins: a pool that
 * admits nothing evicts nothing, and the victim would never come down.
 * It does not halve with the sketch: halving it too admitted rows used
 * less than the victims (measured on replay's host workload: 79.6%
 * against 83.7% hits), and rows used often climb back within batches. */
FL_HD uint32_t fl_admit_victim(unsigned long long sum, unsigned long long n, uint32_t last) {
  if (FL_MUTANT_ON(11)) return 0;
  if (n == 0) return last;
  unsigned long long v = sum * FL_VICTIM_ONE / n, top = (FL_SKETCH_MAX - 1u) * FL_VICTIM_ONE;
  return (uint32_t)(v < top ? v : top);
}

/* 1 when a missed row wins a place: count is its missed lookups in the
 * batch, estimate its sketch estimate after the batch's additions (TinyLFU
 * only), victim the part's fl_admit_freq.victim. A prefetch's rows always
 * win: it names rows a query is about to ask for. */
FL_HD int fl_admit_wins(const fl_admit_rule *r, uint64_t batch, uint64_t key, uint32_t count,
                        uint32_t estimate, uint32_t victim) {
  if (r->force && !FL_MUTANT_ON(34)) return 1;
  if (r->policy == FL_ADMIT_TINYLFU)
    return r->open || estimate * FL_VICTIM_ONE > victim + FL_VICTIM_MARGIN;
  return fl_admit_counted(r->seed, batch, key, r->threshold, count);
}

/* What admission does with one unique missed row. */
typedef enum fl_admit_choice {
  FL_ADMIT_NONE = 0,    /* answered from the store only */
  FL_ADMIT_CACHE = 1,   /* won a place: copy it into a slab (promotes a pointer) */
  FL_ADMIT_POINTER = 2  /* a store miss that stays out of the cache leaves a pointer */
} fl_admit_choice;

/* wins: fl_admit_wins; pointer_row: the row was a unified-index pointer
 * hit; ref: the store row of a store miss (0 when unknown or absent);
 * room: 1 while the unified index takes pointers. */
FL_HD fl_admit_choice fl_admit_choose(int wins, int pointer_row, uint64_t ref, int room) {
  if (wins) return FL_ADMIT_CACHE;
  return !pointer_row && ref && room ? FL_ADMIT_POINTER : FL_ADMIT_NONE;
}

#endif
