/* stress_writer.c: the stress run's writer threads: each upserts, removes
 * and re-adds the rows it owns, numbering every write from the one clock
 * and keeping the row's version words (stress.c's opening comment); writer
 * 0 also switches the unified index, clears and syncs the cache. */
#include <sched.h>

#include "common/clock.h"
#include "tools/stress.h"

/* Up to WRITE_ROWS distinct rows of t that writer w owns (k % writers ==
 * w), skewed like the readers' ids so that hot, cached rows change too. */
static size_t pick_rows(writer *w, const table *t, uint64_t *rows) {
  size_t n = 0;
  uint32_t n_writers = w->s->o.writers;
  for (int tries = 0; tries < WRITE_ROWS; tries++) {
    uint64_t k = skewed(&w->rng, t->shape->corpus);
    k = k - k % n_writers + w->index;
    int seen = k >= t->shape->corpus;
    for (size_t i = 0; i < n && !seen; i++) seen = rows[i] == k;
    if (!seen) rows[n++] = k;
  }
  return n;
}

/* Numbers for n writes, the first in w->versions[0]. */
static void take_numbers(writer *w, size_t n) {
  uint64_t first = atomic_fetch_add(&w->s->clock, n) + 1;
  for (size_t i = 0; i < n; i++) w->versions[i] = first + i;
}

static void upsert_rows(writer *w, const table *t, const uint64_t *rows, size_t n) {
  if (n == 0) return;
  take_numbers(w, n);
  for (size_t i = 0; i < n; i++) {
    w->ids[i] = row_id(t, rows[i]);
    encode_row(t, w->ids[i], w->versions[i], w->vectors + i * t->row_bytes);
  }
  fl_status st = fl_store_upsert(w->s->store, t->index, w->ids, n, w->vectors);
  if (!store_ok(w->s, "fl_store_upsert", st)) return;
  for (size_t i = 0; i < n; i++) atomic_store(&t->state[rows[i]].done, w->versions[i] << 1);
  w->n.upserts += n;
}

/* Waits until no reader checks against an end below `last` (a row's last
 * remove), so that announcing the row's next remove keeps removing_prev
 * at or below every held end (stress.c's opening comment). */
static void await_holds(const stress *s, uint64_t last) {
  for (uint32_t j = 0; j < s->n_holds; j++)
    while (atomic_load(&s->holds[j]) < last) sched_yield();
}

static void remove_rows(writer *w, const table *t, const uint64_t *rows, size_t n) {
  if (n == 0) return;
  for (size_t i = 0; i < n; i++) await_holds(w->s, atomic_load(&t->state[rows[i]].removing));
  take_numbers(w, n);
  for (size_t i = 0; i < n; i++) {
    row_state *r = &t->state[rows[i]];
    atomic_store(&r->removing_prev, atomic_load(&r->removing));
    atomic_store(&r->removing, w->versions[i]);
    w->ids[i] = row_id(t, rows[i]);
  }
  fl_status st = fl_store_remove(w->s->store, t->index, w->ids, n);
  if (!store_ok(w->s, "fl_store_remove", st)) return;
  for (size_t i = 0; i < n; i++)
    atomic_store(&t->state[rows[i]].done, w->versions[i] << 1 | 1u);
  w->n.removes += n;
}

/* New versions of a few rows of t; in hashed tables a quarter of the present
 * rows picked are removed instead, and removed rows picked are re-added. */
static void write_table(writer *w, const table *t) {
  uint64_t rows[WRITE_ROWS], ups[WRITE_ROWS], rms[WRITE_ROWS];
  size_t n = pick_rows(w, t, rows), nu = 0, nr = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t done = atomic_load(&t->state[rows[i]].done);
    if (t->shape->id_kind == FL_IDS_HASHED && !(done & 1) && next(&w->rng) % 4 == 0) {
      rms[nr++] = rows[i];
    } else {
      ups[nu++] = rows[i];
      w->n.readds += done & 1;
    }
  }
  upsert_rows(w, t, ups, nu);
  remove_rows(w, t, rms, nr);
}

/* Writer 0, every MAINT_PERIOD_S: the unified index switched between 0 and
 * --unified entries (a cache created without keeps none), every fourth time
 * a clear, then a sync (CUDA: waits for the admission rounds in flight). */
static void maintain(writer *w, uint64_t tick) {
  fl_cache *c = w->s->cache;
  if (w->s->o.unified) {
    cache_ok(w->s, "fl_cache_set_unified_entries",
             fl_cache_set_unified_entries(c, tick % 2 ? 0 : w->s->o.unified));
    w->n.unified_changes++;
  }
  if (tick % 4 == 3) {
    cache_ok(w->s, "fl_cache_clear", fl_cache_clear(c));
    w->n.clears++;
  }
  cache_ok(w->s, "fl_cache_sync", fl_cache_sync(c));
  w->n.syncs++;
}

void *writer_main(void *arg) {
  writer *w = arg;
  stress *s = w->s;
  double next_maint = fl_now_s() + MAINT_PERIOD_S;
  for (uint64_t tick = 0; !atomic_load(&s->stop);) {
    write_table(w, &s->tables[next(&w->rng) % s->n_tables]);
    if (w->index == 0 && fl_now_s() >= next_maint) {
      maintain(w, tick++);
      next_maint += MAINT_PERIOD_S;
    }
  }
  return NULL;
}
