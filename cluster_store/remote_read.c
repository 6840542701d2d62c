/* remote_read.c: a cluster store's gathers: the local pass over its tables,
 * then the rows they lacked fetched from the cluster in one batch (rows.c
 * groups them per slot and node), absent ids resolved per policy, and the
 * fetched rows cached in the tables within the budget, evicting with the
 * CLOCK hand (see remote.h for the race with writers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "cluster_store/remote.h"

/* Under fill_lock: evicts rows with the CLOCK hand until `need` more bytes
 * fit the budget (or nothing is left to evict). */
static void make_room(fl_store *s, fl_remote *rm, uint64_t need) {
  uint64_t budget = atomic_load(&rm->budget), used = fl_store_local_bytes(s);
  if (used + need <= budget) return;
  uint64_t evicted = fl_cached_evict(s, &rm->hand, used + need - budget);
  atomic_fetch_add_explicit(&fl_store_counters(s)->evictions, evicted, memory_order_relaxed);
}

/* Caches the found rows, table by table, under fill_lock; a table changed
 * since `changes` was read gets none (its rows may predate the change). */
static void cache_rows(fl_store *s, const fl_row_ref *rows, const uint8_t *found, size_t n,
                       const uint64_t *changes) {
  fl_remote *rm = fl_store_tier(s);
  uint32_t n_tables = fl_store_num_tables(s);
  uint64_t budget = atomic_load(&rm->budget), need = 0;
  size_t *count = calloc(n_tables + 1, sizeof *count);
  fl_cached_row *sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (!count || !sorted) { /* no memory: the rows are just not cached */
    free(count);
    free(sorted);
    return;
  }
  for (size_t k = 0; k < n; k++)
    if (found[k] && need + rows[k].bytes <= budget) need += rows[k].bytes, count[rows[k].table + 1]++;
  for (uint32_t t = 0; t < n_tables; t++) count[t + 1] += count[t];
  uint64_t taken = 0;
  for (size_t k = 0; k < n; k++)
    if (found[k] && taken + rows[k].bytes <= budget)
      taken += rows[k].bytes, sorted[count[rows[k].table]++] = (fl_cached_row){rows[k].id, rows[k].buf};
  pthread_mutex_lock(&rm->fill_lock);
  make_room(s, rm, need);
  size_t at = 0;
  for (uint32_t t = 0; t < n_tables; t++) {
    if (at < count[t]) fl_cached_put(s, t, changes[t], sorted + at, count[t] - at);
    at = count[t];
  }
  pthread_mutex_unlock(&rm->fill_lock);
  free(count);
  free(sorted);
}

/* The rows of g at global rows absent[0 .. n_absent-1], fetched from the
 * cluster; `changes` holds the tables' change counts read before the local
 * pass. */
static fl_status fetch_rows(fl_store *s, const fl_gather *g, const uint64_t *absent,
                            size_t n_absent, const uint64_t *changes) {
  fl_remote *rm = fl_store_tier(s);
  fl_tier_counters *k = fl_store_counters(s);
  fl_row_ref *rows = malloc(n_absent * sizeof *rows);
  uint32_t *part = malloc(n_absent * sizeof *part);
  uint8_t *found = malloc(n_absent);
  if (!rows || !part || !found) {
    free(rows), free(part), free(found);
    return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu rows", g->call, n_absent);
  }
  for (size_t i = 0; i < n_absent; i++) {
    fl_gather_row r = fl_gather_row_at(g, absent[i]);
    part[i] = r.part;
    rows[i] = (fl_row_ref){r.table, r.id, r.out, r.bytes};
  }
  uint64_t t0 = fl_now_ns();
  fl_status st = fl_rows_fetch(rm->cluster, s, &rm->ks, rows, n_absent, found);
  atomic_fetch_add_explicit(&k->ns_cluster, fl_now_ns() - t0, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->cluster_fetches, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&k->cluster_rows, n_absent, memory_order_relaxed);
  if (st != FL_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", fl_store_last_error(s));
    fl_fail(s, st, "%s: %s", g->call, why);
  }
  uint64_t absent_in_cluster = 0;
  for (size_t i = 0; i < n_absent && st == FL_OK; i++) {
    if (found[i]) continue;
    const fl_table_desc *d = fl_store_desc(s, rows[i].table);
    memset(rows[i].buf, 0, rows[i].bytes);
    if (d->id_kind == FL_IDS_DENSE) continue; /* a dense row never written is zero */
    absent_in_cluster++;
    fl_gather_count_missing(g, part[i]);
    if (g->policy == FL_MISSING_ERROR)
      st = fl_fail(s, FL_ERR_NOT_FOUND, "%s: table %u '%s': id %llu not found (in the cluster)",
                   g->call, rows[i].table, d->name, (unsigned long long)rows[i].id);
  }
  atomic_fetch_add_explicit(&k->cluster_missing, absent_in_cluster, memory_order_relaxed);
  if (st == FL_OK && atomic_load(&rm->budget) && fl_inval_synced(rm->inval))
    cache_rows(s, rows, found, n_absent, changes);
  free(rows), free(part), free(found);
  return st;
}

fl_status fl_remote_gather(fl_store *s, const fl_gather *g) {
  fl_remote *rm = fl_store_tier(s);
  uint32_t n_tables = fl_store_num_tables(s);
  size_t total = g->start[g->n];
  fl_gather_absent absent = {.rows = malloc((total ? total : 1) * sizeof *absent.rows)};
  uint64_t *changes = malloc((n_tables ? n_tables : 1) * sizeof *changes);
  fl_status st = FL_OK;
  if (!absent.rows || !changes)
    st = fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu rows", g->call, total);
  /* Change counts first: a fill must not cache rows fetched before a change
   * it did not see (remote.h). */
  for (uint32_t t = 0; changes && t < n_tables; t++) changes[t] = fl_cached_changes(s, t);
  absent.skip_local = !atomic_load(&rm->budget) || !fl_inval_synced(rm->inval);
  if (st == FL_OK) {
    /* The watcher hears once, at the end (store_internal.h). */
    fl_gather local = *g;
    local.watch = NULL;
    st = fl_gather_local(s, &local, &absent);
    size_t n_absent = atomic_load(&absent.n);
    if (st == FL_OK && n_absent) st = fetch_rows(s, g, absent.rows, n_absent, changes);
  }
  free(absent.rows);
  free(changes);
  return st;
}
