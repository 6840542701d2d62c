/* replay_runner.c: queries one batch at a time through a cache and times it.
 * On the CUDA backend ids are copied to device memory and answers land in
 * device buffers before the clock starts, so a batch's time is fl_query plus
 * the stream synchronisation: what an inference server would wait for. With
 * prepared queries, the ids go into the runner's own buffers (host ones too)
 * and a prepared query over them is kept while batches keep their shape. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/replay.h"

/* Rows checked per table and batch with --verify. */
enum { VERIFY_ROWS = 16 };

typedef struct table_buf {
  uint64_t *ids_dev;  /* CUDA: device copy of the batch's ids */
  uint64_t *ids_host; /* host backend, prepared: host copy of the batch's ids */
  void *out;          /* answers: device (CUDA) or host memory */
  size_t cap;         /* ids the buffers hold */
} table_buf;

struct fl_runner {
  fl_cache *cache;
  fl_store *store;
  uint32_t n_tables;
  int cuda;
  void *stream;          /* cudaStream_t */
  size_t *row_bytes;     /* per table: dim * element size */
  table_buf *buf;
  fl_table_query *q;     /* n_tables queries */
  int verify;
  unsigned char *check;  /* VERIFY_ROWS rows of the widest table, twice */
  uint64_t verified, mismatches;
  int prepared;          /* run through prepared queries */
  fl_prepared *p;        /* over q as it is, NULL: prepare before the next run */
};

static fl_status cuda_fail(cudaError_t e, const char *what) {
  fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
  return FL_ERR_CUDA;
}

void fl_runner_destroy(fl_runner *r) {
  if (!r) return;
  fl_prepared_destroy(r->p);
  for (uint32_t t = 0; r->buf && t < r->n_tables; t++) {
    if (r->cuda) {
      cudaFree(r->buf[t].ids_dev);
      cudaFree(r->buf[t].out);
    } else {
      free(r->buf[t].ids_host);
      free(r->buf[t].out);
    }
  }
  if (r->stream) cudaStreamDestroy((cudaStream_t)r->stream);
  free(r->buf);
  free(r->q);
  free(r->row_bytes);
  free(r->check);
  free(r);
}

fl_status fl_runner_create(fl_cache *c, const fl_workload *w, int verify, int prepared,
                           fl_runner **out) {
  fl_runner *r = calloc(1, sizeof *r);
  if (!r) return FL_ERR_OUT_OF_MEMORY;
  r->cache = c;
  r->prepared = prepared;
  r->store = w->verify_store ? w->verify_store : w->store;
  r->n_tables = w->n_tables;
  r->cuda = fl_cache_backend(c) == FL_BACKEND_CUDA;
  r->verify = verify;
  r->buf = calloc(w->n_tables, sizeof *r->buf);
  r->q = calloc(w->n_tables, sizeof *r->q);
  r->row_bytes = calloc(w->n_tables, sizeof *r->row_bytes);
  size_t widest = 0;
  for (uint32_t t = 0; r->row_bytes && t < w->n_tables; t++) {
    fl_table_desc d;
    if (fl_store_table(w->store, t, &d) != FL_OK) break;
    r->row_bytes[t] = (size_t)d.dim * (d.dtype == FL_FP16 ? 2 : 4);
    if (r->row_bytes[t] > widest) widest = r->row_bytes[t];
  }
  r->check = malloc(2 * VERIFY_ROWS * (widest ? widest : 1));
  if (!r->buf || !r->q || !r->row_bytes || !r->check) {
    fl_runner_destroy(r);
    return FL_ERR_OUT_OF_MEMORY;
  }
  if (r->cuda) {
    cudaStream_t s;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      fl_runner_destroy(r);
      return cuda_fail(e, "cudaStreamCreate");
    }
    r->stream = s;
  }
  *out = r;
  return FL_OK;
}

/* Grows table t's buffers to hold n ids (untimed). */
static fl_status reserve(fl_runner *r, uint32_t t, size_t n) {
  table_buf *b = &r->buf[t];
  if (n <= b->cap) return FL_OK;
  size_t cap = n + n / 4;
  if (r->cuda) {
    cudaFree(b->ids_dev);
    cudaFree(b->out);
    b->ids_dev = NULL, b->out = NULL, b->cap = 0;
    cudaError_t e = cudaMalloc((void **)&b->ids_dev, cap * sizeof(uint64_t));
    if (e == cudaSuccess) e = cudaMalloc(&b->out, cap * r->row_bytes[t]);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMalloc of replay buffers");
  } else {
    void *p = realloc(b->out, cap * r->row_bytes[t]);
    if (!p) return FL_ERR_OUT_OF_MEMORY;
    b->out = p;
    if (r->prepared) {
      uint64_t *ids = realloc(b->ids_host, cap * sizeof *ids);
      if (!ids) return FL_ERR_OUT_OF_MEMORY;
      b->ids_host = ids;
    }
  }
  b->cap = cap;
  /* The buffers moved: a prepared query over them is stale. */
  fl_prepared_destroy(r->p);
  r->p = NULL;
  return FL_OK;
}

/* Compares VERIFY_ROWS evenly spaced answers of every table with the store
 * (with --store: with the cluster, read by a store without a local tier). */
static fl_status verify(fl_runner *r, const fl_trace_batch *b) {
  for (uint32_t t = 0; t < r->n_tables; t++) {
    size_t n = b->n[t], rb = r->row_bytes[t];
    if (n == 0) continue;
    size_t k = n < VERIFY_ROWS ? n : VERIFY_ROWS;
    uint64_t ids[VERIFY_ROWS];
    unsigned char *got = r->check, *want = r->check + VERIFY_ROWS * rb;
    for (size_t i = 0; i < k; i++) {
      size_t at = i * n / k;
      ids[i] = b->ids[t][at];
      const unsigned char *src = (const unsigned char *)r->buf[t].out + at * rb;
      if (r->cuda) {
        cudaError_t e = cudaMemcpy(got + i * rb, src, rb, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpy of answers");
      } else {
        memcpy(got + i * rb, src, rb);
      }
    }
    fl_table_query q = {t, ids, k, want};
    fl_status s = fl_store_gather(r->store, &q, 1, FL_MISSING_ZERO, NULL);
    if (s != FL_OK) {
      fprintf(stderr, "error: verify: %s: %s\n", fl_status_name(s), fl_store_last_error(r->store));
      return s;
    }
    for (size_t i = 0; i < k; i++) {
      if (memcmp(got + i * rb, want + i * rb, rb) != 0) {
        if (r->mismatches < 10)
          fprintf(stderr, "verify: table %u id %llu: the cache's answer differs from the store's\n",
                  t, (unsigned long long)ids[i]);
        r->mismatches++;
      }
      r->verified++;
    }
  }
  return FL_OK;
}

fl_status fl_runner_query(fl_runner *r, const fl_trace_batch *b, double *ms) {
  for (uint32_t t = 0; t < r->n_tables; t++) {
    fl_status s = reserve(r, t, b->n[t] ? b->n[t] : 1);
    if (s != FL_OK) return s;
    /* A prepared query is over fixed buffers of fixed sizes. */
    if (r->q[t].n != b->n[t] || r->q[t].table != t) {
      fl_prepared_destroy(r->p);
      r->p = NULL;
    }
    r->q[t].table = t;
    r->q[t].n = b->n[t];
    r->q[t].out = r->buf[t].out;
    r->q[t].ids = b->ids[t];
    if (r->cuda && b->n[t]) {
      cudaError_t e = cudaMemcpy(r->buf[t].ids_dev, b->ids[t], b->n[t] * sizeof(uint64_t),
                                 cudaMemcpyHostToDevice);
      if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpy of ids");
      r->q[t].ids = r->buf[t].ids_dev;
    } else if (r->prepared && b->n[t]) {
      memcpy(r->buf[t].ids_host, b->ids[t], b->n[t] * sizeof(uint64_t));
      r->q[t].ids = r->buf[t].ids_host;
    }
  }
  if (r->prepared && !r->p) {
    fl_status s = fl_query_prepare(r->cache, r->q, r->n_tables, &r->p);
    if (s != FL_OK) {
      fprintf(stderr, "error: fl_query_prepare: %s: %s\n", fl_status_name(s),
              fl_cache_last_error(r->cache));
      return s;
    }
  }
  double t0 = fl_now_s();
  fl_status s = r->p ? fl_prepared_run(r->p, r->stream) : fl_query(r->cache, r->q, r->n_tables, r->stream);
  if (s == FL_OK && r->cuda) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)r->stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize");
  }
  *ms = 1e3 * (fl_now_s() - t0);
  if (s != FL_OK) {
    fprintf(stderr, "error: %s: %s: %s\n", r->p ? "fl_prepared_run" : "fl_query", fl_status_name(s),
            fl_cache_last_error(r->cache));
    return s;
  }
  return r->verify ? verify(r, b) : FL_OK;
}

uint64_t fl_runner_verified(const fl_runner *r) { return r->verified; }
uint64_t fl_runner_mismatches(const fl_runner *r) { return r->mismatches; }
