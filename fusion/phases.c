/* phases.c: the CUDA engine's phases (phases.h). */
#include "fusion/phases.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "cache/cache.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/parallel.h"
#include "dram_store/store_internal.h"

/* Misses (at the part's recent share of its lookups) from which a batch
 * wakes the store's pool ahead of its gather: 8,192 rows take the pool 60 us
 * or more (7-12 ns a row on 8 threads, docs/PERFORMANCE.md), of which a
 * sleeping helper's wake (10-40 us on the lent VMs) is a fifth or more. A
 * server's requests (at most 2,048 samples over 26 tables: about 2,700
 * misses at 95% hits) stay under it: a wake ahead for every caller of small
 * batches kept the pool spinning on every core under 4 callers
 * (PERFORMANCE_LOG, stop 30). */
#define FL_PREWAKE_MISSES 8192u
/* How long the woken workers spin: beyond the index phase of the largest
 * batches measured (the default replay's 426,000 lookups: 85-95 us on the
 * H200); past it they sleep, and the gather wakes them as usual. */
#define FL_PREWAKE_SPIN_NS 300000ull
/* The share's unit: 2^-20. */
#define FL_SHARE_BITS 20

void fl_phase_prewake(const fl_part_batch *b) {
  _Atomic uint32_t *running = &b->c->parts[b->part].miss_share[b->prefetch != 0];
  uint64_t share = atomic_load_explicit(running, memory_order_relaxed);
  if (b->n_keys * share < ((uint64_t)FL_PREWAKE_MISSES << FL_SHARE_BITS)) return;
  fl_workers_prewake(fl_store_workers(b->f->store), fl_now_ns() + FL_PREWAKE_SPIN_NS);
}

void fl_phase_note_misses(const fl_part_batch *b, uint64_t n_miss) {
  _Atomic uint32_t *share = &b->c->parts[b->part].miss_share[b->prefetch != 0];
  uint64_t now = b->n_keys ? (n_miss << FL_SHARE_BITS) / b->n_keys : 0;
  uint64_t was = atomic_load_explicit(share, memory_order_relaxed);
  /* Over about 8 batches. Callers of one part may lose each other's update,
   * which moves the average no further than one batch would. */
  atomic_store_explicit(share, (uint32_t)((7 * was + now) / 8), memory_order_relaxed);
}

int fl_phase_index(const fl_part_batch *b, const fl_run_setup *s, const fl_run_views *v,
                   int clear_set, int gated, fl_launch_to to, void **prof) {
  cudaStream_t stream = (cudaStream_t)to.stream;
  const fl_batch_arg *A = v->d.args;
  const fl_cuda_state *cs = b->f->cuda;
  const fl_in_place ip = {v->d.zc,      cs->zc_limit,  fl_phase_pointers_in_place(b),
                          cs->zc_seq,    v->d.offsets,  v->stage_base,
                          v->staging};
  int e = (int)fl_launch_copy(to, v->d.args, v->h.args, s->l.header_end, cudaMemcpyHostToDevice);
  if (!e && prof) e = (int)cudaEventRecord((cudaEvent_t)prof[0], stream);
  if (!e)
    e = fl_launch_index(*fl_cache_index(b->c, b->part), v->d.codes, A, v->d.scan_index, b->n_args,
                        s->index_threads, b->n_keys, v->d.run, v->locs, v->m,
                        fl_run_publish(&s->l, v), clear_set, to);
  if (!e && prof) e = (int)cudaEventRecord((cudaEvent_t)prof[1], stream);
  if (!e)
    e = fl_launch_copy_hits(A, v->d.scan_copy, b->n_args, s->copy_threads, v->locs, v->m, ip, to);
  if (!e && prof) e = (int)cudaEventRecord((cudaEvent_t)prof[2], stream);
  if (!e && gated)
    e = fl_launch_gated_scatter(A, v->d.offsets, b->n_args, v->m, v->d.zc, cs->zc_limit,
                                fl_run_gate(v), v->stage_base, v->staging, to);
  return e;
}

fl_status fl_phase_wait_word(fl_cache *c, const uint32_t *word, uint32_t want, uint64_t check_ns,
                             void *stream, const char *what) {
  return fl_phase_wait_bits(c, word, ~0u, want, check_ns, stream, what);
}

fl_status fl_phase_wait_bits(fl_cache *c, const uint32_t *word, uint32_t mask, uint32_t want,
                             uint64_t check_ns, void *stream, const char *what) {
  uint64_t next_check = fl_now_ns() + check_ns;
  for (uint32_t i = 1;; i++) {
    if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) & mask) == want) return FL_OK;
    if (i % 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    uint64_t now = fl_now_ns();
    if (now < next_check) continue;
    next_check = now + check_ns;
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady) continue;
    if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) & mask) == want) return FL_OK;
    (void)cudaGetLastError();
    return fl_fail(c, FL_ERR_CUDA, "%s: %s", what,
                   e == cudaSuccess ? "the kernel ended without writing it" : cudaGetErrorString(e));
  }
}

/* Where the fetch's stretches of gathered rows go: the device's upload
 * block, on the batch's stream, each as soon as it is gathered, so that the
 * upload overlaps the rest of the gather. */
typedef struct upload_job {
  const fl_part_batch *b;
  const fl_run_views *v;
  /* Zero-copy batches: per table, non-NULL when the GPU read its misses in
   * place (their staging rows are not the host's to upload); else NULL. */
  const void *const *in_place;
} upload_job;

/* Uploads bytes [from, to) of the upload block. */
static fl_status upload(upload_job *j, uint64_t from, uint64_t to) {
  int e = (int)cudaMemcpyAsync((uint8_t *)j->v->stage_base + from,
                               (const uint8_t *)j->v->h_stage_base + from, to - from,
                               cudaMemcpyHostToDevice, (cudaStream_t)j->b->stream);
  if (e) return fl_fail(j->b->c, FL_ERR_CUDA, "uploading missed rows failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  return FL_OK;
}

/* Uploads staging bytes [begin, end), around the rows read in place: the
 * hit copy wrote those in device memory before these uploads land. */
static fl_status upload_stretch(void *ctx, uint64_t begin, uint64_t end) {
  upload_job *j = ctx;
  const fl_part_batch *b = j->b;
  uint64_t head = j->v->head;
  /* The first stretch takes the staging offsets along, unless the hit
   * copy wrote them (it read rows in place). */
  uint64_t from = begin || j->in_place ? head + begin : 0, to = head + end;
  for (uint32_t a = 0; j->in_place && a < b->n_args && from < to; a++) {
    if (!j->in_place[b->args[a].table]) continue;
    uint64_t lo = head + j->v->h_stage_base[a];
    uint64_t hi = lo + (uint64_t)j->v->h_per_arg[FL_MISS_COUNTERS * a] * b->args[a].vec_bytes;
    if (hi <= from || lo >= to) continue;
    if (lo > from) {
      fl_status st = upload(j, from, lo);
      if (st != FL_OK) return st;
    }
    from = hi;
  }
  return from < to ? upload(j, from, to) : FL_OK;
}

int fl_phase_pointers_in_place(const fl_part_batch *b) { return b->plan == NULL; }

/* A batch read wholly in place: waits for the hit copy's reads of its
 * hashed pointer rows (each rewrites its reference: query_kernels.h), then
 * fetches by id, into their staging rows, the rows whose slot no longer
 * held the id (the store removed or moved it since the index kernel found
 * the pointer; the cache's entry goes with the store's change), and
 * uploads each; *host_rows: how many, for the scatter. */
static fl_status settle_slot_reads(fl_part_batch *b, const fl_run_views *v, upload_job *up,
                                   uint64_t *host_rows) {
  fl_cache *c = b->c;
  const uint32_t *per_arg = v->h_per_arg;
  uint64_t *refs = v->m.uniq_refs, stale = 0;
  fl_status st = FL_OK;
  for (uint32_t a = 0; a < b->n_args && st == FL_OK; a++) {
    const fl_batch_arg *g = &b->args[a];
    const uint32_t ptr = per_arg[FL_MISS_COUNTERS * a + 1];
    if (v->h.zc[g->table].rows || !ptr) continue;
    for (uint64_t uid = g->key_offset + g->n - ptr; uid < g->key_offset + g->n && st == FL_OK; uid++) {
      /* The low bit is in the first word (little-endian). */
      st = fl_phase_wait_bits(c, (const uint32_t *)&refs[uid], 1u, 0u, 20000, b->stream,
                              "the hit copy's reads of hashed rows in place");
      stale += st == FL_OK && __atomic_load_n(&refs[uid], __ATOMIC_ACQUIRE) == 0;
    }
  }
  if (st != FL_OK || !stale) return st;
  fl_table_query *q = malloc(stale * sizeof *q);
  uint64_t *at = malloc(stale * sizeof *at);
  if (!q || !at) {
    free(q);
    free(at);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint64_t n = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_batch_arg *g = &b->args[a];
    const uint32_t miss = per_arg[FL_MISS_COUNTERS * a], ptr = per_arg[FL_MISS_COUNTERS * a + 1];
    if (v->h.zc[g->table].rows) continue;
    for (uint64_t uid = g->key_offset + g->n - ptr; uid < g->key_offset + g->n; uid++) {
      if (refs[uid]) continue;
      at[n] = v->h_stage_base[a] + fl_miss_row(uid - g->key_offset, g->n, miss, ptr) * g->vec_bytes;
      q[n] = (fl_table_query){g->table, &v->m.uniq_ids[uid], 1, v->h_staging + at[n]};
      n++;
    }
  }
  st = fl_store_gather_watched(b->f->store, q, (uint32_t)n, b->f->cfg.missing, NULL, NULL, 1);
  if (st != FL_OK) fl_fail(c, st, "%s", fl_store_last_error(b->f->store));
  for (uint64_t i = 0; i < n && st == FL_OK; i++)
    st = upload(up, v->head + at[i], v->head + at[i] + b->f->tables[q[i].table].vec_bytes);
  free(q);
  free(at);
  fl_cache_add(c, FL_STAT_ZERO_COPY_STALE, stale);
  *host_rows = stale;
  return st;
}

fl_status fl_phase_misses(fl_part_batch *b, const fl_run_views *v, int want_refs, int upload,
                          int *in_place_out, uint64_t *host_rows) {
  fl_cache *c = b->c;
  const fl_cuda_state *cs = b->f->cuda;
  const uint32_t *per_arg = v->h_per_arg;
  uint64_t cpu0 = fl_thread_cpu_ns();
  fl_zc_count k = {0, 0, 0};
  const int pointers = fl_phase_pointers_in_place(b);
  for (uint32_t a = 0; a < b->n_args; a++)
    fl_zc_count_arg(&k, per_arg, a, &v->h.zc[b->args[a].table], pointers);
  /* The hit copy read the qualifying rows in place when the batch has few
   * enough (zero_copy.h); the host fetches the rest. */
  const int mode = fl_zc_mode(k, cs->zc_limit);
  const void *const *in_place = mode != FL_ZC_NONE ? cs->zc_rows : NULL;
  const uint64_t read = fl_zc_in_place_rows(k, cs->zc_limit);
  *host_rows = k.all - read;
  *in_place_out = in_place != NULL;
  if (read) {
    fl_cache_add(c, FL_STAT_UNIQUE_MISSES, read);
    fl_cache_add(c, FL_STAT_ZERO_COPY_ROWS, read);
  }
  fl_misses_layout(b, per_arg, v->h_stage_base);
  upload_job up = {b, v, in_place};
  fl_cache_add(c, FL_STAT_NS_MISS_CPU, fl_thread_cpu_ns() - cpu0);
  fl_status st = FL_OK;
  if (want_refs && in_place) st = fl_misses_refs(b, per_arg, v->m.uniq_ids, v->m.uniq_refs, in_place);
  if (st == FL_OK && *host_rows)
    st = fl_misses_fetch(b, per_arg, v->m.uniq_ids, v->m.uniq_refs, want_refs, v->h_staging,
                         v->h_stage_base, in_place, upload ? upload_stretch : NULL, &up, 1);
  if (st == FL_OK && mode == FL_ZC_ALL && k.pointers) st = settle_slot_reads(b, v, &up, host_rows);
  return st;
}

fl_status fl_phase_scatter(const fl_part_batch *b, const fl_run_views *v, uint64_t n_miss) {
  int e = fl_launch_scatter(v->d.args, v->d.offsets, b->n_args, v->m, v->stage_base, v->staging,
                            n_miss, b->stream);
  if (e) return fl_fail(b->c, FL_ERR_CUDA, "miss scatter failed: %s",
                        cudaGetErrorString((cudaError_t)e));
  return FL_OK;
}

void fl_phase_end_uses(fl_cache *c, fl_scratch *x, int64_t ticket, void *stream) {
  void *ev = NULL;
  if (fl_event_get(c, &ev) == FL_OK &&
      cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream) == cudaSuccess) {
    fl_cache_query_end(c, ticket, ev);
  } else {
    /* No event: wait for the stream instead, then end at once. */
    cudaStreamSynchronize((cudaStream_t)stream);
    if (ev) fl_event_release(c, ev);
    fl_cache_query_end(c, ticket, NULL);
  }
  cudaEventRecord((cudaEvent_t)x->busy_until, (cudaStream_t)stream);
}

fl_admit_job *fl_phase_admit_job(const fl_part_batch *b, const fl_run_views *v, fl_scratch *x,
                                 uint64_t n_miss, uint64_t **gen, int want_refs, int release_x) {
  fl_admit_batch ab = {
      .codes = v->d.codes,
      .table_cls = v->d.table_cls,
      .args = v->d.args,
      .key_offsets = v->d.offsets,
      .n_args = b->n_args,
      .n_keys = b->n_keys,
      .m = v->m,
      .stage_base = v->stage_base,
      .staging = v->staging,
      .choice = v->choice,
      .now = b->now,
      .rule = {.force = (uint32_t)b->prefetch},
  };
  return fl_admit_job_new(b->c, b->part, &ab, b->args, v->h_per_arg, n_miss, gen, want_refs, x,
                          release_x);
}
