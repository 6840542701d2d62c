/* store_internal.h: what the cache module (not the public API) needs from the
 * store: change notifications, table descriptors and the store's thread pool. */
#ifndef FL_DRAM_STORE_STORE_INTERNAL_H
#define FL_DRAM_STORE_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/parallel.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of `table` changed. `ids` lists the ids the call was given (an id may
 * not have existed, e.g. a remove of an absent id); ids == NULL (n == 0) means
 * any row of the table may have changed (fl_store_fill_synthetic). */
typedef void (*fl_store_change_fn)(void *ctx, uint32_t table, const uint64_t *ids, size_t n);

/* Called after the changed rows are visible, on the writer's thread, once per
 * upsert/remove/import/fill call that changed rows of `table`; callbacks are
 * serialized, and none runs after fl_store_unsubscribe returns (so a callback
 * must not itself subscribe or unsubscribe). Returns a subscription id >= 0,
 * or -1 on OOM. fl_store_load builds a new store: it has no subscribers. */
int fl_store_subscribe(fl_store *s, fl_store_change_fn fn, void *ctx);
void fl_store_unsubscribe(fl_store *s, int id);
/* The table's descriptor, NULL when out of range; valid while the store lives. */
const fl_table_desc *fl_store_desc(const fl_store *s, uint32_t table);
/* The store's thread pool, shared with the cache's miss path. */
fl_workers *fl_store_workers(fl_store *s);

#ifdef __cplusplus
}
#endif
#endif
