/* tune_search.c: the unified-index tuner's hill climb. It replays the trace
 * through one cache, measuring throughput over windows of batches, and moves
 * the unified-index size through three states:
 *   warm-up  one window at the current contents, not judged (a fresh or just
 *            cleared index would otherwise credit the cache's own warm-up to
 *            the first step);
 *   search   from 0, add `step` entries per window while throughput rises; at
 *            the first window that does not beat the best, go back to the best
 *            size and hold;
 *   hold     keep measuring; `patience` windows in a row under (1 - drop) x
 *            the best hold throughput so far (it starts at the throughput
 *            that chose the size, and rises as the cache keeps warming) mean
 *            the workload changed (a single slow window is usually an
 *            eviction burst): clear the unified index and warm up, then
 *            search again from 0. */
#include <stdlib.h>
#include <string.h>

#include "tools/tune.h"

void fl_tune_opts_default(fl_tune_opts *t) {
  t->step = 0;
  t->window = 8;
  t->drop = 0.15;
  t->rounds = 1;
  t->patience = 2;
}

void fl_tune_result_free(fl_tune_result *r) {
  free(r->steps);
  free(r->searches);
  memset(r, 0, sizeof *r);
}

typedef enum { WARMUP, SEARCH, HOLD } tune_state;

typedef struct tuner {
  fl_cache *c;
  const fl_tune_opts *t;
  FILE *log;
  fl_tune_result *r;
  tune_state state;
  uint64_t size;          /* unified entries set now */
  uint64_t best_size;     /* of the current search */
  double best;            /* its throughput, < 0 before the first window */
  uint32_t slow;          /* hold windows in a row under the drop threshold */
  double hold_ref;        /* best throughput since the size was chosen */
  size_t cap_steps, cap_searches;
  /* The current window. */
  uint32_t in_window;
  double ms;
  fl_cache_stats prev;    /* statistics when the window started */
} tuner;

static fl_status set_size(tuner *u, uint64_t n) {
  fl_status s = fl_cache_set_unified_entries(u->c, n);
  if (s != FL_OK)
    fprintf(stderr, "error: fl_cache_set_unified_entries(%llu): %s: %s\n", (unsigned long long)n,
            fl_status_name(s), fl_cache_last_error(u->c));
  else
    u->size = n;
  return s;
}

/* Grows an array of `size`-byte elements so that element n fits. */
static fl_status grow(void **a, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return FL_OK;
  size_t c = *cap ? 2 * *cap : 64;
  void *p = realloc(*a, c * size);
  if (!p) return FL_ERR_OUT_OF_MEMORY;
  *a = p;
  *cap = c;
  return FL_OK;
}

/* Opens a search record; the search starts with a warm-up window (the size
 * is already 0). */
static fl_status start_search(tuner *u) {
  fl_tune_result *r = u->r;
  fl_status s = grow((void **)&r->searches, &u->cap_searches, r->n_searches, sizeof *r->searches);
  if (s != FL_OK) return s;
  r->searches[r->n_searches++] = (fl_tune_search){.start_batch = r->batches};
  u->state = WARMUP;
  u->best = -1;
  u->best_size = 0;
  return FL_OK;
}

/* The search's peak: back to the best size, remember it, hold. */
static fl_status hold(tuner *u, const char *why) {
  fl_tune_search *se = &u->r->searches[u->r->n_searches - 1];
  se->done = 1;
  fprintf(u->log, "chosen: %llu unified entries, %.3f M lookups/s (search %zu, %s)\n",
          (unsigned long long)se->chosen, se->throughput / 1e6, u->r->n_searches, why);
  u->state = HOLD;
  u->hold_ref = se->throughput;
  u->slow = 0;
  return u->size == u->best_size ? FL_OK : set_size(u, u->best_size);
}

/* Judges the window that just ended and picks the next size. */
static fl_status end_window(tuner *u, uint64_t lookups) {
  fl_cache_stats st;
  fl_status s = fl_cache_stats_get(u->c, &st, NULL, 0);
  if (s != FL_OK) return s;
  fl_tune_result *r = u->r;
  uint64_t n = st.lookups - u->prev.lookups;
  uint64_t dram = st.dram_hits - u->prev.dram_hits, hits = st.hits - u->prev.hits;
  double tput = u->ms > 0 ? (double)lookups / (u->ms / 1e3) : 0;
  u->prev = st;
  u->in_window = 0;
  u->ms = 0;
  if (u->state == WARMUP) {
    u->state = SEARCH;
    return FL_OK;
  }

  s = grow((void **)&r->steps, &u->cap_steps, r->n_steps, sizeof *r->steps);
  if (s != FL_OK) return s;
  fl_tune_step *p = &r->steps[r->n_steps++];
  *p = (fl_tune_step){.batch = r->batches,
                      .phase = u->state == HOLD ? FL_TUNE_HOLD : FL_TUNE_SEARCH,
                      .search = (uint32_t)(r->n_searches - 1),
                      .set = u->size,
                      .live = st.unified_entries,
                      .dram_hit_rate = n ? (double)dram / (double)n : 0,
                      .hit_rate = n ? (double)(hits + dram) / (double)n : 0,
                      .throughput = tput};
  fprintf(u->log, "%8llu  %-6s  %10llu  %10llu  %8.4f  %8.4f  %10.3f\n",
          (unsigned long long)p->batch, u->state == HOLD ? "hold" : "search",
          (unsigned long long)p->set, (unsigned long long)p->live, p->dram_hit_rate, p->hit_rate,
          tput / 1e6);

  fl_tune_search *se = &r->searches[r->n_searches - 1];
  if (u->state == HOLD) {
    if (tput >= (1 - u->t->drop) * u->hold_ref) {
      u->slow = 0;
      if (tput > u->hold_ref) u->hold_ref = tput;
      return FL_OK;
    }
    if (++u->slow < u->t->patience) return FL_OK;
    fprintf(u->log, "re-search at batch %llu: %u window(s) in a row under %.0f%% of %.3f M "
            "lookups/s, the best while holding (last %.3f); clearing the unified index\n",
            (unsigned long long)r->batches, u->t->patience, 100 * (1 - u->t->drop),
            u->hold_ref / 1e6, tput / 1e6);
    s = set_size(u, 0);
    return s == FL_OK ? start_search(u) : s;
  }
  se->windows++;
  if (tput > u->best) {
    u->best = tput;
    u->best_size = u->size;
    se->chosen = u->size;
    se->throughput = tput;
    /* More entries than the index has slots cannot be live. */
    if (r->step > r->index_slots - u->size) return hold(u, "reached the index slots");
    return set_size(u, u->size + r->step);
  }
  return hold(u, "throughput fell");
}

/* Replays the trace t->rounds times, one window at a time. */
static fl_status replay(tuner *u, const fl_workload *w, fl_runner *rn) {
  fl_trace_batch b = {0};
  fl_status s = FL_OK;
  uint64_t lookups = 0; /* of the current window */
  for (uint32_t round = 0; s == FL_OK && round < u->t->rounds; round++) {
    s = fl_trace_rewind(w->trace);
    for (uint64_t i = 0; s == FL_OK && (w->batches == 0 || i < w->batches); i++) {
      int got;
      s = fl_trace_next(w->trace, &b, &got);
      if (s != FL_OK) {
        fprintf(stderr, "error: %s: %s\n", fl_status_name(s), fl_trace_last_error(w->trace));
        break;
      }
      if (!got) break;
      double ms;
      s = fl_runner_query(rn, &b, NULL, &ms);
      if (s != FL_OK) break;
      uint64_t n = fl_trace_batch_lookups(&b);
      u->r->batches++;
      u->r->lookups += n;
      lookups += n;
      u->ms += ms;
      if (++u->in_window == u->t->window) {
        s = end_window(u, lookups);
        lookups = 0;
      }
    }
  }
  fl_trace_batch_free(&b);
  return s;
}

fl_status fl_tune_run(const fl_workload *w, const fl_replay_opts *o, const fl_tune_opts *t,
                      FILE *log, fl_tune_result *r) {
  memset(r, 0, sizeof *r);
  r->budget_bytes = fl_workload_budget(w, o);
  tuner u = {.t = t, .log = log, .r = r};
  fl_runner *rn = NULL;
  /* Created with unified entries, so that its index can hold pointers
   * (cache/index.h: 64-bit locations); the search starts from none. */
  fl_replay_opts with_pointers = *o;
  with_pointers.unified = 1;
  fl_status s = fl_workload_cache(w, &with_pointers, o->layout, &u.c);
  if (s != FL_OK) return s;
  s = set_size(&u, 0);
  r->backend = fl_cache_backend(u.c);
  if (s == FL_OK) s = fl_cache_stats_get(u.c, &u.prev, NULL, 0);
  if (s == FL_OK) {
    r->index_slots = u.prev.index_slots;
    r->step = t->step ? t->step : r->index_slots / 50;
    if (r->step == 0) r->step = 1;
    fprintf(stderr, "cache: %s backend, budget %.1f MB, %llu index slots; step %llu entries, "
            "window %u batches\n", r->backend == FL_BACKEND_CUDA ? "CUDA" : "host",
            (double)r->budget_bytes / 1e6, (unsigned long long)r->index_slots,
            (unsigned long long)r->step, t->window);
    fprintf(log, "%8s  %-6s  %10s  %10s  %8s  %8s  %10s\n", "batch", "phase", "unified", "live",
            "dram_hit", "hit", "Mlookup/s");
    s = fl_runner_create(u.c, w, o, &rn);
  }
  if (s == FL_OK) s = start_search(&u);
  if (s == FL_OK) s = replay(&u, w, rn);
  if (rn) {
    r->verified = fl_runner_verified(rn);
    r->mismatches = fl_runner_mismatches(rn);
  }
  fl_runner_destroy(rn);
  fl_cache_destroy(u.c);
  return s;
}
