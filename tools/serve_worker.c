/* serve_worker.c: one worker of the serving benchmark: its CUDA stream and
 * buffers, allocated once for the largest request (as a server allocates at
 * start-up), and the answer to one request: fl_query over all tables, then
 * the stream synchronisation. Outputs are device memory on the CUDA backend,
 * host memory on the host backend. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "tools/serve.h"

struct fl_serve_worker {
  fl_cache *cache;
  uint32_t n_tables;
  int cuda;
  void *stream;       /* cudaStream_t, non-blocking; NULL on the host backend */
  fl_table_query *q;  /* n_tables queries, rewritten per request */
  void **out;         /* per table: room for the largest request's rows */
  uint64_t *ids_dev;  /* --device-ids: n_tables x the largest request's ids, device */
};

static fl_status cuda_fail(cudaError_t e, const char *what) {
  fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
  return FL_ERR_CUDA;
}

void fl_serve_worker_destroy(fl_serve_worker *k) {
  if (!k) return;
  for (uint32_t t = 0; k->out && t < k->n_tables; t++) {
    if (k->cuda) cudaFree(k->out[t]);
    else free(k->out[t]);
  }
  if (k->cuda) cudaFree(k->ids_dev);
  if (k->stream) cudaStreamDestroy((cudaStream_t)k->stream);
  free(k->out);
  free(k->q);
  free(k);
}

static fl_status alloc_buffers(fl_serve_worker *k, const fl_workload *w, const fl_serve_pool *p,
                               int device_ids) {
  for (uint32_t t = 0; t < k->n_tables; t++) {
    fl_table_desc d;
    fl_status s = fl_store_table(w->store, t, &d);
    if (s != FL_OK) return s;
    size_t bytes = (size_t)p->max_samples * d.dim * (d.dtype == FL_FP16 ? 2 : 4);
    if (!k->cuda) {
      if (!(k->out[t] = malloc(bytes))) return FL_ERR_OUT_OF_MEMORY;
      continue;
    }
    cudaError_t e = cudaMalloc(&k->out[t], bytes);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMalloc of a worker's outputs");
  }
  if (k->cuda && device_ids) {
    size_t bytes = (size_t)p->max_samples * k->n_tables * sizeof(uint64_t);
    cudaError_t e = cudaMalloc((void **)&k->ids_dev, bytes);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMalloc of a worker's ids");
  }
  if (k->cuda) {
    cudaStream_t st;
    cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamCreate");
    k->stream = st;
  }
  return FL_OK;
}

fl_status fl_serve_worker_create(fl_cache *c, const fl_workload *w, const fl_serve_pool *p,
                                 int device_ids, fl_serve_worker **out) {
  fl_serve_worker *k = calloc(1, sizeof *k);
  if (!k) return FL_ERR_OUT_OF_MEMORY;
  k->cache = c;
  k->n_tables = w->n_tables;
  k->cuda = fl_cache_backend(c) == FL_BACKEND_CUDA;
  k->q = calloc(k->n_tables, sizeof *k->q);
  k->out = calloc(k->n_tables, sizeof *k->out);
  fl_status s = k->q && k->out ? alloc_buffers(k, w, p, device_ids) : FL_ERR_OUT_OF_MEMORY;
  if (s != FL_OK) {
    if (s == FL_ERR_OUT_OF_MEMORY) fprintf(stderr, "error: out of memory for a worker\n");
    fl_serve_worker_destroy(k);
    return s;
  }
  *out = k;
  return FL_OK;
}

fl_status fl_serve_worker_answer(fl_serve_worker *k, const fl_serve_request *r,
                                 fl_query_timing *t) {
  const uint64_t *ids = r->ids;
  cudaStream_t st = (cudaStream_t)k->stream;
  if (k->ids_dev) {
    cudaError_t e = cudaMemcpyAsync(k->ids_dev, r->ids,
                                    (size_t)r->samples * k->n_tables * sizeof(uint64_t),
                                    cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpyAsync of request ids");
    ids = k->ids_dev;
  }
  for (uint32_t t = 0; t < k->n_tables; t++)
    k->q[t] = (fl_table_query){t, ids + (size_t)t * r->samples, r->samples, k->out[t]};
  fl_status s = fl_query(k->cache, k->q, k->n_tables, k->stream);
  fl_query_timing_last(t);
  if (s != FL_OK) {
    fprintf(stderr, "error: fl_query: %s: %s\n", fl_status_name(s), fl_cache_last_error(k->cache));
    return s;
  }
  if (k->cuda) {
    cudaError_t e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize");
  }
  return FL_OK;
}
