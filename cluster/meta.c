/* meta.c: the model metadata key (see meta.h) and single commands. */
#include "cluster/meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/slots.h"
#include "common/error.h"

fl_status fl_cluster_command(fl_cluster *c, const void *eh, int argc, const char **argv,
                             const size_t *argvlen, redisReply **reply) {
  fl_rc_cmd cmd = {.slot = argc > 1 ? fl_key_slot(argv[1], argvlen[1]) : 0,
                   .argc = argc, .argv = argv, .argvlen = argvlen};
  fl_status st = fl_cluster_run(c, eh, &cmd, 1);
  *reply = cmd.reply;
  return st;
}

void fl_meta_free(fl_model_meta *m) {
  free(m->tables);
  free(m->names);
  memset(m, 0, sizeof *m);
}

static fl_status parse(const void *eh, const char *key, const char *text, size_t len,
                       fl_model_meta *m) {
  memset(m, 0, sizeof *m);
  char *buf = malloc(len + 1);
  if (!buf) return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for %s", key);
  memcpy(buf, text, len);
  buf[len] = '\0';
  unsigned version, buckets, n;
  int at = 0;
  if (sscanf(buf, "fleche-model %u\nbuckets %u\ntables %u\n%n", &version, &buckets, &n, &at) != 3 ||
      !at || version != 1 || !buckets || n > 65536) {
    free(buf);
    return fl_fail(eh, FL_ERR_FORMAT, "redis key %s is not fleche model metadata (version 1)", key);
  }
  m->buckets = buckets;
  m->n_tables = n;
  m->names = buf;
  m->tables = calloc(n ? n : 1, sizeof *m->tables);
  if (!m->tables) {
    fl_meta_free(m);
    return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for %s", key);
  }
  char *p = buf + at;
  for (uint32_t i = 0; i < n; i++) {
    unsigned dim, dtype, kind;
    unsigned long long corpus;
    int name_at = 0;
    char *eol = strchr(p, '\n');
    if (eol) *eol = '\0';
    if (!eol || sscanf(p, "%u %u %u %llu %n", &dim, &dtype, &kind, &corpus, &name_at) != 4 ||
        !name_at || !p[name_at] || dtype > 1 || kind > 1) {
      fl_meta_free(m);
      return fl_fail(eh, FL_ERR_FORMAT, "redis key %s: table line %u does not parse", key, i);
    }
    m->tables[i] = (fl_table_desc){p + name_at, corpus, dim, (fl_dtype)dtype, (fl_id_kind)kind};
    p = eol + 1;
  }
  return FL_OK;
}

fl_status fl_meta_read(fl_cluster *c, const void *eh, const char *ns, fl_model_meta *out) {
  char key[96];
  snprintf(key, sizeof key, "%s:meta", ns);
  const char *argv[2] = {"GET", key};
  size_t len[2] = {3, strlen(key)};
  redisReply *r;
  fl_status st = fl_cluster_command(c, eh, 2, argv, len, &r);
  if (st != FL_OK) return st;
  if (r->type == REDIS_REPLY_STRING) st = parse(eh, key, r->str, r->len, out);
  else st = fl_fail(eh, FL_ERR_NOT_FOUND, "the cluster holds no model '%s' (no key %s)", ns, key);
  freeReplyObject(r);
  return st;
}

fl_status fl_meta_create(fl_cluster *c, const void *eh, const char *ns, uint32_t buckets,
                         const fl_table_desc *tables, uint32_t n, fl_model_meta *out) {
  size_t cap = 64;
  for (uint32_t i = 0; i < n; i++) {
    const char *name = tables[i].name;
    if (!name || !*name || strchr(name, '\n'))
      return fl_fail(eh, FL_ERR_INVALID_ARGUMENT,
                     "table %u: a cluster model needs a non-empty name without newlines", i);
    cap += strlen(name) + 64;
  }
  char *text = malloc(cap);
  if (!text) return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for the model metadata");
  size_t len = (size_t)snprintf(text, cap, "fleche-model 1\nbuckets %u\ntables %u\n", buckets, n);
  for (uint32_t i = 0; i < n; i++)
    len += (size_t)snprintf(text + len, cap - len, "%u %d %d %llu %s\n", tables[i].dim,
                            (int)tables[i].dtype, (int)tables[i].id_kind,
                            (unsigned long long)tables[i].corpus_size, tables[i].name);
  char key[96];
  snprintf(key, sizeof key, "%s:meta", ns);
  const char *argv[4] = {"SET", key, text, "NX"};
  size_t lens[4] = {3, strlen(key), len, 2};
  redisReply *r;
  fl_status st = fl_cluster_command(c, eh, 4, argv, lens, &r);
  free(text);
  if (st != FL_OK) return st;
  freeReplyObject(r);
  return fl_meta_read(c, eh, ns, out);
}
