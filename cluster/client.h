/* client.h: a Redis Cluster client over hiredis 0.14 (which has no cluster
 * support): connections pooled per node, the slot map refreshed from CLUSTER
 * SLOTS, and one call that runs a batch of single-slot commands pipelined per
 * node, the nodes in parallel (one thread polling all of them), following
 * MOVED and ASK and retrying through
 * failovers until a deadline. Rows, model metadata and invalidations
 * (rows.c, meta.c, inval.c) are built on it. With rows.h, meta.h and inval.h,
 * the interface of cluster/ to the store's cluster tier (docs/TIERS.md).
 *
 * Thread-safe: any number of threads may run batches at once; each takes its
 * own pooled connections. Errors are recorded with fl_fail on the handle the
 * caller passes (`eh`, the store), naming node, slot and key. */
#ifndef FL_CLUSTER_CLIENT_H
#define FL_CLUSTER_CLIENT_H

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "include/fleche.h"

typedef struct fl_cluster fl_cluster;

/* Connects to cfg->seed ("host:port" or "redis://host:port") and loads the
 * slot map. FL_ERR_UNAVAILABLE when no node answers, FL_ERR_INVALID_ARGUMENT
 * for a bad address or config. */
fl_status fl_cluster_open(const fl_cluster_config *cfg, const void *eh, fl_cluster **out);
void fl_cluster_close(fl_cluster *c);
/* The configuration, with the defaults filled in and seed/ns copied. */
const fl_cluster_config *fl_cluster_cfg(const fl_cluster *c);
/* Commands sent since open (for statistics). */
uint64_t fl_cluster_commands(const fl_cluster *c);

/* One command of a batch. Every key it names hashes to `slot`. */
typedef struct fl_rc_cmd {
  uint16_t slot;          /* the keys' hash slot */
  int argc;               /* arguments, command name first */
  const char **argv;
  const size_t *argvlen;
  /* Out: */
  redisReply *reply;      /* the reply once done (not an error); the caller frees it */
  int tryagain;           /* 1: TRYAGAIN (a multi-key command on a slot being
                             migrated, keys on both sides): split it per key */
  /* The client's: */
  int ask;                /* node named by a pending ASK, -1: none */
  int node;               /* node of the current attempt, -1: unrouted */
  redisReply *raw;        /* the last attempt's reply, NULL: no reply (I/O error) */
  const char *io_err;     /* the last attempt's connection error (static text) */
} fl_rc_cmd;

/* Runs n commands until each has a reply (or TRYAGAIN). MOVED updates the
 * map and resends; ASK resends once to the named node after ASKING; a node
 * that cannot be reached, times out or answers CLUSTERDOWN/LOADING/
 * MASTERDOWN is retried after a refresh of the slot map, with backoff, for
 * cfg.retry_ms: then FL_ERR_UNAVAILABLE naming the node, slot and the last
 * error. Any other error reply fails at once with FL_ERR_FORMAT (a key of
 * the wrong type, ...). On failure no reply is left to free. */
fl_status fl_cluster_run(fl_cluster *c, const void *eh, fl_rc_cmd *cmds, size_t n);

/* A new connection (not pooled) to a master that answers, after a refresh
 * of the slot map: for the invalidation subscriber. NULL with err set when
 * none can be made. The caller frees it with redisFree. */
redisContext *fl_cluster_connect_any(fl_cluster *c, char *err, size_t cap);

#endif
