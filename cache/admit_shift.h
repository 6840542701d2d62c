/* admit_shift.h: TinyLFU's shift detector. A part's admission watches the
 * share of its lookups that miss; when a short window's share jumps well
 * above the long-run one, the part's hot set has moved, and every missed row
 * is admitted (admit_rule.h: fl_admit_rule.open) for a span of lookups.
 *
 * Why: TinyLFU admits a row once it is missed more often than the rows
 * eviction takes, so after the hot set moves each new hot row must miss
 * twice before it wins, and the hit rate climbs back a batch or more behind
 * an LRU that admits every miss (policy_sim, `--switch-at 64`: 23 batches
 * against LRU's 20). A moved hot set shows as a jump of the miss share
 * (replay's workload: 5% of lookups to 20-25% in the switch's batch),
 * which no steady trace of ours comes near (the short window stays within
 * 1.2x of the long one on the Criteo head and replay's workload). A scan
 * of rows never seen again raises the share too, and while the part is
 * open it is admitted as an LRU would admit it; eviction's probation takes
 * such rows, never hit, first.
 *
 * Windows and spans are in lookups, in units of the part's capacity in
 * vectors, so the detector reads the same at any batch size. Both backends
 * run it on the host before a batch's admission decides (under the cache
 * lock), over the lookups of every batch since the last admission: all-hit
 * batches and batches whose CUDA round was shed count too. */
#ifndef FL_CACHE_ADMIT_SHIFT_H
#define FL_CACHE_ADMIT_SHIFT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The windows: exponential averages over about capacity / 8 and
 * 4 x capacity lookups (plain means until that many have passed). A short
 * window of a whole capacity smooths the switch's one batch away at
 * replay's batch size. */
#define FL_SHIFT_SHORT_DIV 8.0
#define FL_SHIFT_LONG 4.0
/* The detector starts at the part's first eviction: before it, the pool is
 * filling (every row missed, then fewer and fewer: no steady share to
 * compare with), and admission takes every row anyway. Its windows start
 * from the first batch after it, and it may open once it has seen this
 * many capacities of lookups since. A pool that fills slowly evicts late
 * (replay's workload at 5%: batch 53 of 128), so the wait is short. */
#define FL_SHIFT_WARM 1.0
/* It opens when the short window's miss share passes this multiple of the
 * long one's, by FL_SHIFT_SIGMAS standard deviations of the long one's
 * miss count over the short window or the batch, the longer (so that a
 * small part's few misses do not open it by chance), and passes this
 * multiple of its own peak too, which fades by e every FL_SHIFT_PEAK
 * capacities of lookups: a share that comes back to where it was a while
 * ago is no shift. serve_bench's requests come from a finite pool served
 * over and over (39 capacities of lookups a pass): where a pass reaches
 * requests the cache holds whole, the share falls from about 3% to under
 * 0.5% for 4 to 9 capacities, and its return passed 1.5x the long share
 * every pass (the H200, stop 43: about 100 opens a run, 0.1-0.4 points of
 * hit rate lost; with the peak, 0 to 3). The replay's switch passes it
 * 5x (the short share 22% against a peak of 4.5%). */
#define FL_SHIFT_RATIO 1.5
#define FL_SHIFT_SIGMAS 6.0
#define FL_SHIFT_PEAK 16.0
/* It stays open this many capacities of lookups: the new hot set's climb
 * (policy_sim `--switch-at 64`: 2 capacities recovered in 20 batches, 4 and
 * 8 in 12-13; 16 admitted old rows long after and settled later). */
#define FL_SHIFT_OPEN 8.0

typedef struct fl_admit_shift {
  double capacity;           /* the part's vectors (the windows' unit) */
  double short_miss, long_miss; /* miss shares of the two windows */
  double peak;               /* the short share's fading peak */
  int started;                /* the part has evicted */
  double seen;               /* lookups since the detector started */
  double open_left;          /* lookups it stays open (> 0: open) */
  uint64_t opened;           /* times it opened */
} fl_admit_shift;

/* A detector for a part whose pool holds `capacity` vectors. */
void fl_shift_init(fl_admit_shift *s, uint64_t capacity);
/* The part evicted: the detector starts (again after fl_shift_init). */
void fl_shift_evicted(fl_admit_shift *s);
/* Takes one batch of the part: its lookups, and of them the missed ones.
 * Returns 1 when the batch's admission is open (every missed row wins). */
int fl_shift_observe(fl_admit_shift *s, uint64_t lookups, uint64_t missed);

#ifdef __cplusplus
}
#endif
#endif
