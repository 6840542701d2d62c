/* sim_run.c: the simulator's driver: replays a loaded trace through one
 * policy. Per batch it splits the distinct keys into hits (resident at the
 * batch's start) and misses, counts every lookup of a hit as a hit and keeps
 * the batch's hit rate, offers both lists to the policy and applies its
 * records, checking each against the rules of sim_policy.h, so that a
 * policy's bug fails the run instead of flattering its hit rate. */
#include <string.h>

#include "common/clock.h"
#include "tools/policy_sim.h"

typedef struct run {
  const fl_sim_trace *t;
  const fl_sim_policy *p;
  uint8_t *resident;   /* per key */
  uint32_t *seen_in;   /* per key: 1 + the last batch that looked it up */
  fl_sim_entry *hits, *misses;
  fl_sim_log log;
  uint64_t in_cache;
  char *err;
  size_t err_len;
} run;

/* Applies batch b's records; FL_ERR_INVALID_ARGUMENT at the first that
 * breaks a rule. */
static fl_status apply(run *x, uint64_t b, uint64_t capacity, fl_sim_result *r) {
  for (size_t i = 0; i < x->log.n; i++) {
    uint32_t k = x->log.ev[i].key;
    const char *broken = NULL;
    if (k >= x->t->n_keys) broken = "a key that does not exist";
    else if (x->log.ev[i].evict) {
      if (!x->resident[k]) broken = "an eviction of a key not resident";
      x->resident[k] = 0;
      x->in_cache--;
      r->evictions++;
    } else {
      if (x->resident[k]) broken = "an admission of a resident key";
      else if (x->seen_in[k] != b + 1) broken = "an admission of a key this batch did not look up";
      else if (x->in_cache == capacity) broken = "an admission beyond the capacity";
      x->resident[k] = 1;
      x->in_cache++;
      r->admissions++;
    }
    if (broken) {
      snprintf(x->err, x->err_len, "policy %s, batch %llu, key %u: %s", x->p->name,
               (unsigned long long)b, k, broken);
      return FL_ERR_INVALID_ARGUMENT;
    }
  }
  return FL_OK;
}

static fl_status replay(run *x, void *state, uint64_t capacity, int quiet, fl_sim_result *r) {
  const fl_sim_trace *t = x->t;
  fl_progress pg;
  fl_progress_start(&pg, quiet);
  fl_status s = FL_OK;
  for (uint64_t b = 0; s == FL_OK && b < t->n_batches; b++) {
    fl_sim_batch batch = {b, x->hits, 0, x->misses, 0};
    uint64_t lookups = 0, hits = 0;
    for (uint64_t e = t->first[b]; e < t->first[b + 1]; e++) {
      const fl_sim_entry *en = &t->entry[e];
      lookups += en->count;
      x->seen_in[en->key] = (uint32_t)b + 1;
      if (x->resident[en->key]) {
        x->hits[batch.n_hits++] = *en;
        hits += en->count;
      } else {
        x->misses[batch.n_misses++] = *en;
      }
    }
    r->lookups += lookups;
    r->hits += hits;
    r->batch_pct[r->batches++] = lookups ? 100.0 * (double)hits / (double)lookups : 0;
    x->log.n = 0;
    x->p->batch(state, &batch, &x->log);
    if (x->log.out_of_memory) {
      snprintf(x->err, x->err_len, "policy %s: out of memory for its records", x->p->name);
      s = FL_ERR_OUT_OF_MEMORY;
    } else {
      s = apply(x, b, capacity, r);
    }
    fl_progress_update(&pg, x->p->name, b + 1, t->n_batches, r->lookups);
  }
  fl_progress_end(&pg);
  return s;
}

fl_status fl_sim_run(const fl_sim_trace *t, const fl_sim_policy *p, uint64_t capacity, int quiet,
                     fl_sim_result *r, char *err, size_t err_len) {
  memset(r, 0, sizeof *r);
  r->name = p->name;
  r->capacity = capacity;
  double t0 = fl_now_s();
  uint64_t widest = 1, keys = t->n_keys ? t->n_keys : 1;
  for (uint64_t b = 0; b < t->n_batches; b++)
    if (t->first[b + 1] - t->first[b] > widest) widest = t->first[b + 1] - t->first[b];
  run x = {.t = t, .p = p, .err = err, .err_len = err_len};
  x.resident = calloc(keys, sizeof *x.resident);
  x.seen_in = calloc(keys, sizeof *x.seen_in);
  x.hits = malloc(widest * sizeof *x.hits);
  x.misses = malloc(widest * sizeof *x.misses);
  r->batch_pct = malloc((t->n_batches ? t->n_batches : 1) * sizeof *r->batch_pct);
  fl_sim_setup setup = {capacity, keys, widest};
  void *state = x.resident && x.seen_in && x.hits && x.misses && r->batch_pct ? p->create(&setup)
                                                                               : NULL;
  fl_status s = FL_OK;
  if (!state) {
    snprintf(err, err_len, "policy %s: out of memory for %llu keys", p->name,
             (unsigned long long)t->n_keys);
    s = FL_ERR_OUT_OF_MEMORY;
  } else {
    s = replay(&x, state, capacity, quiet, r);
    p->destroy(state);
  }
  free(x.log.ev);
  free(x.resident);
  free(x.seen_in);
  free(x.hits);
  free(x.misses);
  r->seconds = fl_now_s() - t0;
  return s;
}

void fl_sim_result_free(fl_sim_result *r) {
  free(r->batch_pct);
  r->batch_pct = NULL;
  r->batches = 0;
}
