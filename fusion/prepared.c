/* prepared.c: prepared queries (fl_query_prepare): fl_query's checks and, on
 * CUDA, where each buffer lives, done once for many runs; a call that is one
 * part batch (flat layout, at most FL_LAUNCH_MAX_QUERIES queries) also keeps
 * its scratch and replays its launches as a graph (query_cuda.c), which a
 * launch (fl_prepared_launch) enqueues without waiting for the host's part. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "fusion/query.h"
#include "fusion/query_kernels.h"

struct fl_prepared {
  fl_cache *c;
  fl_table_query *queries; /* the caller's, copied */
  uint32_t n;
  fl_query_view *views;    /* CUDA: per query; host backend: NULL */
  fl_plan *plan;      /* CUDA, one part batch: its kept scratch and graph; else NULL */
};

fl_status fl_query_prepare(fl_cache *c, const fl_table_query *queries, uint32_t n_queries,
                           fl_prepared **out) {
  if (!c) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_query_prepare: cache is NULL");
  if (!out) return fl_fail(c, FL_ERR_INVALID_ARGUMENT, "fl_query_prepare: out is NULL");
  *out = NULL;
  fl_status st = fl_query_validate(c, queries, n_queries, 0);
  if (st != FL_OK) return st;
  fl_prepared *p = calloc(1, sizeof *p);
  size_t n = n_queries ? n_queries : 1;
  const fl_cache_fixed *f = fl_cache_fixed_of(c);
  int cuda = f->backend == FL_BACKEND_CUDA;
  if (p) p->queries = malloc(n * sizeof *p->queries);
  int one_batch = f->n_parts == 1 && n_queries <= FL_LAUNCH_MAX_QUERIES;
  if (p && cuda) p->views = malloc(n * sizeof *p->views);
  if (p && cuda && one_batch) p->plan = fl_plan_create();
  if (!p || !p->queries || (cuda && !p->views) || (cuda && one_batch && !p->plan)) {
    fl_prepared_destroy(p);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "fl_query_prepare: out of host memory");
  }
  p->c = c;
  p->n = n_queries;
  if (n_queries) memcpy(p->queries, queries, n_queries * sizeof *queries);
  if (cuda) fl_query_cuda_views(p->queries, n_queries, p->views);
  *out = p;
  return FL_OK;
}

/* A run; launched (async): the host half of a run with the gated graph is
 * the answerer's. */
static fl_status run(fl_prepared *p, void *stream, int async, const char *call) {
  if (!p) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "%s: prepared query is NULL", call);
  if (p->plan) fl_plan_set_async(p->plan, async);
  return fl_query_run(p->c, p->queries, p->n, stream, p->views, p->plan, 0);
}

fl_status fl_prepared_run(fl_prepared *p, void *stream) { return run(p, stream, 0, "fl_prepared_run"); }

fl_status fl_prepared_launch(fl_prepared *p, void *stream) {
  return run(p, stream, 1, "fl_prepared_launch");
}

fl_status fl_prepared_wait(fl_prepared *p) {
  if (!p) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_prepared_wait: prepared query is NULL");
  return p->plan ? fl_plan_wait(p->c, p->plan) : FL_OK;
}

void fl_prepared_destroy(fl_prepared *p) {
  if (!p) return;
  fl_plan_destroy(p->c, p->plan);
  free(p->queries);
  free(p->views);
  free(p);
}
