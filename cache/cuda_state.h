/* cuda_state.h: what the CUDA backend keeps beside the shared cache state: the
 * maintenance stream that serializes every index mutation, a pool of reusable
 * events, and scratch buffers (device and pinned host) for maintenance and
 * for queries. The reclamation hooks are safe on the host backend
 * (no CUDA state, no events); the rest is called on CUDA caches only. It
 * also owns fl_cache_mem_alloc/free for both backends (cache.h). The query
 * path (fusion/) uses its scratch sets and events through this header. */
#ifndef FL_CACHE_CUDA_STATE_H
#define FL_CACHE_CUDA_STATE_H

#include <pthread.h>
#include <stddef.h>

#include "dram_store/seq_stripe.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fl_cache;

/* A query's scratch: device and pinned host buffers, reused across queries
 * once the event of their last use has fired. */
typedef struct fl_scratch {
  void *dev;          /* device buffer */
  size_t dev_bytes;
  void *host;         /* pinned host buffer */
  size_t host_bytes;
  void *busy_until;   /* cudaEvent_t: the last use on the caller's stream ends (the
                         query's admission round starts after it) */
  void *admit_done;   /* cudaEvent_t: the last admission round reading it ends
                         (maintenance stream) */
  int in_use;         /* taken by a running fl_query, or kept */
  uint64_t takes;     /* times taken (under scratch_lock): tells a set taken and given
                         back meanwhile from one left alone */
  int kept;           /* by a prepared query, for all its runs (under scratch_lock) */
  uint64_t ended_take; /* `takes` when its events were last seen fired (under scratch_lock):
                          events are recorded only while a set is taken, so they stay
                          fired until its next take and need not be asked again */
  /* A miss set (batch/miss_set.h) in dev known to be empty: its address and
   * slots, so that the next query laying out its set at the same place and
   * size skips clearing it; clean_set NULL: none. (The set's offset in dev
   * moves with the header, host ids included: the batch shape alone does not
   * name it.) */
  void *clean_set;
  uint64_t clean_slots;
  /* The courier's ticket of the admission round that holds the set (its
   * admit_done not recorded yet), 0 when none (atomic; common/courier.h). */
  uint64_t round_ticket;
  uint32_t round_part; /* the part of that round (written before the ticket) */
} fl_scratch;

typedef struct fl_cuda_state {
  int device;
  uint64_t allocations;        /* buffers allocated after creation, each replacing a smaller
                                  one (fl_cache_stats.allocations; atomic, fl_cuda_allocated) */
  void *maint;                 /* cudaStream_t: index mutations, in order */
  pthread_mutex_t events_lock; /* guards the event pool (a leaf lock) */
  void **free_events;          /* cudaEvent_t pool */
  size_t n_free_events, cap_free_events;
  void *m_dev, *m_host;        /* maintenance scratch (under the cache lock) */
  size_t m_dev_bytes, m_host_bytes;
  pthread_mutex_t scratch_lock; /* guards the sets' in_use, takes and n_scratch (a leaf lock;
                                  no CUDA call under it) */
  fl_scratch *scratch;         /* query scratch sets */
  size_t n_scratch;            /* sets created, at most FL_MAX_CONCURRENT_QUERIES */
  /* The largest sizes any query asked of a set (under scratch_lock): a set
   * that must grow grows to them, so that the sets of a cache serving
   * batches of many sizes soon stop growing (a growth frees and allocates
   * device and pinned memory, which waits for the whole device). */
  size_t want_dev, want_host;
  /* Zero-copy reads (fusion/zero_copy.h): the most qualifying rows a batch
   * reads in place (0: none, the store not mapped; with FL_ZERO_COPY_AUTO,
   * 0 until fusion/zc_calibrate.c sets it at create), per table its dense rows
   * as the device sees them (fl_zc_table layout: NULL when not readable) and
   * its hashed slots' layout (vec_stride 0: not readable; slots are read at
   * their host addresses), and the store's seqlock stripes, device-mapped. */
  uint64_t zc_limit;
  const void **zc_rows;
  fl_slot_layout *zc_slots;
  const uint32_t *zc_seq;
} fl_cuda_state;

/* The maintenance stream and, with cfg.zero_copy_rows, the store's rows
 * mapped for zero-copy reads (left off when the store cannot be mapped:
 * queries then gather every miss on the host). */
fl_status fl_cuda_state_create(struct fl_cache *c);
void fl_cuda_state_destroy(struct fl_cache *c);
/* Undoes the mapping: no batch reads in place from here on. Before the
 * cache's first query only. */
void fl_cuda_state_unmap(struct fl_cache *c);
/* Waits for all work the cache enqueued (maintenance and scratch users). */
void fl_cuda_state_sync(struct fl_cache *c);
/* Reclamation hooks (ctx is the cache). */
int fl_event_done(void *ctx, void *event);
void fl_event_release(void *ctx, void *event);
/* An event from the pool (thread-safe). */
fl_status fl_event_get(struct fl_cache *c, void **event);
/* Counts n buffers allocated (fl_cuda_state.allocations). */
static inline void fl_cuda_allocated(fl_cuda_state *s, uint64_t n) {
  __atomic_add_fetch(&s->allocations, n, __ATOMIC_RELAXED);
}
/* Maintenance scratch of at least these sizes (under the cache lock). */
fl_status fl_cuda_state_maint_buffers(struct fl_cache *c, size_t dev_bytes, size_t host_bytes,
                                void **dev, void **host);
/* Query scratch sets a cache makes at most. */
enum { FL_MAX_CONCURRENT_QUERIES = 65 };
/* Pending sets beyond which a query waits for one rather than make another:
 * a new set costs tens of milliseconds of pinned and device allocation at
 * a large shape (35-53 ms for a replay batch's on the H100), a pending one
 * frees when its admission round ends. Three: the round running on the
 * device, the one the courier prepares (it waits for the first to end) and
 * one waiting, which a query can shed; with two, a query waits out an
 * evicting round (0.5-0.85 ms on the H200) whenever the courier holds the
 * other. */
#define FL_SCRATCH_PENDING_MAX 3
/* How long a query short of a set waits for one whose admission round is
 * running before it sheds a round not started instead: longer than most
 * rounds, shorter than one that evicts. */
#define FL_SCRATCH_PATIENCE_NS 200000ull

/* A free query scratch set with at least these sizes, for a batch of part
 * `part` (FL_NO_PART: none). When none is free and FL_SCRATCH_PENDING_MAX
 * sets are still finishing (their query's stream or admission round), it
 * waits up to FL_SCRATCH_PATIENCE_NS for a set whose round is running,
 * then sheds a round of the same part the courier has not started (the
 * batch's own round would shed it anyway), else waits for a set instead of
 * making a new one. Takes no cache lock. */
#define FL_NO_PART 0xffffffffu
/* Adds to *wait_ns the time spent waiting for a set and to *grow_ns the
 * time spent making or growing one. */
fl_status fl_scratch_acquire(struct fl_cache *c, size_t dev_bytes, size_t host_bytes,
                             uint32_t part, fl_scratch **out, uint64_t *wait_ns,
                             uint64_t *grow_ns);
/* Makes sure `callers` (at most FL_RESERVE_MAX_CALLERS) concurrent queries
 * of at most these sizes each find a set without making or growing one:
 * with a set each and FL_SCRATCH_PENDING_MAX pending, a query waits for a
 * pending set rather than make one. Takes that many sets (making them, or
 * waiting for pending ones), grows them to these sizes and gives them back.
 * Making or growing a set after this would allocate pinned memory, which
 * holds every thread's CUDA calls meanwhile (PERFORMANCE_LOG, stop 34). */
fl_status fl_scratch_reserve(struct fl_cache *c, size_t dev_bytes, size_t host_bytes,
                             uint32_t callers);
/* Marks a set a prepared query keeps for all its runs: other queries never
 * wait for it or shed its rounds. */
void fl_scratch_keep(struct fl_cache *c, fl_scratch *s);
/* Gives it back (kept or not); it becomes reusable once its busy_until and
 * admit_done events, recorded after the set's last uses, fire. */
void fl_scratch_release(struct fl_cache *c, fl_scratch *s);
/* The admission round that held the set is launched or shed: its ticket
 * cleared and, with release, the set given back, in one step under the
 * sets' lock. Apart, a query looking for a set in between would see one in
 * use with no round, a running query's, and make a set more than
 * fl_scratch_reserve provided for. */
void fl_scratch_round_done(struct fl_cache *c, fl_scratch *s, int release);
/* Waits until the admission round that holds the set, if any, is launched
 * (or shed by a newer round of its part). */
void fl_scratch_unhold(struct fl_cache *c, fl_scratch *s);

#ifdef __cplusplus
}
#endif
#endif
