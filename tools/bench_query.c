/* bench_query.c: the query-path benchmark on a GPU machine. On the 26 Criteo
 * Kaggle tables (fp32 dim 32, Zipf 1.05 ids scattered by a fixed bijection):
 *   - all-hit fl_query latency for batches of 16,384 and 256 samples, flat
 *     layout against the per-table layout at the same budget, device buffers,
 *     and the same flat batches as prepared queries (fl_prepared_run) and
 *     launched ones (fl_prepared_launch, the stream, fl_prepared_wait); with
 *     each, the p50 of the call's own time (the host time before the stream
 *     wait);
 *   - the 256-sample batch with 5% of its keys missing, through fl_query,
 *     prepared and launched: before each timed run, N positions (56; --miss-per-table N)
 *     of each of the 6 largest tables get ids never queried before (dense
 *     tables); with the default config (the cache picks the miss path,
 *     FL_ZERO_COPY_AUTO), then read in place by the GPU (cfg.zero_copy_rows
 *     1024: rows "zc"), then gathered by the host (0: rows "host");
 *     with --hashed every table holds raw 64-bit ids (the store's synthetic
 *     ids, dram_store/synthetic_ids.h), so no miss can be read in place;
 *   - the fused index kernel's probe rate on the all-hit 16,384-sample batch
 *     against a plain linear-probing find over the same keys, table size and
 *     load factor, measured in the same run (bench_linear_probe.cu);
 *   - the floors of the small batch's graph: the same launch, flag poll and
 *     stream synchronization with no lookup, shape by shape
 *     (bench_graph_floor.cu).
 * Prints a table and writes --json FILE. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "dram_store/synthetic_ids.h"
#include "include/fleche.h"
#include "tools/bench_graph_floor.h"
#include "tools/bench_linear_probe.h"
#include "tools/criteo_tables.h"
#include "tools/trace/zipf.h"

enum { N_TABLES = FL_CRITEO_TABLES, DIM = 32 };
/* The 5%-miss batch: 6 tables x 56 positions = 336 of 6,656 keys. */
enum { MISS_TABLES = 6, MISS_PER_TABLE = 56 };

typedef struct opts {
  double scale;      /* cardinality scale */
  int reps;          /* timed repetitions per measurement */
  uint64_t budget;   /* cache bytes, both layouts */
  const char *json;
  uint32_t miss_per_table; /* cold positions in each of the MISS_TABLES tables */
  int hashed;              /* hashed tables: ids are synthetic 64-bit ids */
} opts;

typedef struct batch {
  uint32_t samples;
  int hashed;                /* the device ids are the ranks' synthetic ids */
  uint64_t *ids[N_TABLES];   /* host: ranks, 0..rows-1 */
  uint64_t *warm[N_TABLES];  /* host: the ids as made (fresh_misses keeps clear of them) */
  void *d_ids[N_TABLES];     /* device copies */
  void *d_out[N_TABLES];     /* device outputs */
  fl_table_query q[N_TABLES];
} batch;

typedef struct result {
  const char *layout;
  uint32_t samples;
  double hit_rate, p50_us, p99_us, call_p50_us;
  uint64_t zero_copy_limit; /* the cache's (calibrated under the default) */
  /* p50 of the call's phases (fl_query_timing_last): setup, index, fetch */
  double phase_p50_us[3];
} result;

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_query: %s: %s\n", what, msg);
  exit(1);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Copies table t's ids to the device (a hashed table's as its ids). */
static void upload_ids(batch *b, uint32_t t) {
  uint64_t *ids = b->ids[t], *mapped = NULL;
  if (b->hashed) {
    if (!(mapped = malloc(b->samples * sizeof *mapped))) die("bench_query", "out of memory");
    for (uint32_t i = 0; i < b->samples; i++) mapped[i] = fl_synthetic_id(t, ids[i]);
    ids = mapped;
  }
  cudaError_t e = cudaMemcpy(b->d_ids[t], ids, b->samples * 8, cudaMemcpyHostToDevice);
  free(mapped);
  if (e != cudaSuccess) die("cuda", "uploading batch ids failed");
}

static void make_batch(batch *b, uint32_t samples, const uint64_t *card, uint64_t seed, int hashed) {
  memset(b, 0, sizeof *b);
  b->samples = samples;
  b->hashed = hashed;
  for (uint32_t t = 0; t < N_TABLES; t++) {
    fl_zipf z;
    fl_perm p;
    fl_zipf_init(&z, card[t], 1.05);
    fl_perm_init(&p, card[t], 0x7ab1e0000ull + t);
    uint64_t rng = seed * 1000003u + t;
    b->ids[t] = malloc(samples * sizeof(uint64_t));
    for (uint32_t i = 0; i < samples; i++) b->ids[t][i] = fl_perm_apply(&p, fl_zipf_sample(&z, &rng));
    b->warm[t] = malloc(samples * sizeof(uint64_t));
    memcpy(b->warm[t], b->ids[t], samples * sizeof(uint64_t));
    if (cudaMalloc(&b->d_ids[t], samples * 8) != cudaSuccess ||
        cudaMalloc(&b->d_out[t], (size_t)samples * DIM * 4) != cudaSuccess)
      die("cuda", "allocating batch buffers failed");
    upload_ids(b, t);
    b->q[t] = (fl_table_query){t, b->d_ids[t], samples, b->d_out[t]};
  }
}

static void free_batch(batch *b) {
  for (uint32_t t = 0; t < N_TABLES; t++) {
    free(b->ids[t]);
    free(b->warm[t]);
    cudaFree(b->d_ids[t]);
    cudaFree(b->d_out[t]);
  }
}

/* Where fresh_misses takes ids: per table, the next id to try, counting down
 * from the table's end; only the MISS_TABLES largest tables are used. */
typedef struct cold_ids {
  uint32_t table[MISS_TABLES];
  uint64_t next[N_TABLES];
  uint32_t per_table; /* cold positions per table */
} cold_ids;

static void cold_init(cold_ids *k, const uint64_t *card, uint32_t per_table) {
  k->per_table = per_table;
  uint32_t order[N_TABLES];
  for (uint32_t t = 0; t < N_TABLES; t++) order[t] = t, k->next[t] = card[t];
  for (uint32_t i = 0; i < MISS_TABLES; i++)
    for (uint32_t j = i + 1; j < N_TABLES; j++)
      if (card[order[j]] > card[order[i]]) {
        uint32_t x = order[i];
        order[i] = order[j], order[j] = x;
      }
  memcpy(k->table, order, sizeof k->table);
}

/* Gives the first k->per_table positions of each cold table ids that no
 * earlier run asked for (none of the warm ids either), on host and device. */
static void fresh_misses(batch *b, cold_ids *k) {
  for (uint32_t i = 0; i < MISS_TABLES; i++) {
    uint32_t t = k->table[i];
    for (uint32_t p = 0; p < k->per_table && p < b->samples; p++) {
      uint64_t id;
      int warm;
      do {
        if (k->next[t] == 0) die("bench_query", "a table ran out of never-queried ids");
        id = --k->next[t];
        warm = 0;
        for (uint32_t j = 0; j < b->samples && !warm; j++) warm = b->warm[t][j] == id;
      } while (warm);
      b->ids[t][p] = id;
    }
    upload_ids(b, t);
  }
}

/* How a batch is asked: fl_query, fl_prepared_run, or fl_prepared_launch
 * (then the stream, then fl_prepared_wait). */
enum { ASK_QUERY, ASK_RUN, ASK_LAUNCH };

/* One query, through the prepared handle when p (launched: ask); returns
 * the call's own time in us (the stream is waited for after). */
static double query(fl_cache *c, fl_prepared *p, int ask, batch *b, cudaStream_t s) {
  double t0 = 1e6 * fl_now_s();
  fl_status st = !p ? fl_query(c, b->q, N_TABLES, s)
                 : ask == ASK_LAUNCH ? fl_prepared_launch(p, s) : fl_prepared_run(p, s);
  double t1 = 1e6 * fl_now_s();
  if (st != FL_OK) die(p ? "fl_prepared_run" : "fl_query", fl_cache_last_error(c));
  if (cudaStreamSynchronize(s) != cudaSuccess) die("cuda", "stream synchronize failed");
  if (p && ask == ASK_LAUNCH && fl_prepared_wait(p) != FL_OK)
    die("fl_prepared_wait", fl_cache_last_error(c));
  return t1 - t0;
}

static fl_cache *make_cache(fl_store *store, fl_layout layout, uint64_t budget, int profile,
                            uint64_t zero_copy_rows) {
  fl_config cfg;
  fl_config_default(&cfg);
  cfg.zero_copy_rows = zero_copy_rows;
  cfg.backend = FL_BACKEND_CUDA;
  cfg.layout = layout;
  cfg.budget_bytes = budget;
  cfg.admit_policy = FL_ADMIT_COIN; /* every row enters: the all-hit batches */
  cfg.admit_probability = 1.0;
  cfg.profile = profile;
  fl_cache *c;
  double t0 = fl_now_s();
  if (fl_cache_create(store, &cfg, &c) != FL_OK) die("fl_cache_create", fl_cache_last_error(NULL));
  fl_cache_stats st;
  fl_cache_stats_get(c, &st, NULL, 0);
  fprintf(stderr, "cache created in %.1f ms, zero_copy_limit %llu\n", 1e3 * (fl_now_s() - t0),
          (unsigned long long)st.zero_copy_limit);
  return c;
}

/* Warms the cache on the batch until nothing more enters, then times it
 * (prepared: through one prepared handle). cold: before each timed run, new
 * never-queried ids for the batch's cold positions (fresh_misses, untimed);
 * NULL: all hits. The hit rate is over the timed runs. */
static result measure(fl_cache *c, batch *b, const char *layout, int ask, cold_ids *cold,
                      int reps, cudaStream_t s) {
  fl_prepared *p = NULL;
  if (ask != ASK_QUERY && fl_query_prepare(c, b->q, N_TABLES, &p) != FL_OK)
    die("fl_query_prepare", fl_cache_last_error(c));
  for (int i = 0; i < 3; i++) query(c, p, ask, b, s);
  fl_cache_stats st;
  fl_cache_stats_reset(c);
  double *t = malloc(reps * sizeof *t), *call = malloc(reps * sizeof *call);
  double *phase = malloc(3 * reps * sizeof *phase);
  for (int r = 0; r < reps; r++) {
    if (cold) fresh_misses(b, cold);
    double t0 = 1e6 * fl_now_s();
    call[r] = query(c, p, ask, b, s);
    t[r] = 1e6 * fl_now_s() - t0;
    fl_query_timing tm;
    fl_query_timing_last(&tm);
    phase[r] = tm.setup_ns / 1e3;
    phase[reps + r] = tm.index_ns / 1e3;
    phase[2 * reps + r] = tm.fetch_ns / 1e3;
  }
  fl_cache_stats_get(c, &st, NULL, 0);
  qsort(t, reps, sizeof *t, cmp_double);
  qsort(call, reps, sizeof *call, cmp_double);
  result res = {layout, b->samples, (double)st.hits / (double)st.lookups, t[reps / 2],
                t[(int)(reps * 0.99)], call[reps / 2], st.zero_copy_limit, {0}};
  for (int k = 0; k < 3; k++) {
    qsort(phase + k * reps, reps, sizeof *phase, cmp_double);
    res.phase_p50_us[k] = phase[k * reps + reps / 2];
  }
  free(phase);
  free(t);
  free(call);
  fl_prepared_destroy(p);
  return res;
}

/* 0 to run, 2 on a usage error (said on stderr). */
static int parse(int argc, char **argv, opts *o) {
  *o = (opts){1.0, 200, 2ull << 30, NULL, MISS_PER_TABLE, 0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--scale") && i + 1 < argc) o->scale = atof(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) o->reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--budget-mb") && i + 1 < argc) o->budget = strtoull(argv[++i], NULL, 10) << 20;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) o->json = argv[++i];
    else if (!strcmp(argv[i], "--miss-per-table") && i + 1 < argc) o->miss_per_table = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--hashed")) o->hashed = 1;
    else {
      fprintf(stderr, "usage: bench_query [--scale S] [--reps N] [--budget-mb MB] [--json FILE] "
                      "[--miss-per-table N] [--hashed]\n");
      return 2;
    }
  }
  if (o->reps < 1) o->reps = 1;
  return 0;
}

/* The 26 tables at the options' scale, in a store of synthetic rows. */
typedef struct model {
  uint64_t card[N_TABLES]; /* rows per table, at least 2 */
  fl_table_desc desc[N_TABLES];
  char names[N_TABLES][8];
  fl_store *store;
} model;

static void make_model(model *m, double scale, int hashed) {
  for (uint32_t t = 0; t < N_TABLES; t++) {
    m->card[t] = (uint64_t)(fl_criteo_rows[t] * scale);
    if (m->card[t] < 2) m->card[t] = 2;
    snprintf(m->names[t], sizeof m->names[t], "C%u", t + 1);
    m->desc[t] = (fl_table_desc){m->names[t], m->card[t], DIM, FL_FP32,
                                 hashed ? FL_IDS_HASHED : FL_IDS_DENSE};
  }
  if (fl_store_create(m->desc, N_TABLES, 0, &m->store) != FL_OK)
    die("store", fl_store_last_error(NULL));
  for (uint32_t t = 0; t < N_TABLES; t++)
    if (fl_store_fill_synthetic(m->store, t, 1) != FL_OK) die("fill", fl_store_last_error(m->store));
}

/* What the run measured, for the table and the JSON. */
typedef struct findings {
  result res[24];
  int n_res;
  double small_index_us, small_copy_us; /* device time per small all-hit batch */
  double index_us, copy_us;             /* the same, big batch */
  uint64_t index_entries, index_slots;  /* the big batch's flat cache */
  double base_ms;                       /* the plain linear probe on the big batch's keys */
  fl_floor_result floors[FL_FLOOR_SHAPES];
} findings;

/* Keys of the big (16,384-sample) batch. */
#define BIG_KEYS (16384ull * N_TABLES)

/* All-hit latency of both batches, flat and per-table, and flat prepared and
 * launched, each on a cache of its own. */
static void all_hit_latency(const model *m, const opts *o, batch *big, batch *small,
                            cudaStream_t s, findings *f) {
  const fl_layout layouts[4] = {FL_LAYOUT_FLAT, FL_LAYOUT_PER_TABLE, FL_LAYOUT_FLAT, FL_LAYOUT_FLAT};
  const char *names_l[4] = {"flat", "per-table", "prepared", "launched"};
  const int asks[4] = {ASK_QUERY, ASK_QUERY, ASK_RUN, ASK_LAUNCH};
  for (int l = 0; l < 4; l++) {
    fl_cache *c = make_cache(m->store, layouts[l], o->budget, 0, FL_ZERO_COPY_AUTO);
    f->res[f->n_res++] = measure(c, big, names_l[l], asks[l], NULL, o->reps, s);
    fl_cache_destroy(c);
    c = make_cache(m->store, layouts[l], o->budget, 0, FL_ZERO_COPY_AUTO);
    f->res[f->n_res++] = measure(c, small, names_l[l], asks[l], NULL, o->reps, s);
    fl_cache_destroy(c);
  }
}

/* The 5%-miss small batch, flat, through fl_query, prepared and launched:
 * its 336 distinct misses on the path the cache picks (the default), read
 * in place by the GPU (zero_copy_rows 1024), gathered by the host (0).
 * Leaves the batch's ids all hits again. */
static void miss_latency(const model *m, const opts *o, batch *small, cudaStream_t s,
                         findings *f) {
  cold_ids cold;
  double miss_pct = 100.0 * MISS_TABLES * o->miss_per_table / (small->samples * N_TABLES);
  static char names_m[9][32];
  const char *kind[3] = {"flat", "prep", "launch"}, *path[3] = {"", " zc", " host"};
  const uint64_t limit[3] = {FL_ZERO_COPY_AUTO, 1024, 0};
  for (int i = 0; i < 9; i++) {
    snprintf(names_m[i], sizeof names_m[i], "%s %.1f%%%s", kind[i % 3], miss_pct, path[i / 3]);
    fl_cache *c = make_cache(m->store, FL_LAYOUT_FLAT, o->budget, 0, limit[i / 3]);
    /* Never queried by this cache, a new one: each case starts from the
     * tables' ends again (one count shared by the six cases would run out
     * of ids above --reps 400). */
    cold_init(&cold, m->card, o->miss_per_table);
    f->res[f->n_res++] = measure(c, small, names_m[i], i % 3, &cold, o->reps, s);
    fl_cache_destroy(c);
  }
  for (uint32_t t = 0; t < N_TABLES; t++) {
    memcpy(small->ids[t], small->warm[t], small->samples * 8);
    upload_ids(small, t);
  }
}

/* Device time of the two kernels per all-hit batch (events around them:
 * cfg.profile), into *st; returns the profiling cache, kept while the
 * baseline and the floors run. */
static fl_cache *kernel_time(const model *m, const opts *o, batch *b, cudaStream_t s,
                             fl_cache_stats *st) {
  fl_cache *c = make_cache(m->store, FL_LAYOUT_FLAT, o->budget, 1, 0);
  for (int i = 0; i < 3; i++) query(c, NULL, ASK_QUERY, b, s);
  fl_cache_stats_reset(c);
  for (int r = 0; r < o->reps; r++) query(c, NULL, ASK_QUERY, b, s);
  fl_cache_stats_get(c, st, NULL, 0);
  return c;
}

/* The small batch's kernel times, then the big one's (the probe rate), whose
 * cache is returned. */
static fl_cache *kernel_times(const model *m, const opts *o, batch *big, batch *small,
                              cudaStream_t s, findings *f) {
  fl_cache_stats st;
  fl_cache_destroy(kernel_time(m, o, small, s, &st));
  f->small_index_us = st.gpu_ns_index / o->reps / 1e3;
  f->small_copy_us = st.gpu_ns_hit_copy / o->reps / 1e3;
  fl_cache *c = kernel_time(m, o, big, s, &st);
  f->index_us = st.gpu_ns_index / o->reps / 1e3;
  f->copy_us = st.gpu_ns_hit_copy / o->reps / 1e3;
  f->index_entries = st.index_entries;
  f->index_slots = st.index_slots;
  return c;
}

/* Baseline: the big batch's flat keys in a plain table of the same size. */
static void baseline(const model *m, const opts *o, const batch *big, findings *f) {
  fl_encoding *enc;
  if (fl_encoding_create(m->desc, N_TABLES, 64, FL_ENCODING_SIZE_AWARE, &enc) != FL_OK)
    die("encoding", fl_encoding_last_error(NULL));
  uint64_t *qkeys = malloc(BIG_KEYS * 8), *ukeys = malloc(BIG_KEYS * 8);
  for (uint32_t t = 0; t < N_TABLES; t++)
    fl_encoding_encode(enc, t, big->ids[t], 16384, qkeys + (uint64_t)t * 16384, 0);
  memcpy(ukeys, qkeys, BIG_KEYS * 8);
  qsort(ukeys, BIG_KEYS, 8, cmp_u64);
  uint64_t n_unique = 0;
  for (uint64_t i = 0; i < BIG_KEYS; i++)
    if (i == 0 || ukeys[i] != ukeys[i - 1]) ukeys[n_unique++] = ukeys[i];
  uint64_t found = 0;
  int e = fl_bench_linear_probe(ukeys, n_unique, f->index_slots, qkeys, BIG_KEYS, o->reps,
                                &f->base_ms, &found);
  if (e || found != BIG_KEYS) die("baseline", "linear probing failed");
  free(qkeys);
  free(ukeys);
  fl_encoding_destroy(enc);
}

/* The floors of the small batch's graph. The header a prepared 256-sample
 * run uploads: 26 args with device ids (args, scans, offsets, codes,
 * classes, zero-copy rows, counters, run). */
static void graph_floors(const opts *o, findings *f) {
  enum { SMALL_HEADER_BYTES = 4608 };
  int e = fl_bench_graph_floor(SMALL_HEADER_BYTES, o->reps < 1000 ? 1000 : o->reps, f->floors);
  if (e) die("graph floor", cudaGetErrorString((cudaError_t)e));
}

static double load_of(const findings *f) {
  return (double)f->index_entries / (double)f->index_slots;
}

static void print_findings(const char *gpu, const opts *o, const findings *f) {
  const result *res = f->res;
  double ours_gkps = BIG_KEYS / (f->index_us * 1e3), base_gkps = BIG_KEYS / (f->base_ms * 1e6);
  printf("bench_query on %s: 26 Criteo tables x %.3g%s, fp32 dim %d, Zipf 1.05, budget %.0f MB per layout, %d reps\n",
         gpu, o->scale, o->hashed ? " (hashed ids)" : "", DIM, o->budget / 1048576.0, o->reps);
  printf("%-16s %8s %8s %8s %10s %10s %12s %12s %20s %9s\n", "layout", "samples", "keys", "hit%",
         "p50 us", "p99 us", "Mkeys/s p50", "call p50 us", "setup/index/fetch us", "zc limit");
  for (int i = 0; i < f->n_res; i++)
    printf("%-16s %8u %8u %8.2f %10.1f %10.1f %12.1f %12.1f %6.1f/%6.1f/%6.1f %9llu\n",
           res[i].layout, res[i].samples, res[i].samples * N_TABLES, 100 * res[i].hit_rate,
           res[i].p50_us, res[i].p99_us, res[i].samples * N_TABLES / res[i].p50_us,
           res[i].call_p50_us, res[i].phase_p50_us[0], res[i].phase_p50_us[1],
           res[i].phase_p50_us[2], (unsigned long long)res[i].zero_copy_limit);
  printf("per-table / flat p50: 16384 samples %.2fx, 256 samples %.2fx\n", res[2].p50_us / res[0].p50_us,
         res[3].p50_us / res[1].p50_us);
  printf("probe, %llu keys, index load %.3f (%llu entries / %llu slots):\n",
         (unsigned long long)BIG_KEYS, load_of(f), (unsigned long long)f->index_entries,
         (unsigned long long)f->index_slots);
  printf("  fused index kernel  %8.1f us  %6.2f G keys/s\n", f->index_us, ours_gkps);
  printf("  plain linear probe  %8.1f us  %6.2f G keys/s  (same keys, slots, load)\n", f->base_ms * 1e3,
         base_gkps);
  printf("  ratio %.2f; hit copy kernel %.1f us = %.0f GB/s of vectors read+written\n",
         ours_gkps / base_gkps, f->copy_us, BIG_KEYS * DIM * 4 * 2 / (f->copy_us * 1e3));
  printf("256-sample batch (%u keys): fused index kernel %.1f us, hit copy kernel %.1f us (device time)\n",
         256u * N_TABLES, f->small_index_us, f->small_copy_us);
  printf("graph floors, 26 blocks, no lookup (batch = launch to stream synchronized):\n");
  for (int i = 0; i < FL_FLOOR_SHAPES; i++)
    printf("  %-30s batch p50 %6.1f us, p90 %6.1f us; flag seen at p50 %6.1f us\n",
           fl_floor_shape_name(i), f->floors[i].batch_p50_us, f->floors[i].batch_p90_us,
           f->floors[i].flag_p50_us);
}

static void write_json(const char *gpu, const opts *o, const findings *f) {
  const result *res = f->res;
  double ours_gkps = BIG_KEYS / (f->index_us * 1e3), base_gkps = BIG_KEYS / (f->base_ms * 1e6);
  FILE *out = fopen(o->json, "w");
  if (!out) die(o->json, "cannot write");
  fprintf(out, "{\"gpu\": \"%s\", \"scale\": %g, \"hashed\": %s, \"budget_bytes\": %llu, \"reps\": %d, "
          "\"latency\": [", gpu, o->scale, o->hashed ? "true" : "false", (unsigned long long)o->budget,
          o->reps);
  for (int i = 0; i < f->n_res; i++)
    fprintf(out, "%s{\"layout\": \"%s\", \"samples\": %u, \"hit_rate\": %.6f, \"p50_us\": %.2f, "
            "\"p99_us\": %.2f, \"call_p50_us\": %.2f, \"setup_p50_us\": %.2f, "
            "\"index_p50_us\": %.2f, \"fetch_p50_us\": %.2f, \"zero_copy_limit\": %llu}",
            i ? ", " : "", res[i].layout, res[i].samples, res[i].hit_rate, res[i].p50_us,
            res[i].p99_us, res[i].call_p50_us, res[i].phase_p50_us[0], res[i].phase_p50_us[1],
            res[i].phase_p50_us[2], (unsigned long long)res[i].zero_copy_limit);
  fprintf(out, "], \"probe\": {\"keys\": %llu, \"load\": %.4f, \"index_us\": %.2f, \"baseline_us\": %.2f, "
          "\"ratio\": %.4f, \"copy_us\": %.2f}, \"small_index_us\": %.2f, \"small_copy_us\": %.2f",
          (unsigned long long)BIG_KEYS, load_of(f), f->index_us, f->base_ms * 1e3, ours_gkps / base_gkps,
          f->copy_us, f->small_index_us, f->small_copy_us);
  fprintf(out, ", \"graph_floor\": [");
  for (int i = 0; i < FL_FLOOR_SHAPES; i++)
    fprintf(out, "%s{\"shape\": \"%s\", \"batch_p50_us\": %.2f, \"batch_p90_us\": %.2f, "
            "\"flag_p50_us\": %.2f}", i ? ", " : "", fl_floor_shape_name(i), f->floors[i].batch_p50_us,
            f->floors[i].batch_p90_us, f->floors[i].flag_p50_us);
  fprintf(out, "]}\n");
  fclose(out);
}

int main(int argc, char **argv) {
  opts o;
  if (parse(argc, argv, &o) != 0) return 2;
  if (fl_cuda_device_count() <= 0) die("bench_query", "needs a CUDA device");
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  model m;
  make_model(&m, o.scale, o.hashed);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  batch big, small;
  make_batch(&big, 16384, m.card, 1, o.hashed);
  make_batch(&small, 256, m.card, 2, o.hashed);
  findings f = {0};
  all_hit_latency(&m, &o, &big, &small, s, &f);
  miss_latency(&m, &o, &small, s, &f);
  fl_cache *c = kernel_times(&m, &o, &big, &small, s, &f);
  baseline(&m, &o, &big, &f);
  graph_floors(&o, &f);
  print_findings(prop.name, &o, &f);
  if (o.json) write_json(prop.name, &o, &f);
  fl_cache_destroy(c);
  free_batch(&big);
  free_batch(&small);
  cudaStreamDestroy(s);
  fl_store_destroy(m.store);
  return 0;
}
