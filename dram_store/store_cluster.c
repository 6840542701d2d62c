/* store_cluster.c: stores over a Redis Cluster (remote.h, docs/TIERS.md):
 * create/open against the model's metadata, the local budget, copies of
 * tables between stores, and the tier statistics every store keeps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/meta.h"
#include "common/error.h"
#include "common/hash.h"
#include "dram_store/remote.h"

void fl_remote_close(fl_store *s) {
  fl_remote *rm = s->remote;
  if (!rm) return;
  fl_inval_stop(rm->inval);
  fl_cluster_close(rm->cluster);
  fl_keyspace_fini(&rm->ks);
  pthread_mutex_destroy(&rm->fill_lock);
  free(rm);
  s->remote = NULL;
}

/* The first difference between the asked tables and the model's, or FL_OK. */
static fl_status same_tables(const fl_cluster_config *cfg, const fl_table_desc *a, uint32_t n,
                             const fl_model_meta *m) {
  if (n != m->n_tables)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                   "cluster model '%s' has %u tables, asked for %u", cfg->ns, m->n_tables, n);
  for (uint32_t i = 0; i < n; i++) {
    const fl_table_desc *b = &m->tables[i];
    if (strcmp(a[i].name ? a[i].name : "", b->name) || a[i].dim != b->dim || a[i].dtype != b->dtype ||
        a[i].id_kind != b->id_kind || a[i].corpus_size != b->corpus_size)
      return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                     "cluster model '%s' table %u is '%s' dim %u %s %s corpus %llu; asked for "
                     "'%s' dim %u %s %s corpus %llu", cfg->ns, i, b->name, b->dim,
                     b->dtype == FL_FP16 ? "fp16" : "fp32",
                     b->id_kind == FL_IDS_DENSE ? "dense" : "hashed",
                     (unsigned long long)b->corpus_size, a[i].name ? a[i].name : "", a[i].dim,
                     a[i].dtype == FL_FP16 ? "fp16" : "fp32",
                     a[i].id_kind == FL_IDS_DENSE ? "dense" : "hashed",
                     (unsigned long long)a[i].corpus_size);
  }
  return FL_OK;
}

/* Opens model cfg->ns (creating it from `tables` when given) and builds the
 * store over it. */
static fl_status open_model(const fl_table_desc *tables, uint32_t n, uint32_t threads,
                            const fl_cluster_config *cfg, fl_store **out) {
  if (!out) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "cluster store: out is NULL");
  *out = NULL;
  if (!cfg) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "cluster store: cfg is NULL");
  if (!tables && n) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "cluster store: tables is NULL");
  fl_cluster *c;
  fl_status st = fl_cluster_open(cfg, NULL, &c);
  if (st != FL_OK) return st;
  const fl_cluster_config *cc = fl_cluster_cfg(c);
  fl_model_meta m = {0};
  st = tables ? fl_meta_create(c, NULL, cc->ns, cc->buckets, tables, n, &m)
              : fl_meta_read(c, NULL, cc->ns, &m);
  if (st == FL_OK && tables) st = same_tables(cc, tables, n, &m);
  fl_store *s = NULL;
  if (st == FL_OK) st = fl_store_new(m.tables, m.n_tables, threads, 1, &s);
  fl_remote *rm = st == FL_OK ? calloc(1, sizeof *rm) : NULL;
  if (st == FL_OK && (!rm || fl_keyspace_init(&rm->ks, cc->ns, m.buckets) != 0)) {
    free(rm);
    st = fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "no memory for the cluster tier");
  }
  fl_meta_free(&m);
  if (st != FL_OK) {
    fl_store_destroy(s);
    fl_cluster_close(c);
    return st;
  }
  rm->cluster = c;
  pthread_mutex_init(&rm->fill_lock, NULL);
  atomic_init(&rm->budget, cfg->local_budget_bytes);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rm->self = fl_hash2(((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s,
                      (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
  s->remote = rm;
  st = fl_inval_start(c, NULL, rm->self, fl_remote_apply, s, &rm->inval);
  if (st != FL_OK) {
    fl_store_destroy(s);
    return st;
  }
  *out = s;
  return FL_OK;
}

fl_status fl_store_create_cluster(const fl_table_desc *tables, uint32_t n_tables,
                                  uint32_t threads, const fl_cluster_config *cfg,
                                  fl_store **out) {
  if (!tables) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_store_create_cluster: tables is NULL");
  return open_model(tables, n_tables, threads, cfg, out);
}

fl_status fl_store_open_cluster(const fl_cluster_config *cfg, uint32_t threads, fl_store **out) {
  return open_model(NULL, 0, threads, cfg, out);
}

fl_status fl_store_set_local_budget(fl_store *s, uint64_t bytes) {
  if (!s || !s->remote)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT,
                   "fl_store_set_local_budget: %s", s ? "the store is not over a cluster" : "store is NULL");
  atomic_store(&s->remote->budget, bytes);
  return FL_OK;
}

/* ------------------------------------------------------------ copies */

/* Rows per write of fl_store_copy. */
#define FL_COPY_BATCH 65536

typedef struct fl_copy {
  fl_store *dst;
  fl_table *t;           /* dst's table */
  uint64_t *ids;         /* the batch being gathered */
  unsigned char *vec;
  size_t n;
  uint64_t done, total;
  fl_progress_fn progress;
  void *ctx;
  fl_status st;
} fl_copy;

static int copy_flush(fl_copy *x) {
  if (!x->n) return 0;
  x->st = x->dst->remote ? fl_remote_put(x->dst, x->t, x->ids, x->n, x->vec)
                         : fl_store_upsert_rows(x->dst, x->t, x->ids, x->n, x->vec);
  x->done += x->n;
  x->n = 0;
  if (x->progress && x->st == FL_OK) x->progress(x->ctx, x->done, x->total);
  return x->st != FL_OK;
}

static int copy_row(void *ctx, uint64_t id, const void *vec) {
  fl_copy *x = ctx;
  x->ids[x->n] = id;
  memcpy(x->vec + x->n * x->t->row_bytes, vec, x->t->row_bytes);
  return ++x->n == FL_COPY_BATCH ? copy_flush(x) : 0;
}

fl_status fl_store_copy(fl_store *dst, fl_store *src, uint32_t table, fl_progress_fn progress,
                        void *ctx) {
  if (!dst || !src || dst == src)
    return fl_fail(dst, FL_ERR_INVALID_ARGUMENT, "fl_store_copy: %s",
                   dst && src ? "dst and src are the same store" : "a store is NULL");
  fl_table *t = fl_store_table_arg(dst, table, "fl_store_copy");
  fl_table *from = t ? fl_store_table_arg(src, table, "fl_store_copy") : NULL;
  if (!from) {
    if (t) fl_error_forward(src, dst);
    return FL_ERR_INVALID_ARGUMENT;
  }
  if (t->row_bytes != from->row_bytes || t->desc.dtype != from->desc.dtype ||
      t->desc.id_kind != from->desc.id_kind)
    return fl_fail(dst, FL_ERR_INVALID_ARGUMENT,
                   "fl_store_copy: table %u: '%s' (dim %u) and '%s' (dim %u) differ in shape", table,
                   t->name, t->desc.dim, from->name, from->desc.dim);
  if (src->remote) return fl_store_local_only(dst, "fl_store_copy from a cluster store");
  fl_copy x = {.dst = dst, .t = t, .ids = malloc(FL_COPY_BATCH * sizeof(uint64_t)),
               .vec = malloc(FL_COPY_BATCH * t->row_bytes), .progress = progress, .ctx = ctx,
               .st = FL_OK};
  if (!x.ids || !x.vec) {
    free(x.ids), free(x.vec);
    return fl_fail(dst, FL_ERR_OUT_OF_MEMORY, "fl_store_copy: no memory for a batch");
  }
  pthread_mutex_lock(&from->write_lock);
  x.total = atomic_load(&from->rows);
  if (!fl_table_walk(from, copy_row, &x)) copy_flush(&x);
  pthread_mutex_unlock(&from->write_lock);
  free(x.ids), free(x.vec);
  if (dst->remote && x.done) {
    fl_status changed = fl_remote_changed(dst, t, NULL, 0);
    if (x.st == FL_OK) x.st = changed;
  }
  return x.st;
}

/* ------------------------------------------------------------ statistics */

fl_status fl_store_tier_stats_get(const fl_store *s, fl_store_tier_stats *out) {
  if (!s || !out) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_tier_stats_get: NULL argument");
  const fl_tier_counters *k = &s->tier;
  memset(out, 0, sizeof *out);
  out->lookups = atomic_load(&k->lookups);
  out->local_hits = atomic_load(&k->local_hits);
  out->cluster_rows = atomic_load(&k->cluster_rows);
  out->cluster_missing = atomic_load(&k->cluster_missing);
  out->cluster_fetches = atomic_load(&k->cluster_fetches);
  out->evictions = atomic_load(&k->evictions);
  out->ns_local = (double)atomic_load(&k->ns_local);
  out->ns_cluster = (double)atomic_load(&k->ns_cluster);
  out->local_bytes = fl_local_bytes(s);
  fl_remote *rm = s->remote;
  out->local_budget_bytes = rm ? atomic_load(&rm->budget) : out->local_bytes;
  for (uint32_t i = 0; i < s->n_tables; i++)
    out->model_bytes += rm ? s->tables[i].desc.corpus_size * s->tables[i].row_bytes
                           : atomic_load(&s->tables[i].rows) * s->tables[i].row_bytes;
  if (rm) {
    out->cluster_commands = fl_cluster_commands(rm->cluster) - k->commands0;
    out->invalidations = fl_inval_applied(rm->inval) - k->invalidations0;
    out->resyncs = fl_inval_resyncs(rm->inval) - k->resyncs0;
  }
  return FL_OK;
}

void fl_store_tier_stats_reset(fl_store *s) {
  if (!s) return;
  fl_tier_counters *k = &s->tier;
  atomic_store(&k->lookups, 0), atomic_store(&k->local_hits, 0);
  atomic_store(&k->cluster_rows, 0), atomic_store(&k->cluster_missing, 0);
  atomic_store(&k->cluster_fetches, 0), atomic_store(&k->evictions, 0);
  atomic_store(&k->ns_local, 0), atomic_store(&k->ns_cluster, 0);
  if (s->remote) {
    k->commands0 = fl_cluster_commands(s->remote->cluster);
    k->invalidations0 = fl_inval_applied(s->remote->inval);
    k->resyncs0 = fl_inval_resyncs(s->remote->inval);
  }
}
