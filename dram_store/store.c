/* store.c: the store handle, the front over its tier (tier.h): create and
 * destroy, table descriptors, statistics, upserts, removes, synthetic fills
 * and change subscriptions. Gathers live in gather.c, copies in copy.c, file
 * formats in format_*.c, the tiers in local_tier.c and cluster_store/. */
#include <stdlib.h>
#include <unistd.h>

#include "common/half.h"
#include "common/synthetic.h"
#include "dram_store/store_impl.h"
#include "dram_store/synthetic_ids.h"

/* Rows a synthetic fill computes in parallel before writing them. */
#define FL_FILL_BATCH 8192

static fl_status fl_check_desc(const fl_table_desc *d, uint32_t i) {
  const char *name = d->name ? d->name : "";
  if (d->dim < 1 || d->dim > 4096)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "table %u '%s': dim %u is not in 1..4096", i,
                   name, d->dim);
  if (d->dtype != FL_FP32 && d->dtype != FL_FP16)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "table %u '%s': unknown dtype %d", i, name,
                   (int)d->dtype);
  if (d->id_kind != FL_IDS_DENSE && d->id_kind != FL_IDS_HASHED)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "table %u '%s': unknown id_kind %d", i, name,
                   (int)d->id_kind);
  if (d->id_kind == FL_IDS_DENSE && d->corpus_size > (SIZE_MAX / 2) / (4096 * 4))
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "table %u '%s': corpus_size %llu is too large",
                   i, name, (unsigned long long)d->corpus_size);
  return FL_OK;
}

fl_status fl_store_new(const fl_table_desc *tables, uint32_t n_tables, uint32_t threads,
                       int cached, const fl_store_ops *ops, fl_store **out) {
  if (!out) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_store_create: out is NULL");
  *out = NULL;
  if (!tables && n_tables)
    return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fl_store_create: tables is NULL");
  for (uint32_t i = 0; i < n_tables; i++) {
    fl_status st = fl_check_desc(&tables[i], i);
    if (st != FL_OK) return st;
  }
  fl_store *s = calloc(1, sizeof *s);
  /* The seqlock stripes get pages of their own: zero-copy readers register
   * them for device access (fl_store_map_rows). */
  size_t env_bytes = fl_mem_round_pages(sizeof(fl_store_env));
  fl_store_env *env = s ? aligned_alloc(FL_MEM_PAGE_BYTES, env_bytes) : NULL;
  if (env) memset(env, 0, env_bytes);
  if (!env || fl_mem_init(&env->mem) != 0) {
    free(env);
    free(s);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "fl_store_create: no memory for the store");
  }
  s->ops = ops;
  s->env = env;
  fl_grace_init(&env->grace);
  pthread_mutex_init(&s->subs_lock, NULL);
  pthread_mutex_init(&s->map_lock, NULL);
  s->workers = fl_workers_create("fl-store", threads ? threads : fl_store_default_threads());
  s->tables = calloc(n_tables ? n_tables : 1, sizeof *s->tables);
  if (!s->workers || !s->tables) {
    fl_store_destroy(s);
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "fl_store_create: no memory for the store");
  }
  for (uint32_t i = 0; i < n_tables; i++) {
    if (fl_table_init(&s->tables[i], env, i, &tables[i], cached) != 0) {
      fl_store_destroy(s);
      return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY,
                     "fl_store_create: table %u: no memory for %llu rows of %u elements", i,
                     (unsigned long long)tables[i].corpus_size, tables[i].dim);
    }
    s->n_tables = i + 1;
  }
  *out = s;
  return FL_OK;
}

void fl_store_set_tier(fl_store *s, void *tier) { s->tier_state = tier; }

void *fl_store_tier(const fl_store *s) { return s->tier_state; }

void fl_store_destroy(fl_store *s) {
  if (!s) return;
  s->ops->close(s);
  for (uint32_t i = 0; i < s->n_tables; i++) fl_table_fini(&s->tables[i]);
  free(s->tables);
  fl_workers_destroy(s->workers);
  free(s->subs);
  pthread_mutex_destroy(&s->subs_lock);
  pthread_mutex_destroy(&s->map_lock);
  fl_grace_fini(&s->env->grace);
  fl_mem_fini(&s->env->mem);
  free(s->env);
  free(s);
}

const char *fl_store_last_error(const fl_store *s) { return fl_error_get(s); }

uint32_t fl_store_num_tables(const fl_store *s) { return s ? s->n_tables : 0; }

fl_table *fl_store_table_arg(fl_store *s, uint32_t table, const char *call) {
  if (table < s->n_tables) return &s->tables[table];
  fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: table %u does not exist (the store has %u)", call,
          table, s->n_tables);
  return NULL;
}

fl_status fl_store_table(const fl_store *s, uint32_t table, fl_table_desc *out) {
  if (!s || !out) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_table: NULL argument");
  fl_table *t = fl_store_table_arg((fl_store *)s, table, "fl_store_table");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  *out = t->desc;
  return FL_OK;
}

const fl_table_desc *fl_store_desc(const fl_store *s, uint32_t table) {
  return s && table < s->n_tables ? &s->tables[table].desc : NULL;
}

fl_workers *fl_store_workers(fl_store *s) { return s->workers; }

size_t fl_store_row_bytes(const fl_store *s, uint32_t table) { return s->tables[table].row_bytes; }

fl_status fl_store_stats(const fl_store *s, uint32_t table, fl_store_table_stats *out) {
  if (!s || !out) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_stats: NULL argument");
  fl_table *t = fl_store_table_arg((fl_store *)s, table, "fl_store_stats");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  out->rows = atomic_load_explicit(&t->rows, memory_order_relaxed);
  out->bytes = out->rows * t->row_bytes;
  out->lookups = atomic_load_explicit(&t->lookups, memory_order_relaxed);
  out->misses = atomic_load_explicit(&t->misses, memory_order_relaxed);
  return FL_OK;
}

fl_status fl_store_set_local_budget(fl_store *s, uint64_t bytes) {
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_set_local_budget: store is NULL");
  return s->ops->set_budget(s, bytes);
}

/* ---------------------------------------------------------- writes */

void fl_store_notify(fl_store *s, uint32_t table, const uint64_t *ids, size_t n) {
  pthread_mutex_lock(&s->subs_lock);
  for (int i = 0; i < s->n_subs; i++)
    if (s->subs[i].fn) s->subs[i].fn(s->subs[i].ctx, table, ids, n);
  pthread_mutex_unlock(&s->subs_lock);
}

fl_status fl_store_upsert_rows(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                               const void *vectors) {
  return n ? s->ops->write(s, t->id, ids, n, vectors) : FL_OK;
}

fl_status fl_store_upsert(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                          const void *vectors) {
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_upsert: store is NULL");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_upsert");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  if (n && (!ids || !vectors))
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_upsert: table %u '%s': %s is NULL",
                   table, t->name, ids ? "vectors" : "ids");
  size_t bad = fl_table_first_out_of_range(t, ids, n);
  if (bad < n)
    return fl_fail(s, FL_ERR_OUT_OF_RANGE,
                   "fl_store_upsert: table %u '%s': id %llu is out of range (corpus %llu)", table,
                   t->name, (unsigned long long)ids[bad], (unsigned long long)t->desc.corpus_size);
  return fl_store_upsert_rows(s, t, ids, n, vectors);
}

fl_status fl_store_remove(fl_store *s, uint32_t table, const uint64_t *ids, size_t n) {
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_remove: store is NULL");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_remove");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  if (t->desc.id_kind == FL_IDS_DENSE)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT,
                   "fl_store_remove: table %u '%s' is dense: it holds every id", table, t->name);
  if (n && !ids)
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_remove: table %u '%s': ids is NULL",
                   table, t->name);
  return n ? s->ops->write(s, table, ids, n, NULL) : FL_OK;
}

/* ---------------------------------------------------------- synthetic */

float fl_synthetic_value(uint64_t seed, uint32_t table, uint64_t id, uint32_t j) {
  return fl_synthetic(seed, table, id, j);
}

/* One batch of a synthetic fill: rows k0 .. k0+n-1 computed in parallel. */
typedef struct fl_fill_job {
  const fl_table *t;  /* the table filled */
  uint64_t seed;      /* value seed */
  uint64_t k0;        /* first row of the batch */
  uint64_t *ids;      /* out: the batch's ids */
  unsigned char *vec; /* out: the batch's vectors */
} fl_fill_job;

static void fl_fill_range(void *ctx, size_t b, size_t e) {
  fl_fill_job *j = ctx;
  const fl_table *t = j->t;
  for (size_t i = b; i < e; i++) {
    uint64_t k = j->k0 + i;
    uint64_t id = t->desc.id_kind == FL_IDS_DENSE ? k : fl_synthetic_id(t->id, k);
    j->ids[i] = id;
    unsigned char *row = j->vec + i * t->row_bytes;
    for (uint32_t c = 0; c < t->desc.dim; c++) {
      float v = fl_synthetic_value(j->seed, t->id, id, c);
      if (t->desc.dtype == FL_FP16)
        ((uint16_t *)row)[c] = fl_f32_to_f16(v);
      else
        ((float *)row)[c] = v;
    }
  }
}

fl_status fl_store_fill_synthetic(fl_store *s, uint32_t table, uint64_t seed) {
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "fl_store_fill_synthetic: store is NULL");
  fl_table *t = fl_store_table_arg(s, table, "fl_store_fill_synthetic");
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  uint64_t corpus = t->desc.corpus_size;
  fl_fill_job job = {t, seed, 0, malloc(FL_FILL_BATCH * sizeof(uint64_t)),
                     malloc(FL_FILL_BATCH * t->row_bytes)};
  pthread_mutex_lock(&t->write_lock);
  int rc = job.ids && job.vec ? s->ops->reserve(s, table, corpus) : FL_TABLE_NO_MEMORY;
  if (rc != 0) {
    pthread_mutex_unlock(&t->write_lock);
    free(job.ids);
    free(job.vec);
    return fl_fail(s, FL_ERR_OUT_OF_MEMORY,
                   "fl_store_fill_synthetic: table %u '%s': %s for %llu rows", table, t->name,
                   fl_table_reserve_why(rc), (unsigned long long)corpus);
  }
  fl_status st = FL_OK;
  for (; job.k0 < corpus && st == FL_OK; job.k0 += FL_FILL_BATCH) {
    size_t n = corpus - job.k0 < FL_FILL_BATCH ? (size_t)(corpus - job.k0) : FL_FILL_BATCH;
    fl_workers_for(s->workers, n, 64, fl_fill_range, &job);
    st = s->ops->put(s, table, job.ids, n, job.vec);
  }
  pthread_mutex_unlock(&t->write_lock);
  free(job.ids);
  free(job.vec);
  if (!corpus) return st;
  /* Even a failed fill may have written rows: tell. */
  fl_status changed = s->ops->changed(s, table);
  return st != FL_OK ? st : changed;
}

/* ---------------------------------------------------------- subscriptions */

int fl_store_subscribe(fl_store *s, fl_store_change_fn fn, void *ctx) {
  pthread_mutex_lock(&s->subs_lock);
  int id = 0;
  while (id < s->n_subs && s->subs[id].fn) id++;
  if (id == s->n_subs) {
    fl_store_sub *n = realloc(s->subs, (size_t)(s->n_subs + 1) * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&s->subs_lock);
      return -1;
    }
    s->subs = n;
    s->n_subs++;
  }
  s->subs[id].fn = fn;
  s->subs[id].ctx = ctx;
  pthread_mutex_unlock(&s->subs_lock);
  return id;
}

void fl_store_unsubscribe(fl_store *s, int id) {
  pthread_mutex_lock(&s->subs_lock);
  if (id >= 0 && id < s->n_subs) s->subs[id].fn = NULL;
  pthread_mutex_unlock(&s->subs_lock);
}

uint32_t fl_store_default_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 1 ? (uint32_t)(cores / 2) : 1;
}

uint32_t fl_store_threads(const fl_store *s) { return fl_workers_count(s->workers); }
