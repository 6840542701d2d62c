/* replay.h: the pieces shared by the replay benchmark (replay.c) and the
 * unified-index tuner (tune.c): options, the workload (trace + store + cache),
 * the timed per-batch query runner, the report and the SVG plot. */
#ifndef FL_TOOLS_REPLAY_H
#define FL_TOOLS_REPLAY_H

#include <stdio.h>

#include "include/fleche.h"
#include "tools/trace/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- options */

typedef struct fl_replay_opts {
  const char *trace;        /* NULL: the embedded Zipf workload */
  fl_trace_format format;
  uint32_t batch;           /* samples (Criteo, generator) or lookups (text) per batch */
  uint64_t batches;         /* stop after this many batches, 0 = the whole trace
                               (generator: 128 on a GPU, 16 on the host backend) */
  const char *tables;       /* generator cardinalities: "criteo" or "n1,n2,..." */
  double scale;             /* generator cardinalities divided by this, 0 = auto
                               (1 on a GPU, 100 on the host backend) */
  double exponent;          /* generator Zipf exponent */
  uint64_t switch_at;       /* generator: switch distribution at this batch (0 = never) */
  double switch_exponent;
  int hashed;               /* generator: raw 64-bit ids in hashed tables */
  uint64_t seed;            /* generator ids and synthetic vectors */
  uint32_t dim;
  fl_dtype dtype;
  double budget_pct;        /* cache budget, % of the model's bytes */
  uint64_t budget_bytes;    /* overrides budget_pct when non-zero */
  uint64_t unified;         /* unified index entries */
  double admit;             /* admission probability, < 0 = library default */
  int admit_policy;         /* an fl_admit_policy, < 0 = library default */
  double max_load;          /* index load limit, 0 = library default */
  uint64_t zero_copy_rows;  /* fl_config.zero_copy_rows (FL_ZERO_COPY_AUTO by default) */
  uint32_t key_bits;        /* flat key width, 0 = the library's choice */
  double low_watermark;     /* pool use fractions of eviction, 0 = library default */
  double high_watermark;
  fl_layout layout;
  int compare;              /* run flat and per-table */
  fl_backend backend;
  uint32_t threads;         /* host threads (store, host backend), 0 = their defaults */
  const char *model;        /* .flst file for fl_store_load */
  const char *model_npy;    /* DIR/<table>.ids.npy + DIR/<table>.vectors.npy */
  const char *model_hugectr;/* DIR/<table>/ HugeCTR sparse model folders */
  const char *store;        /* redis://host:port: the model in a Redis Cluster (docs/TIERS.md) */
  const char *store_ns;     /* with store: the model's key namespace, NULL: the default */
  double dram_budget_pct;   /* with store: local DRAM tier budget, % of the model's bytes */
  int verify;
  int prepared;             /* answer through prepared queries (fl_query_prepare) */
  uint64_t model_us;        /* CUDA: GPU work after each batch's lookup, standing in for the
                               model (model_delay.h); 0: none */
  int lookahead;            /* CUDA: fl_prefetch of the next batch on a second stream once a
                               batch's lookup and model are enqueued */
  const char *json;
  const char *plot;
  int quiet;                /* no progress bar */
  int floor;                /* measure each run's steady-state floor (replay_floor.c); set
                               by replay, not an option: the other tools skip its cost */
} fl_replay_opts;

void fl_replay_opts_default(fl_replay_opts *o);
/* 1 when the options lead to the CUDA backend (a usable GPU, not disabled by
 * --backend host or env FL_BACKEND=host). */
int fl_replay_uses_gpu(const fl_replay_opts *o);
/* Parses argv[*i] (and its value) if it is a common option: 1 consumed, 0 not
 * a common option, -1 bad value (message printed). */
int fl_replay_parse_option(fl_replay_opts *o, int argc, char **argv, int *i);
/* The common options' help text. */
void fl_replay_print_options(FILE *f);
/* A tool's own options: argv[*i] (and its value) consumed: 1; not one of
 * them: 0; a bad value (message printed): -1. */
typedef int (*fl_tool_option_fn)(void *ctx, int argc, char **argv, int *i);
/* Parses argv[1..] of a tool over replay's workload: its own options through
 * `own` (NULL: none) first, then the common ones, and at most one TRACE into
 * o->trace. -h or --help prints usage on stdout and exits 0. Returns 0, or -1
 * after printing the error. */
int fl_replay_parse_args(fl_replay_opts *o, int argc, char **argv, fl_tool_option_fn own, void *ctx,
                         void (*usage)(FILE *f));

/* --------------------------------------------------------------- workload */

typedef struct fl_workload {
  fl_trace *trace;
  fl_store *store;
  uint32_t n_tables;
  uint64_t batches;     /* batches to replay (0 while unknown) */
  uint64_t model_bytes; /* bytes of vectors in the store */
  uint64_t model_rows;
  const char *model_desc; /* "synthetic" or the model path */
  fl_store *verify_store; /* --store with --verify: the cluster read directly (no local
                             tier), the answers' oracle; else NULL (verify reads store) */
} fl_workload;

/* The trace of the options: the file o->trace, else the Zipf generator
 * (sized for a GPU when gpu != 0). Errors are printed. */
fl_status fl_replay_open_trace(const fl_replay_opts *o, int gpu, fl_trace **out);
/* Opens the trace (or generates the default), builds the store. Prints what
 * it does on stderr. Errors are printed; returns FL_OK or the failing status. */
fl_status fl_workload_open(const fl_replay_opts *o, fl_workload *w);
void fl_workload_close(fl_workload *w);
/* Cache memory: --budget-bytes, else --budget-pct of the model's bytes. */
uint64_t fl_workload_budget(const fl_workload *w, const fl_replay_opts *o);
/* Creates a cache over w->store configured from o with `layout`. */
/* The cache options of `o` (admission, index load, watermarks, threads,
 * unified entries) over cfg; the others stay as they are. */
void fl_replay_cache_config(const fl_replay_opts *o, fl_config *cfg);
fl_status fl_workload_cache(const fl_workload *w, const fl_replay_opts *o, fl_layout layout,
                            fl_cache **out);

/* ---------------------------------------------------------------- runner */

typedef struct fl_runner fl_runner;

/* Output buffers (device ones on the CUDA backend), the streams, the
 * queries, as o asks: o->prepared: batches run through a prepared query on
 * the runner's buffers, prepared again (untimed) when a batch's shape
 * differs from the last; o->model_us: the stand-in model after each lookup;
 * o->verify: sampled rows checked. */
fl_status fl_runner_create(fl_cache *c, const fl_workload *w, const fl_replay_opts *o,
                           fl_runner **out);
void fl_runner_destroy(fl_runner *r);
/* Queries one batch and waits for it: *ms is the wall time of fl_query (or
 * fl_prepared_run), the model's enqueue and, with next (a look-ahead),
 * fl_prefetch of next on the runner's second stream, then the stream's
 * synchronisation (ids already in place): what a server waits for per
 * batch. With verify, sampled rows are then compared with fl_store_gather. */
fl_status fl_runner_query(fl_runner *r, const fl_trace_batch *b, const fl_trace_batch *next,
                          double *ms);
uint64_t fl_runner_verified(const fl_runner *r);
/* The look-aheads' mean time on the calling thread (fl_prefetch): whole,
 * then of it setup, index phase and fetch (fl_query_timing); 0 without. */
void fl_runner_lookahead_ms(const fl_runner *r, double ms[4]);
uint64_t fl_runner_mismatches(const fl_runner *r);

/* A progress bar on stderr, drawn only once a run passes 2 s. */
typedef struct fl_progress {
  double start;      /* seconds, monotonic */
  double last_draw;
  int drawn;
  int quiet;
} fl_progress;
void fl_progress_start(fl_progress *p, int quiet);
void fl_progress_update(fl_progress *p, const char *label, uint64_t done, uint64_t total,
                        uint64_t lookups);
void fl_progress_end(fl_progress *p);

/* ---------------------------------------------------------------- report */

/* The steady-state batch's floor, measured in the same run (replay_floor.c):
 * per steady batch, its all-hit time plus its distinct missed rows at the
 * store's memcpy-gather rate (with --lookahead, the gather's time beyond
 * the model's, which hides the rest); the run's floor is the batch with the
 * median of those. */
typedef struct fl_batch_floor {
  const char *missing;  /* NULL: measured; else why it was not (a phrase) */
  uint64_t batch;       /* the steady batch whose floor is the median */
  double ms;            /* its floor: all_hit_ms + gather_ms - hidden_ms */
  double all_hit_ms;    /* its all-hit time (the model's included) */
  double gather_ms;     /* its distinct missed rows at rows_per_s */
  double hidden_ms;     /* --lookahead: of gather_ms, what the model's time covers */
  uint64_t rows;        /* its distinct missed rows */
  double rows_per_s;    /* the memcpy-gather rate */
  uint64_t rate_rows;   /* rows per gather of the rate: the steady batches' median
                           distinct misses (at least 1) */
  uint64_t array_rows;  /* rows of the dense array the rate gathered from */
  uint32_t threads;     /* the rate's threads: the store's count */
  double steady_ms;     /* the steady-state batch: median latency of the steady batches */
  double ratio;         /* steady_ms / ms */
  double *all_hit_ms_of; /* per steady batch (from fl_run_steady_from on): all-hit time */
  uint64_t steady;      /* entries of all_hit_ms_of */
} fl_batch_floor;

/* One replay of the trace through one cache. */
typedef struct fl_run {
  const char *label;       /* "flat", "per-table" */
  fl_backend backend;
  uint64_t budget_bytes;
  uint64_t batches, lookups;
  double *lat_ms;          /* per batch */
  double *hit_rate;        /* per batch: (hits + dram_hits) / lookups */
  fl_cache_stats *after;   /* per batch: the cache's counters after it */
  double query_s;          /* sum of batch latencies */
  fl_cache_stats stats;    /* at the end */
  fl_index_health health;  /* the index at the end (before the floor's batches) */
  fl_cache_table_stats *tables; /* n_tables entries */
  uint64_t verified, mismatches;
  double lookahead_ms[4];  /* --lookahead: fl_prefetch's mean time on the replay's thread
                              (fl_runner_lookahead_ms) */
  fl_store_tier_stats tiers; /* the store's tiers during the run */
  fl_batch_floor floor;    /* with o->floor, after the timed batches */
} fl_run;

/* Replays the workload's trace through a new cache of `layout`. */
fl_status fl_run_replay(const fl_workload *w, const fl_replay_opts *o, fl_layout layout,
                        fl_run *run);
void fl_run_free(fl_run *run);
/* Steady state: the batches from this one on, once the cache has warmed up. */
uint64_t fl_run_steady_from(const fl_run *run);
/* The distinct rows batch b fetched from the store (misses and pointer hits). */
uint64_t fl_run_batch_rows(const fl_run *run, uint64_t b);
/* The floor of the run's steady-state batch (replay_floor.c), into run->floor:
 * runs the steady batches again on c through rn, after the timed ones. */
fl_status fl_floor_measure(const fl_workload *w, const fl_replay_opts *o, fl_cache *c,
                           fl_runner *rn, fl_run *run);
double fl_percentile(const double *v, uint64_t n, double q); /* q in [0, 1]; v unchanged */
double fl_run_percentile(const fl_run *run, double q);       /* of lat_ms */

void fl_report_print(FILE *f, const fl_workload *w, const fl_run *runs, int n_runs);
fl_status fl_report_json(const char *path, const fl_workload *w, const fl_run *runs, int n_runs);

/* Where lookups were served, tier by tier (replay_tiers.c): the cache (when
 * cache is non-NULL), the store's local DRAM tier and the cluster. */
void fl_tiers_print(FILE *f, const fl_cache_stats *cache, const fl_store_tier_stats *t);
/* Opens the cluster store of o->store (docs/TIERS.md) with a local budget of
 * `budget_pct` % of the model's bytes; errors are printed. */
fl_status fl_replay_open_cluster(const fl_replay_opts *o, double budget_pct, fl_store **out);

/* ------------------------------------------------------------------ plot */

typedef struct fl_plot_series {
  const char *label;
  const double *x, *y;
  size_t n;
} fl_plot_series;

typedef struct fl_plot_panel {
  const char *title, *x_label, *y_label;
  const fl_plot_series *series;
  size_t n_series;
} fl_plot_panel;

/* Writes an SVG of line charts stacked vertically. */
fl_status fl_plot_svg(const char *path, const char *title, const fl_plot_panel *panels,
                      size_t n_panels);
/* The replay's plot: hit rate and latency over the run, one line per run. */
fl_status fl_report_plot(const char *path, const fl_run *runs, int n_runs);

#ifdef __cplusplus
}
#endif

#endif
