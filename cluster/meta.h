/* meta.h: a model's metadata in the cluster, the string key "NS:meta": its
 * bucket count and table descriptors, written once by the model's creator
 * (SET NX) and read by every process that opens the model, so all agree on
 * the key layout and the tables. Part of the interface of cluster/ to the
 * store's cluster tier (client.h). Text, one line each:
 *   fleche-model 1
 *   buckets B
 *   tables N
 *   DIM DTYPE ID_KIND CORPUS NAME      (N lines; dtype/id_kind as in fleche.h) */
#ifndef FL_CLUSTER_META_H
#define FL_CLUSTER_META_H

#include "cluster/client.h"

typedef struct fl_model_meta {
  uint32_t buckets;
  uint32_t n_tables;
  fl_table_desc *tables; /* names point into names */
  char *names;
} fl_model_meta;

void fl_meta_free(fl_model_meta *m);
/* FL_ERR_NOT_FOUND when the cluster has no model `ns`; FL_ERR_FORMAT when its
 * metadata does not parse. */
fl_status fl_meta_read(fl_cluster *c, const void *eh, const char *ns, fl_model_meta *out);
/* Creates model `ns` with these tables unless it exists; either way *out is
 * the model as the cluster has it (compare it with what was asked). Table
 * names must be non-empty and free of newlines (FL_ERR_INVALID_ARGUMENT). */
fl_status fl_meta_create(fl_cluster *c, const void *eh, const char *ns, uint32_t buckets,
                         const fl_table_desc *tables, uint32_t n, fl_model_meta *out);

/* Runs one command on the node of `key`'s slot (with the client's retries);
 * *reply is the caller's to free. */
fl_status fl_cluster_command(fl_cluster *c, const void *eh, int argc, const char **argv,
                             const size_t *argvlen, redisReply **reply);

#endif
