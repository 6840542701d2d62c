/* zc_calibrate.c: the zero-copy limit a cache picks by itself
 * (cfg.zero_copy_rows FL_ZERO_COPY_AUTO, zero_copy.h). At create, both miss
 * paths fetch the same random rows of the store's largest dense table, or,
 * in a store of hashed tables only, of its hashed table with the most rows
 * that the device reads at their references (a sample of them: pointer
 * rows, read with their slots' headers in place and by reference on the
 * host, as a query reads them):
 *   - in place: the reads (fl_launch_zc_probe, a warp a row) timed on the
 *     device by events. In a query the hit-copy kernel makes those reads
 *     after its copies, queued behind the index kernel: no launch, no host
 *     between them, so the kernel's own time is what reading in place
 *     adds. A warp a row: the hit copy has `lanes` threads a key (a row's
 *     units of 16, 4 or 2 bytes), so a batch whose misses are a small share
 *     of its keys (the case for reading in place) has a warp for each;
 *   - host: the store's gather into pinned staging, its upload, the stream
 *     synchronized (the scatter launched after them in a query is not
 *     counted: the comparison leans to the host's path),
 * at row counts from 64 to 4,096 (fewer for wide rows), each the median of
 * a few runs, alternating paths; the limit is the count where reading in
 * place stops paying by a margin (fl_zc_limit_of, FL_ZC_MARGIN), or where
 * its reads stop being bound by a row's latency (fl_zc_latency_limit:
 * beyond, they are bound by PCIe's request rate, which concurrent queries
 * share), whichever comes first. The host's path is bound by its gather
 * and the upload: neither is one line, hence the points.
 * A store with no row to time (no dense table read in place, and no hashed
 * one holding 64 rows) gets no limit: its memory is unmapped.
 * A few ms, once per cache, on the device and store it serves. Failures
 * are fl_cache_create's (recorded for no handle, as its others are). */
#include "fusion/zc_calibrate.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "cache/cuda_state.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/mutant.h"
#include "dram_store/store_internal.h"
#include "fusion/query_kernels.h"

/* Row counts 64 * 4^k, up to this many rows and bytes of them. */
enum { ROWS_FIRST = 64, ROWS_MAX = 4096, POINTS_MAX = 4, RUNS = 5 };
#define FL_ZC_PROBE_BYTES (16ull << 20)

typedef struct probe {
  const fl_cache_fixed *f;
  uint32_t table, vec_bytes;         /* the table read */
  int hashed;                        /* its rows are read at their references */
  uint32_t rows;                     /* the most rows one fetch reads */
  uint64_t *ids;                     /* host: that many random row ids */
  uint64_t *refs;                    /* hashed: their references */
  uint64_t *d_ids;                   /* device copy of the ids (hashed: of the references) */
  uint8_t *d_dst, *h_stage;          /* device destination, pinned staging */
  cudaStream_t stream;
  cudaEvent_t ev[2];                 /* around the reads in place */
} probe;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ns of the device's reads of n rows in place (events around them). */
static fl_status time_in_place(probe *p, uint32_t n, double *ns) {
  const fl_cuda_state *cs = p->f->cuda;
  float ms = 0;
  FL_CUDA_TRY(NULL, cudaEventRecord(p->ev[0], p->stream));
  const fl_slot_layout none = {0, 0};
  FL_CUDA_TRY(NULL, (cudaError_t)fl_launch_zc_probe(
                        p->hashed ? NULL : (const uint8_t *)cs->zc_rows[p->table],
                        p->hashed ? cs->zc_slots[p->table] : none, p->table, p->vec_bytes,
                        p->d_ids, n, cs->zc_seq, p->d_dst, p->stream));
  FL_CUDA_TRY(NULL, cudaEventRecord(p->ev[1], p->stream));
  FL_CUDA_TRY(NULL, cudaEventSynchronize(p->ev[1]));
  FL_CUDA_TRY(NULL, cudaEventElapsedTime(&ms, p->ev[0], p->ev[1]));
  *ns = 1e6 * (double)ms;
  return FL_OK;
}

/* ns of the host's fetch of n rows: its gather (hashed rows by reference),
 * the upload, the stream synchronized. */
static fl_status time_host(probe *p, uint32_t n, double *ns) {
  uint64_t t0 = fl_now_ns();
  fl_table_query q = {p->table, p->ids, n, p->h_stage};
  fl_ref_query rq = {p->table, p->ids, p->refs, n, p->h_stage};
  fl_status st = p->hashed ? fl_store_gather_refs(p->f->store, &rq, 1, FL_MISSING_ZERO, NULL, 1)
                           : fl_store_gather(p->f->store, &q, 1, FL_MISSING_ZERO, NULL);
  if (st != FL_OK)
    return fl_fail(NULL, st, "calibrating zero-copy reads: the store's gather failed: %s",
                   fl_store_last_error(p->f->store));
  FL_CUDA_TRY(NULL, cudaMemcpyAsync(p->d_dst, p->h_stage, (size_t)n * p->vec_bytes,
                                 cudaMemcpyHostToDevice, p->stream));
  FL_CUDA_TRY(NULL, cudaStreamSynchronize(p->stream));
  *ns = (double)(fl_now_ns() - t0);
  return FL_OK;
}

/* Each path's median time at each row count up to p->rows. */
static fl_status measure(probe *p, int *n, double *rows, double *zc_ns, double *host_ns) {
  *n = 0;
  for (uint32_t k = ROWS_FIRST; k <= p->rows && *n < POINTS_MAX; k *= 4, (*n)++) {
    double t[2][RUNS + 1];
    /* Run 0 warms both paths (the pool's threads, the TLB) and is dropped. */
    for (int r = 0; r <= RUNS; r++)
      for (int path = 0; path < 2; path++) {
        fl_status st = path ? time_in_place(p, k, &t[path][r]) : time_host(p, k, &t[path][r]);
        if (st != FL_OK) return st;
      }
    for (int path = 0; path < 2; path++) qsort(t[path] + 1, RUNS, sizeof(double), cmp_double);
    rows[*n] = k;
    host_ns[*n] = t[0][1 + RUNS / 2];
    zc_ns[*n] = t[1][1 + RUNS / 2];
  }
  return FL_OK;
}

/* The table to time: the largest dense table the device reads in place,
 * else the hashed table with the most rows whose slots it reads (*hashed
 * set); 0 when none. */
static int pick_table(const fl_cache_fixed *f, uint32_t *table, int *hashed) {
  uint64_t best = 0;
  for (int pass = 0; pass < 2 - FL_MUTANT_ON(33) && !best; pass++)
    for (uint32_t t = 0; t < f->n_tables; t++) {
      fl_table_desc d;
      fl_store_table_stats st;
      uint64_t rows = 0;
      if (!pass && f->cuda->zc_rows[t] && fl_store_table(f->store, t, &d) == FL_OK)
        rows = d.corpus_size;
      if (pass && f->cuda->zc_slots[t].vec_stride && fl_store_stats(f->store, t, &st) == FL_OK)
        rows = st.rows;
      if (rows > best) best = rows, *table = t, *hashed = pass;
    }
  return best > 0;
}

static void probe_free(probe *p) {
  for (int i = 0; i < 2; i++)
    if (p->ev[i]) cudaEventDestroy(p->ev[i]);
  if (p->stream) cudaStreamDestroy(p->stream);
  cudaFree(p->d_ids);
  cudaFree(p->d_dst);
  cudaFreeHost(p->h_stage);
  free(p->ids);
  free(p->refs);
}

fl_status fl_zc_calibrate(fl_cache *c) {
  const fl_cache_fixed *f = fl_cache_fixed_of(c);
  fl_cuda_state *cs = f->cuda;
  if (f->cfg.zero_copy_rows != FL_ZERO_COPY_AUTO || !cs->zc_seq) return FL_OK;
  probe p = {.f = f};
  if (!pick_table(f, &p.table, &p.hashed)) {
    fl_cuda_state_unmap(c);
    return FL_OK;
  }
  p.vec_bytes = f->tables[p.table].vec_bytes;
  p.rows = ROWS_MAX;
  while (p.rows > ROWS_FIRST && (uint64_t)p.rows * p.vec_bytes > FL_ZC_PROBE_BYTES) p.rows /= 4;
  fl_status st = FL_OK;
  if (!(p.ids = malloc(p.rows * sizeof *p.ids)) || !(p.refs = malloc(p.rows * sizeof *p.refs)))
    st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  if (st == FL_OK && p.hashed) {
    uint64_t got = fl_store_sample_rows(f->store, p.table, p.rows, 0x2c0b, p.ids, p.refs);
    while (p.rows > got && p.rows >= ROWS_FIRST) p.rows /= 4;
    if (p.rows < ROWS_FIRST) {
      probe_free(&p);
      fl_cuda_state_unmap(c);
      return FL_OK;
    }
  } else if (st == FL_OK) {
    fl_table_desc d;
    fl_store_table(f->store, p.table, &d);
    for (uint32_t i = 0; i < p.rows; i++) p.ids[i] = fl_hash2(0x2c0b, i) % d.corpus_size;
  }
  size_t bytes = (size_t)p.rows * p.vec_bytes;
  if (st == FL_OK) st = FL_CUDA_CHECK(NULL, cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
  for (int i = 0; i < 2 && st == FL_OK; i++) st = FL_CUDA_CHECK(NULL, cudaEventCreate(&p.ev[i]));
  if (st == FL_OK) st = FL_CUDA_CHECK(NULL, cudaMalloc((void **)&p.d_ids, p.rows * sizeof *p.ids));
  if (st == FL_OK) st = FL_CUDA_CHECK(NULL, cudaMalloc((void **)&p.d_dst, bytes));
  if (st == FL_OK) st = FL_CUDA_CHECK(NULL, cudaMallocHost((void **)&p.h_stage, bytes));
  if (st == FL_OK)
    st = FL_CUDA_CHECK(NULL, cudaMemcpy(p.d_ids, p.hashed ? p.refs : p.ids, p.rows * sizeof *p.ids,
                                        cudaMemcpyHostToDevice));
  int n = 0;
  double rows[POINTS_MAX], zc_ns[POINTS_MAX], host_ns[POINTS_MAX];
  if (st == FL_OK) st = measure(&p, &n, rows, zc_ns, host_ns);
  probe_free(&p);
  if (st != FL_OK) return st;
  uint64_t by_cost = fl_zc_limit_of(rows, zc_ns, host_ns, n, FL_ZC_MARGIN),
           by_latency = fl_zc_latency_limit(rows, zc_ns, n, FL_ZC_LATENCY);
  cs->zc_limit = by_cost < by_latency ? by_cost : by_latency;
  /* No batch would read in place: the store's pages need not stay locked. */
  if (!cs->zc_limit) fl_cuda_state_unmap(c);
  return FL_OK;
}
