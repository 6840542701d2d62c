/* remote_read.c: the gather rows a cluster store's local tier lacked:
 * fetched from the cluster in one batch (rows.c groups them per slot and
 * node), absent ids resolved per policy, and the fetched rows cached in the
 * local tier within its budget (see remote.h for the race with writers). */
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/error.h"
#include "dram_store/remote.h"

/* Caches the found rows, table by table, under fill_lock; a table changed
 * since `changes` was read gets none (its rows may predate the change). */
static void cache_rows(fl_store *s, const fl_row_ref *rows, const uint8_t *found, size_t n,
                       const uint64_t *changes) {
  fl_remote *rm = s->remote;
  uint64_t budget = atomic_load(&rm->budget), need = 0;
  size_t *count = calloc(s->n_tables + 1, sizeof *count), *order = malloc(n * sizeof *order);
  if (!count || !order) { /* no memory: the rows are just not cached */
    free(count);
    free(order);
    return;
  }
  for (size_t k = 0; k < n; k++)
    if (found[k] && need + rows[k].bytes <= budget) need += rows[k].bytes, count[rows[k].table + 1]++;
  for (uint32_t t = 0; t < s->n_tables; t++) count[t + 1] += count[t];
  uint64_t taken = 0;
  for (size_t k = 0; k < n; k++)
    if (found[k] && taken + rows[k].bytes <= budget) taken += rows[k].bytes, order[count[rows[k].table]++] = k;
  pthread_mutex_lock(&rm->fill_lock);
  fl_local_make_room(s, need);
  size_t at = 0;
  for (uint32_t ti = 0; ti < s->n_tables; ti++) {
    size_t end = count[ti];
    if (at == end) continue;
    fl_table *t = &s->tables[ti];
    pthread_mutex_lock(&t->write_lock);
    if (atomic_load(&t->changes) == changes[ti] && fl_table_reserve(t, end - at) == 0)
      for (size_t k = at; k < end; k++) fl_table_put(t, rows[order[k]].id, rows[order[k]].buf);
    pthread_mutex_unlock(&t->write_lock);
    at = end;
  }
  pthread_mutex_unlock(&rm->fill_lock);
  free(count);
  free(order);
}

fl_status fl_remote_fill(fl_store *s, const char *call, const fl_gather_part *parts, uint32_t n,
                         const size_t *start, const uint64_t *absent, size_t n_absent,
                         const uint64_t *changes, fl_missing policy, _Atomic uint64_t *miss) {
  fl_remote *rm = s->remote;
  fl_row_ref *rows = malloc(n_absent * sizeof *rows);
  uint32_t *part = malloc(n_absent * sizeof *part);
  uint8_t *found = malloc(n_absent);
  if (!rows || !part || !found) {
    free(rows), free(part), free(found);
    return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu rows", call, n_absent);
  }
  for (size_t k = 0; k < n_absent; k++) {
    uint32_t qi = fl_gather_part_of(start, n, absent[k]);
    const fl_gather_part *p = &parts[qi];
    size_t i = absent[k] - start[qi];
    part[k] = qi;
    rows[k] = (fl_row_ref){p->t->id, p->ids[i], p->out + i * p->t->row_bytes, p->t->row_bytes};
  }
  uint64_t t0 = fl_now_ns();
  fl_status st = fl_rows_fetch(rm->cluster, s, &rm->ks, rows, n_absent, found);
  atomic_fetch_add_explicit(&s->tier.ns_cluster, fl_now_ns() - t0, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->tier.cluster_fetches, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->tier.cluster_rows, n_absent, memory_order_relaxed);
  if (st != FL_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", fl_store_last_error(s));
    fl_fail(s, st, "%s: %s", call, why);
  }
  uint64_t absent_in_cluster = 0;
  for (size_t k = 0; k < n_absent && st == FL_OK; k++) {
    if (found[k]) continue;
    fl_table *t = parts[part[k]].t;
    memset(rows[k].buf, 0, rows[k].bytes);
    if (t->desc.id_kind == FL_IDS_DENSE) continue; /* a dense row never written is zero */
    absent_in_cluster++;
    atomic_fetch_add_explicit(&t->misses, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&miss[part[k]], 1, memory_order_relaxed);
    if (policy == FL_MISSING_ERROR)
      st = fl_fail(s, FL_ERR_NOT_FOUND, "%s: table %u '%s': id %llu not found (in the cluster)",
                   call, t->id, t->name, (unsigned long long)rows[k].id);
  }
  atomic_fetch_add_explicit(&s->tier.cluster_missing, absent_in_cluster, memory_order_relaxed);
  if (st == FL_OK && atomic_load(&rm->budget) && fl_inval_synced(rm->inval))
    cache_rows(s, rows, found, n_absent, changes);
  free(rows), free(part), free(found);
  return st;
}
