/* refs.c: references to rows for the cache's unified index (store_internal.h):
 * fl_store_refs hands out row addresses, fl_store_gather_refs reads rows
 * through them on the gather engine of gather.c, with the torn-free reads of
 * table.h (fl_table_ref, fl_table_read_ref).
 *
 * Why a stale reference cannot return a wrong row: slots never move and are
 * freed only with the store, so reading one is always safe; a slot's owner id,
 * its live flag and its vector are written together under the slot's seqlock
 * (striped by slot address, so a reader needs no slot number), and a remove
 * clears the live flag before the slot can be reused. A consistent copy of a
 * live slot owned by the id asked for is therefore that id's current row,
 * however often the slot changed hands since the reference was taken (a
 * removed id's old slot reused by another id, itself removed, stays not
 * live). Anything else falls back to a lookup by id. */
#include <stdlib.h>

#include "dram_store/store_impl.h"

fl_status fl_store_refs(fl_store *s, uint32_t table, const uint64_t *ids, size_t n, uint64_t *refs) {
  static const char call[] = "fl_store_refs";
  if (!s) return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: store is NULL", call);
  fl_table *t = fl_store_table_arg(s, table, call);
  if (!t) return FL_ERR_INVALID_ARGUMENT;
  if (n && (!ids || !refs))
    return fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: table %u '%s': %s is NULL", call, table,
                   t->name, ids ? "refs" : "ids");
  size_t bad = fl_table_first_out_of_range(t, ids, n);
  if (bad < n)
    return fl_fail(s, FL_ERR_OUT_OF_RANGE, "%s: table %u '%s': id %llu is out of range (corpus %llu)",
                   call, table, t->name, (unsigned long long)ids[bad],
                   (unsigned long long)t->desc.corpus_size);
  /* The grace section keeps the index and the slot directory we probe alive. */
  uint32_t token = fl_grace_enter(&s->env->grace);
  for (size_t i = 0; i < n; i++) refs[i] = fl_table_ref(t, ids[i]);
  fl_grace_exit(&s->env->grace, token);
  return FL_OK;
}

fl_status fl_store_gather_refs(fl_store *s, const fl_ref_query *queries, uint32_t n_queries,
                               fl_missing policy, uint64_t *missing, int for_device) {
  static const char call[] = "fl_store_gather_refs";
  fl_gather_part *parts;
  fl_status st = fl_gather_start(s, call, queries, n_queries, policy, &parts);
  if (st != FL_OK) return st;
  for (uint32_t i = 0; i < n_queries && st == FL_OK; i++) {
    const fl_ref_query *q = &queries[i];
    st = fl_gather_part_init(s, call, i, q->table, q->ids, q->n, q->out, &parts[i]);
    if (st == FL_OK && q->n && !q->refs)
      st = fl_fail(s, FL_ERR_INVALID_ARGUMENT, "%s: query %u (table %u '%s'): refs is NULL", call,
                   i, q->table, parts[i].t->name);
    parts[i].refs = q->refs;
  }
  if (st == FL_OK)
    st = fl_store_gather_parts(s, call, parts, n_queries, policy, missing, NULL, for_device);
  free(parts);
  return st;
}
