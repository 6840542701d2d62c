/* admit_round.h: the CUDA backend's admission rounds, as the host sees them.
 *
 * A round admits one batch's unique misses on the maintenance stream
 * (admit_kernels.cu) while fl_query has already returned. The host
 * does no work per miss: it prepares the round (settles the last one, makes
 * room, takes slots for the reservoirs from the pool, notes which tables
 * changed in the store since the batch's fetch) and reads its status once it
 * is over.
 *
 * A round is one CUDA graph per part, built once (again when its input
 * block grows): the upload of the round's inputs (its arguments, the
 * reservoir tops, new slots, skip flags) as one block, the kernels, which
 * read their arguments from that block, and the status download. Launching
 * it takes four calls (wait for the batch, the graph, two events) where
 * separate launches would take a dozen, about 10 us each on the courier
 * while queries run.
 *
 * Reservoirs: one device-resident free list of slab slots per class, filled
 * from the pool (pool.h, the single owner of slab memory) with as many slots
 * as the next round may take. Slots on a reservoir count as used in the pool
 * and as reserved in the part (fl_part.reserved_bytes), not as live vectors.
 * Slots whose insert did not publish go back on the reservoir on the device.
 *
 * Eviction: a round first evicts what the watermarks ask for (evict.c's
 * count, taken at prepare), or, in a part of one slab class whose class is
 * starved (no slot, no free page), what a starved pool frees: the age
 * histogram, the pick and the tombstoning run as the graph's first
 * kernels, with no host step between them. The round admits with the
 * slots it has; what it evicts serves later rounds. A starved class among
 * several still evicts at prepare, from the host, as the host backend
 * does: it needs whole pages back soon.
 *
 * Limbo: the evicted slabs go to a pinned ring (written by the kernel), and
 * the host marks each round's share with one reclamation epoch when it
 * settles (fl_reclaim_mark), not slab by slab. Once no query can read them
 * (fl_reclaim_horizon), a later prepare releases them: in a part of one
 * slab class, straight onto the reservoir by that round's first kernel, so
 * the host never touches them (an eviction burst of 235,000 slabs costs the
 * host 2-5 ms one by one); in a part of several classes, back to the pool
 * one by one, so that memory can move to another class.
 *
 * Rounds of one part never overlap: prepare waits for the last round first
 * (by then it is normally long over). Everything here runs under c->lock. */
#ifndef FL_CACHE_ADMIT_ROUND_H
#define FL_CACHE_ADMIT_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "cache/admit_rule.h"
#include "cache/maint_kernels.h"
#include "common/launch_to.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fl_cache;

/* Round counters, in fl_admit_dev.count. */
enum {
  FL_ROUND_ADMITTED = 0,  /* vectors published, promotions included */
  FL_ROUND_PROMOTED = 1,  /* of which replaced a unified-index pointer */
  FL_ROUND_POINTERS = 2,  /* unified-index pointers published */
  FL_ROUND_POINTER_CANDIDATES = 3,
  FL_ROUND_EVICTED = 4,   /* entries the round's eviction claimed (those past its want were not taken) */
  FL_ROUND_COUNTS = 5
};

/* Bytes at the head of the input block for the kernels' arguments
 * (fl_admit_args, admit_kernels.h). */
#define FL_ROUND_ARGS_BYTES 512u

/* The device state of a part's rounds, passed by value into the kernels
 * (fixed for a built graph). The first arrays, up to skip, are the input
 * block each round uploads; top to count is the status it downloads. */
typedef struct fl_admit_dev {
  uint64_t *top;             /* per class: slots on the reservoir, new slots included */
  uint64_t *granted;         /* per class: coin winners given a slot this round */
  uint64_t *wanted;          /* per class: coin winners this round */
  unsigned long long *count; /* FL_ROUND_COUNTS, uploaded as zeros */
  const uint64_t *fill_n;    /* per class: slots of `fill` this round stocks */
  const uint64_t *fill;      /* new slots from the pool, class after class */
  const uint8_t *skip;       /* per table: 1 when the store changed it since the fetch */
  const fl_evict_in *ev;     /* the round's eviction and recycling (in the input block) */
  uint32_t *ret_n;           /* per class: slots to put back (insert not published) */
  uint32_t *cand;            /* per class and priority bucket: coin winners */
  uint32_t *base;            /* per class and bucket: rank of the bucket's first winner */
  uint64_t **res;            /* per class: the reservoir, slots at [0, top) */
  uint64_t **ret;            /* per class: slots to put back */
  fl_sketch_view sketch;     /* TinyLFU: the part's sketch (admit_sketch.h) */
  fl_admit_freq *freq;       /* TinyLFU: its state; NULL under the coin */
  uint64_t sketch_sample;    /* additions between halvings */
  uint32_t n_classes;
} fl_admit_dev;

/* Limbo slabs [previous mark's end, end) were evicted in reclamation epoch
 * `epoch` (fl_reclaim_mark). */
typedef struct fl_limbo_mark {
  uint64_t end, epoch;
} fl_limbo_mark;
#define FL_LIMBO_MARKS 16

typedef struct fl_admit_round {
  fl_admit_dev dev;   /* views into io_d and fixed_d */
  void *fixed_d;      /* device: ret_n, cand, base, res, ret (ret_n and cand zero between rounds) */
  void *io_d;         /* device: the input block (args, then dev's arrays up to fill) */
  uint8_t *io_h;      /* pinned: the input block as the next round uploads it */
  uint64_t io_bytes, fill_cap; /* the block's size; slots `fill` holds */
  uint64_t *status_h; /* pinned: top, granted, wanted (per class), count, after the round */
  uint64_t **res, **ret; /* per class: device arrays (host copies of the pointers) */
  uint64_t *cap;      /* per class: capacity of res and ret, in slots */
  uint64_t *top;      /* per class: slots on the reservoir, exact once settled */
  void *graph;        /* cudaGraphExec_t of the round, NULL until built */
  uint64_t graph_keys; /* the batch size its kernels are sized for */
  void *event;        /* cudaEvent_t: the round in flight is over when it fires */
  fl_evict_dev evict; /* the eviction's device state (in fixed_d; taken in the status) */
  void *evict_in;     /* device: its fl_evict_in in the input block */
  uint64_t evict_want; /* what the round in flight was asked to evict */
  uint64_t *limbo;    /* pinned: the limbo ring (fl_evict_in), limbo_cap slots */
  uint64_t limbo_cap;
  /* Ring positions, counting up: [tail, released) were handed to the round
   * in flight (recycled or freed), [released, head) wait for their marks. */
  uint64_t limbo_tail, limbo_released, limbo_head;
  fl_limbo_mark marks[FL_LIMBO_MARKS]; /* per evicting round, oldest first */
  uint32_t n_marks;
  fl_status failed;   /* a launch failure not reported yet (fl_round_failed) */
  char failed_msg[256];
} fl_admit_round;

/* Per part of a CUDA cache (fl_part.round); the host backend has none. */
fl_status fl_round_create(struct fl_cache *c, uint32_t part);
void fl_round_destroy(struct fl_cache *c, uint32_t part);
/* Applies the finished round's status to the part's counts (entries,
 * pointers, admissions, reservoirs, evicted slabs). wait = 0: only if it is
 * already over. Fails when the round failed on the device. */
fl_status fl_round_settle(struct fl_cache *c, uint32_t part, int wait);
/* Under the cache lock (fl_cache_reserve): waits for the part's round, then
 * sizes each class's reservoir for a round's `fill` new slots (a batch's
 * misses, at most its ids and queries), and its eviction ring and, in a
 * part of one class, its reservoir for two eviction bursts of a full pool
 * (fl_cache_evict_burst), so that no round allocates when the pool first
 * fills or later. The input block grows on demand (fl_cache_stats.allocations
 * counts it). */
fl_status fl_round_reserve(struct fl_cache *c, uint32_t part, uint64_t fill);
/* After a settle, under the cache lock (a clear): the limbo slabs no
 * running query can read go back to the pool now, not at the next round. */
void fl_round_release_limbo(struct fl_cache *c, uint32_t part);
/* Reports, once, the failure of a round that could not be prepared or
 * launched after its query returned (fl_round_failed). Only calls that
 * answer to a user report it: a round's own prepare does not, or every
 * later round would fail on its predecessor's failure and admission would
 * stop. */
fl_status fl_round_report(struct fl_cache *c, uint32_t part);
/* Waits, without the cache lock, until the part's round in flight (if any)
 * is over, so that fl_round_prepare's settle finds it done and the lock is
 * not held across the wait: queries take that lock too. Takes the lock
 * briefly. */
void fl_round_wait(struct fl_cache *c, uint32_t part);
/* Readies a round: settles the last, makes room and gives each class at
 * least need[cls] reservoir slots where the pool has them (written into the
 * input block). The caller then calls fl_round_launch. */
fl_status fl_round_prepare(struct fl_cache *c, uint32_t part, const uint64_t *need);
/* Launches the prepared round on the maintenance stream, after the event
 * `after`: its arguments (args_bytes of them, at most FL_ROUND_ARGS_BYTES)
 * and the tables it leaves out (n_tables skip flags: changed in the store
 * since the batch's fetch) go into the input block; the graph, when built,
 * is sized for batches of n_keys keys or more.
 * Records `done` (cudaEvent_t) after the round. On failure the round's new
 * slots go back to the pool. */
fl_status fl_round_launch(struct fl_cache *c, uint32_t part, const void *args, size_t args_bytes,
                          const uint8_t *skip, uint64_t n_keys, void *after, void *done);
/* fl_round_settle on every part, then, with report, fl_round_report;
 * returns the first failure. A no-op on the host backend. */
fl_status fl_round_settle_all(struct fl_cache *c, int wait, int report);
/* Keeps the failure of a round launched after its query returned, for the
 * next settle to report. */
void fl_round_failed(struct fl_cache *c, uint32_t part, fl_status st, const char *msg);
/* Evicted slabs in limbo not released yet (admit_round.h). */
static inline uint64_t fl_round_in_limbo(const fl_admit_round *r) {
  return r->limbo_head - r->limbo_released;
}

#ifdef __cplusplus
}
#endif
#endif
