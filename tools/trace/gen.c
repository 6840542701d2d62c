/* gen.c: the Zipf trace generator (fl_trace_open_zipf). Each (batch, table)
 * has its own random stream seeded from (seed, phase, batch, table), so batches
 * are generated in parallel over tables, a rewind replays the same ids, and
 * batch k is the same whatever was read before it. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hash.h"
#include "common/parallel.h"
#include "tools/trace/trace_impl.h"
#include "tools/trace/zipf.h"

typedef struct gen {
  fl_trace base;
  fl_zipf_spec spec;   /* spec.cardinality points into base.tables */
  fl_zipf *zipf[2];    /* per table, before and after the switch */
  fl_perm *perm[2];
  fl_workers *workers;
  uint64_t batch;      /* index of the next batch */
} gen;

typedef struct gen_job {
  gen *g;
  fl_trace_batch *b;
  int phase;
} gen_job;

static void gen_tables(void *ctx, size_t begin, size_t end) {
  gen_job *j = ctx;
  const gen *g = j->g;
  for (size_t t = begin; t < end; t++) {
    uint64_t rng = fl_hash2(fl_hash2(g->spec.seed, (uint64_t)j->phase),
                            g->batch * g->base.n_tables + t);
    const fl_zipf *z = &g->zipf[j->phase][t];
    const fl_perm *p = &g->perm[j->phase][t];
    uint64_t *ids = j->b->ids[t];
    for (uint32_t i = 0; i < g->spec.batch_samples; i++) {
      ids[i] = fl_perm_apply(p, fl_zipf_sample(z, &rng));
      if (g->spec.hashed) ids[i] = fl_mix64(ids[i] ^ t); /* raw ids, distinct per table */
    }
    j->b->n[t] = g->spec.batch_samples;
  }
}

static fl_status gen_next(fl_trace *t, fl_trace_batch *b, int *got) {
  gen *g = (gen *)t;
  if (g->batch >= g->spec.n_batches) return FL_OK;
  for (uint32_t i = 0; i < t->n_tables; i++)
    if (fl_trace_batch_reserve(b, i, g->spec.batch_samples) != FL_OK)
      return fl_fail(g, FL_ERR_OUT_OF_MEMORY, "<zipf>: out of memory for a batch");
  gen_job j = {g, b, g->spec.switch_batch && g->batch >= g->spec.switch_batch};
  fl_workers_for(g->workers, t->n_tables, 1, gen_tables, &j);
  b->samples = g->spec.batch_samples;
  g->batch++;
  *got = 1;
  return FL_OK;
}

static fl_status gen_rewind(fl_trace *t) {
  ((gen *)t)->batch = 0;
  return FL_OK;
}

static void gen_close(fl_trace *t) {
  gen *g = (gen *)t;
  for (int ph = 0; ph < 2; ph++) free(g->zipf[ph]), free(g->perm[ph]);
  fl_workers_destroy(g->workers);
}

static const fl_trace_ops gen_ops = {gen_next, gen_rewind, gen_close};

fl_status fl_trace_open_zipf(const fl_zipf_spec *spec, fl_trace **out) {
  if (!spec || !out || !spec->cardinality || spec->n_tables == 0 ||
      spec->n_tables > FL_TRACE_MAX_TABLES || spec->batch_samples == 0)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "zipf: 1..%d tables, cardinalities and a batch size are required",
                   FL_TRACE_MAX_TABLES);
  if (!(spec->exponent > 0) || (spec->switch_batch && !(spec->switch_exponent > 0)))
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "zipf: exponents must be > 0");
  for (uint32_t i = 0; i < spec->n_tables; i++)
    if (spec->cardinality[i] == 0)
      return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "zipf: table %u has cardinality 0", i);
  gen *g = (gen *)fl_trace_alloc(sizeof *g, &gen_ops, "<zipf>", spec->n_tables);
  if (!g) return FL_ERR_OUT_OF_MEMORY;
  g->spec = *spec;
  const uint32_t n = spec->n_tables;
  for (int ph = 0; ph < 2; ph++) {
    g->zipf[ph] = calloc(n, sizeof *g->zipf[ph]);
    g->perm[ph] = calloc(n, sizeof *g->perm[ph]);
  }
  g->workers = fl_workers_create("trace-gen", spec->threads);
  if (!g->zipf[0] || !g->zipf[1] || !g->perm[0] || !g->perm[1] || !g->workers) {
    fl_trace_close(&g->base);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "zipf: out of memory");
  }
  for (uint32_t i = 0; i < n; i++) {
    fl_trace_table *tb = &g->base.tables[i];
    tb->cardinality = spec->cardinality[i];
    tb->id_kind = spec->hashed ? FL_IDS_HASHED : FL_IDS_DENSE;
    for (int ph = 0; ph < 2; ph++) {
      fl_zipf_init(&g->zipf[ph][i], tb->cardinality, ph ? spec->switch_exponent : spec->exponent);
      /* The switch re-keys the bijection: the new hot ids are other ids. */
      fl_perm_init(&g->perm[ph][i], tb->cardinality, fl_hash2(spec->seed + (uint64_t)ph, i));
    }
  }
  g->base.n_batches = spec->n_batches;
  *out = &g->base;
  return FL_OK;
}
