/* serve_pool.c: the request pool: the workload's trace cut, before anything
 * is timed, into consecutive requests of drawn sizes. Request r holds samples
 * [first_r, first_r + size_r) of the trace, all tables' ids in one block, so a
 * worker can copy a whole request with one call. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "tools/serve.h"

void fl_serve_pool_free(fl_serve_pool *p) {
  if (p->pinned) cudaFreeHost(p->ids);
  else free(p->ids);
  free(p->req);
  memset(p, 0, sizeof *p);
}

/* Draws sizes until the next request would pass the trace's end. */
static fl_status draw_sizes(const fl_serve_opts *o, uint64_t total, fl_serve_pool *p) {
  uint64_t rng = fl_hash2(o->w.seed, 0x5e27e51e5ull), cap = 0;
  for (;;) {
    uint32_t s = fl_serve_draw_size(&o->sizes, &rng);
    if (p->samples + s > total) break;
    if (p->n == cap) {
      cap = cap ? 2 * cap : 1024;
      fl_serve_request *r = realloc(p->req, cap * sizeof *r);
      if (!r) return FL_ERR_OUT_OF_MEMORY;
      p->req = r;
    }
    p->req[p->n++] = (fl_serve_request){s, NULL};
    p->samples += s;
    if (s > p->max_samples) p->max_samples = s;
  }
  if (p->n == 0) {
    fprintf(stderr, "error: the trace's %llu samples cannot hold one request (raise --batches)\n",
            (unsigned long long)total);
    return FL_ERR_INVALID_ARGUMENT;
  }
  return FL_OK;
}

static fl_status alloc_ids(fl_serve_pool *p) {
  size_t bytes = (size_t)p->samples * p->n_tables * sizeof(uint64_t);
  if (p->pinned) {
    cudaError_t e = cudaHostAlloc((void **)&p->ids, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      fprintf(stderr, "error: cudaHostAlloc of %zu bytes of request ids: %s\n", bytes,
              cudaGetErrorString(e));
      p->ids = NULL;
      return FL_ERR_CUDA;
    }
  } else if (!(p->ids = malloc(bytes))) {
    return FL_ERR_OUT_OF_MEMORY;
  }
  uint64_t at = 0;
  for (uint64_t r = 0; r < p->n; r++) {
    p->req[r].ids = p->ids + at;
    at += (uint64_t)p->req[r].samples * p->n_tables;
  }
  return FL_OK;
}

/* Copies the batch's samples into the requests from (*r, *off) on. */
static void place_batch(fl_serve_pool *p, const fl_trace_batch *b, uint64_t *r, uint32_t *off) {
  uint64_t done = 0;
  while (done < b->samples && *r < p->n) {
    fl_serve_request *q = &p->req[*r];
    uint64_t m = q->samples - *off;
    if (m > b->samples - done) m = b->samples - done;
    for (uint32_t t = 0; t < p->n_tables; t++)
      memcpy(q->ids + (uint64_t)t * q->samples + *off, b->ids[t] + done, m * sizeof(uint64_t));
    done += m;
    *off += (uint32_t)m;
    if (*off == q->samples) ++*r, *off = 0;
  }
}

static fl_status fill(const fl_workload *w, fl_serve_pool *p) {
  fl_trace_batch b = {0};
  uint64_t r = 0;
  uint32_t off = 0;
  int got = 1;
  fl_status s = fl_trace_rewind(w->trace);
  while (s == FL_OK && got && r < p->n) {
    s = fl_trace_next(w->trace, &b, &got);
    if (s != FL_OK) {
      fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(w->trace));
      break;
    }
    /* A request's sample is one id in every table (the generator's batches). */
    for (uint32_t t = 0; got && t < p->n_tables; t++)
      if (b.n[t] != b.samples) {
        fprintf(stderr, "error: the trace's table %u has %zu ids for %llu samples\n", t, b.n[t],
                (unsigned long long)b.samples);
        s = FL_ERR_INVALID_ARGUMENT;
      }
    if (s == FL_OK && got) place_batch(p, &b, &r, &off);
  }
  fl_trace_batch_free(&b);
  if (s == FL_OK && r < p->n) {
    fprintf(stderr, "error: the trace ended before request %llu\n", (unsigned long long)r);
    s = FL_ERR_INVALID_ARGUMENT;
  }
  return s;
}

fl_status fl_serve_pool_build(const fl_workload *w, const fl_serve_opts *o, int pinned,
                              fl_serve_pool *p) {
  memset(p, 0, sizeof *p);
  p->n_tables = w->n_tables;
  p->pinned = pinned;
  fl_status s = draw_sizes(o, w->batches * o->w.batch, p);
  if (s == FL_OK) s = alloc_ids(p);
  if (s == FL_OK) s = fill(w, p);
  if (s == FL_ERR_OUT_OF_MEMORY) fprintf(stderr, "error: out of memory for the request pool\n");
  return s;
}
