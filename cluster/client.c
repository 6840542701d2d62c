/* client.c: the cluster client (see client.h): address parsing, connection
 * pools per node, slot-map refresh and the pipelined, redirect-following,
 * retrying batch runner. Routing itself is slots.c, request encoding
 * resp.c. */
#include "cluster/client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/resp.h"
#include "cluster/slots.h"
#include "common/clock.h"
#include "common/error.h"

/* Idle connections kept per node: one per concurrent caller is typical. */
#define FL_POOL_IDLE 8
/* Bytes read from a socket at once, and fed to the reader at once (job_read). */
#define FL_READ_BYTES 65536
#define FL_FEED_SLICE 1024
/* Backoff between retries of unreachable slots, doubling from MIN to MAX. */
#define FL_BACKOFF_MIN_MS 10
#define FL_BACKOFF_MAX_MS 200

typedef struct fl_pool {
  pthread_mutex_t lock;
  redisContext *idle[FL_POOL_IDLE]; /* connected, no command in flight */
  int n_idle;
} fl_pool;

struct fl_cluster {
  fl_cluster_config cfg;    /* defaults filled in; seed and ns point at the copies below */
  char seed[80], ns[64];
  pthread_rwlock_t map_lock;/* guards map */
  fl_slot_map map;          /* slot -> master, the known nodes */
  fl_pool pools[FL_SLOTS_MAX_NODES];
  _Atomic uint64_t commands; /* commands sent */
  _Atomic uint32_t refresh_from; /* node the next refresh asks first (rotates) */
};

void fl_cluster_config_default(fl_cluster_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->ns = "fl";
  cfg->buckets = 1024;
  cfg->connect_timeout_ms = 500;
  cfg->io_timeout_ms = 1000;
  cfg->retry_ms = 10000;
  cfg->heartbeat_ms = 100;
}

static void sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1e3), (long)(ms * 1e6) % 1000000000L};
  nanosleep(&ts, NULL);
}

static struct timeval tv_ms(uint32_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
  return tv;
}

const fl_cluster_config *fl_cluster_cfg(const fl_cluster *c) { return &c->cfg; }
uint64_t fl_cluster_commands(const fl_cluster *c) { return atomic_load(&c->commands); }

/* hiredis' text for a failed context; a read timeout shows as EAGAIN. */
static const char *conn_err(const redisContext *ctx) {
  if (!ctx) return "no memory for a connection";
  if (strstr(ctx->errstr, "temporarily unavailable") || strstr(ctx->errstr, "timed out"))
    return "timed out";
  if (ctx->err == REDIS_ERR_EOF) return "connection closed by the node";
  return ctx->errstr[0] ? ctx->errstr : "connection error";
}

/* A new connection to node addr with the configured timeouts, or NULL with
 * *err pointing at a static description. */
static redisContext *connect_addr(const fl_cluster *c, const fl_node_addr *a, const char **err) {
  redisContext *ctx = redisConnectWithTimeout(a->host, a->port, tv_ms(c->cfg.connect_timeout_ms));
  if (!ctx || ctx->err) {
    *err = !ctx ? "no memory for a connection"
           : strstr(ctx->errstr, "refused") ? "connection refused"
           : strstr(ctx->errstr, "timed out") || strstr(ctx->errstr, "progress") ? "connect timed out"
           : "cannot connect";
    if (ctx) redisFree(ctx);
    return NULL;
  }
  redisSetTimeout(ctx, tv_ms(c->cfg.io_timeout_ms));
  return ctx;
}

static fl_node_addr node_addr(fl_cluster *c, int node) {
  pthread_rwlock_rdlock(&c->map_lock);
  fl_node_addr a = c->map.nodes[node];
  pthread_rwlock_unlock(&c->map_lock);
  return a;
}

static redisContext *pool_get(fl_cluster *c, int node, const char **err) {
  fl_pool *p = &c->pools[node];
  pthread_mutex_lock(&p->lock);
  redisContext *ctx = p->n_idle ? p->idle[--p->n_idle] : NULL;
  pthread_mutex_unlock(&p->lock);
  if (ctx) return ctx;
  fl_node_addr a = node_addr(c, node);
  return connect_addr(c, &a, err);
}

/* Returns a healthy connection to its pool; a failed one is closed (its
 * stream may hold replies nobody will read). */
static void pool_put(fl_cluster *c, int node, redisContext *ctx) {
  if (!ctx) return;
  fl_pool *p = &c->pools[node];
  pthread_mutex_lock(&p->lock);
  if (!ctx->err && p->n_idle < FL_POOL_IDLE) {
    p->idle[p->n_idle++] = ctx;
    ctx = NULL;
  }
  pthread_mutex_unlock(&p->lock);
  if (ctx) redisFree(ctx);
}

/* Parses CLUSTER SLOTS into the map. 0, or -1 when the reply is malformed. */
static int load_slots(fl_cluster *c, const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY) return -1;
  fl_slot_range *ranges = malloc((r->elements ? r->elements : 1) * sizeof *ranges);
  if (!ranges) return -1;
  size_t n = 0;
  for (size_t i = 0; i < r->elements; i++) {
    const redisReply *e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2 || e->element[2]->element[0]->type != REDIS_REPLY_STRING)
      break;
    const redisReply *m = e->element[2];
    ranges[n++] = (fl_slot_range){(int)e->element[0]->integer, (int)e->element[1]->integer,
                                  m->element[0]->str, m->element[0]->len,
                                  (int)m->element[1]->integer};
  }
  int rc = -1;
  if (n == r->elements) {
    pthread_rwlock_wrlock(&c->map_lock);
    rc = fl_slot_map_set(&c->map, ranges, n);
    pthread_rwlock_unlock(&c->map_lock);
  }
  free(ranges);
  return rc;
}

/* Reloads the slot map from the first node that answers CLUSTER SLOTS,
 * starting at a rotating node so a dead one is not always asked first.
 * 0, or -1 with the last failure in err. */
static int refresh(fl_cluster *c, char *err, size_t cap) {
  pthread_rwlock_rdlock(&c->map_lock);
  int n = c->map.n_nodes;
  pthread_rwlock_unlock(&c->map_lock);
  uint32_t first = atomic_fetch_add(&c->refresh_from, 1);
  snprintf(err, cap, "no node known");
  for (int k = 0; k < n; k++) {
    int node = (int)((first + (uint32_t)k) % (uint32_t)n);
    const char *why = NULL;
    redisContext *ctx = pool_get(c, node, &why);
    fl_node_addr a = node_addr(c, node);
    if (!ctx) {
      snprintf(err, cap, "redis node %s:%d: %s", a.host, a.port, why);
      continue;
    }
    redisReply *r = redisCommand(ctx, "CLUSTER SLOTS");
    atomic_fetch_add(&c->commands, 1);
    int ok = r && load_slots(c, r) == 0;
    if (!ok)
      snprintf(err, cap, "redis node %s:%d: CLUSTER SLOTS: %s", a.host, a.port,
               !r ? conn_err(ctx) : r->type == REDIS_REPLY_ERROR ? r->str : "malformed reply");
    if (r) freeReplyObject(r);
    pool_put(c, node, ctx);
    if (ok) return 0;
  }
  return -1;
}

static int parse_seed(const char *seed, char *host, size_t cap, int *port) {
  if (!strncmp(seed, "redis://", 8)) seed += 8;
  const char *colon = strrchr(seed, ':');
  if (!colon || colon == seed || (size_t)(colon - seed) >= cap) return -1;
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if ((*end && strcmp(end, "/")) || p <= 0 || p > 65535) return -1;
  memcpy(host, seed, (size_t)(colon - seed));
  host[colon - seed] = '\0';
  *port = (int)p;
  return 0;
}

fl_status fl_cluster_open(const fl_cluster_config *cfg, const void *eh, fl_cluster **out) {
  *out = NULL;
  char host[64];
  int port;
  if (!cfg->seed || parse_seed(cfg->seed, host, sizeof host, &port) != 0)
    return fl_fail(eh, FL_ERR_INVALID_ARGUMENT,
                   "cluster seed '%s': expected host:port or redis://host:port",
                   cfg->seed ? cfg->seed : "(null)");
  const char *ns = cfg->ns ? cfg->ns : "fl";
  if (strlen(cfg->seed) >= 80 || strlen(ns) >= 64 || !*ns || strpbrk(ns, "{} \n"))
    return fl_fail(eh, FL_ERR_INVALID_ARGUMENT,
                   "cluster namespace '%s': 1..63 characters without braces or spaces", ns);
  if (cfg->buckets < 1 || cfg->buckets > FL_SLOTS * 4 || !cfg->io_timeout_ms ||
      !cfg->connect_timeout_ms || !cfg->heartbeat_ms)
    return fl_fail(eh, FL_ERR_INVALID_ARGUMENT,
                   "cluster config: buckets must be 1..65536 and the timeouts non-zero");
  fl_cluster *c = calloc(1, sizeof *c);
  if (!c) return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for the cluster client");
  c->cfg = *cfg;
  strcpy(c->seed, cfg->seed);
  strcpy(c->ns, ns);
  c->cfg.seed = c->seed;
  c->cfg.ns = c->ns;
  pthread_rwlock_init(&c->map_lock, NULL);
  for (int i = 0; i < FL_SLOTS_MAX_NODES; i++) pthread_mutex_init(&c->pools[i].lock, NULL);
  fl_slot_map_init(&c->map);
  fl_slot_map_node(&c->map, host, strlen(host), port);
  char err[256];
  if (refresh(c, err, sizeof err) != 0) {
    fl_cluster_close(c);
    return fl_fail(eh, FL_ERR_UNAVAILABLE, "cluster %s: %s", cfg->seed, err);
  }
  *out = c;
  return FL_OK;
}

void fl_cluster_close(fl_cluster *c) {
  if (!c) return;
  for (int i = 0; i < FL_SLOTS_MAX_NODES; i++) {
    for (int k = 0; k < c->pools[i].n_idle; k++) redisFree(c->pools[i].idle[k]);
    pthread_mutex_destroy(&c->pools[i].lock);
  }
  pthread_rwlock_destroy(&c->map_lock);
  free(c);
}

redisContext *fl_cluster_connect_any(fl_cluster *c, char *err, size_t cap) {
  char why[256];
  if (refresh(c, why, sizeof why) != 0) {
    snprintf(err, cap, "%s", why);
    return NULL;
  }
  pthread_rwlock_rdlock(&c->map_lock);
  int node = c->map.master[0];
  pthread_rwlock_unlock(&c->map_lock);
  if (node < 0) {
    snprintf(err, cap, "slot 0 is not served by any node");
    return NULL;
  }
  fl_node_addr a = node_addr(c, node);
  const char *e = NULL;
  redisContext *ctx = connect_addr(c, &a, &e);
  if (!ctx) snprintf(err, cap, "redis node %s:%d: %s", a.host, a.port, e);
  return ctx;
}

/* ------------------------------------------------------------ batches */

/* The commands one node gets in one round, and how far its replies got. */
typedef struct fl_node_job {
  int node;
  fl_rc_cmd **cmds;
  size_t n;
  redisContext *ctx;  /* the connection, NULL once failed */
  size_t next;        /* the command whose reply comes next */
  int asked;          /* its ASKING reply was read */
} fl_node_job;

/* The rest of a job's commands get no reply: the connection failed. */
static void job_fail(fl_node_job *job, const char *why) {
  for (size_t i = job->next; i < job->n; i++) job->cmds[i]->io_err = why;
  job->next = job->n;
  if (job->ctx) redisFree(job->ctx);
  job->ctx = NULL;
}

/* Takes every complete reply the job's reader holds. 0, or -1 on a
 * protocol error (the connection is then failed). */
static int job_take(fl_node_job *job) {
  void *r = NULL;
  int rc = REDIS_OK;
  while (job->next < job->n && (rc = redisReaderGetReply(job->ctx->reader, &r)) == REDIS_OK && r) {
    fl_rc_cmd *m = job->cmds[job->next];
    if (m->ask >= 0 && !job->asked) {
      job->asked = 1; /* ASKING's +OK */
      freeReplyObject(r);
    } else {
      m->raw = r;
      job->next++;
      job->asked = 0;
    }
    r = NULL;
  }
  if (job->next < job->n && rc != REDIS_OK) {
    job_fail(job, "protocol error in a reply");
    return -1;
  }
  return 0;
}

/* Reads what the job's socket holds (poll said it is readable) and parses
 * it. hiredis 0.14's reader moves its unparsed input down after every
 * complete reply once it has consumed 1 KB, so a large read fed whole costs
 * a move of the rest per reply (quadratic in the read); fed in slices of
 * FL_FEED_SLICE bytes, the unparsed input it moves stays under one slice. */
static void job_read(fl_node_job *job) {
  char buf[FL_READ_BYTES];
  ssize_t got = read(job->ctx->fd, buf, sizeof buf);
  if (got <= 0) {
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    job_fail(job, got == 0 ? "connection closed by the node" : "connection error");
    return;
  }
  for (ssize_t at = 0; at < got && job->ctx; at += FL_FEED_SLICE) {
    size_t len = (size_t)(got - at) < FL_FEED_SLICE ? (size_t)(got - at) : FL_FEED_SLICE;
    if (redisReaderFeed(job->ctx->reader, buf + at, len) != REDIS_OK) {
      job_fail(job, "no memory for a reply");
      return;
    }
    if (job_take(job) != 0) return;
  }
}

/* Appends the job's commands (each after ASKING where an ASK is pending)
 * to its connection's output as one pipeline, encoded by resp.c. 0, or -1
 * when out of memory. */
static int job_append(fl_node_job *job) {
  static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
  size_t cap = 0;
  for (size_t i = 0; i < job->n; i++)
    cap += sizeof asking + fl_resp_bound(job->cmds[i]->argc, job->cmds[i]->argvlen);
  char *buf = malloc(cap ? cap : 1);
  if (!buf) return -1;
  size_t len = 0;
  for (size_t i = 0; i < job->n; i++) {
    const fl_rc_cmd *m = job->cmds[i];
    if (m->ask >= 0) memcpy(buf + len, asking, sizeof asking - 1), len += sizeof asking - 1;
    len += fl_resp_put(buf + len, m->argc, m->argv, m->argvlen);
  }
  int rc = redisAppendFormattedCommand(job->ctx, buf, len) == REDIS_OK ? 0 : -1;
  free(buf);
  return rc;
}

/* One round: every node's commands written as one pipeline, then the
 * replies read as they arrive from all nodes at once (poll), on this
 * thread: the nodes work in parallel and no thread spins. A node silent
 * for the I/O timeout fails its remaining commands. */
static void run_round(fl_cluster *c, fl_node_job *jobs, size_t n_jobs) {
  struct pollfd *fds = calloc(n_jobs ? n_jobs : 1, sizeof *fds);
  size_t *of = calloc(n_jobs ? n_jobs : 1, sizeof *of);
  for (size_t j = 0; j < n_jobs; j++) {
    fl_node_job *job = &jobs[j];
    const char *err = "no memory";
    job->next = 0, job->asked = 0;
    job->ctx = fds && of ? pool_get(c, job->node, &err) : NULL;
    if (!job->ctx) {
      job->next = job->n;
      for (size_t i = 0; i < job->n; i++) job->cmds[i]->io_err = err;
      continue;
    }
    if (job_append(job) != 0) {
      job_fail(job, "no memory for a pipeline");
      continue;
    }
    atomic_fetch_add(&c->commands, job->n);
    int done = 0;
    while (!done && redisBufferWrite(job->ctx, &done) == REDIS_OK) {}
    if (!done) job_fail(job, conn_err(job->ctx));
  }
  for (;;) {
    size_t n = 0;
    for (size_t j = 0; j < n_jobs; j++)
      if (jobs[j].ctx && jobs[j].next < jobs[j].n) fds[n] = (struct pollfd){jobs[j].ctx->fd, POLLIN, 0}, of[n++] = j;
    if (!n) break;
    int ready = poll(fds, n, (int)c->cfg.io_timeout_ms);
    for (size_t k = 0; k < n; k++) {
      fl_node_job *job = &jobs[of[k]];
      if (ready == 0) job_fail(job, "timed out");
      else if (fds[k].revents) job_read(job);
    }
  }
  for (size_t j = 0; j < n_jobs; j++) {
    pool_put(c, jobs[j].node, jobs[j].ctx);
    jobs[j].ctx = NULL;
  }
  free(fds);
  free(of);
}

static int starts(const redisReply *r, const char *word) {
  size_t n = strlen(word);
  return r->len >= n && !memcmp(r->str, word, n);
}

/* Human-readable first key of a command, for messages. */
static void cmd_key(const fl_rc_cmd *m, char *out, size_t cap) {
  if (m->argc < 2) {
    snprintf(out, cap, "-");
    return;
  }
  size_t len = m->argvlen[1] < cap - 1 ? m->argvlen[1] : cap - 1;
  memcpy(out, m->argv[1], len);
  out[len] = '\0';
}

fl_status fl_cluster_run(fl_cluster *c, const void *eh, fl_rc_cmd *cmds, size_t n) {
  fl_rc_cmd **pending = malloc((n ? n : 1) * sizeof *pending);
  fl_rc_cmd **by_node = malloc((n ? n : 1) * sizeof *by_node);
  fl_node_job *jobs = calloc(FL_SLOTS_MAX_NODES, sizeof *jobs);
  size_t *count = calloc(FL_SLOTS_MAX_NODES, sizeof *count);
  if (!pending || !by_node || !jobs || !count) {
    free(pending), free(by_node), free(jobs), free(count);
    return fl_fail(eh, FL_ERR_OUT_OF_MEMORY, "no memory for %zu redis commands", n);
  }
  for (size_t i = 0; i < n; i++) {
    cmds[i].reply = NULL, cmds[i].tryagain = 0, cmds[i].ask = -1, cmds[i].raw = NULL;
    pending[i] = &cmds[i];
  }
  size_t n_pending = n;
  double deadline = fl_now_ms() + c->cfg.retry_ms, backoff = FL_BACKOFF_MIN_MS;
  char last[384] = "";
  fl_status st = FL_OK;
  while (n_pending && st == FL_OK) {
    /* Route: every pending command to its node, grouped by node. */
    int stalled = 0;
    memset(count, 0, FL_SLOTS_MAX_NODES * sizeof *count);
    pthread_rwlock_rdlock(&c->map_lock);
    for (size_t i = 0; i < n_pending; i++) {
      fl_rc_cmd *m = pending[i];
      m->node = m->ask >= 0 ? m->ask : c->map.master[m->slot];
      m->raw = NULL;
      m->io_err = NULL;
      if (m->node >= 0) count[m->node]++;
    }
    pthread_rwlock_unlock(&c->map_lock);
    size_t n_jobs = 0, at = 0;
    for (int k = 0; k < FL_SLOTS_MAX_NODES; k++) {
      if (!count[k]) continue;
      jobs[n_jobs] = (fl_node_job){.node = k, .cmds = by_node + at};
      at += count[k];
      count[k] = n_jobs++; /* from here on: the node's job */
    }
    size_t keep = 0;
    for (size_t i = 0; i < n_pending; i++) {
      fl_rc_cmd *m = pending[i];
      if (m->node < 0) {
        /* Unserved slot (a failover in progress): stays pending. */
        snprintf(last, sizeof last, "slot %u is not served by any node", m->slot);
        stalled = 1;
        pending[keep++] = m;
        continue;
      }
      fl_node_job *job = &jobs[count[m->node]];
      job->cmds[job->n++] = m;
    }
    run_round(c, jobs, n_jobs);
    /* Classify the replies. */
    for (size_t j = 0; j < n_jobs; j++) {
      fl_node_addr a = node_addr(c, jobs[j].node);
      for (size_t i = 0; i < jobs[j].n; i++) {
        fl_rc_cmd *m = jobs[j].cmds[i];
        redisReply *r = m->raw;
        m->raw = NULL;
        char key[96];
        if (!r) {
          cmd_key(m, key, sizeof key);
          snprintf(last, sizeof last, "redis node %s:%d (slot %u, key %s): %s", a.host, a.port,
                   m->slot, key, m->io_err ? m->io_err : "no reply");
          stalled = 1;
          m->ask = -1;
          pending[keep++] = m;
          continue;
        }
        if (r->type != REDIS_REPLY_ERROR) {
          m->reply = r;
          continue;
        }
        fl_redirect rd2 = fl_redirect_parse(r->str, r->len);
        if (rd2.kind != FL_REDIRECT_NONE) {
          pthread_rwlock_wrlock(&c->map_lock);
          int node = fl_slot_map_node(&c->map, rd2.host, strlen(rd2.host), rd2.port);
          if (node >= 0 && rd2.kind == FL_REDIRECT_MOVED) c->map.master[rd2.slot] = (int16_t)node;
          pthread_rwlock_unlock(&c->map_lock);
          m->ask = rd2.kind == FL_REDIRECT_ASK ? node : -1;
          if (node < 0) stalled = 1;
          pending[keep++] = m;
        } else if (starts(r, "TRYAGAIN")) {
          m->tryagain = 1;
        } else if (starts(r, "CLUSTERDOWN") || starts(r, "LOADING") || starts(r, "MASTERDOWN")) {
          cmd_key(m, key, sizeof key);
          snprintf(last, sizeof last, "redis node %s:%d (slot %u, key %s): %.*s", a.host, a.port,
                   m->slot, key, (int)r->len, r->str);
          stalled = 1;
          m->ask = -1;
          pending[keep++] = m;
        } else if (st == FL_OK) {
          cmd_key(m, key, sizeof key);
          st = fl_fail(eh, FL_ERR_FORMAT, "redis node %s:%d (slot %u, key %s): %.*s", a.host,
                       a.port, m->slot, key, (int)r->len, r->str);
        }
        freeReplyObject(r);
      }
    }
    n_pending = keep;
    if (!n_pending || st != FL_OK) break;
    if (fl_now_ms() > deadline) {
      st = fl_fail(eh, FL_ERR_UNAVAILABLE, "%s; still failing after retrying for %u ms", last,
                   c->cfg.retry_ms);
      break;
    }
    if (stalled) {
      /* A failover or a restart is under way: wait, then ask where slots are. */
      sleep_ms(backoff < deadline - fl_now_ms() ? backoff : deadline - fl_now_ms());
      backoff = backoff * 2 < FL_BACKOFF_MAX_MS ? backoff * 2 : FL_BACKOFF_MAX_MS;
      char err[256];
      if (refresh(c, err, sizeof err) != 0) snprintf(last, sizeof last, "%s", err);
    }
  }
  if (st != FL_OK)
    for (size_t i = 0; i < n; i++)
      if (cmds[i].reply) freeReplyObject(cmds[i].reply), cmds[i].reply = NULL;
  free(pending), free(by_node), free(jobs), free(count);
  return st;
}
