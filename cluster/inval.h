/* inval.h: invalidations across processes. A writer, after its rows are in
 * the cluster, takes the next version (INCR "NS:version") and publishes a
 * change message on the channel "NS:inval" (Redis Cluster forwards PUBLISH to
 * every node). Each process runs one subscriber thread that applies other
 * processes' messages to its local tier and caches. Part of the interface
 * of cluster/ to the store's cluster tier (client.h).
 *
 * Pub/sub delivery is not guaranteed (a subscriber's node fails, a writer
 * dies between INCR and PUBLISH), so the subscriber also reads the version
 * key every heartbeat: a version that was taken one heartbeat ago and whose
 * message has not arrived means a lost message, and everything is
 * invalidated. A broken subscription invalidates everything at once, and
 * the local tier is bypassed (synced 0) until the subscription is back.
 * Hence the staleness bound of docs/TIERS.md: delivery latency normally,
 * at most about 2 heartbeats plus the I/O timeout when messages are lost.
 *
 * Message payload (little-endian): u64 version, u64 sender, u32 table,
 * u32 count, then count u64 ids; count FL_INVAL_TABLE: the whole table. */
#ifndef FL_CLUSTER_INVAL_H
#define FL_CLUSTER_INVAL_H

#include "cluster/client.h"

#define FL_INVAL_TABLE UINT32_MAX /* count: every row of the table */
#define FL_INVAL_ALL UINT32_MAX   /* table: every table (resync) */

/* Applies a change: ids == NULL: the whole table, table FL_INVAL_ALL: all. */
typedef void (*fl_inval_fn)(void *ctx, uint32_t table, const uint64_t *ids, size_t n);

typedef struct fl_inval fl_inval;

/* Publishes a change of n ids of `table` (ids NULL: the whole table). */
fl_status fl_inval_publish(fl_cluster *c, const void *eh, uint64_t sender, uint32_t table,
                           const uint64_t *ids, size_t n);
/* Subscribes (synchronously: FL_ERR_UNAVAILABLE when it cannot) and starts
 * the thread; messages from `self` are not applied. */
fl_status fl_inval_start(fl_cluster *c, const void *eh, uint64_t self, fl_inval_fn fn, void *ctx,
                         fl_inval **out);
void fl_inval_stop(fl_inval *v);
/* 1 while subscribed and no message is known lost. */
int fl_inval_synced(const fl_inval *v);
/* Times everything was invalidated because the channel broke or lost a message. */
uint64_t fl_inval_resyncs(const fl_inval *v);
/* Messages of other processes applied. */
uint64_t fl_inval_applied(const fl_inval *v);

#endif
