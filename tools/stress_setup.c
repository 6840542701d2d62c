/* stress_setup.c: the stress run's store (dense fp32, dense fp16 and hashed
 * fp32 tables, every row written at version 1) and the small cache over it. */
#include <stdio.h>
#include <stdlib.h>

#include "tools/stress.h"

/* Every row of table t at version 1 (hashed tables: every id present). */
static int fill(stress *s, table *t) {
  uint64_t *ids = malloc(FILL_ROWS * sizeof *ids);
  unsigned char *rows = malloc(FILL_ROWS * t->row_bytes);
  int ok = ids && rows;
  for (uint64_t k0 = 0; ok && k0 < t->shape->corpus; k0 += FILL_ROWS) {
    size_t n = t->shape->corpus - k0 < FILL_ROWS ? (size_t)(t->shape->corpus - k0) : FILL_ROWS;
    for (size_t i = 0; i < n; i++) {
      ids[i] = row_id(t, k0 + i);
      encode_row(t, ids[i], 1, rows + i * t->row_bytes);
      atomic_init(&t->state[k0 + i].removing, 0);
      atomic_init(&t->state[k0 + i].removing_prev, 0);
      atomic_init(&t->state[k0 + i].done, 1u << 1);
    }
    ok = store_ok(s, "fl_store_upsert", fl_store_upsert(s->store, t->index, ids, n, rows));
  }
  free(ids);
  free(rows);
  return ok;
}

int make_store(stress *s) {
  fl_table_desc *d = calloc(s->n_tables, sizeof *d);
  s->tables = calloc(s->n_tables, sizeof *s->tables);
  int ok = d && s->tables;
  for (uint32_t i = 0; ok && i < s->n_tables; i++) {
    table *t = &s->tables[i];
    t->index = i;
    t->shape = &shapes[i % 3];
    snprintf(t->name, sizeof t->name, "t%u", i);
    t->row_bytes = t->shape->dim * (t->shape->dtype == FL_FP16 ? 2u : 4u);
    if (t->row_bytes > s->widest) s->widest = t->row_bytes;
    ok = (t->state = calloc(t->shape->corpus, sizeof *t->state)) != NULL;
    d[i] = (fl_table_desc){t->name, t->shape->corpus, t->shape->dim, t->shape->dtype,
                           t->shape->id_kind};
  }
  if (!ok) fprintf(stderr, "error: out of host memory for %u tables\n", s->n_tables);
  fl_status st = ok ? fl_store_create(d, s->n_tables, 0, &s->store) : FL_ERR_OUT_OF_MEMORY;
  if (ok && st != FL_OK)
    fprintf(stderr, "error: fl_store_create: %s: %s\n", fl_status_name(st),
            fl_store_last_error(NULL));
  ok = ok && st == FL_OK;
  for (uint32_t i = 0; ok && i < s->n_tables; i++) ok = fill(s, &s->tables[i]);
  atomic_store(&s->clock, 1); /* the number fill wrote */
  free(d);
  return ok;
}

int make_cache(stress *s) {
  fl_config cfg;
  fl_config_default(&cfg);
  cfg.backend = s->o.backend;
  cfg.layout = s->o.layout;
  cfg.budget_bytes = s->o.budget_kb << 10;
  cfg.unified_entries = s->o.unified;
  cfg.seed = s->o.seed;
  cfg.zero_copy_rows = s->o.zero_copy_rows;
  fl_status st = fl_cache_create(s->store, &cfg, &s->cache);
  if (st != FL_OK) {
    fprintf(stderr, "error: fl_cache_create: %s: %s\n", fl_status_name(st),
            fl_cache_last_error(NULL));
    return 0;
  }
  s->cuda = fl_cache_backend(s->cache) == FL_BACKEND_CUDA;
  return 1;
}
