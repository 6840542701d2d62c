/* reclaim.h: batch-based reclamation. An evicted or invalidated entry is first
 * made a tombstone in the index (readers stop finding it); its slab goes on
 * the retired list tagged with the epoch of its removal, and returns to the
 * pool only when every query that began at or before that epoch has finished
 * (CUDA: its completion event on the caller's stream has fired). So copy
 * kernels read slabs without locks and never see reused memory.
 * Thread-safe through its own mutex, a leaf: queries begin and end without
 * the cache lock, which admission rounds hold for tens of microseconds;
 * removals retire, and collect runs, under it. Whether an event has fired
 * is asked outside the mutex (a CUDA call can wait for the driver's own
 * locks, and every query's begin and end takes this mutex). */
#ifndef FL_CACHE_RECLAIM_H
#define FL_CACHE_RECLAIM_H

#include <pthread.h>
#include <stdint.h>


typedef struct fl_inflight {
  uint64_t start;  /* epoch when the query began */
  uint64_t gen;    /* the begin that took the slot (fl_reclaim.begins then) */
  void *event;     /* cudaEvent_t marking its end on the caller's stream, or NULL */
  int active;      /* 1 while the query may still read slabs */
} fl_inflight;

typedef struct fl_retired {
  uint64_t loc;    /* slab address */
  uint64_t epoch;  /* epoch of its removal from the index */
  uint32_t part;   /* which part's pool owns it */
} fl_retired;

typedef struct fl_reclaim {
  pthread_mutex_t mu;      /* guards everything below */
  uint64_t epoch;          /* bumped at each removal batch */
  uint64_t begins;         /* begins so far: each slot's gen */
  fl_inflight *inflight;   /* slots, reused; tickets index into it */
  uint32_t n_inflight, cap_inflight;
  fl_retired *retired;
  uint64_t n_retired, cap_retired;
} fl_reclaim;

void fl_reclaim_init(fl_reclaim *r);
void fl_reclaim_destroy(fl_reclaim *r);
typedef struct fl_reclaim_hooks fl_reclaim_hooks;
/* Registers a query; returns its ticket, or -1 on allocation failure. With
 * every slot taken, it first gives back the slots (and, through h, the
 * events) of queries whose events have fired; h may be NULL when no query
 * ends with an event. Only h's event hooks are called. */
int64_t fl_reclaim_begin(fl_reclaim *r, const fl_reclaim_hooks *h);
/* The query's reads end when `event` fires (CUDA), or now when event is NULL. */
void fl_reclaim_end(fl_reclaim *r, int64_t ticket, void *event);
/* Retires slabs just removed from the index (the removal must be complete,
 * i.e. visible to every query that starts afterwards). Returns 0 or -1 (OOM:
 * the caller then waits for the device and frees at once). */
int fl_reclaim_retire(fl_reclaim *r, const uint64_t *locs, uint64_t n, uint32_t part);
/* How the owner frees a slab and tracks events (CUDA) for fl_reclaim_collect. */
struct fl_reclaim_hooks {
  void (*free_slab)(void *ctx, uint32_t part, uint64_t loc);
  int (*event_done)(void *ctx, void *event);     /* has the event fired? */
  void (*release_event)(void *ctx, void *event); /* back to the owner's pool */
  void *ctx;
};

/* Frees what no running query can read. Returns slabs freed. */
uint64_t fl_reclaim_collect(fl_reclaim *r, const fl_reclaim_hooks *h);
/* For removals whose slabs the owner keeps (a CUDA round's evicted slabs,
 * admit_round.h): marks the removal, complete as above, and returns its
 * epoch. Its slabs may be reused once fl_reclaim_horizon is past it. */
uint64_t fl_reclaim_mark(fl_reclaim *r);
/* The oldest epoch a running query began in (the current one when none
 * runs): slabs retired or marked in an earlier epoch are free to reuse.
 * Releases the events of queries that have ended, as collect does. */
uint64_t fl_reclaim_horizon(fl_reclaim *r, const fl_reclaim_hooks *h);

#endif
