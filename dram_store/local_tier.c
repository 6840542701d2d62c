/* local_tier.c: the local tier (tier.h): the stores of fl_store_create and
 * fl_store_load, whose tables hold their whole model. Rows are written into
 * the tables under each table's write lock and told to subscribers once
 * visible; a gather is its local pass alone; the model can be saved,
 * exported and copied from; there is no budget and nothing behind. */
#include "common/mutant.h"
#include "dram_store/store_impl.h"

/* Writes n rows into the table; the caller holds its write lock and has
 * reserved room for them. */
static fl_status local_put(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                           const void *vectors) {
  fl_table *t = &s->tables[table];
  const unsigned char *v = vectors;
  for (size_t i = 0; i < n; i++) fl_table_put(t, ids[i], v + i * t->row_bytes);
  return FL_OK;
}

static fl_status local_upsert(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                              const void *vectors) {
  pthread_mutex_lock(&t->write_lock);
  int rc = fl_table_reserve(t, n);
  if (rc != 0 && !FL_MUTANT_ON(22)) {
    pthread_mutex_unlock(&t->write_lock);
    return fl_fail(s, FL_ERR_OUT_OF_MEMORY, "table %u '%s': %s for %zu more rows", t->id, t->name,
                   fl_table_reserve_why(rc), n);
  }
  local_put(s, t->id, ids, n, vectors);
  pthread_mutex_unlock(&t->write_lock);
  fl_store_notify(s, t->id, ids, n);
  return FL_OK;
}

/* Subscribers hear of a remove only when it removed a row. */
static void local_remove(fl_store *s, fl_table *t, const uint64_t *ids, size_t n) {
  size_t removed = 0;
  pthread_mutex_lock(&t->write_lock);
  for (size_t i = 0; i < n; i++) removed += (size_t)fl_table_erase(t, ids[i]);
  pthread_mutex_unlock(&t->write_lock);
  if (removed) fl_store_notify(s, t->id, ids, n);
}

static fl_status local_write(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                             const void *vectors) {
  fl_table *t = &s->tables[table];
  if (vectors) return local_upsert(s, t, ids, n, vectors);
  local_remove(s, t, ids, n);
  return FL_OK;
}

static int local_reserve(fl_store *s, uint32_t table, uint64_t rows) {
  return fl_table_reserve(&s->tables[table], rows);
}

static fl_status local_changed(fl_store *s, uint32_t table) {
  fl_store_notify(s, table, NULL, 0);
  return FL_OK;
}

/* A copy's batches are upserts (local_write), each told as it lands. */
static fl_status local_loaded(fl_store *s, uint32_t table) {
  (void)s, (void)table;
  return FL_OK;
}

static fl_status local_gather(fl_store *s, const fl_gather *g) {
  return fl_gather_local(s, g, NULL);
}

static fl_status local_whole(fl_store *err, const char *call) {
  (void)err, (void)call;
  return FL_OK;
}

/* The tables are the model: its budget is what they hold. */
static void local_tier_stats(const fl_store *s, fl_store_tier_stats *out) {
  out->local_budget_bytes = out->local_bytes;
  out->model_bytes = fl_store_local_bytes(s);
}

static fl_status local_set_budget(fl_store *s, uint64_t bytes) {
  (void)bytes;
  return fl_fail(s, FL_ERR_INVALID_ARGUMENT,
                 "fl_store_set_local_budget: the store is not over a cluster");
}

static void local_close(fl_store *s) { (void)s; }

static const fl_store_ops local_ops = {
    .write = local_write,
    .reserve = local_reserve,
    .put = local_put,
    .changed = local_changed,
    .load = local_write,
    .loaded = local_loaded,
    .gather = local_gather,
    .whole = local_whole,
    .tier_stats = local_tier_stats,
    .set_budget = local_set_budget,
    .close = local_close,
};

fl_status fl_store_create(const fl_table_desc *tables, uint32_t n_tables, uint32_t threads,
                          fl_store **out) {
  return fl_store_new(tables, n_tables, threads, 0, &local_ops, out);
}
