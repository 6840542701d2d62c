/* replay_setup.c: the workload of a replay: the trace (a file or the embedded
 * Zipf generator), the store holding a row for every id the trace looks up
 * (synthetic vectors, a model file, or a model in a Redis Cluster), and caches
 * configured from the options. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/half.h"
#include "tools/criteo_tables.h"
#include "tools/replay.h"
#include "tools/trace/distinct.h"

/* A percentage budget never goes under 1 MiB, so tiny test models still get
 * a cache that holds a few slabs. */
#define FL_MIN_BUDGET (UINT64_C(1) << 20)

static fl_status fail_store(fl_store *s, fl_status st, const char *what) {
  fprintf(stderr, "error: %s: %s: %s\n", what, fl_status_name(st), fl_store_last_error(s));
  return st;
}

/* "criteo" or "n1,n2,...", each divided by scale (at least 1). */
static fl_status parse_tables(const char *spec, double scale, uint64_t *card, uint32_t *n) {
  *n = 0;
  if (!strcmp(spec, "criteo")) {
    for (; *n < FL_CRITEO_TABLES; ++*n) card[*n] = fl_criteo_rows[*n];
  } else {
    for (const char *p = spec; *p && *n < FL_TRACE_MAX_TABLES;) {
      char *end;
      unsigned long long v = strtoull(p, &end, 10);
      if (end == p || v == 0 || (*end && *end != ',')) {
        fprintf(stderr, "error: --tables '%s': expected criteo or positive n1,n2,...\n", spec);
        return FL_ERR_INVALID_ARGUMENT;
      }
      card[(*n)++] = v;
      p = *end ? end + 1 : end;
    }
  }
  for (uint32_t i = 0; i < *n; i++) {
    card[i] = (uint64_t)((double)card[i] / scale + 0.5);
    if (card[i] == 0) card[i] = 1;
  }
  return FL_OK;
}

fl_status fl_replay_open_trace(const fl_replay_opts *o, int gpu, fl_trace **out) {
  fl_status s;
  if (o->trace) {
    s = fl_trace_open(o->trace, o->format, o->batch, out);
  } else {
    uint64_t card[FL_TRACE_MAX_TABLES];
    fl_zipf_spec z = {0};
    double scale = o->scale > 0 ? o->scale : (gpu ? 1 : 100);
    s = parse_tables(o->tables, scale, card, &z.n_tables);
    if (s != FL_OK) return s;
    z.cardinality = card;
    z.exponent = o->exponent;
    z.seed = o->seed;
    z.batch_samples = o->batch;
    z.n_batches = o->batches ? o->batches : (gpu ? 128 : 16);
    z.switch_batch = o->switch_at;
    z.switch_exponent = o->switch_exponent;
    z.threads = o->threads;
    z.hashed = o->hashed;
    fprintf(stderr, "workload: %u %sZipf(%.3g) tables%s, %llu batches of %u samples, seed %llu\n",
            z.n_tables, z.hashed ? "hashed-id " : "", z.exponent,
            strcmp(o->tables, "criteo") ? "" : " (Criteo Kaggle sizes)",
            (unsigned long long)z.n_batches, z.batch_samples, (unsigned long long)z.seed);
    if (scale != 1) fprintf(stderr, "workload: cardinalities divided by %g\n", scale);
    if (z.switch_batch)
      fprintf(stderr, "workload: switches to Zipf(%.3g), new hot ids, at batch %llu\n",
              z.switch_exponent, (unsigned long long)z.switch_batch);
    s = fl_trace_open_zipf(&z, out);
  }
  if (s != FL_OK)
    fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(NULL));
  return s;
}

/* Rows with synthetic vectors for the ids of a hashed table. */
static fl_status upsert_synthetic(fl_store *st, uint32_t t, const fl_replay_opts *o,
                                  const uint64_t *ids, size_t n) {
  enum { CHUNK = 65536 };
  const size_t esz = o->dtype == FL_FP16 ? 2 : 4;
  unsigned char *v = malloc((size_t)CHUNK * o->dim * esz);
  if (!v) return FL_ERR_OUT_OF_MEMORY;
  fl_status s = FL_OK;
  for (size_t b = 0; s == FL_OK && b < n; b += CHUNK) {
    size_t m = n - b < CHUNK ? n - b : CHUNK;
    for (size_t i = 0; i < m; i++)
      for (uint32_t j = 0; j < o->dim; j++) {
        float x = fl_synthetic_value(o->seed, t, ids[b + i], j);
        size_t at = i * o->dim + j;
        if (esz == 2) ((uint16_t *)v)[at] = fl_f32_to_f16(x);
        else ((float *)v)[at] = x;
      }
    s = fl_store_upsert(st, t, ids + b, m, v);
  }
  free(v);
  return s;
}

/* Joins dir and a table's file name. */
static void table_path(char *out, size_t cap, const char *dir, const char *name, const char *suffix) {
  snprintf(out, cap, "%s/%s%s", dir, name, suffix);
}

static fl_status fill_table(fl_store *st, uint32_t t, const fl_trace_table *tb,
                            const fl_replay_opts *o, const fl_idset *seen) {
  char a[4096], b[4096];
  if (o->model_npy) {
    table_path(a, sizeof a, o->model_npy, tb->name, ".ids.npy");
    table_path(b, sizeof b, o->model_npy, tb->name, ".vectors.npy");
    return fl_store_import_npy(st, t, a, b);
  }
  if (o->model_hugectr) {
    table_path(a, sizeof a, o->model_hugectr, tb->name, "");
    return fl_store_import_hugectr(st, t, a);
  }
  if (tb->id_kind == FL_IDS_DENSE) return fl_store_fill_synthetic(st, t, o->seed);
  uint64_t *ids = malloc((seen->count ? seen->count : 1) * sizeof *ids);
  if (!ids) return FL_ERR_OUT_OF_MEMORY;
  fl_idset_list(seen, ids);
  fl_status s = upsert_synthetic(st, t, o, ids, seen->count);
  free(ids);
  return s;
}

fl_status fl_replay_open_cluster(const fl_replay_opts *o, double budget_pct, fl_store **out) {
  fl_cluster_config cfg;
  fl_cluster_config_default(&cfg);
  cfg.seed = o->store;
  if (o->store_ns) cfg.ns = o->store_ns;
  fl_status s = fl_store_open_cluster(&cfg, o->threads, out);
  if (s != FL_OK) return fail_store(NULL, s, "opening the cluster store");
  fl_store_tier_stats ts;
  s = fl_store_tier_stats_get(*out, &ts);
  if (s == FL_OK)
    s = fl_store_set_local_budget(*out, (uint64_t)((double)ts.model_bytes * budget_pct / 100));
  if (s != FL_OK) return fail_store(*out, s, "sizing the local tier");
  return FL_OK;
}

/* --store: the model is the cluster's; with --verify a second store over it
 * with no local tier checks the answers against the cluster itself. */
static fl_status open_cluster_store(const fl_replay_opts *o, fl_workload *w) {
  w->model_desc = o->store;
  fl_status s = fl_replay_open_cluster(o, o->dram_budget_pct, &w->store);
  if (s == FL_OK && o->verify) s = fl_replay_open_cluster(o, 0, &w->verify_store);
  if (s != FL_OK) return s;
  if (fl_store_num_tables(w->store) != w->n_tables) {
    fprintf(stderr, "error: the cluster's model has %u tables, the trace %u\n",
            fl_store_num_tables(w->store), w->n_tables);
    return FL_ERR_INVALID_ARGUMENT;
  }
  fl_store_tier_stats ts;
  fl_store_tier_stats_get(w->store, &ts);
  fprintf(stderr, "store: %s, local DRAM tier %.1f MB (%g%% of the model)\n", o->store,
          (double)ts.local_budget_bytes / 1e6, o->dram_budget_pct);
  return FL_OK;
}

static fl_status build_store(const fl_replay_opts *o, fl_workload *w, fl_idset *seen) {
  const fl_trace_table *tb = fl_trace_tables(w->trace);
  fl_status s;
  if (o->store) return open_cluster_store(o, w);
  if (o->model) {
    w->model_desc = o->model;
    s = fl_store_load(o->model, o->threads, &w->store);
    if (s != FL_OK) return fail_store(NULL, s, "loading the model");
    if (fl_store_num_tables(w->store) != w->n_tables) {
      fprintf(stderr, "error: %s has %u tables, the trace %u\n", o->model,
              fl_store_num_tables(w->store), w->n_tables);
      return FL_ERR_INVALID_ARGUMENT;
    }
    return FL_OK;
  }
  w->model_desc = o->model_npy ? o->model_npy : o->model_hugectr ? o->model_hugectr : "synthetic";
  fl_table_desc *d = calloc(w->n_tables, sizeof *d);
  if (!d) return FL_ERR_OUT_OF_MEMORY;
  for (uint32_t i = 0; i < w->n_tables; i++) {
    d[i].name = tb[i].name;
    d[i].corpus_size = tb[i].id_kind == FL_IDS_DENSE ? tb[i].cardinality
                                                     : (seen[i].count ? seen[i].count : 1);
    d[i].dim = o->dim;
    d[i].dtype = o->dtype;
    d[i].id_kind = tb[i].id_kind;
  }
  s = fl_store_create(d, w->n_tables, o->threads, &w->store);
  free(d);
  if (s != FL_OK) return fail_store(NULL, s, "creating the store");
  for (uint32_t i = 0; i < w->n_tables; i++) {
    s = fill_table(w->store, i, &tb[i], o, &seen[i]);
    if (s != FL_OK) {
      fprintf(stderr, "error: table %u (%s): ", i, tb[i].name);
      return fail_store(w->store, s, "filling the store");
    }
  }
  return FL_OK;
}

fl_status fl_workload_open(const fl_replay_opts *o, fl_workload *w) {
  memset(w, 0, sizeof *w);
  int gpu = fl_replay_uses_gpu(o);
  if (!gpu)
    fprintf(stderr, "no usable GPU (or host backend asked for): host backend%s\n",
            o->trace || o->scale > 0 ? "" : ", smaller default workload");
  fl_status s = fl_replay_open_trace(o, gpu, &w->trace);
  if (s != FL_OK) return s;
  w->n_tables = fl_trace_num_tables(w->trace);
  const fl_trace_table *tb = fl_trace_tables(w->trace);
  int hashed = 0;
  for (uint32_t i = 0; i < w->n_tables; i++) hashed |= tb[i].id_kind == FL_IDS_HASHED;
  fl_idset *seen = calloc(w->n_tables, sizeof *seen);
  if (!seen) return FL_ERR_OUT_OF_MEMORY;
  w->batches = fl_trace_num_batches(w->trace);
  /* Hashed ids: a first pass finds the ids the store needs rows for (and
   * validates the whole trace before anything is timed). */
  if (hashed && !o->model && !o->store) {
    double t0 = fl_now_s();
    s = fl_trace_distinct(w->trace, o->batches, seen, &w->batches, NULL);
    if (s != FL_OK)
      fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(w->trace));
    else
      fprintf(stderr, "trace: %s: %llu batches, distinct ids found in %.2f s\n",
              fl_trace_path(w->trace), (unsigned long long)w->batches, fl_now_s() - t0);
  }
  if (o->batches && (w->batches == 0 || w->batches > o->batches)) w->batches = o->batches;
  if (s == FL_OK) {
    double t0 = fl_now_s();
    s = build_store(o, w, seen);
    if (s == FL_OK) {
      for (uint32_t i = 0; i < w->n_tables; i++) {
        fl_store_table_stats ts;
        fl_table_desc d;
        if (fl_store_stats(w->store, i, &ts) != FL_OK || fl_store_table(w->store, i, &d) != FL_OK)
          continue;
        /* A cluster store's rows are in the cluster: its tables' corpus. */
        uint64_t rows = o->store ? d.corpus_size : ts.rows;
        w->model_rows += rows;
        w->model_bytes += o->store ? rows * d.dim * (d.dtype == FL_FP16 ? 2 : 4) : ts.bytes;
      }
      fprintf(stderr, "store: %u tables, %llu rows, %.1f MB (%s), built in %.2f s\n", w->n_tables,
              (unsigned long long)w->model_rows, (double)w->model_bytes / 1e6, w->model_desc,
              fl_now_s() - t0);
    }
  }
  for (uint32_t i = 0; i < w->n_tables; i++) fl_idset_free(&seen[i]);
  free(seen);
  return s;
}

void fl_workload_close(fl_workload *w) {
  fl_store_destroy(w->verify_store);
  fl_store_destroy(w->store);
  fl_trace_close(w->trace);
  memset(w, 0, sizeof *w);
}

uint64_t fl_workload_budget(const fl_workload *w, const fl_replay_opts *o) {
  if (o->budget_bytes) return o->budget_bytes;
  uint64_t b = (uint64_t)((double)w->model_bytes * o->budget_pct / 100);
  return b < FL_MIN_BUDGET ? FL_MIN_BUDGET : b;
}

void fl_replay_cache_config(const fl_replay_opts *o, fl_config *cfg) {
  cfg->unified_entries = o->unified;
  if (o->admit >= 0) cfg->admit_probability = o->admit;
  if (o->admit_policy >= 0) cfg->admit_policy = (fl_admit_policy)o->admit_policy;
  if (o->max_load > 0) cfg->max_load = o->max_load;
  if (o->key_bits) cfg->key_bits = o->key_bits;
  cfg->zero_copy_rows = o->zero_copy_rows;
  if (o->low_watermark > 0) cfg->low_watermark = o->low_watermark;
  if (o->high_watermark > 0) cfg->high_watermark = o->high_watermark;
  cfg->host_threads = o->threads;
}

fl_status fl_workload_cache(const fl_workload *w, const fl_replay_opts *o, fl_layout layout,
                            fl_cache **out) {
  fl_config cfg;
  fl_config_default(&cfg);
  cfg.backend = o->backend;
  cfg.layout = layout;
  cfg.budget_bytes = fl_workload_budget(w, o);
  fl_replay_cache_config(o, &cfg);
  fl_status s = fl_cache_create(w->store, &cfg, out);
  if (s != FL_OK) {
    fprintf(stderr, "error: creating the cache (budget %llu bytes): %s: %s\n",
            (unsigned long long)cfg.budget_bytes, fl_status_name(s), fl_cache_last_error(NULL));
    return s;
  }
  /* As a server would at start-up: query buffers for a whole batch (one id
   * per table and sample), so the first batch pays no allocation. */
  s = fl_cache_reserve(*out, (uint64_t)o->batch * w->n_tables, w->n_tables, 1);
  if (s != FL_OK) {
    fprintf(stderr, "error: reserving query buffers: %s: %s\n", fl_status_name(s),
            fl_cache_last_error(*out));
    fl_cache_destroy(*out);
    *out = NULL;
  }
  return s;
}
