/* gather.c: the batched multi-threaded gather behind fl_store_gather (rows
 * looked up by id) and fl_store_gather_refs (rows read by reference, refs.c).
 * All parts' rows form one range [0, total) split over the store's workers,
 * so a batch of many small tables balances as well as one big one. Inputs are
 * validated before any output is written. Under FL_MISSING_ERROR a missing id
 * stops the call with FL_ERR_NOT_FOUND; outputs may then be partly written
 * (the store itself never changes in a gather).
 *
 * The front (fl_store_gather_parts) hands the gather to the store's tier
 * (tier.h). Its local pass (fl_gather_local) is all a plain store does; the
 * tier of a cluster store runs it collecting the rows its tables lack, and
 * fetches those itself. */
#include <sched.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/search.h"
#include "dram_store/store_impl.h"

/* Rows per chunk handed to a worker: enough to amortize the per-chunk stats
 * flush, small enough to balance (a worker takes ~100 ns a cold row, so a
 * chunk is a few us) and to let a watcher see rows land early. */
#define FL_GATHER_GRAIN 64
/* How many rows ahead of the copy a hashed id is found; every row's lines
 * are asked for twice as far ahead (fl_gather_hint). */
#define FL_GATHER_AHEAD 16

typedef struct fl_gather_job {
  const fl_gather_part *q;         /* the parts */
  uint32_t nq;                     /* number of parts */
  const size_t *start;             /* start[i]: first global row of part i; start[nq] = total */
  fl_missing policy;               /* zero-fill or fail */
  _Atomic uint64_t *missing;       /* per part: ids not found */
  _Atomic int failed;              /* set once a missing id fails the call */
  uint32_t fail_query;             /* the part of that id (valid once failed) */
  uint64_t fail_id;                /* that id */
  fl_gather_absent *absent;        /* NULL, or where rows the tables lack go (tier.h) */
  int skip_local;                  /* 1: the tables are bypassed (absent->skip_local) */
  fl_tier_counters *tier;          /* the store's tier statistics */
  _Atomic uint32_t *landed;        /* watched gathers: rows done per FL_GATHER_GRAIN block */
  int for_device;                  /* outputs bound for a GPU (row_copy.h) */
} fl_gather_job;

/* The hint for row k of part q, given when the copy is 2 * FL_GATHER_AHEAD
 * rows before it: the row itself for dense rows and references; for hashed
 * ids read by id, the id's home slot in the index, whose probe follows
 * FL_GATHER_AHEAD rows later (fl_gather_hashed_row). */
static inline void fl_gather_hint(const fl_gather_part *q, size_t k) {
  if (q->refs)
    fl_table_prefetch_ref(q->t, q->ids[k], q->refs[k]);
  else if (q->t->dense)
    fl_table_prefetch_row(q->t, q->ids[k]);
  else
    fl_table_prefetch_index(q->t, q->ids[k]);
}

/* Row i of rows [b, e) of a part of hashed ids, read by id: its index slot
 * was found FL_GATHER_AHEAD rows before its copy (its home slot hinted as
 * far again before that), or before the range's first copy, and the copy
 * reads the row found there, or looks again when the id moved meanwhile
 * (fl_table_read_found). So the index is probed once a row: a second probe
 * for the copy costs about a third of the rows a second (PERFORMANCE_LOG,
 * stop 33). ahead: FL_GATHER_AHEAD finds, by row modulo its size. 1 when
 * found. */
static int fl_gather_hashed_row(const fl_gather_part *q, size_t i, size_t e,
                                fl_table_found *ahead, unsigned char *dst, int for_device) {
  fl_table *t = q->t;
  fl_table_found f = ahead[i % FL_GATHER_AHEAD];
  if (i + FL_GATHER_AHEAD < e) { /* into row i's place, read above */
    fl_table_found *next = &ahead[i % FL_GATHER_AHEAD];
    fl_table_find(t, q->ids[i + FL_GATHER_AHEAD], next);
    fl_table_prefetch_found(t, next);
  }
  if (f.slot && fl_table_read_found(t, q->ids[i], &f, dst, for_device)) {
    if (q->refs_out) q->refs_out[i] = fl_table_found_ref(t, &f);
    return 1;
  }
  return fl_table_read(t, q->ids[i], dst, q->refs_out ? &q->refs_out[i] : NULL, for_device);
}

/* Rows [b, e) of part qi, which are rows [b - start, e - start) of the part. */
static int fl_gather_query(fl_gather_job *j, uint32_t qi, size_t b, size_t e) {
  const fl_gather_part *q = &j->q[qi];
  fl_table *t = q->t;
  size_t rb = t->row_bytes;
  unsigned char *out = q->out;
  const uint64_t *refs = q->refs;
  uint64_t miss = 0, elsewhere = 0;
  fl_table_found ahead[FL_GATHER_AHEAD]; /* hashed ids: fl_gather_hashed_row's */
  int ok = 1;
  int by_id = !j->skip_local && !refs && !t->dense; /* hashed ids read by id */
  /* Before the first copy, what the loop would have done for the first rows
   * had it started earlier: every line they need is asked for before any
   * copy (or find) waits for one. A small batch over many tables gathers
   * parts of tens of rows: started cold, a part's first rows would wait for
   * their index lines one after another (this start doubles the rows a
   * second at 512 rows a call over 26 tables, PERFORMANCE_LOG stop 36). */
  for (size_t i = b; !j->skip_local && i < e && i < b + 2 * FL_GATHER_AHEAD; i++)
    fl_gather_hint(q, i);
  for (size_t i = b; by_id && i < e && i < b + FL_GATHER_AHEAD; i++) {
    fl_table_find(t, q->ids[i], &ahead[i % FL_GATHER_AHEAD]);
    fl_table_prefetch_found(t, &ahead[i % FL_GATHER_AHEAD]);
  }
  for (size_t i = b; i < e; i++) {
    int found;
    if (i + 2 * FL_GATHER_AHEAD < e && !j->skip_local) fl_gather_hint(q, i + 2 * FL_GATHER_AHEAD);
    if (j->skip_local) {
      found = 0;
      if (q->refs_out) q->refs_out[i] = 0;
    } else if (refs) {
      found = fl_table_read_ref(t, q->ids[i], refs[i], out + i * rb, j->for_device);
    } else if (by_id) {
      found = fl_gather_hashed_row(q, i, e, ahead, out + i * rb, j->for_device);
    } else {
      found = fl_table_read(t, q->ids[i], out + i * rb, q->refs_out ? &q->refs_out[i] : NULL,
                            j->for_device);
    }
    if (found) continue;
    if (j->absent) {
      size_t k = atomic_fetch_add_explicit(&j->absent->n, 1, memory_order_relaxed);
      j->absent->rows[k] = j->start[qi] + i;
      elsewhere++;
      continue;
    }
    miss++;
    if (j->policy == FL_MISSING_ERROR) {
      int expected = 0;
      if (atomic_compare_exchange_strong(&j->failed, &expected, 1)) {
        j->fail_query = qi;
        j->fail_id = q->ids[i];
      }
      ok = 0;
      e = i + 1;
      break;
    }
    memset(out + i * rb, 0, rb);
  }
  /* Before anyone is told (the landed blocks, the pool's end of the job). */
  fl_row_copy_fence(j->for_device);
  atomic_fetch_add_explicit(&t->lookups, e - b, memory_order_relaxed);
  atomic_fetch_add_explicit(&j->tier->lookups, e - b, memory_order_relaxed);
  atomic_fetch_add_explicit(&j->tier->local_hits, e - b - miss - elsewhere, memory_order_relaxed);
  if (miss) {
    atomic_fetch_add_explicit(&t->misses, miss, memory_order_relaxed);
    atomic_fetch_add_explicit(&j->missing[qi], miss, memory_order_relaxed);
  }
  return ok;
}

/* The part holding global row `row` of a gather: the last i with
 * start[i] <= row (start[0] = 0, n parts). */
static uint32_t fl_gather_part_of(const size_t *start, uint32_t n, uint64_t row) {
  return fl_search_range(start, n, row);
}

fl_gather_row fl_gather_row_at(const fl_gather *g, uint64_t row) {
  uint32_t qi = fl_gather_part_of(g->start, g->n, row);
  const fl_gather_part *p = &g->parts[qi];
  size_t i = row - g->start[qi], rb = p->t->row_bytes;
  return (fl_gather_row){qi, p->t->id, p->ids[i], p->out + i * rb, rb};
}

void fl_gather_count_missing(const fl_gather *g, uint32_t part) {
  atomic_fetch_add_explicit(&g->parts[part].t->misses, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g->miss[part], 1, memory_order_relaxed);
}

static void fl_gather_range(void *ctx, size_t b, size_t e) {
  fl_gather_job *j = ctx;
  size_t from = b;
  for (uint32_t qi = fl_gather_part_of(j->start, j->nq, b); qi < j->nq && b < e; qi++) {
    size_t qe = j->start[qi + 1] < e ? j->start[qi + 1] : e;
    if (b >= qe) continue;
    if (atomic_load_explicit(&j->failed, memory_order_relaxed)) return;
    if (!fl_gather_query(j, qi, b - j->start[qi], qe - j->start[qi])) return;
    b = qe;
  }
  /* Release: a watcher that sees a block complete sees its rows. */
  for (b = from; j->landed && b < e;) {
    size_t k = b / FL_GATHER_GRAIN, be = (k + 1) * FL_GATHER_GRAIN < e ? (k + 1) * FL_GATHER_GRAIN : e;
    atomic_fetch_add_explicit(&j->landed[k], (uint32_t)(be - b), memory_order_release);
    b = be;
  }
}

/* Runs a local gather of `total` rows on the store's workers while this
 * thread tells the watcher how far the completed prefix reaches (chunks are
 * handed out in order, so the prefix follows closely). When no block has
 * landed since it last looked, this thread gathers the next chunk itself:
 * helpers start when the kernel runs them, and a woken helper late by a
 * millisecond (a loaded host, or a vCPU the hypervisor holds) would
 * otherwise hold the query up that long with its chunks untouched
 * (serve_bench: 1-2 ms fetches of 1,800 rows, the caller spinning). */
static void fl_gather_watched_run(fl_store *s, fl_gather_job *j, size_t total,
                                  const fl_gather_watch *watch) {
  size_t blocks = (total + FL_GATHER_GRAIN - 1) / FL_GATHER_GRAIN;
  j->landed = calloc(blocks ? blocks : 1, sizeof *j->landed);
  if (total <= FL_GATHER_GRAIN || !j->landed ||
      !fl_workers_start(s->workers, total, FL_GATHER_GRAIN, fl_gather_range, j)) {
    /* Small, no memory for the blocks, no free workers, or watching does
     * not pay: the pool plans it with this thread working (and learns the
     * rows' cost from it); the watcher hears of the rows at the end. */
    fl_workers_for(s->workers, total, FL_GATHER_GRAIN, fl_gather_range, j);
  } else {
    size_t k = 0;
    for (unsigned idle = 0; k < blocks && !atomic_load_explicit(&j->failed, memory_order_relaxed);) {
      size_t k0 = k;
      for (; k < blocks; k++) {
        size_t rows = (k + 1) * FL_GATHER_GRAIN < total ? FL_GATHER_GRAIN : total - k * FL_GATHER_GRAIN;
        if (atomic_load_explicit(&j->landed[k], memory_order_acquire) != rows) break;
      }
      if (k > k0 && k < blocks) {
        watch->fn(watch->ctx, k * FL_GATHER_GRAIN);
      } else if (k < blocks && fl_workers_help(s->workers)) {
        idle = 0;
      } else if (++idle % 256 == 0) {
        sched_yield(); /* the workers may need this core */
      } else {
        fl_cpu_relax();
      }
    }
    fl_workers_wait(s->workers);
  }
  free(j->landed);
  j->landed = NULL;
}

fl_status fl_gather_part_init(fl_store *s, const char *call, uint32_t i, uint32_t table,
                              const uint64_t *ids, size_t n, void *out, fl_gather_part *p) {
  fl_table *t = fl_store_table_arg(s, table, call);
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  if (n && (!ids || !out))
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: query %u (table %u '%s'): %s is NULL", call, i,
                   table, t->name, ids ? "out" : "ids");
  size_t bad = fl_table_first_out_of_range(t, ids, n);
  if (bad < n)
    return fl_fail(s, FL_ERR_OUT_OF_RANGE, "%s: table %u '%s': id %llu is out of range (corpus %llu)",
                   call, table, t->name, (unsigned long long)ids[bad],
                   (unsigned long long)t->desc.corpus_size);
  *p = (fl_gather_part){.t = t, .ids = ids, .n = n, .out = out};
  return FL_OK;
}

fl_status fl_gather_local(fl_store *s, const fl_gather *g, fl_gather_absent *absent) {
  fl_gather_job job = {.q = g->parts, .nq = g->n, .start = g->start, .policy = g->policy,
                       .missing = g->miss, .absent = absent,
                       .skip_local = absent && absent->skip_local, .tier = &s->tier,
                       .for_device = g->for_device};
  atomic_init(&job.failed, 0);
  size_t total = g->start[g->n];
  uint64_t t0 = fl_now_ns();
  uint32_t token = fl_grace_enter(&s->env->grace);
  if (g->watch) fl_gather_watched_run(s, &job, total, g->watch);
  else fl_workers_for(s->workers, total, FL_GATHER_GRAIN, fl_gather_range, &job);
  fl_grace_exit(&s->env->grace, token);
  atomic_fetch_add_explicit(&s->tier.ns_local, fl_now_ns() - t0, memory_order_relaxed);
  if (!atomic_load(&job.failed)) return FL_OK;
  const fl_gather_part *q = &g->parts[job.fail_query];
  return fl_fail(s, FL_ERR_NOT_FOUND, "%s: table %u '%s': id %llu not found", g->call, q->t->id,
                 q->t->name, (unsigned long long)job.fail_id);
}

fl_status fl_store_gather_parts(fl_store *s, const char *call, const fl_gather_part *parts,
                                uint32_t n, fl_missing policy, uint64_t *missing,
                                const fl_gather_watch *watch, int for_device) {
  size_t *start = malloc((n + 1) * sizeof *start);
  _Atomic uint64_t *miss = calloc(n ? n : 1, sizeof *miss);
  if (!start || !miss) {
    free(start);
    free(miss);
    return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %u queries", call, n);
  }
  start[0] = 0;
  for (uint32_t i = 0; i < n; i++) start[i + 1] = start[i] + parts[i].n;
  size_t total = start[n];
  fl_gather g = {.call = call, .parts = parts, .n = n, .start = start, .policy = policy,
                 .miss = miss, .watch = watch, .for_device = for_device};
  fl_status st = s->ops->gather(s, &g);
  if (missing)
    for (uint32_t i = 0; i < n; i++) missing[i] = atomic_load(&miss[i]);
  free(start);
  free(miss);
  if (st == FL_OK && watch) watch->fn(watch->ctx, total);
  return st;
}

fl_status fl_gather_start(fl_store *s, const char *call, const void *queries, uint32_t n,
                          fl_missing policy, fl_gather_part **parts) {
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: store is NULL", call);
  if (policy != FL_MISSING_ZERO && policy != FL_MISSING_ERROR)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: unknown missing policy %d", call, (int)policy);
  if (n && !queries) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: queries is NULL", call);
  *parts = malloc((n ? n : 1) * sizeof **parts);
  if (!*parts) return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %u queries", call, n);
  return FL_OK;
}

/* fl_store_gather and fl_store_gather_watched. */
static fl_status gather_queries(fl_store *s, const char *call, const fl_table_query *queries,
                                uint32_t n_queries, fl_missing policy, uint64_t *missing,
                                const fl_gather_watch *watch, uint64_t *const *refs_out,
                                int for_device) {
  fl_gather_part *parts;
  fl_status st = fl_gather_start(s, call, queries, n_queries, policy, &parts);
  if (st != FL_OK) return st;
  for (uint32_t i = 0; i < n_queries && st == FL_OK; i++) {
    const fl_table_query *q = &queries[i];
    st = fl_gather_part_init(s, call, i, q->table, q->ids, q->n, q->out, &parts[i]);
    if (st == FL_OK && refs_out) parts[i].refs_out = refs_out[i];
  }
  if (st == FL_OK)
    st = fl_store_gather_parts(s, call, parts, n_queries, policy, missing, watch, for_device);
  free(parts);
  return st;
}

fl_status fl_store_gather(fl_store *s, const fl_table_query *queries, uint32_t n_queries,
                          fl_missing policy, uint64_t *missing) {
  return gather_queries(s, "fl_store_gather", queries, n_queries, policy, missing, NULL, NULL, 0);
}

fl_status fl_store_gather_watched(fl_store *s, const fl_table_query *queries, uint32_t n_queries,
                                  fl_missing policy, const fl_gather_watch *watch,
                                  uint64_t *const *refs_out, int for_device) {
  return gather_queries(s, "fl_store_gather", queries, n_queries, policy, NULL, watch, refs_out,
                        for_device);
}
