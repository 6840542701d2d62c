/* inval.c: the change channel (see inval.h): publishing, and the subscriber
 * thread with its heartbeat (PING on the subscription, GET of the version
 * key) and lost-message detection. */
#include "cluster/inval.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/meta.h"
#include "common/clock.h"
#include "common/error.h"

/* Versions above `done` seen out of order, at most this many (more: resync). */
#define FL_INVAL_SEEN_MAX 4096

struct fl_inval {
  fl_cluster *c;
  uint64_t self;
  fl_inval_fn fn;
  void *ctx;
  pthread_t thread;
  _Atomic int stop;
  _Atomic int synced;
  _Atomic uint64_t resyncs, applied;
  redisContext *sub;        /* the subscription, NULL while broken */
  uint64_t done;            /* every version <= done is accounted for */
  uint64_t seen[FL_INVAL_SEEN_MAX]; /* versions > done received, unsorted */
  size_t n_seen;
  uint64_t taken;           /* the version key at the last heartbeat */
};

static void channel(const fl_cluster *c, char *out, size_t cap, const char *what) {
  snprintf(out, cap, "%s:%s", fl_cluster_cfg(c)->ns, what);
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); } /* little-endian hosts */
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

fl_status fl_inval_publish(fl_cluster *c, const void *eh, uint64_t sender, uint32_t table,
                           const uint64_t *ids, size_t n) {
  char vkey[96], chan[96];
  channel(c, vkey, sizeof vkey, "version");
  channel(c, chan, sizeof chan, "inval");
  const char *incr[2] = {"INCR", vkey};
  size_t incr_len[2] = {4, strlen(vkey)};
  redisReply *r;
  fl_status st = fl_cluster_command(c, eh, 2, incr, incr_len, &r);
  if (st != FL_OK) return st;
  uint64_t version = (uint64_t)r->integer;
  freeReplyObject(r);
  size_t count = ids ? n : 0, bytes = 24 + 8 * count;
  unsigned char *msg = malloc(bytes);
  if (!msg) return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for a change message");
  put64(msg, version);
  put64(msg + 8, sender);
  uint32_t head[2] = {table, ids ? (uint32_t)n : FL_INVAL_TABLE};
  memcpy(msg + 16, head, 8);
  if (count) memcpy(msg + 24, ids, 8 * count);
  const char *pub[3] = {"PUBLISH", chan, (const char *)msg};
  size_t pub_len[3] = {7, strlen(chan), bytes};
  st = fl_cluster_command(c, eh, 3, pub, pub_len, &r);
  free(msg);
  if (st == FL_OK) freeReplyObject(r);
  return st;
}

/* Everything may be stale: tell the store, forget the versions. */
static void resync(fl_inval *v, uint64_t done) {
  v->fn(v->ctx, FL_INVAL_ALL, NULL, 0);
  atomic_fetch_add(&v->resyncs, 1);
  v->done = done;
  size_t k = 0;
  for (size_t i = 0; i < v->n_seen; i++)
    if (v->seen[i] > done) v->seen[k++] = v->seen[i];
  v->n_seen = k;
}

static void mark_seen(fl_inval *v, uint64_t version) {
  if (version <= v->done) return;
  if (v->n_seen == FL_INVAL_SEEN_MAX) {
    resync(v, version);
    return;
  }
  v->seen[v->n_seen++] = version;
  for (int moved = 1; moved;) {
    moved = 0;
    for (size_t i = 0; i < v->n_seen; i++)
      if (v->seen[i] == v->done + 1) {
        v->done++;
        v->seen[i] = v->seen[--v->n_seen];
        moved = 1;
        break;
      }
  }
}

static void on_message(fl_inval *v, const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING ||
      strcmp(r->element[0]->str, "message"))
    return; /* subscribe confirmations, pongs */
  const redisReply *p = r->element[2];
  if (p->type != REDIS_REPLY_STRING || p->len < 24) return;
  const unsigned char *m = (const unsigned char *)p->str;
  uint32_t head[2];
  memcpy(head, m + 16, 8);
  uint64_t sender = get64(m + 8);
  size_t n = head[1] == FL_INVAL_TABLE ? 0 : head[1];
  if (p->len != 24 + 8 * n) return;
  if (sender != v->self) {
    uint64_t *ids = NULL;
    if (head[1] != FL_INVAL_TABLE) {
      ids = malloc(n ? 8 * n : 8);
      if (ids) memcpy(ids, m + 24, 8 * n);
    }
    if (head[1] != FL_INVAL_TABLE && !ids) v->fn(v->ctx, FL_INVAL_ALL, NULL, 0);
    else v->fn(v->ctx, head[0], ids, n);
    free(ids);
    atomic_fetch_add(&v->applied, 1);
  }
  mark_seen(v, get64(m));
}

static int read_version(fl_inval *v, uint64_t *out) {
  char key[96];
  channel(v->c, key, sizeof key, "version");
  const char *argv[2] = {"GET", key};
  size_t len[2] = {3, strlen(key)};
  redisReply *r;
  if (fl_cluster_command(v->c, v, 2, argv, len, &r) != FL_OK) return -1;
  *out = r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;
  freeReplyObject(r);
  return 0;
}

static void drop(fl_inval *v) {
  if (v->sub) redisFree(v->sub);
  v->sub = NULL;
  if (atomic_exchange(&v->synced, 0)) {
    v->fn(v->ctx, FL_INVAL_ALL, NULL, 0);
    atomic_fetch_add(&v->resyncs, 1);
  }
}

/* Connects and subscribes; then everything cached before is suspect. 0 or -1. */
static int subscribe(fl_inval *v, char *err, size_t cap) {
  redisContext *ctx = fl_cluster_connect_any(v->c, err, cap);
  if (!ctx) return -1;
  char chan[96];
  channel(v->c, chan, sizeof chan, "inval");
  redisReply *r = redisCommand(ctx, "SUBSCRIBE %s", chan);
  uint64_t version;
  if (!r || r->type != REDIS_REPLY_ARRAY || read_version(v, &version) != 0) {
    snprintf(err, cap, "SUBSCRIBE %s: %s", chan, r ? "unexpected reply" : ctx->errstr);
    if (r) freeReplyObject(r);
    redisFree(ctx);
    return -1;
  }
  freeReplyObject(r);
  v->sub = ctx;
  v->n_seen = 0;
  v->done = v->taken = version;
  v->fn(v->ctx, FL_INVAL_ALL, NULL, 0);
  atomic_store(&v->synced, 1);
  return 0;
}

static void *run(void *arg) {
  fl_inval *v = arg;
  const fl_cluster_config *cfg = fl_cluster_cfg(v->c);
  double next_beat = fl_now_ms() + cfg->heartbeat_ms, ping_sent = 0;
  while (!atomic_load(&v->stop)) {
    if (!v->sub) {
      char err[256];
      if (subscribe(v, err, sizeof err) != 0) {
        struct timespec ts = {0, (long)cfg->heartbeat_ms * 1000000L};
        nanosleep(&ts, NULL);
        continue;
      }
      ping_sent = 0;
    }
    double wait = next_beat - fl_now_ms();
    struct pollfd p = {v->sub->fd, POLLIN, 0};
    int ready = poll(&p, 1, wait > 0 ? (int)wait + 1 : 0);
    if (ready > 0 && redisBufferRead(v->sub) != REDIS_OK) {
      drop(v);
      continue;
    }
    void *reply = NULL;
    while (ready > 0 && redisGetReplyFromReader(v->sub, &reply) == REDIS_OK && reply) {
      const redisReply *r = reply;
      if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_STRING &&
          !strcmp(r->element[0]->str, "pong"))
        ping_sent = 0;
      on_message(v, r);
      freeReplyObject(reply);
      reply = NULL;
    }
    if (fl_now_ms() < next_beat) continue;
    next_beat = fl_now_ms() + cfg->heartbeat_ms;
    /* No pong within the I/O timeout: the subscription is dead. */
    if (ping_sent && fl_now_ms() - ping_sent > cfg->io_timeout_ms) {
      drop(v);
      continue;
    }
    if (!ping_sent) {
      int done = 0;
      redisAppendCommand(v->sub, "PING");
      while (!done && redisBufferWrite(v->sub, &done) == REDIS_OK) {}
      if (!done) {
        drop(v);
        continue;
      }
      ping_sent = fl_now_ms();
    }
    /* A version taken a heartbeat ago whose message has not come: lost. */
    uint64_t version;
    if (read_version(v, &version) != 0) continue;
    if (v->taken > v->done) resync(v, v->taken);
    v->taken = version;
  }
  return NULL;
}

fl_status fl_inval_start(fl_cluster *c, const void *eh, uint64_t self, fl_inval_fn fn, void *ctx,
                         fl_inval **out) {
  fl_inval *v = calloc(1, sizeof *v);
  if (!v) return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for the change subscriber");
  v->c = c, v->self = self, v->fn = fn, v->ctx = ctx;
  char err[256];
  if (subscribe(v, err, sizeof err) != 0) {
    free(v);
    return fl_fail(eh, FL_ERR_UNAVAILABLE, "change channel: %s", err);
  }
  if (pthread_create(&v->thread, NULL, run, v) != 0) {
    redisFree(v->sub);
    free(v);
    return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "cannot start the change subscriber thread");
  }
  pthread_setname_np(v->thread, "fl-inval"); /* a name is a label: failing is harmless */
  *out = v;
  return FL_OK;
}

void fl_inval_stop(fl_inval *v) {
  if (!v) return;
  atomic_store(&v->stop, 1);
  pthread_join(v->thread, NULL);
  if (v->sub) redisFree(v->sub);
  free(v);
}

int fl_inval_synced(const fl_inval *v) { return atomic_load(&v->synced); }
uint64_t fl_inval_resyncs(const fl_inval *v) { return atomic_load(&v->resyncs); }
uint64_t fl_inval_applied(const fl_inval *v) { return atomic_load(&v->applied); }
