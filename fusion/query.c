/* query.c: fl_query: validates a request, splits it into part batches (one for
 * the flat layout, one per table for the per-table baseline) and runs the
 * backend's engine on each; fl_cache_create: the cache, with the query
 * kernels loaded and its zero-copy limit calibrated. */
#include <stdlib.h>
#include <string.h>

#include "cache/cuda_state.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "dram_store/store_internal.h"
#include "fusion/query.h"
#include "fusion/query_kernels.h"
#include "fusion/zc_calibrate.h"

fl_status fl_query_validate(fl_cache *c, const fl_table_query *q, uint32_t n, int prefetch) {
  const char *call = prefetch ? "fl_prefetch" : "fl_query";
  if (n > 0 && !q) return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "%s: queries is NULL", call);
  uint64_t total = 0;
  uint32_t n_tables = fl_cache_fixed_of(c)->n_tables;
  for (uint32_t i = 0; i < n; i++) {
    if (q[i].table >= n_tables)
      return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "query %u: table %u does not exist (%u tables)",
                     i, q[i].table, n_tables);
    if (q[i].n > 0 && (!q[i].ids || (!q[i].out && !prefetch)))
      return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "query %u (table %u): %s is NULL", i, q[i].table,
                     q[i].ids ? "out" : "ids");
    if (q[i].n > 0xffffffffull)
      return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "query %u (table %u): %zu ids, more than 2^32-1",
                     i, q[i].table, q[i].n);
    total += q[i].n;
  }
  if (total > 0xffffffffull)
    return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "%s: %llu ids in one call, more than 2^32-1", call,
                   (unsigned long long)total);
  return FL_OK;
}

/* Builds part `part`'s batch from the queries of its tables; q[i] is the
 * caller's query first + i. A prefetch's args have no outputs. */
static void make_batch(fl_cache *c, uint32_t part, const fl_table_query *q, uint32_t first,
                       uint32_t n, int prefetch, fl_batch_arg *args, uint32_t *query_of,
                       fl_part_batch *b) {
  memset(b, 0, sizeof *b);
  b->c = c;
  b->prefetch = prefetch;
  b->f = fl_cache_fixed_of(c);
  b->part = part;
  b->args = args;
  b->query_of = query_of;
  for (uint32_t i = 0; i < n; i++) {
    const fl_table_info *ti = &b->f->tables[q[i].table];
    if (ti->part != part || q[i].n == 0) continue;
    fl_batch_arg *a = &args[b->n_args];
    memset(a, 0, sizeof *a);
    a->ids = q[i].ids;
    a->out = prefetch ? NULL : q[i].out;
    a->key_offset = b->n_keys;
    a->n = (uint32_t)q[i].n;
    a->table = q[i].table;
    a->vec_bytes = ti->vec_bytes;
    query_of[b->n_args] = first + i;
    b->n_keys += q[i].n;
    if (ti->vec_bytes > b->max_row) b->max_row = ti->vec_bytes;
    b->n_args++;
  }
}

fl_status fl_cache_create(fl_store *store, const fl_config *cfg, fl_cache **out) {
  fl_status st = fl_cache_new(store, cfg, out);
  if (st != FL_OK || fl_cache_fixed_of(*out)->backend != FL_BACKEND_CUDA) return st;
  /* The query kernels load now: lazy module loading would load each at its
   * first launch, inside whichever query meets it. */
  st = fl_load_module(NULL, "the query kernels", fl_query_kernels_load);
  if (st == FL_OK) st = fl_zc_calibrate(*out);
  if (st == FL_OK) return FL_OK;
  fl_cache_destroy(*out);
  *out = NULL;
  return st;
}

fl_status fl_query(fl_cache *c, const fl_table_query *queries, uint32_t n_queries, void *stream) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_query: cache is NULL");
  fl_status st = fl_query_validate(c, queries, n_queries, 0);
  return st == FL_OK ? fl_query_run(c, queries, n_queries, stream, NULL, NULL, 0) : st;
}

fl_status fl_prefetch(fl_cache *c, const fl_table_query *queries, uint32_t n_queries,
                      void *stream) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_prefetch: cache is NULL");
  fl_status st = fl_query_validate(c, queries, n_queries, 1);
  return st == FL_OK ? fl_query_run(c, queries, n_queries, stream, NULL, NULL, 1) : st;
}

fl_status fl_query_run(fl_cache *c, const fl_table_query *queries, uint32_t n_queries,
                       void *stream, const fl_query_view *views, fl_plan *plan, int prefetch) {
  uint64_t t0 = fl_now_ns();
  fl_query_timing *timing = fl_query_timing_here();
  *timing = (fl_query_timing){0};
  fl_status st = FL_OK;
  const fl_cache_fixed *f = fl_cache_fixed_of(c);
  fl_cache_add(c, prefetch ? FL_STAT_PREFETCHES : FL_STAT_QUERIES, 1);
  fl_batch_arg *args = malloc((n_queries ? n_queries : 1) * sizeof *args);
  uint32_t *query_of = malloc((n_queries ? n_queries : 1) * sizeof *query_of);
  if (!args || !query_of) {
    free(args);
    free(query_of);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint32_t now = fl_cache_next_batch(c);
  /* Per-table layout: one part batch (its own launches) per table. The flat
   * layout has one part, so one batch covers every table, in launches of at
   * most FL_LAUNCH_MAX_QUERIES queries (the kernels keep the scan in shared
   * memory). */
  for (uint32_t first = 0; first < n_queries && st == FL_OK; first += FL_LAUNCH_MAX_QUERIES) {
    uint32_t n = n_queries - first < FL_LAUNCH_MAX_QUERIES ? n_queries - first : FL_LAUNCH_MAX_QUERIES;
    for (uint32_t part = 0; part < f->n_parts && st == FL_OK; part++) {
      fl_part_batch b;
      make_batch(c, part, queries + first, first, n, prefetch, args, query_of, &b);
      if (b.n_keys == 0) continue;
      b.now = now;
      b.stream = stream;
      b.views = views;
      b.plan = plan;
      st = f->backend == FL_BACKEND_CUDA ? fl_query_part_cuda(&b) : fl_query_part_host(&b);
    }
  }
  free(args);
  free(query_of);
  timing->total_ns = fl_now_ns() - t0;
  return st;
}

fl_status fl_cache_reserve(fl_cache *c, uint64_t keys, uint32_t queries, uint32_t callers) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_cache_reserve: cache is NULL");
  if (keys > 0xffffffffull)
    return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "fl_cache_reserve: %llu keys, more than 2^32-1",
                   (unsigned long long)keys);
  if (callers == 0 || callers > FL_RESERVE_MAX_CALLERS)
    return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "fl_cache_reserve: %u callers, not 1 to %u", callers,
                   FL_RESERVE_MAX_CALLERS);
  if (queries > FL_LAUNCH_MAX_QUERIES) queries = FL_LAUNCH_MAX_QUERIES;
  return fl_cache_fixed_of(c)->backend == FL_BACKEND_CUDA
             ? fl_query_cuda_reserve(c, keys, queries, callers)
             : FL_OK;
}
