/* rows.h: embedding rows in the cluster: the key layout, and batched reads,
 * writes and deletes of rows, grouped by hash slot into multi-key commands
 * (MGET, MSET, DEL) that the client pipelines per node. Part of the
 * interface of cluster/ to the store's cluster tier (client.h).
 *
 * Key layout (docs/TIERS.md): row (table t, id) of model namespace NS is the
 * string key "NS{b}t:id" (t and id in decimal, b = fl_hash2(t, id) mod
 * buckets), its value the row's raw bytes (dim elements, little-endian fp32
 * or fp16), exactly the table's row bytes. The hash tag {b} puts the rows of
 * one bucket in one slot, so a batch of misses becomes one MGET per bucket
 * slot rather than one command per row; `buckets` (in the model's metadata)
 * trades bigger MGETs against finer spreading over nodes. */
#ifndef FL_CLUSTER_ROWS_H
#define FL_CLUSTER_ROWS_H

#include "cluster/client.h"

/* A model's key space: namespace, buckets and each bucket's slot. */
typedef struct fl_keyspace {
  char ns[64];
  uint32_t buckets;
  uint16_t *bucket_slot; /* buckets entries */
} fl_keyspace;

/* 0, or -1 when out of memory. */
int fl_keyspace_init(fl_keyspace *ks, const char *ns, uint32_t buckets);
void fl_keyspace_fini(fl_keyspace *ks);
/* Writes row (table, id)'s key into out (FL_ROW_KEY_MAX bytes); its length. */
#define FL_ROW_KEY_MAX 112
size_t fl_row_key(const fl_keyspace *ks, uint32_t table, uint64_t id, char *out);
uint16_t fl_row_slot(const fl_keyspace *ks, uint32_t table, uint64_t id);

/* One row of a batch. */
typedef struct fl_row_ref {
  uint32_t table;
  uint64_t id;
  void *buf;     /* reads: where the row goes; writes: the row (NULL: delete) */
  size_t bytes;  /* the table's row bytes */
} fl_row_ref;

/* Reads n rows: found[i] = 1 and rows[i].buf filled, or found[i] = 0 when the
 * cluster holds no such key. A value of another length than rows[i].bytes
 * fails with FL_ERR_FORMAT naming the key (nothing is trusted from it). */
fl_status fl_rows_fetch(fl_cluster *c, const void *eh, const fl_keyspace *ks,
                        const fl_row_ref *rows, size_t n, uint8_t *found);
/* Writes (buf non-NULL) or deletes (buf NULL, every row) n rows. */
fl_status fl_rows_store(fl_cluster *c, const void *eh, const fl_keyspace *ks,
                        const fl_row_ref *rows, size_t n);

#endif
