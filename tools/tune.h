/* tune.h: the unified-index tuner's search (tune_search.c) and its outputs
 * (tune_report.c), shared with the command line (tune.c). The workload, cache
 * and timed runner come from replay.h. */
#ifndef FL_TOOLS_TUNE_H
#define FL_TOOLS_TUNE_H

#include "tools/replay.h"

typedef struct fl_tune_opts {
  uint64_t step;   /* unified entries added per step, 0 = 2% of the index slots */
  uint32_t window; /* batches per measurement */
  double drop;     /* hold throughput fraction lost that starts a new search */
  uint32_t rounds; /* passes over the trace */
  uint32_t patience; /* slow hold windows in a row that start a new search */
} fl_tune_opts;

void fl_tune_opts_default(fl_tune_opts *t);

typedef enum fl_tune_phase { FL_TUNE_SEARCH = 0, FL_TUNE_HOLD = 1 } fl_tune_phase;

/* One measured window. */
typedef struct fl_tune_step {
  uint64_t batch;        /* batches replayed when the window ended */
  fl_tune_phase phase;
  uint32_t search;       /* which search (0 = the first) this window belongs to */
  uint64_t set;          /* unified entries asked for */
  uint64_t live;         /* unified entries live at the window's end */
  double dram_hit_rate;  /* dram_hits / lookups over the window */
  double hit_rate;       /* (hits + dram_hits) / lookups over the window */
  double throughput;     /* lookups/s: window lookups / summed fl_runner times */
} fl_tune_step;

/* One search: a warm-up window, then from 0 up to the peak. */
typedef struct fl_tune_search {
  uint64_t start_batch;
  uint64_t chosen;       /* the size held; 0 and !done while still searching */
  double throughput;     /* measured at the chosen size */
  uint32_t windows;      /* search windows measured (0: the trace ended in its warm-up) */
  int done;              /* reached a peak (else the trace ended first) */
} fl_tune_search;

typedef struct fl_tune_result {
  fl_backend backend;
  uint64_t budget_bytes, index_slots, step;
  uint64_t batches, lookups;
  fl_tune_step *steps;
  size_t n_steps;
  fl_tune_search *searches; /* n_searches - 1 re-searches */
  size_t n_searches;
  uint64_t verified, mismatches;
} fl_tune_result;

/* Creates a cache of o's configuration over w and tunes its unified index
 * while replaying the trace, printing each window on `log`. */
fl_status fl_tune_run(const fl_workload *w, const fl_replay_opts *o, const fl_tune_opts *t,
                      FILE *log, fl_tune_result *r);
void fl_tune_result_free(fl_tune_result *r);

/* The summary (chosen sizes, re-searches), the JSON and the SVG curves. */
void fl_tune_print(FILE *f, const fl_tune_result *r);
fl_status fl_tune_json(const char *path, const fl_workload *w, const fl_tune_opts *t,
                       const fl_tune_result *r);
fl_status fl_tune_plot(const char *path, const fl_tune_result *r);

#endif
