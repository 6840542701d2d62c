/* query_host.c: the host engine: the same probe, copy and admission steps as
 * the CUDA kernels, run by the cache's worker threads over host memory with
 * the same index.h / flat_key.h / batch.h functions. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "fusion/query.h"

typedef struct probe_ctx {
  fl_part_batch *b;
  uint64_t *offsets;          /* args' key offsets, for fl_batch_find */
  uint64_t *locs;             /* per position: slab address or 0 */
  uint32_t *miss_pos;
  uint64_t *miss_ids;
  uint64_t *miss_locs;        /* unified-index pointer of each miss, or 0 */
  uint64_t n_miss;            /* atomic append cursor */
  uint64_t bad_pos;           /* smallest position of an out-of-range id */
} probe_ctx;

static void probe_range(void *arg, size_t begin, size_t end) {
  probe_ctx *x = arg;
  fl_part_batch *b = x->b;
  const fl_index_view *v = &b->c->parts[b->part].index;
  for (size_t pos = begin; pos < end; pos++) {
    const fl_batch_arg *a = &b->args[fl_batch_find(x->offsets, b->n_args, pos)];
    uint64_t id = a->ids[pos - a->key_offset], key, loc = FL_LOC_NONE;
    if (fl_code_encode(&b->c->tables[a->table].code, v->key_bits, id, &key) != 0) {
      uint64_t cur = __atomic_load_n(&x->bad_pos, __ATOMIC_RELAXED);
      while (pos < cur && !__atomic_compare_exchange_n(&x->bad_pos, &cur, pos, 0,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      }
    } else {
      int64_t slot = fl_index_find(v, key, &loc);
      if (slot >= 0) fl_index_touch(v, slot, b->now);
      if (slot < 0 || (loc & FL_LOC_DRAM_BIT)) {
        uint64_t m = __atomic_fetch_add(&x->n_miss, 1, __ATOMIC_RELAXED);
        x->miss_pos[m] = (uint32_t)pos;
        x->miss_ids[m] = id;
        x->miss_locs[m] = slot >= 0 ? loc : 0;
        loc = FL_LOC_NONE;
      }
    }
    x->locs[pos] = loc;
  }
}

static void copy_range(void *arg, size_t begin, size_t end) {
  probe_ctx *x = arg;
  fl_part_batch *b = x->b;
  for (size_t pos = begin; pos < end; pos++) {
    if (x->locs[pos] == FL_LOC_NONE) continue;
    const fl_batch_arg *a = &b->args[fl_batch_find(x->offsets, b->n_args, pos)];
    memcpy(a->out + (pos - a->key_offset) * a->vec_bytes, (const void *)x->locs[pos],
           a->vec_bytes);
  }
}

/* Writes fetched rows to their outputs and admits the plan's rows. */
static fl_status finish_misses(fl_part_batch *b, probe_ctx *x) {
  fl_cache *c = b->c;
  fl_misses m;
  uint64_t t0 = fl_now_ns();
  fl_status st = fl_misses_group(b, x->miss_pos, x->miss_ids, x->miss_locs, x->n_miss, &m);
  if (st != FL_OK) return st;
  uint8_t *staging = malloc(m.staging_bytes ? m.staging_bytes : 16);
  uint64_t *gen = malloc(c->n_tables * sizeof *gen);
  if (!staging || !gen) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu staged rows",
                 (unsigned long long)m.n);
    goto out;
  }
  if ((st = fl_misses_fetch(b, &m, staging, gen)) != FL_OK) goto out;
  for (uint64_t r = 0; r < m.n; r++) {
    const fl_batch_arg *a = &b->args[m.arg[r]];
    memcpy(a->out + (m.pos[r] - a->key_offset) * a->vec_bytes, staging + m.src_off[r],
           a->vec_bytes);
  }
  fl_query_count(b, &m);
  uint64_t t1 = fl_now_ns();
  atomic_fetch_add(&c->ns_miss_fetch, t1 - t0);
  pthread_mutex_lock(&c->lock);
  fl_admit_plan plan;
  st = fl_admit_plan_make(b, &m, gen, &plan);
  if (st == FL_OK && plan.n) {
    uint8_t *result = malloc(plan.n);
    if (!result) {
      st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
    } else {
      const fl_index_view *v = &c->parts[b->part].index;
      for (uint64_t k = 0; k < plan.n; k++) {
        if (plan.row_bytes[k]) /* 0: a unified-index pointer, nothing to copy */
          memcpy((void *)plan.slots[k], staging + plan.src_off[k], plan.row_bytes[k]);
        result[k] = (uint8_t)fl_index_insert(v, plan.keys[k], plan.slots[k], b->now);
      }
      fl_admit_plan_finish(b, &plan, result);
      free(result);
    }
  }
  if (st != FL_OK) fl_admit_plan_abandon(b, &plan); /* nothing was published */
  fl_admit_plan_free(&plan);
  pthread_mutex_unlock(&c->lock);
  atomic_fetch_add(&c->ns_admission, fl_now_ns() - t1);
out:
  free(staging);
  free(gen);
  fl_misses_free(&m);
  return st;
}

fl_status fl_query_part_host(fl_part_batch *b) {
  fl_cache *c = b->c;
  probe_ctx x = {.b = b, .bad_pos = ~0ull};
  x.offsets = malloc(b->n_args * sizeof *x.offsets);
  x.locs = malloc(b->n_keys * sizeof *x.locs);
  x.miss_pos = malloc(b->n_keys * sizeof *x.miss_pos);
  x.miss_ids = malloc(b->n_keys * sizeof *x.miss_ids);
  x.miss_locs = malloc(b->n_keys * sizeof *x.miss_locs);
  fl_status st = FL_OK;
  if (!x.offsets || !x.locs || !x.miss_pos || !x.miss_ids || !x.miss_locs) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu keys",
                 (unsigned long long)b->n_keys);
    goto out;
  }
  for (uint32_t a = 0; a < b->n_args; a++) x.offsets[a] = b->args[a].key_offset;
  pthread_mutex_lock(&c->lock);
  int64_t ticket = fl_reclaim_begin(&c->reclaim);
  pthread_mutex_unlock(&c->lock);
  if (ticket < 0) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory registering the query");
    goto out;
  }
  uint64_t t0 = fl_now_ns();
  fl_workers_for(c->workers, b->n_keys, 4096, probe_range, &x);
  uint64_t t1 = fl_now_ns();
  atomic_fetch_add(&c->ns_index, t1 - t0);
  if (x.bad_pos != ~0ull) {
    const fl_batch_arg *a = &b->args[fl_batch_find(x.offsets, b->n_args, x.bad_pos)];
    st = fl_query_range_error(b, x.bad_pos, a->ids[x.bad_pos - a->key_offset]);
  } else {
    fl_workers_for(c->workers, b->n_keys, 4096, copy_range, &x);
    atomic_fetch_add(&c->ns_hit_copy, fl_now_ns() - t1);
    st = finish_misses(b, &x);
  }
  pthread_mutex_lock(&c->lock);
  fl_reclaim_end(&c->reclaim, ticket, NULL);
  pthread_mutex_unlock(&c->lock);
out:
  free(x.offsets);
  free(x.locs);
  free(x.miss_pos);
  free(x.miss_ids);
  free(x.miss_locs);
  return st;
}
