/* rows.c: the key layout and batched row commands (see rows.h). A batch is
 * sorted by slot and cut into multi-key commands of at most FL_ROWS_PER_CMD
 * rows; a command answered TRYAGAIN (its slot is being migrated and its keys
 * are split between the two nodes) is sent again as single-key commands,
 * which the client then follows through ASK. */
#include "cluster/rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/resp.h"
#include "cluster/slots.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/mutant.h"

/* Rows per MGET/MSET/DEL: large enough to amortize a command, small enough
 * that one reply stays a modest allocation. */
#define FL_ROWS_PER_CMD 256

int fl_keyspace_init(fl_keyspace *ks, const char *ns, uint32_t buckets) {
  memset(ks, 0, sizeof *ks);
  snprintf(ks->ns, sizeof ks->ns, "%s", ns);
  ks->buckets = buckets;
  ks->bucket_slot = malloc(buckets * sizeof *ks->bucket_slot);
  if (!ks->bucket_slot) return -1;
  for (uint32_t b = 0; b < buckets; b++) {
    char tag[16];
    int len = snprintf(tag, sizeof tag, "%u", b);
    ks->bucket_slot[b] = fl_key_slot(tag, (size_t)len);
  }
  return 0;
}

void fl_keyspace_fini(fl_keyspace *ks) {
  free(ks->bucket_slot);
  ks->bucket_slot = NULL;
}

static uint32_t bucket_of(const fl_keyspace *ks, uint32_t table, uint64_t id) {
  return (uint32_t)(fl_hash2(table, id) % ks->buckets);
}

/* "NS{b}t:id" without printf, which costs as much as the rest of building a
 * fetch: at most 63 + 12 + 10 + 1 + 20 bytes, under FL_ROW_KEY_MAX. */
size_t fl_row_key(const fl_keyspace *ks, uint32_t table, uint64_t id, char *out) {
  size_t n = strlen(ks->ns);
  memcpy(out, ks->ns, n);
  out[n++] = '{';
  n += fl_resp_u64(out + n, bucket_of(ks, table, id));
  out[n++] = '}';
  n += fl_resp_u64(out + n, table);
  out[n++] = ':';
  n += fl_resp_u64(out + n, id);
  out[n] = '\0';
  return n;
}

uint16_t fl_row_slot(const fl_keyspace *ks, uint32_t table, uint64_t id) {
  return ks->bucket_slot[bucket_of(ks, table, id)];
}

/* A batch turned into commands: rows sorted by slot, keys, argument vectors. */
typedef struct fl_row_batch {
  size_t *order;       /* row numbers sorted by slot */
  char *keys;          /* FL_ROW_KEY_MAX bytes per row, in row order */
  size_t *key_len;     /* per row */
  const char **argv;   /* all commands' arguments */
  size_t *argvlen;
  fl_rc_cmd *cmds;
  size_t *first;       /* per command: its first position in order */
  size_t n_cmds;
} fl_row_batch;

static void batch_free(fl_row_batch *b) {
  for (size_t i = 0; b->cmds && i < b->n_cmds; i++)
    if (b->cmds[i].reply) freeReplyObject(b->cmds[i].reply);
  free(b->order), free(b->keys), free(b->key_len), free(b->argv), free(b->argvlen);
  free(b->cmds), free(b->first);
  memset(b, 0, sizeof *b);
}

/* Builds the commands for rows[order[pos]] (pos in positions[0..m)): each
 * command holds rows of one slot, at most `per_cmd` of them, named `verb`
 * with `stride` arguments per row (1: key; 2: key and value). */
static int batch_build(fl_row_batch *b, const fl_row_ref *rows, const size_t *positions, size_t m,
                       const uint16_t *slot, const char *verb, int stride, size_t per_cmd) {
  b->cmds = calloc(m ? m : 1, sizeof *b->cmds);
  b->first = malloc((m ? m : 1) * sizeof *b->first);
  b->argv = malloc((m * (size_t)stride + m + 1) * sizeof *b->argv);
  b->argvlen = malloc((m * (size_t)stride + m + 1) * sizeof *b->argvlen);
  if (!b->cmds || !b->first || !b->argv || !b->argvlen) return -1;
  size_t arg = 0;
  b->n_cmds = 0;
  for (size_t p = 0; p < m;) {
    size_t r0 = b->order[positions[p]];
    fl_rc_cmd *cmd = &b->cmds[b->n_cmds];
    b->first[b->n_cmds++] = p;
    cmd->slot = slot[r0];
    cmd->argv = b->argv + arg;
    cmd->argvlen = b->argvlen + arg;
    b->argv[arg] = verb;
    b->argvlen[arg++] = strlen(verb);
    size_t k = 0;
    for (; p < m && k < per_cmd && slot[b->order[positions[p]]] == cmd->slot; p++, k++) {
      size_t r = b->order[positions[p]];
      b->argv[arg] = b->keys + r * FL_ROW_KEY_MAX;
      b->argvlen[arg++] = b->key_len[r];
      if (stride == 2) {
        b->argv[arg] = rows[r].buf;
        b->argvlen[arg++] = rows[r].bytes;
      }
    }
    cmd->argc = (int)(1 + k * (size_t)stride);
  }
  return 0;
}

/* Keys, slots and the slot order of n rows into b (slot: n entries, out). */
static int batch_keys(fl_row_batch *b, const fl_keyspace *ks, const fl_row_ref *rows, size_t n,
                      uint16_t *slot) {
  b->order = malloc((n ? n : 1) * sizeof *b->order);
  b->keys = malloc((n ? n : 1) * FL_ROW_KEY_MAX);
  b->key_len = malloc((n ? n : 1) * sizeof *b->key_len);
  size_t *count = calloc(FL_SLOTS + 1, sizeof *count);
  if (!b->order || !b->keys || !b->key_len || !count) {
    free(count);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    slot[i] = fl_row_slot(ks, rows[i].table, rows[i].id);
    b->key_len[i] = fl_row_key(ks, rows[i].table, rows[i].id, b->keys + i * FL_ROW_KEY_MAX);
    count[slot[i] + 1]++;
  }
  for (int s = 0; s < FL_SLOTS; s++) count[s + 1] += count[s];
  for (size_t i = 0; i < n; i++) b->order[count[slot[i]]++] = i;
  free(count);
  return 0;
}

/* The reply for row position p of command k: an MGET element, or the
 * single-key command's own reply. */
static const redisReply *row_reply(const fl_row_batch *b, size_t k, size_t p) {
  const redisReply *r = b->cmds[k].reply;
  if (r->type != REDIS_REPLY_ARRAY) return r;
  size_t i = p - b->first[k];
  return i < r->elements ? r->element[i] : NULL;
}

static fl_status check_row(const void *eh, const fl_row_batch *b, size_t r, const fl_row_ref *row,
                           const redisReply *e, uint8_t *found) {
  if (e && e->type == REDIS_REPLY_NIL) {
    *found = 0;
    return FL_OK;
  }
  if (e && e->type == REDIS_REPLY_STRING && e->len == row->bytes) {
    memcpy(row->buf, e->str, row->bytes);
    *found = 1;
    return FL_OK;
  }
  if (FL_MUTANT_ON(9)) memset(row->buf, 0, row->bytes);
  return fl_fail(eh, FL_ERR_FORMAT,
                 "redis key %.*s (table %u, id %llu): %s %zu bytes, the table's rows are %zu",
                 (int)b->key_len[r], b->keys + r * FL_ROW_KEY_MAX, row->table,
                 (unsigned long long)row->id, e && e->type == REDIS_REPLY_STRING ? "holds" : "not a string of",
                 e && e->type == REDIS_REPLY_STRING ? e->len : 0, row->bytes);
}

/* Runs the rows at `positions` as multi-key commands, then the rows of any
 * TRYAGAIN command as single-key ones; calls back per row with its reply
 * (reads) or checks nothing more (writes: any error failed the run). */
static fl_status run_rows(fl_cluster *c, const void *eh, fl_row_batch *b, const fl_row_ref *rows,
                          size_t n, const uint16_t *slot, const char *multi, const char *single,
                          int stride, uint8_t *found) {
  size_t *all = malloc((n ? n : 1) * sizeof *all);
  if (!all) return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for %zu rows", n);
  for (size_t i = 0; i < n; i++) all[i] = i;
  fl_status st = FL_OK;
  const size_t *positions = all;
  size_t m = n;
  for (int round = 0; round < 2 && m && st == FL_OK; round++) {
    if (batch_build(b, rows, positions, m, slot, round ? single : multi, stride,
                    round ? 1 : FL_ROWS_PER_CMD) != 0) {
      st = fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for %zu rows", n);
      break;
    }
    st = fl_cluster_run(c, eh, b->cmds, b->n_cmds);
    size_t retry = 0;
    for (size_t k = 0; st == FL_OK && k < b->n_cmds; k++) {
      size_t end = k + 1 < b->n_cmds ? b->first[k + 1] : m;
      for (size_t p = b->first[k]; p < end; p++) {
        size_t r = b->order[positions[p]];
        if (b->cmds[k].tryagain) {
          all[retry++] = positions[p]; /* positions[p] >= retry: safe in place */
          continue;
        }
        if (found) st = check_row(eh, b, r, &rows[r], row_reply(b, k, p), &found[r]);
        if (st != FL_OK) break;
      }
    }
    for (size_t k = 0; k < b->n_cmds; k++)
      if (b->cmds[k].reply) freeReplyObject(b->cmds[k].reply), b->cmds[k].reply = NULL;
    free(b->cmds), free(b->first), free(b->argv), free(b->argvlen);
    b->cmds = NULL, b->first = NULL, b->argv = NULL, b->argvlen = NULL, b->n_cmds = 0;
    m = retry;
    if (round == 1 && m && st == FL_OK)
      st = fl_fail(eh, FL_ERR_UNAVAILABLE, "slot %u: TRYAGAIN on a single key", slot[b->order[all[0]]]);
  }
  free(all);
  return st;
}

static fl_status rows_run(fl_cluster *c, const void *eh, const fl_keyspace *ks,
                          const fl_row_ref *rows, size_t n, const char *multi, const char *single,
                          int stride, uint8_t *found) {
  if (n == 0) return FL_OK;
  fl_row_batch b = {0};
  uint16_t *slot = malloc(n * sizeof *slot);
  fl_status st = FL_OK;
  if (!slot || batch_keys(&b, ks, rows, n, slot) != 0)
    st = fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for %zu rows", n);
  else
    st = run_rows(c, eh, &b, rows, n, slot, multi, single, stride, found);
  batch_free(&b);
  free(slot);
  return st;
}

fl_status fl_rows_fetch(fl_cluster *c, const void *eh, const fl_keyspace *ks,
                        const fl_row_ref *rows, size_t n, uint8_t *found) {
  return rows_run(c, eh, ks, rows, n, "MGET", "GET", 1, found);
}

fl_status fl_rows_store(fl_cluster *c, const void *eh, const fl_keyspace *ks,
                        const fl_row_ref *rows, size_t n) {
  int del = n && !rows[0].buf;
  return rows_run(c, eh, ks, rows, n, del ? "DEL" : "MSET", del ? "DEL" : "SET", del ? 1 : 2, NULL);
}
