/* query_host.c: the host engine: the same probe, dedup and copy steps as
 * the CUDA kernels, run by the cache's worker threads over host memory with
 * the same index.h / flat_key.h / batch.h / miss_set.h functions. Admission
 * (cache/admit.h) runs before the call returns (the host has no second
 * stream to overlap it with). A prefetch has no outputs: it probes, fetches
 * and admits. */
#include <stdlib.h>
#include <string.h>

#include "cache/admit.h"
#include "common/clock.h"
#include "common/error.h"
#include "fusion/query.h"

typedef struct probe_ctx {
  fl_part_batch *b;
  uint64_t *offsets;          /* args' key offsets, for fl_batch_find */
  uint64_t *locs;             /* per position: slab address or 0 */
  fl_miss_set set;            /* the batch's unique misses (miss_set.h) */
  uint32_t *per_arg;          /* FL_MISS_COUNTERS per arg */
  uint32_t *miss_pos, *miss_slot; /* per missed position */
  uint32_t *uniq_slot;        /* per uid */
  uint64_t *uniq_ids, *uniq_refs;
  uint8_t *staging;
  uint64_t *stage_base;
  uint64_t n_miss;            /* atomic append cursor */
  uint64_t bad_pos;           /* smallest position of an out-of-range id */
} probe_ctx;

static void probe_range(void *arg, size_t begin, size_t end) {
  probe_ctx *x = arg;
  fl_part_batch *b = x->b;
  const fl_index_view *v = fl_cache_index(b->c, b->part);
  for (size_t pos = begin; pos < end; pos++) {
    uint32_t q = fl_batch_find(x->offsets, b->n_args, pos);
    const fl_batch_arg *a = &b->args[q];
    uint64_t id = a->ids[pos - a->key_offset], key, loc = FL_LOC_NONE;
    if (fl_code_encode(&b->f->tables[a->table].code, v->key_bits, id, &key) != 0) {
      uint64_t cur = __atomic_load_n(&x->bad_pos, __ATOMIC_RELAXED);
      while (pos < cur && !__atomic_compare_exchange_n(&x->bad_pos, &cur, pos, 0,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      }
    } else {
      int64_t s = fl_index_find(v, key, &loc);
      if (s >= 0) fl_index_touch(v, s, b->now);
      if (s < 0 || (loc & FL_LOC_DRAM_BIT)) {
        uint64_t dram = s >= 0 ? loc : 0;
        int pointer = dram != 0, fresh;
        uint32_t *counters = x->per_arg + FL_MISS_COUNTERS * q;
        uint64_t slot = fl_miss_set_insert(&x->set, fl_miss_set_base(a->key_offset, q), a->n, id, &fresh);
        fl_add32(&x->set.count[slot], 1);
        fl_add32(&counters[2 + pointer], 1);
        if (fresh) {
          uint64_t uid = fl_miss_uid(a->key_offset, a->n, pointer, fl_add32(&counters[pointer], 1));
          x->set.uid[slot] = (uint32_t)uid;
          x->uniq_slot[uid] = (uint32_t)slot;
          x->uniq_ids[uid] = id;
          if (pointer) x->uniq_refs[uid] = dram;
        }
        uint64_t m = __atomic_fetch_add(&x->n_miss, 1, __ATOMIC_RELAXED);
        x->miss_pos[m] = (uint32_t)pos;
        x->miss_slot[m] = (uint32_t)slot;
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

/* Expands unique rows into every missed position (the scatter kernel's job). */
static void scatter_range(void *arg, size_t begin, size_t end) {
  probe_ctx *x = arg;
  fl_part_batch *b = x->b;
  for (size_t m = begin; m < end; m++) {
    uint32_t pos = x->miss_pos[m], ua = 0;
    uint64_t row = 0;
    int pointer;
    fl_miss_resolve(x->offsets, b->args, b->n_args, x->per_arg, x->set.uid[x->miss_slot[m]], &ua,
                    &row, &pointer);
    const fl_batch_arg *a = &b->args[ua];
    memcpy(a->out + (pos - a->key_offset) * a->vec_bytes,
           x->staging + x->stage_base[ua] + row * a->vec_bytes, a->vec_bytes);
  }
}

/* Fetches the unique rows, writes them to every missed position, admits. */
static fl_status finish_misses(fl_part_batch *b, probe_ctx *x) {
  fl_cache *c = b->c;
  uint64_t t0 = fl_now_ns(), cpu0 = fl_thread_cpu_ns(), cpu1 = cpu0, cpu2 = cpu0;
  uint64_t *gen = malloc(b->f->n_tables * sizeof *gen);
  x->stage_base = malloc(b->n_args * sizeof *x->stage_base);
  fl_status st = gen && x->stage_base ? FL_OK : fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  uint64_t bytes = st == FL_OK ? fl_misses_layout(b, x->per_arg, x->stage_base) : 0;
  if (st == FL_OK && !(x->staging = malloc(bytes ? bytes : 16)))
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu staged bytes",
                 (unsigned long long)bytes);
  /* The store's lookups and gathers are left out of this thread's CPU time
   * (the fetch counts its own share outside the gathers). */
  cpu1 = fl_thread_cpu_ns();
  if (st == FL_OK) {
    fl_cache_generations(c, gen);
    st = fl_misses_fetch(b, x->per_arg, x->uniq_ids, x->uniq_refs,
                         fl_cache_unified_limit(c, b->part) > 0, x->staging, x->stage_base, NULL,
                         NULL, NULL, 0);
  }
  cpu2 = fl_thread_cpu_ns();
  if (st == FL_OK) {
    if (!b->prefetch) fl_workers_for(b->f->workers, x->n_miss, 4096, scatter_range, x);
    uint64_t t1 = fl_now_ns();
    fl_cache_add(c, FL_STAT_NS_MISS_FETCH, t1 - t0);
    fl_admit_host_batch ab = {b->part,      b->now,       b->args,    b->n_args,
                              x->per_arg,   x->set,       x->uniq_slot, x->uniq_refs,
                              x->staging,   x->stage_base, gen,       b->prefetch};
    st = fl_admit_host(c, &ab);
    uint64_t t2 = fl_now_ns();
    fl_cache_add(c, FL_STAT_NS_ADMISSION, t2 - t1);
    fl_query_timing *tm = fl_query_timing_here();
    tm->fetch_ns += t1 - t0;
    tm->admission_ns += t2 - t1;
  }
  free(gen);
  free(x->staging);
  free(x->stage_base);
  fl_cache_add(c, FL_STAT_NS_MISS_CPU, (cpu1 - cpu0) + (fl_thread_cpu_ns() - cpu2));
  return st;
}

fl_status fl_query_part_host(fl_part_batch *b) {
  fl_cache *c = b->c;
  uint64_t n = b->n_keys, sets = fl_miss_set_slots(n, b->n_args);
  probe_ctx x = {.b = b, .bad_pos = ~0ull};
  x.offsets = malloc(b->n_args * sizeof *x.offsets);
  x.locs = malloc(n * sizeof *x.locs);
  x.set.ids = malloc(sets * sizeof *x.set.ids);
  x.set.uid = malloc(sets * sizeof *x.set.uid);
  x.set.count = calloc(sets, sizeof *x.set.count);
  x.per_arg = calloc(FL_MISS_COUNTERS * b->n_args, sizeof *x.per_arg);
  x.miss_pos = malloc(n * sizeof *x.miss_pos);
  x.miss_slot = malloc(n * sizeof *x.miss_slot);
  x.uniq_slot = malloc(n * sizeof *x.uniq_slot);
  x.uniq_ids = malloc(n * sizeof *x.uniq_ids);
  x.uniq_refs = calloc(n, sizeof *x.uniq_refs);
  fl_status st = FL_OK;
  if (!x.offsets || !x.locs || !x.set.ids || !x.set.uid || !x.set.count || !x.per_arg ||
      !x.miss_pos || !x.miss_slot || !x.uniq_slot || !x.uniq_ids || !x.uniq_refs) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for %llu keys", (unsigned long long)n);
    goto out;
  }
  memset(x.set.ids, 0xff, sets * sizeof *x.set.ids);
  for (uint32_t a = 0; a < b->n_args; a++) x.offsets[a] = b->args[a].key_offset;
  int64_t ticket = fl_cache_query_begin(c);
  if (ticket < 0) {
    st = fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory registering the query");
    goto out;
  }
  uint64_t t0 = fl_now_ns();
  fl_workers_for(b->f->workers, n, 4096, probe_range, &x);
  uint64_t t1 = fl_now_ns();
  fl_cache_add(c, FL_STAT_NS_INDEX, t1 - t0);
  if (x.bad_pos != ~0ull) {
    const fl_batch_arg *a = &b->args[fl_batch_find(x.offsets, b->n_args, x.bad_pos)];
    st = fl_query_range_error(b, x.bad_pos, a->ids[x.bad_pos - a->key_offset]);
  } else {
    if (!b->prefetch) fl_workers_for(b->f->workers, n, 4096, copy_range, &x);
    uint64_t t2 = fl_now_ns();
    fl_cache_add(c, FL_STAT_NS_HIT_COPY, t2 - t1);
    fl_query_timing *tm = fl_query_timing_here();
    tm->index_ns += t2 - t0;
    tm->missed += x.n_miss;
    fl_query_count(b, x.per_arg);
    if (x.n_miss) st = finish_misses(b, &x);
  }
  fl_cache_query_end(c, ticket, NULL);
out:
  free(x.offsets);
  free(x.locs);
  free(x.set.ids);
  free(x.set.uid);
  free(x.set.count);
  free(x.per_arg);
  free(x.miss_pos);
  free(x.miss_slot);
  free(x.uniq_slot);
  free(x.uniq_ids);
  free(x.uniq_refs);
  return st;
}
