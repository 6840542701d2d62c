/* gather.c: fl_store_gather, the batched multi-threaded lookup. All queries'
 * rows form one range [0, total) split over the store's workers, so a batch
 * of many small tables balances as well as one big one. Inputs are validated
 * before any output is written. Under FL_MISSING_ERROR a missing id stops the
 * call with FL_ERR_NOT_FOUND; outputs may then be partly written (the store
 * itself never changes in a gather). */
#include <stdlib.h>

#include "dram_store/store_impl.h"

/* Rows per chunk handed to a worker: enough to amortize the per-chunk stats
 * flush, small enough to balance. */
#define FL_GATHER_GRAIN 256
/* How many rows ahead of the copy to prefetch the row; the index slot is
 * prefetched twice as far ahead (see fl_table_prefetch_row). */
#define FL_GATHER_AHEAD 16

typedef struct fl_gather_job {
  fl_store *s;                     /* the store */
  const fl_table_query *q;         /* the queries */
  uint32_t nq;                     /* number of queries */
  const size_t *start;             /* start[i]: first global row of query i; start[nq] = total */
  fl_missing policy;               /* zero-fill or fail */
  _Atomic uint64_t *missing;       /* per query: ids not found */
  _Atomic int failed;              /* set once a missing id fails the call */
  uint32_t fail_query;             /* the query of that id (valid once failed) */
  uint64_t fail_id;                /* that id */
} fl_gather_job;

/* Rows [b, e) of query qi, which are rows [b - start, e - start) of the query. */
static int fl_gather_query(fl_gather_job *j, uint32_t qi, size_t b, size_t e) {
  const fl_table_query *q = &j->q[qi];
  fl_table *t = &j->s->tables[q->table];
  size_t rb = t->row_bytes;
  unsigned char *out = q->out;
  uint64_t miss = 0;
  int ok = 1;
  for (size_t i = b; i < e; i++) {
    if (i + 2 * FL_GATHER_AHEAD < e) fl_table_prefetch_index(t, q->ids[i + 2 * FL_GATHER_AHEAD]);
    if (i + FL_GATHER_AHEAD < e) fl_table_prefetch_row(t, q->ids[i + FL_GATHER_AHEAD]);
    if (fl_table_read(t, q->ids[i], out + i * rb)) continue;
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
  atomic_fetch_add_explicit(&t->lookups, e - b, memory_order_relaxed);
  if (miss) {
    atomic_fetch_add_explicit(&t->misses, miss, memory_order_relaxed);
    atomic_fetch_add_explicit(&j->missing[qi], miss, memory_order_relaxed);
  }
  return ok;
}

static void fl_gather_range(void *ctx, size_t b, size_t e) {
  fl_gather_job *j = ctx;
  /* The query holding global row b: the last start <= b. */
  uint32_t lo = 0, hi = j->nq;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (j->start[mid] <= b) lo = mid; else hi = mid;
  }
  for (uint32_t qi = lo; qi < j->nq && b < e; qi++) {
    size_t qe = j->start[qi + 1] < e ? j->start[qi + 1] : e;
    if (b >= qe) continue;
    if (atomic_load_explicit(&j->failed, memory_order_relaxed)) return;
    if (!fl_gather_query(j, qi, b - j->start[qi], qe - j->start[qi])) return;
    b = qe;
  }
}

/* Checks every query; FL_OK or the failure, recorded on s. */
static fl_status fl_gather_check(fl_store *s, const fl_table_query *queries, uint32_t n) {
  if (n && !queries)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_gather: queries is NULL");
  for (uint32_t i = 0; i < n; i++) {
    const fl_table_query *q = &queries[i];
    fl_table *t = fl_store_table_arg(s, q->table, "fl_store_gather");
    if (!t) return FL_ERR_INVALID_ARGUMENT;
    if (q->n && (!q->ids || !q->out))
      return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_gather: query %u (table %u '%s'): %s is NULL",
                     i, q->table, t->name, q->ids ? "out" : "ids");
    size_t bad = fl_table_first_out_of_range(t, q->ids, q->n);
    if (bad < q->n)
      return fl_fail(s, FL_ERR_OUT_OF_RANGE,
                     "fl_store_gather: table %u '%s': id %llu is out of range (corpus %llu)",
                     q->table, t->name, (unsigned long long)q->ids[bad],
                     (unsigned long long)t->desc.corpus_size);
  }
  return FL_OK;
}

fl_status fl_store_gather(fl_store *s, const fl_table_query *queries, uint32_t n_queries,
                          fl_missing policy, uint64_t *missing) {
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_gather: store is NULL");
  if (policy != FL_MISSING_ZERO && policy != FL_MISSING_ERROR)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_gather: unknown missing policy %d",
                   (int)policy);
  fl_status st = fl_gather_check(s, queries, n_queries);
  if (st != FL_OK) return st;
  size_t *start = malloc((n_queries + 1) * sizeof *start);
  _Atomic uint64_t *miss = calloc(n_queries ? n_queries : 1, sizeof *miss);
  if (!start || !miss) {
    free(start);
    free(miss);
    return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "fl_store_gather: no memory for %u queries",
                   n_queries);
  }
  start[0] = 0;
  for (uint32_t i = 0; i < n_queries; i++) start[i + 1] = start[i] + queries[i].n;
  fl_gather_job job = {.s = s, .q = queries, .nq = n_queries, .start = start,
                       .policy = policy, .missing = miss};
  atomic_init(&job.failed, 0);
  uint32_t token = fl_grace_enter(&s->env->grace);
  fl_workers_for(s->workers, start[n_queries], FL_GATHER_GRAIN, fl_gather_range, &job);
  fl_grace_exit(&s->env->grace, token);
  if (missing)
    for (uint32_t i = 0; i < n_queries; i++) missing[i] = atomic_load(&miss[i]);
  free(start);
  free(miss);
  if (atomic_load(&job.failed)) {
    const fl_table_query *q = &queries[job.fail_query];
    return fl_fail(s, FL_ERR_NOT_FOUND, "fl_store_gather: table %u '%s': id %llu not found",
                   q->table, s->tables[q->table].name, (unsigned long long)job.fail_id);
  }
  return FL_OK;
}
