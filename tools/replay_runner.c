/* replay_runner.c: queries one batch at a time through a cache and times it.
 * On the CUDA backend ids are copied to device memory and answers land in
 * device buffers before the clock starts, so a batch's time is fl_query plus
 * the stream synchronisation: what an inference server would wait for. With
 * prepared queries, the ids go into the runner's own buffers (host ones too)
 * and a prepared query over them is kept while batches keep their shape.
 * With --model-us the stand-in model (model_delay.h) follows each lookup on
 * its stream; with a next batch (--lookahead) fl_prefetch names it on a
 * second stream before the wait, so that its misses are fetched while the
 * model runs, and the next batch's lookup waits (on the device) for the
 * look-ahead's point of that stream. Its ids too are in device memory
 * before the clock starts. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/model_delay.h"
#include "tools/replay.h"

/* Rows checked per table and batch with --verify. */
enum { VERIFY_ROWS = 16 };

typedef struct table_buf {
  uint64_t *ids_dev;  /* CUDA: device copy of the batch's ids */
  uint64_t *ids_next; /* CUDA, --lookahead: device copy of the next batch's ids */
  size_t next_cap;
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
  uint64_t model_ns;     /* the stand-in model's time after each lookup (CUDA) */
  void *ahead;           /* cudaStream_t of the look-aheads (CUDA) */
  void *ahead_done;      /* cudaEvent_t: the last look-ahead's point on `ahead` */
  int ahead_pending;     /* the next lookup must wait for ahead_done */
  fl_table_query *pq;    /* n_tables queries of the next batch's ids, no outputs */
  double ahead_ms[4];    /* the look-aheads' time on the calling thread, in all: whole, and
                            of it setup, index phase, fetch (fl_query_timing) */
  uint64_t aheads;
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
      cudaFree(r->buf[t].ids_next);
      cudaFree(r->buf[t].out);
    } else {
      free(r->buf[t].ids_host);
      free(r->buf[t].out);
    }
  }
  if (r->stream) cudaStreamDestroy((cudaStream_t)r->stream);
  if (r->ahead) cudaStreamDestroy((cudaStream_t)r->ahead);
  if (r->ahead_done) cudaEventDestroy((cudaEvent_t)r->ahead_done);
  free(r->buf);
  free(r->q);
  free(r->pq);
  free(r->row_bytes);
  free(r->check);
  free(r);
}

fl_status fl_runner_create(fl_cache *c, const fl_workload *w, const fl_replay_opts *o,
                           fl_runner **out) {
  fl_runner *r = calloc(1, sizeof *r);
  if (!r) return FL_ERR_OUT_OF_MEMORY;
  r->cache = c;
  r->prepared = o->prepared;
  r->store = w->verify_store ? w->verify_store : w->store;
  r->n_tables = w->n_tables;
  r->cuda = fl_cache_backend(c) == FL_BACKEND_CUDA;
  r->verify = o->verify;
  r->model_ns = r->cuda ? o->model_us * 1000 : 0;
  r->buf = calloc(w->n_tables, sizeof *r->buf);
  r->q = calloc(w->n_tables, sizeof *r->q);
  r->pq = calloc(w->n_tables, sizeof *r->pq);
  r->row_bytes = calloc(w->n_tables, sizeof *r->row_bytes);
  size_t widest = 0;
  for (uint32_t t = 0; r->row_bytes && t < w->n_tables; t++) {
    fl_table_desc d;
    if (fl_store_table(w->store, t, &d) != FL_OK) break;
    r->row_bytes[t] = (size_t)d.dim * (d.dtype == FL_FP16 ? 2 : 4);
    if (r->row_bytes[t] > widest) widest = r->row_bytes[t];
  }
  r->check = malloc(2 * VERIFY_ROWS * (widest ? widest : 1));
  if (!r->buf || !r->q || !r->pq || !r->row_bytes || !r->check) {
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
    if (o->lookahead && (e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) {
      fl_runner_destroy(r);
      return cuda_fail(e, "cudaStreamCreate");
    }
    if (o->lookahead) {
      r->ahead = s;
      cudaEvent_t ev;
      if ((e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != cudaSuccess) {
        fl_runner_destroy(r);
        return cuda_fail(e, "cudaEventCreate");
      }
      r->ahead_done = ev;
    }
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

/* The next batch's ids into device memory, for its look-ahead (untimed). */
static fl_status place_next(fl_runner *r, const fl_trace_batch *next) {
  for (uint32_t t = 0; t < r->n_tables; t++) {
    table_buf *b = &r->buf[t];
    size_t n = next->n[t];
    if (n > b->next_cap) {
      cudaFree(b->ids_next);
      b->ids_next = NULL, b->next_cap = 0;
      cudaError_t e = cudaMalloc((void **)&b->ids_next, (n + n / 4) * sizeof(uint64_t));
      if (e != cudaSuccess) return cuda_fail(e, "cudaMalloc of look-ahead ids");
      b->next_cap = n + n / 4;
    }
    cudaError_t e = n ? cudaMemcpy(b->ids_next, next->ids[t], n * sizeof(uint64_t),
                                   cudaMemcpyHostToDevice)
                      : cudaSuccess;
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpy of look-ahead ids");
    r->pq[t] = (fl_table_query){t, b->ids_next, n, NULL};
  }
  return FL_OK;
}

/* The batch's model, then the next batch's look-ahead, after its lookup. */
static fl_status model_and_lookahead(fl_runner *r, int ahead) {
  if (r->model_ns) {
    cudaError_t e = (cudaError_t)fl_model_delay(r->stream, r->model_ns);
    if (e != cudaSuccess) return cuda_fail(e, "the stand-in model's launch");
  }
  if (!ahead) return FL_OK;
  double t0 = fl_now_s();
  fl_status s = fl_prefetch(r->cache, r->pq, r->n_tables, r->ahead);
  fl_query_timing tm;
  fl_query_timing_last(&tm);
  r->ahead_ms[0] += 1e3 * (fl_now_s() - t0);
  r->ahead_ms[1] += (double)tm.setup_ns / 1e6;
  r->ahead_ms[2] += (double)tm.index_ns / 1e6;
  r->ahead_ms[3] += (double)tm.fetch_ns / 1e6;
  r->aheads++;
  if (s != FL_OK) {
    fprintf(stderr, "error: fl_prefetch: %s: %s\n", fl_status_name(s), fl_cache_last_error(r->cache));
    return s;
  }
  cudaError_t e = cudaEventRecord((cudaEvent_t)r->ahead_done, (cudaStream_t)r->ahead);
  if (e != cudaSuccess) return cuda_fail(e, "cudaEventRecord");
  r->ahead_pending = 1;
  return FL_OK;
}

fl_status fl_runner_query(fl_runner *r, const fl_trace_batch *b, const fl_trace_batch *next,
                          double *ms) {
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
  const int ahead = next && r->ahead;
  if (ahead) {
    fl_status s = place_next(r, next);
    if (s != FL_OK) return s;
  }
  double t0 = fl_now_s();
  /* The look-ahead that named this batch has cached its rows by then. */
  if (r->ahead_pending) {
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)r->stream, (cudaEvent_t)r->ahead_done, 0);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamWaitEvent");
    r->ahead_pending = 0;
  }
  fl_status s = r->p ? fl_prepared_run(r->p, r->stream) : fl_query(r->cache, r->q, r->n_tables, r->stream);
  if (s != FL_OK) {
    fprintf(stderr, "error: %s: %s: %s\n", r->p ? "fl_prepared_run" : "fl_query", fl_status_name(s),
            fl_cache_last_error(r->cache));
    return s;
  }
  if (r->cuda) {
    s = model_and_lookahead(r, ahead);
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)r->stream);
    if (s != FL_OK) return s;
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize");
  }
  *ms = 1e3 * (fl_now_s() - t0);
  return r->verify ? verify(r, b) : FL_OK;
}

uint64_t fl_runner_verified(const fl_runner *r) { return r->verified; }
void fl_runner_lookahead_ms(const fl_runner *r, double ms[4]) {
  for (int i = 0; i < 4; i++) ms[i] = r->aheads ? r->ahead_ms[i] / (double)r->aheads : 0;
}
uint64_t fl_runner_mismatches(const fl_runner *r) { return r->mismatches; }
