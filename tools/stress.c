/* stress.c: the concurrency stress run (//tools:stress). It owns the setup (a
 * store of dense fp32, dense fp16 and hashed fp32 tables, a small cache over
 * it), the reader and writer threads, the row encoding, the checking rule
 * below and the report (a summary line, a table, optional JSON).
 *
 * Readers ask in three ways, in turn by their index (--ask picks which):
 * fl_query with fresh batch sizes each time; a prepared query
 * (fl_query_prepare, sizes fixed per reader) run with fl_prepared_run; and
 * one launched with fl_prepared_launch then fl_prepared_wait (CUDA: its
 * outputs in device memory, so the run does not wait for the host's part).
 * Before every query, every buffer its answer passes through (the host
 * buffers and, on CUDA, the device ones) is filled with POISON bytes, so a
 * query that leaves rows unwritten shows them as such rather than passing
 * with an earlier answer.
 * Exit codes: 0 no violation, 1 a violation (or a failed setup), 2 usage error.
 *
 * Row encoding: the row (table t, id, version v) holds v in base 1024 in its
 * first DIGITS elements and, in every later one, an integer in [-1023, 1023]
 * hashed from (t, id, v, element). Small integers are exact in fp16 as in
 * fp32, so any returned row can be checked on its own: decode v, re-encode
 * (t, id, v), compare every byte. A torn row (parts of two writes) or another
 * id's row fails the comparison. Version 0 is never written, so zeros always
 * mean "no row"; POISON is no row's bytes (all-ones elements are NaN).
 *
 * Versions: every write (upsert or remove) of any row takes its number from
 * one clock, s->clock, by fetch-and-add before the store is called (setup
 * writes 1). So numbers order each row's writes, and place every write
 * against a reader's load of the clock. Row k of every table has one writer
 * (k % writers), which keeps three atomics per row:
 *   removing      the number of the last remove announced: stored after the
 *                 number was taken, before the fl_store_remove call;
 *   removing_prev what removing held before that store (the remove before);
 *   done          the last write whose call returned: number << 1, | 1 for a
 *                 remove, stored after the call returned.
 *
 * The rule, for every row a query returns, with `before` the row's done word
 * loaded just before the query was asked and `end` the clock loaded as soon
 * as the answer was complete (the call returned; CUDA: the stream was
 * synchronised):
 * - POISON means the query did not write the row                (unwritten);
 * - a non-zero row encodes (t, id, v) exactly                      (else torn);
 * - v >= before's number: never older than the write complete before the
 *   query started; a remove's number is never a row's, so a row from before
 *   a completed remove is stale too                               (else stale);
 * - v <= end: no write that took its number after the answer     (else future);
 * - zeros only for a hashed id with a remove in progress or complete, and
 *   the id not re-added, at some moment of the query: before is a remove
 *   (complete at the start; the re-add after it had not returned), or the
 *   last remove announced by `end` is numbered after before's write (it was
 *   announced before the answer, and had not completed before the query
 *   started). Dense rows are never zero.                      (else bad zero)
 * A remove announced after the answer never excuses a zero: that is why the
 * rule needs the last remove announced by `end`, not the last one announced
 * by the time the row is checked. It is removing when that is <= end, else
 * removing_prev, because a row gets at most one remove announced after end
 * before its reader is done checking: while it checks, a reader holds
 * (holds[], seq_cst like every atomic here) `end`, and a writer about to
 * announce a remove of a row whose last remove is numbered above some hold
 * waits for that hold to go. The reader stores its hold (first HOLD_PENDING,
 * which every such writer waits for) before it loads end, and the writer
 * loads the holds before it takes the new number: so a writer that went on
 * either saw this check's hold at or above the row's last remove, or loaded
 * the holds before this check began, and then the row's last remove took
 * its number before end was loaded. Either way removing_prev is <= end.
 *
 * A failed library or CUDA call is a violation too. At the end, with every
 * thread stopped and the cache synced, every row of every table is asked for
 * each way (fl_query with host buffers and, on CUDA, with device buffers; a
 * prepared run; a prepared launch), twice so that the second answer comes
 * from the cache where the first was admitted (final_pass): the same rule,
 * with nothing in flight, asks for exactly the last version written (zeros
 * for removed ids). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/half.h"
#include "common/hash.h"
#include "include/fleche.h"

enum {
  MAX_IDS = 512,    /* ids per table in one query, at most */
  WRITE_ROWS = 16,  /* rows per upsert or remove call, at most */
  DIGITS = 4,       /* leading elements holding the version, base 1024: 2^40
                       write numbers, weeks of writes at a million a second */
  FILL_ROWS = 4096, /* rows per upsert while setting up */
  SHOW_MAX = 10,    /* violations described on stderr */
  POISON = 0xff     /* every byte of an output buffer before a query */
};
#define HOLD_NONE UINT64_MAX /* a reader's hold while it checks nothing */
#define HOLD_PENDING 0       /* ... while it loads the clock to check an answer */
#define MAINT_PERIOD_S 0.05  /* writer 0's cache maintenance period */
#define UNIFIED_ON 2048u     /* unified index entries when switched on */

/* ---------------------------------------------------------------- options */

/* How a reader asks. */
typedef enum ask { ASK_QUERY, ASK_PREPARED_RUN, ASK_PREPARED_LAUNCH, N_ASKS } ask;
static const char *const ask_key[N_ASKS] = {"fl_query", "prepared_run", "prepared_launch"};

typedef struct opts {
  fl_backend backend;
  fl_layout layout;
  double seconds;
  uint32_t readers, writers, tables;
  uint64_t budget_kb, seed, zero_copy_rows;
  unsigned asks; /* bit per ask used by readers 1, 2, ... in turn */
  const char *json;
} opts;

static void usage(FILE *f) {
  fputs("usage: stress [options]\n"
        "Readers query a small cache (evictions, admission 0.5, the unified index\n"
        "switched on and off) while writers upsert, remove and re-add rows and clear\n"
        "the cache; every returned row is checked: never torn, another id's or older\n"
        "than the version complete before the query (rule in tools/stress.c).\n\n"
        "  --backend B     auto|host|cuda [auto; env FL_BACKEND]\n"
        "  --layout L      flat|per-table [flat]\n"
        "  --seconds S     run time [10]\n"
        "  --readers N     query threads, each on its own CUDA stream, 1..64 [4]\n"
        "  --ask LIST      how readers ask, in turn (the final pass asks every way):\n"
        "                  fl_query,prepared_run,prepared_launch [all three]\n"
        "  --writers W     store writer threads; writer 0 also clears, resizes and\n"
        "                  syncs the cache every 50 ms [1]\n"
        "  --tables T      tables: dense fp32, dense fp16, hashed fp32, repeated [3]\n"
        "  --budget-kb K   cache budget in KiB [768]\n"
        "  --seed N        ids, writes and admission coin [1]\n"
        "  --zero-copy-rows N  CUDA: batches with at most N distinct dense misses\n"
        "                  read them in place, under the writers [256]\n"
        "  --json FILE     the summary as JSON\n"
        "  -h, --help      this text\n"
        "Exit codes: 0 no violation, 1 violations or a failed setup, 2 usage error.\n",
        f);
}

static int bad(const char *opt, const char *v, const char *want) {
  fprintf(stderr, "error: %s '%s': expected %s (see --help)\n", opt, v ? v : "", want);
  return -1;
}

/* An integer in [lo, hi]. */
static int u64_arg(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = v ? strtoull(v, &end, 0) : 0;
  if (!v || *v == '-' || errno || *end || x < lo || x > hi)
    return bad(opt, v, "an integer in range");
  *out = x;
  return 0;
}

static int u32_arg(const char *opt, const char *v, uint32_t lo, uint32_t hi, uint32_t *out) {
  uint64_t x;
  if (u64_arg(opt, v, lo, hi, &x) < 0) return -1;
  *out = (uint32_t)x;
  return 0;
}

/* A comma-separated list of ask_key names, as a bit set. */
static int ask_arg(const char *opt, const char *v, unsigned *out) {
  *out = 0;
  for (const char *p = v; p && *p;) {
    size_t n = strcspn(p, ",");
    int k = 0;
    while (k < N_ASKS && !(strlen(ask_key[k]) == n && !strncmp(p, ask_key[k], n))) k++;
    if (k == N_ASKS) return bad(opt, v, "fl_query, prepared_run, prepared_launch, comma-separated");
    *out |= 1u << k;
    p += n + (p[n] == ',');
  }
  return *out ? 0 : bad(opt, v, "at least one way to ask");
}

static int option(opts *o, const char *a, const char *v) {
  if (!strcmp(a, "--backend")) {
    if (v && !strcmp(v, "auto")) o->backend = FL_BACKEND_AUTO;
    else if (v && !strcmp(v, "host")) o->backend = FL_BACKEND_HOST;
    else if (v && !strcmp(v, "cuda")) o->backend = FL_BACKEND_CUDA;
    else return bad(a, v, "auto, host or cuda");
    return 0;
  }
  if (!strcmp(a, "--layout")) {
    if (v && !strcmp(v, "flat")) o->layout = FL_LAYOUT_FLAT;
    else if (v && !strcmp(v, "per-table")) o->layout = FL_LAYOUT_PER_TABLE;
    else return bad(a, v, "flat or per-table");
    return 0;
  }
  if (!strcmp(a, "--seconds")) {
    char *end;
    o->seconds = v ? strtod(v, &end) : 0;
    return v && !*end && o->seconds > 0 && o->seconds < 1e6 ? 0 : bad(a, v, "seconds > 0");
  }
  /* At most 64: a CUDA cache refuses more queries in flight (docs/API.md). */
  if (!strcmp(a, "--readers")) return u32_arg(a, v, 1, 64, &o->readers);
  if (!strcmp(a, "--writers")) return u32_arg(a, v, 0, 64, &o->writers);
  if (!strcmp(a, "--tables")) return u32_arg(a, v, 1, 64, &o->tables);
  if (!strcmp(a, "--budget-kb")) return u64_arg(a, v, 1, 1ull << 32, &o->budget_kb);
  if (!strcmp(a, "--seed")) return u64_arg(a, v, 0, UINT64_MAX, &o->seed);
  if (!strcmp(a, "--zero-copy-rows")) return u64_arg(a, v, 0, UINT64_MAX, &o->zero_copy_rows);
  if (!strcmp(a, "--ask")) return ask_arg(a, v, &o->asks);
  if (!strcmp(a, "--json")) return v ? (o->json = v, 0) : bad(a, v, "a file name");
  fprintf(stderr, "error: unknown argument '%s' (see --help)\n", a);
  return -1;
}

/* 0 to run, 1 after --help, -1 on a usage error. */
static int parse(int argc, char **argv, opts *o) {
  *o = (opts){FL_BACKEND_AUTO, FL_LAYOUT_FLAT, 10, 4, 1, 3, 768, 1, 256, (1u << N_ASKS) - 1, NULL};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 1;
    }
    const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
    if (option(o, a, v) < 0) return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- rows */

/* Table i has shape i % 3: the three row kinds the cache serves differently
 * (dense or hashed lookups, slab classes of 64, 48 and 32 bytes). */
typedef struct shape {
  const char *kind;
  uint64_t corpus;
  uint32_t dim;
  fl_dtype dtype;
  fl_id_kind id_kind;
} shape;

static const shape shapes[3] = {
    {"dense fp32", 16384, 16, FL_FP32, FL_IDS_DENSE},
    {"dense fp16", 8192, 24, FL_FP16, FL_IDS_DENSE},
    {"hashed fp32", 8192, 8, FL_FP32, FL_IDS_HASHED},
};

/* The version words of one row (see the top comment). */
typedef struct row_state {
  _Atomic uint64_t removing, removing_prev, done;
} row_state;

typedef struct table {
  uint32_t index;
  const shape *shape;
  char name[16];
  size_t row_bytes;
  row_state *state; /* per row index k (the id is row_id(t, k)) */
} table;

static uint64_t row_id(const table *t, uint64_t k) {
  /* Hashed tables: a bijection of (table, k), so ids are distinct and spread. */
  return t->shape->id_kind == FL_IDS_DENSE ? k : fl_mix64(((uint64_t)t->index << 32) | k);
}

static float element(const table *t, uint64_t id, uint64_t version, uint32_t j) {
  if (j < DIGITS) return (float)((version >> (10 * j)) & 1023u);
  uint64_t h = fl_hash2(fl_hash2(id, version), ((uint64_t)t->index << 32) | j);
  return (float)((int)(h % 2047u) - 1023);
}

static void encode_row(const table *t, uint64_t id, uint64_t version, void *out) {
  for (uint32_t j = 0; j < t->shape->dim; j++) {
    float v = element(t, id, version, j);
    if (t->shape->dtype == FL_FP16)
      ((uint16_t *)out)[j] = fl_f32_to_f16(v);
    else
      ((float *)out)[j] = v;
  }
}

/* The version a row's digits spell, or 0 when they are not integers 0..1023
 * (not a row any writer wrote). */
static uint64_t decode_version(const table *t, const void *row) {
  uint64_t v = 0;
  for (uint32_t j = 0; j < DIGITS; j++) {
    float x = t->shape->dtype == FL_FP16 ? fl_f16_to_f32(((const uint16_t *)row)[j])
                                         : ((const float *)row)[j];
    if (!(x >= 0 && x <= 1023) || x != (float)(uint32_t)x) return 0;
    v |= (uint64_t)x << (10 * j);
  }
  return v;
}

/* 1 when each of the n bytes at p is `byte`. */
static int all_bytes(const unsigned char *p, size_t n, unsigned char byte) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != byte) return 0;
  return 1;
}

typedef enum verdict {
  ROW_OK,    /* a whole row of a version the rule allows */
  ZERO_OK,   /* zeros for an id the query may have seen removed */
  UNWRITTEN, /* the POISON the buffer held before the query */
  TORN,      /* not a whole row of (table, id): torn, another id's, garbage */
  STALE,     /* older than the write complete before the query */
  FUTURE,    /* a version numbered after the answer was complete */
  ZERO_BAD,  /* zeros for a row present throughout */
  N_VERDICTS
} verdict;
#define FIRST_VIOLATION UNWRITTEN

static const char *const verdict_key[N_VERDICTS] = {"rows_ok", "zero_rows", "unwritten", "torn",
                                                   "stale",   "future",    "bad_zero"};

/* The last remove of row st announced by clock value `end`, while a hold at
 * or below end keeps a second one from being announced (top comment). */
static uint64_t last_remove_by(const row_state *st, uint64_t end) {
  uint64_t last = atomic_load(&st->removing);
  return last <= end ? last : atomic_load(&st->removing_prev);
}

/* The rule of the top comment for one returned row; *got gets the version it
 * spells. scratch holds one row. */
static verdict judge(const table *t, uint64_t id, const void *row, const row_state *st,
                     uint64_t before, uint64_t end, void *scratch, uint64_t *got) {
  uint64_t floor = before >> 1;
  *got = 0;
  if (all_bytes(row, t->row_bytes, POISON)) return UNWRITTEN;
  if (all_bytes(row, t->row_bytes, 0))
    return (before & 1) || last_remove_by(st, end) > floor ? ZERO_OK : ZERO_BAD;
  *got = decode_version(t, row);
  encode_row(t, id, *got, scratch);
  if (*got == 0 || memcmp(row, scratch, t->row_bytes) != 0) return TORN;
  if (*got < floor) return STALE;
  return *got > end ? FUTURE : ROW_OK;
}

/* ---------------------------------------------------------------- the run */

typedef struct tally {
  uint64_t n[N_VERDICTS];
} tally;

typedef struct stress {
  opts o;
  uint32_t n_tables;
  table *tables;
  size_t widest;           /* bytes of the widest row */
  fl_store *store;
  fl_cache *cache;
  int cuda;                /* the cache runs on the CUDA backend */
  _Atomic uint64_t clock;  /* the last write number taken (top comment) */
  _Atomic uint64_t *holds; /* per reader: the end it checks against, HOLD_NONE or
                              HOLD_PENDING (top comment) */
  uint32_t n_holds;
  atomic_int stop;
  _Atomic uint64_t errors; /* failed library or CUDA calls */
  atomic_uint shown;       /* violations described so far */
} stress;

static uint64_t next(uint64_t *rng) { return fl_mix64(*rng += 0x9e3779b97f4a7c15ull); }

/* A row index skewed to the low end: P(k < x * corpus) = x^(1/3), so the
 * hottest 1% of rows draw a fifth of the lookups (and of the writes). */
static uint64_t skewed(uint64_t *rng, uint64_t corpus) {
  double u = (double)(next(rng) >> 11) * 0x1p-53;
  return (uint64_t)(u * u * u * (double)corpus);
}

/* Counts a failed call as a violation; describes the first few. */
static void call_failed(stress *s, const char *call, const char *status, const char *msg) {
  atomic_fetch_add(&s->errors, 1);
  if (atomic_fetch_add(&s->shown, 1) < SHOW_MAX)
    fprintf(stderr, "violation: %s failed: %s: %s\n", call, status, msg);
}

static int cache_ok(stress *s, const char *call, fl_status st) {
  if (st != FL_OK) call_failed(s, call, fl_status_name(st), fl_cache_last_error(s->cache));
  return st == FL_OK;
}

static int store_ok(stress *s, const char *call, fl_status st) {
  if (st != FL_OK) call_failed(s, call, fl_status_name(st), fl_store_last_error(s->store));
  return st == FL_OK;
}

static int cuda_ok(stress *s, const char *call, cudaError_t e) {
  if (e != cudaSuccess) call_failed(s, call, cudaGetErrorName(e), cudaGetErrorString(e));
  return e == cudaSuccess;
}

static void describe(stress *s, const table *t, uint64_t id, verdict v, uint64_t got,
                     uint64_t before, uint64_t end) {
  if (atomic_fetch_add(&s->shown, 1) >= SHOW_MAX) return;
  fprintf(stderr, "violation: table %s, id %llu: %s (the row spells version %llu; before the "
          "query, version %llu was complete%s; the answer was complete at clock %llu)\n",
          t->name, (unsigned long long)id, verdict_key[v], (unsigned long long)got,
          (unsigned long long)(before >> 1), before & 1 ? ", a remove" : "",
          (unsigned long long)end);
}

/* ---------------------------------------------------------------- writers */

typedef struct write_counts {
  uint64_t upserts, removes, readds, clears, unified_changes, syncs;
} write_counts;

typedef struct writer {
  pthread_t thread;
  stress *s;
  uint32_t index;
  uint64_t rng;
  uint64_t ids[WRITE_ROWS], versions[WRITE_ROWS];
  unsigned char *vectors;  /* WRITE_ROWS rows of the widest table */
  write_counts n;
} writer;

/* Up to WRITE_ROWS distinct rows of t that writer w owns (k % writers ==
 * w), skewed like the readers' ids so that hot, cached rows change too. */
static size_t pick_rows(writer *w, const table *t, uint64_t *rows) {
  size_t n = 0;
  uint32_t n_writers = w->s->o.writers;
  for (int tries = 0; tries < WRITE_ROWS; tries++) {
    uint64_t k = skewed(&w->rng, t->shape->corpus);
    k = k - k % n_writers + w->index;
    int seen = k >= t->shape->corpus;
    for (size_t i = 0; i < n && !seen; i++) seen = rows[i] == k;
    if (!seen) rows[n++] = k;
  }
  return n;
}

/* Numbers for n writes, the first in w->versions[0]. */
static void take_numbers(writer *w, size_t n) {
  uint64_t first = atomic_fetch_add(&w->s->clock, n) + 1;
  for (size_t i = 0; i < n; i++) w->versions[i] = first + i;
}

static void upsert_rows(writer *w, const table *t, const uint64_t *rows, size_t n) {
  if (n == 0) return;
  take_numbers(w, n);
  for (size_t i = 0; i < n; i++) {
    w->ids[i] = row_id(t, rows[i]);
    encode_row(t, w->ids[i], w->versions[i], w->vectors + i * t->row_bytes);
  }
  fl_status st = fl_store_upsert(w->s->store, t->index, w->ids, n, w->vectors);
  if (!store_ok(w->s, "fl_store_upsert", st)) return;
  for (size_t i = 0; i < n; i++) atomic_store(&t->state[rows[i]].done, w->versions[i] << 1);
  w->n.upserts += n;
}

/* Waits until no reader checks against an end below `last` (a row's last
 * remove), so that announcing the row's next remove keeps removing_prev
 * at or below every held end (top comment). */
static void await_holds(const stress *s, uint64_t last) {
  for (uint32_t j = 0; j < s->n_holds; j++)
    while (atomic_load(&s->holds[j]) < last) sched_yield();
}

static void remove_rows(writer *w, const table *t, const uint64_t *rows, size_t n) {
  if (n == 0) return;
  for (size_t i = 0; i < n; i++) await_holds(w->s, atomic_load(&t->state[rows[i]].removing));
  take_numbers(w, n);
  for (size_t i = 0; i < n; i++) {
    row_state *r = &t->state[rows[i]];
    atomic_store(&r->removing_prev, atomic_load(&r->removing));
    atomic_store(&r->removing, w->versions[i]);
    w->ids[i] = row_id(t, rows[i]);
  }
  fl_status st = fl_store_remove(w->s->store, t->index, w->ids, n);
  if (!store_ok(w->s, "fl_store_remove", st)) return;
  for (size_t i = 0; i < n; i++)
    atomic_store(&t->state[rows[i]].done, w->versions[i] << 1 | 1u);
  w->n.removes += n;
}

/* New versions of a few rows of t; in hashed tables a quarter of the present
 * rows picked are removed instead, and removed rows picked are re-added. */
static void write_table(writer *w, const table *t) {
  uint64_t rows[WRITE_ROWS], ups[WRITE_ROWS], rms[WRITE_ROWS];
  size_t n = pick_rows(w, t, rows), nu = 0, nr = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t done = atomic_load(&t->state[rows[i]].done);
    if (t->shape->id_kind == FL_IDS_HASHED && !(done & 1) && next(&w->rng) % 4 == 0) {
      rms[nr++] = rows[i];
    } else {
      ups[nu++] = rows[i];
      w->n.readds += done & 1;
    }
  }
  upsert_rows(w, t, ups, nu);
  remove_rows(w, t, rms, nr);
}

/* Writer 0, every MAINT_PERIOD_S: the unified index switched between 0 and
 * UNIFIED_ON entries, every fourth time a clear, then a sync (CUDA: waits for
 * the admission rounds in flight). */
static void maintain(writer *w, uint64_t tick) {
  fl_cache *c = w->s->cache;
  cache_ok(w->s, "fl_cache_set_unified_entries",
           fl_cache_set_unified_entries(c, tick % 2 ? 0 : UNIFIED_ON));
  w->n.unified_changes++;
  if (tick % 4 == 3) {
    cache_ok(w->s, "fl_cache_clear", fl_cache_clear(c));
    w->n.clears++;
  }
  cache_ok(w->s, "fl_cache_sync", fl_cache_sync(c));
  w->n.syncs++;
}

static void *writer_main(void *arg) {
  writer *w = arg;
  stress *s = w->s;
  double next_maint = fl_now_s() + MAINT_PERIOD_S;
  for (uint64_t tick = 0; !atomic_load(&s->stop);) {
    write_table(w, &s->tables[next(&w->rng) % s->n_tables]);
    if (w->index == 0 && fl_now_s() >= next_maint) {
      maintain(w, tick++);
      next_maint += MAINT_PERIOD_S;
    }
  }
  return NULL;
}

/* ---------------------------------------------------------------- readers */

/* One table's part of a reader's queries. */
typedef struct lane {
  size_t n;                  /* ids in the current query */
  uint64_t rows[MAX_IDS];    /* their row indexes */
  uint64_t ids[MAX_IDS];
  uint64_t before[MAX_IDS];  /* their done words before the query */
  unsigned char *out;        /* MAX_IDS answers, host memory */
  uint64_t *ids_dev;         /* CUDA: device ids */
  void *out_dev;             /* CUDA: device answers, in the reader's out_dev */
} lane;

typedef struct reader {
  pthread_t thread;
  stress *s;
  ask how;
  fl_prepared *prepared;   /* ASK_PREPARED_*: over the lanes' buffers, sizes fixed */
  uint64_t rng;
  void *stream;            /* CUDA: a cudaStream_t of its own; host backend: NULL */
  lane *lanes;             /* per table */
  fl_table_query *q;       /* per table */
  void *out_dev;           /* CUDA: every lane's device answers, one block to poison */
  size_t out_dev_bytes;
  _Atomic uint64_t *hold;  /* its entry of s->holds */
  unsigned char *scratch;  /* one re-encoded row */
  tally *tally;            /* per table */
  uint64_t queries;
} reader;

/* Per table 0..MAX_IDS skewed ids (a prepared query: as many as it was
 * prepared for), one in eight a repeat of the one before. */
static void draw(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    const table *tb = &r->s->tables[t];
    if (!r->prepared) l->n = next(&r->rng) % (MAX_IDS + 1);
    for (size_t i = 0; i < l->n; i++) {
      int repeat = i && next(&r->rng) % 8 == 0;
      l->rows[i] = repeat ? l->rows[i - 1] : skewed(&r->rng, tb->shape->corpus);
      l->ids[i] = row_id(tb, l->rows[i]);
    }
  }
}

static void snapshot(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    for (size_t i = 0; i < l->n; i++)
      l->before[i] = atomic_load(&r->s->tables[t].state[l->rows[i]].done);
  }
}

/* POISON into every buffer the answer passes through: the lanes' host
 * buffers (the answer, or on CUDA its download) and, when the query writes
 * device memory, the device block, on the reader's stream ahead of the
 * query's own work. */
static int poison(reader *r, int device) {
  for (uint32_t t = 0; t < r->s->n_tables; t++)
    memset(r->lanes[t].out, POISON, r->lanes[t].n * r->s->tables[t].row_bytes);
  return !device || cuda_ok(r->s, "cudaMemsetAsync of poison",
                            cudaMemsetAsync(r->out_dev, POISON, r->out_dev_bytes,
                                            (cudaStream_t)r->stream));
}

/* The drawn ids into the device buffers, on the reader's stream (CUDA). */
static int upload_ids(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    if (l->n && !cuda_ok(r->s, "cudaMemcpyAsync of ids",
                         cudaMemcpyAsync(l->ids_dev, l->ids, l->n * sizeof *l->ids,
                                         cudaMemcpyHostToDevice, (cudaStream_t)r->stream)))
      return 0;
  }
  return 1;
}

static int from_device(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    if (l->n && !cuda_ok(r->s, "cudaMemcpyAsync of answers",
                         cudaMemcpyAsync(l->out, l->out_dev, l->n * r->s->tables[t].row_bytes,
                                         cudaMemcpyDeviceToHost, (cudaStream_t)r->stream)))
      return 0;
  }
  return 1;
}

/* Asks for the drawn ids the reader's way; the answers end up in the
 * lanes' host buffers, complete. CUDA: fl_query's odd iterations pass device
 * ids and outputs, its even ones host memory (pageable, staged by the
 * library); a prepared query was prepared over the device buffers. */
static int query(reader *r, uint64_t iter) {
  stress *s = r->s;
  cudaStream_t stream = (cudaStream_t)r->stream;
  int device = s->cuda && (r->prepared || (iter & 1));
  for (uint32_t t = 0; !r->prepared && t < s->n_tables; t++) {
    lane *l = &r->lanes[t];
    r->q[t] = device ? (fl_table_query){t, l->ids_dev, l->n, l->out_dev}
                     : (fl_table_query){t, l->ids, l->n, l->out};
  }
  if (!poison(r, device) || (device && !upload_ids(r))) return 0;
  snapshot(r);
  int ok;
  if (r->how == ASK_QUERY) {
    ok = cache_ok(s, "fl_query", fl_query(s->cache, r->q, s->n_tables, stream));
  } else if (r->how == ASK_PREPARED_LAUNCH) {
    ok = cache_ok(s, "fl_prepared_launch", fl_prepared_launch(r->prepared, stream)) &&
         cache_ok(s, "fl_prepared_wait", fl_prepared_wait(r->prepared));
  } else {
    ok = cache_ok(s, "fl_prepared_run", fl_prepared_run(r->prepared, stream));
  }
  if (ok && device) ok = from_device(r);
  if (s->cuda) ok &= cuda_ok(s, "cudaStreamSynchronize", cudaStreamSynchronize(stream));
  return ok;
}

static void check(reader *r, uint64_t end) {
  stress *s = r->s;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    const lane *l = &r->lanes[t];
    const table *tb = &s->tables[t];
    for (size_t i = 0; i < l->n; i++) {
      uint64_t got;
      verdict v = judge(tb, l->ids[i], l->out + i * tb->row_bytes, &tb->state[l->rows[i]],
                        l->before[i], end, r->scratch, &got);
      r->tally[t].n[v]++;
      if (v >= FIRST_VIOLATION) describe(s, tb, l->ids[i], v, got, l->before[i], end);
    }
  }
}

/* One query of the lanes' ids, and its check under the reader's hold (the
 * hold taken before end is loaded: top comment). */
static void ask_and_check(reader *r, uint64_t iter) {
  if (!query(r, iter)) return;
  atomic_store(r->hold, HOLD_PENDING);
  uint64_t end = atomic_load(&r->s->clock);
  atomic_store(r->hold, end);
  check(r, end);
  atomic_store(r->hold, HOLD_NONE);
}

static void *reader_main(void *arg) {
  reader *r = arg;
  for (uint64_t iter = 0; !atomic_load(&r->s->stop); iter++) {
    draw(r);
    ask_and_check(r, iter);
    r->queries++;
  }
  return NULL;
}

static void reader_free(reader *r) {
  fl_prepared_destroy(r->prepared);
  for (uint32_t t = 0; r->lanes && t < r->s->n_tables; t++) {
    free(r->lanes[t].out);
    if (r->s->cuda) cudaFree(r->lanes[t].ids_dev);
  }
  if (r->s->cuda) cudaFree(r->out_dev);
  if (r->stream) cudaStreamDestroy((cudaStream_t)r->stream);
  free(r->lanes);
  free(r->q);
  free(r->scratch);
  free(r->tally);
}

/* A prepared query over the lanes' buffers (CUDA: the device ones), each
 * table's size MAX_IDS when `full`, else drawn once. */
static int reader_prepare(reader *r, int full) {
  stress *s = r->s;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    lane *l = &r->lanes[t];
    l->n = full ? MAX_IDS : next(&r->rng) % (MAX_IDS + 1);
    r->q[t] = (fl_table_query){t, s->cuda ? l->ids_dev : l->ids, l->n,
                               s->cuda ? l->out_dev : (void *)l->out};
  }
  return cache_ok(s, "fl_query_prepare",
                  fl_query_prepare(s->cache, r->q, s->n_tables, &r->prepared));
}

/* Reader `index`'s way to ask: the asks chosen, in turn. */
static ask ask_of(unsigned asks, uint32_t index) {
  unsigned n = (unsigned)__builtin_popcount(asks), k = index % n;
  for (int a = 0;; a++)
    if (asks >> a & 1u && k-- == 0) return (ask)a;
}

/* Reader `index` (its hold: s->holds[index]), asking the way `how`; a
 * prepared one of MAX_IDS ids per table when `full`. */
static int reader_init(stress *s, reader *r, uint32_t index, ask how, int full) {
  *r = (reader){.s = s, .how = how, .rng = fl_hash2(s->o.seed, index), .hold = &s->holds[index]};
  r->lanes = calloc(s->n_tables, sizeof *r->lanes);
  r->q = calloc(s->n_tables, sizeof *r->q);
  r->scratch = malloc(s->widest);
  r->tally = calloc(s->n_tables, sizeof *r->tally);
  int ok = r->lanes && r->q && r->scratch && r->tally;
  for (uint32_t t = 0; ok && t < s->n_tables; t++) {
    ok = (r->lanes[t].out = malloc(MAX_IDS * s->tables[t].row_bytes)) != NULL;
    r->out_dev_bytes += MAX_IDS * s->tables[t].row_bytes;
  }
  if (!ok) {
    fprintf(stderr, "error: out of host memory for reader %u\n", index);
    return 0;
  }
  if (s->cuda) {
    cudaStream_t stream;
    if (!cuda_ok(s, "cudaStreamCreate", cudaStreamCreate(&stream))) return 0;
    r->stream = stream;
    if (!cuda_ok(s, "cudaMalloc", cudaMalloc(&r->out_dev, r->out_dev_bytes))) return 0;
  }
  size_t at = 0;
  for (uint32_t t = 0; ok && s->cuda && t < s->n_tables; t++) {
    lane *l = &r->lanes[t];
    l->out_dev = (unsigned char *)r->out_dev + at;
    at += MAX_IDS * s->tables[t].row_bytes;
    ok = cuda_ok(s, "cudaMalloc", cudaMalloc((void **)&l->ids_dev, MAX_IDS * sizeof *l->ids_dev));
  }
  return ok && (r->how == ASK_QUERY || reader_prepare(r, full));
}

/* ---------------------------------------------------------------- setup */

/* Every row of table t at version 1 (hashed tables: every id present). */
static int fill(stress *s, table *t) {
  uint64_t *ids = malloc(FILL_ROWS * sizeof *ids);
  unsigned char *rows = malloc(FILL_ROWS * t->row_bytes);
  int ok = ids && rows;
  for (uint64_t k0 = 0; ok && k0 < t->shape->corpus; k0 += FILL_ROWS) {
    size_t n = t->shape->corpus - k0 < FILL_ROWS ? (size_t)(t->shape->corpus - k0) : FILL_ROWS;
    for (size_t i = 0; i < n; i++) {
      ids[i] = row_id(t, k0 + i);
      encode_row(t, ids[i], 1, rows + i * t->row_bytes);
      atomic_init(&t->state[k0 + i].removing, 0);
      atomic_init(&t->state[k0 + i].removing_prev, 0);
      atomic_init(&t->state[k0 + i].done, 1u << 1);
    }
    ok = store_ok(s, "fl_store_upsert", fl_store_upsert(s->store, t->index, ids, n, rows));
  }
  free(ids);
  free(rows);
  return ok;
}

static int make_store(stress *s) {
  fl_table_desc *d = calloc(s->n_tables, sizeof *d);
  s->tables = calloc(s->n_tables, sizeof *s->tables);
  int ok = d && s->tables;
  for (uint32_t i = 0; ok && i < s->n_tables; i++) {
    table *t = &s->tables[i];
    t->index = i;
    t->shape = &shapes[i % 3];
    snprintf(t->name, sizeof t->name, "t%u", i);
    t->row_bytes = t->shape->dim * (t->shape->dtype == FL_FP16 ? 2u : 4u);
    if (t->row_bytes > s->widest) s->widest = t->row_bytes;
    ok = (t->state = calloc(t->shape->corpus, sizeof *t->state)) != NULL;
    d[i] = (fl_table_desc){t->name, t->shape->corpus, t->shape->dim, t->shape->dtype,
                           t->shape->id_kind};
  }
  if (!ok) fprintf(stderr, "error: out of host memory for %u tables\n", s->n_tables);
  fl_status st = ok ? fl_store_create(d, s->n_tables, 0, &s->store) : FL_ERR_OUT_OF_MEMORY;
  if (ok && st != FL_OK)
    fprintf(stderr, "error: fl_store_create: %s: %s\n", fl_status_name(st),
            fl_store_last_error(NULL));
  ok = ok && st == FL_OK;
  for (uint32_t i = 0; ok && i < s->n_tables; i++) ok = fill(s, &s->tables[i]);
  atomic_store(&s->clock, 1); /* the number fill wrote */
  free(d);
  return ok;
}

static int make_cache(stress *s) {
  fl_config cfg;
  fl_config_default(&cfg);
  cfg.backend = s->o.backend;
  cfg.layout = s->o.layout;
  cfg.budget_bytes = s->o.budget_kb << 10;
  cfg.admit_probability = 0.5;
  cfg.unified_entries = UNIFIED_ON;
  cfg.seed = s->o.seed;
  cfg.zero_copy_rows = s->o.zero_copy_rows;
  fl_status st = fl_cache_create(s->store, &cfg, &s->cache);
  if (st != FL_OK) {
    fprintf(stderr, "error: fl_cache_create: %s: %s\n", fl_status_name(st),
            fl_cache_last_error(NULL));
    return 0;
  }
  s->cuda = fl_cache_backend(s->cache) == FL_BACKEND_CUDA;
  return 1;
}

/* ---------------------------------------------------------------- report */

typedef struct totals {
  double seconds;
  uint64_t queries, rows, violations;
  uint64_t asked[N_ASKS]; /* the queries, by how they were asked */
  uint64_t failed_calls, final_rows, final_violations;
  uint32_t final_ways;    /* ways the final pass asked every row */
  tally *per_table;
  write_counts writes; /* all writers' */
  fl_cache_stats cache;
} totals;

static uint64_t checked(const tally *t) {
  uint64_t n = 0;
  for (int v = 0; v < N_VERDICTS; v++) n += t->n[v];
  return n;
}

static uint64_t violations(const tally *t) {
  uint64_t n = 0;
  for (int v = FIRST_VIOLATION; v < N_VERDICTS; v++) n += t->n[v];
  return n;
}

static void print_report(const stress *s, const totals *x) {
  printf("stress: backend %s, %s layout, %.1f s, %llu queries, %llu rows checked, %llu violations\n",
         s->cuda ? "cuda" : "host", s->o.layout == FL_LAYOUT_FLAT ? "flat" : "per-table", x->seconds, (unsigned long long)x->queries,
         (unsigned long long)x->rows, (unsigned long long)x->violations);
  printf("%-6s %-12s %14s %10s %9s %6s %6s %7s %9s\n", "table", "kind", "rows checked",
         "zero rows", "unwritten", "torn", "stale", "future", "bad zero");
  for (uint32_t t = 0; t < s->n_tables; t++) {
    const tally *y = &x->per_table[t];
    printf("%-6s %-12s %14llu %10llu %9llu %6llu %6llu %7llu %9llu\n", s->tables[t].name,
           s->tables[t].shape->kind, (unsigned long long)checked(y),
           (unsigned long long)y->n[ZERO_OK], (unsigned long long)y->n[UNWRITTEN],
           (unsigned long long)y->n[TORN], (unsigned long long)y->n[STALE],
           (unsigned long long)y->n[FUTURE], (unsigned long long)y->n[ZERO_BAD]);
  }
  printf("queries by %s %llu, by %s %llu, by %s %llu\n", ask_key[ASK_QUERY],
         (unsigned long long)x->asked[ASK_QUERY], ask_key[ASK_PREPARED_RUN],
         (unsigned long long)x->asked[ASK_PREPARED_RUN], ask_key[ASK_PREPARED_LAUNCH],
         (unsigned long long)x->asked[ASK_PREPARED_LAUNCH]);
  printf("failed calls %llu; final pass, %u ways of asking: %llu rows, %llu violations\n",
         (unsigned long long)x->failed_calls, x->final_ways, (unsigned long long)x->final_rows,
         (unsigned long long)x->final_violations);
  printf("readers %u, writers %u: %llu rows upserted, %llu removed, %llu re-added; %llu clears, "
         "%llu unified-index changes, %llu syncs\n",
         s->o.readers, s->o.writers, (unsigned long long)x->writes.upserts,
         (unsigned long long)x->writes.removes, (unsigned long long)x->writes.readds,
         (unsigned long long)x->writes.clears, (unsigned long long)x->writes.unified_changes,
         (unsigned long long)x->writes.syncs);
  const fl_cache_stats *c = &x->cache;
  printf("cache: %llu lookups, %llu hits, %llu unified-index hits, %llu misses, %llu admissions, "
         "%llu evictions, %llu invalidations\n",
         (unsigned long long)c->lookups, (unsigned long long)c->hits,
         (unsigned long long)c->dram_hits, (unsigned long long)c->misses,
         (unsigned long long)c->admissions, (unsigned long long)c->evictions,
         (unsigned long long)c->invalidations);
}

static int write_json(const stress *s, const totals *x, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: %s: cannot create\n", path);
    return 0;
  }
  const fl_cache_stats *c = &x->cache;
  fprintf(f, "{\n  \"backend\": \"%s\",\n  \"layout\": \"%s\",\n  \"seconds\": %.3f,\n  \"readers\": %u,\n"
          "  \"writers\": %u,\n  \"queries\": %llu,\n  \"rows_checked\": %llu,\n"
          "  \"violations\": %llu,\n  \"failed_calls\": %llu,\n  \"final_rows\": %llu,\n"
          "  \"final_violations\": %llu,\n  \"final_ways\": %u,\n",
          s->cuda ? "cuda" : "host", s->o.layout == FL_LAYOUT_FLAT ? "flat" : "per-table",
          x->seconds, s->o.readers, s->o.writers,
          (unsigned long long)x->queries, (unsigned long long)x->rows,
          (unsigned long long)x->violations, (unsigned long long)x->failed_calls,
          (unsigned long long)x->final_rows, (unsigned long long)x->final_violations,
          x->final_ways);
  fprintf(f, "  \"asked\": {");
  for (int a = 0; a < N_ASKS; a++)
    fprintf(f, "%s\"%s\": %llu", a ? ", " : "", ask_key[a], (unsigned long long)x->asked[a]);
  fprintf(f, "},\n  \"tables\": [");
  for (uint32_t t = 0; t < s->n_tables; t++) {
    fprintf(f, "%s\n    {\"table\": \"%s\", \"kind\": \"%s\", \"rows_checked\": %llu", t ? "," : "",
            s->tables[t].name, s->tables[t].shape->kind,
            (unsigned long long)checked(&x->per_table[t]));
    for (int v = ZERO_OK; v < N_VERDICTS; v++)
      fprintf(f, ", \"%s\": %llu", verdict_key[v], (unsigned long long)x->per_table[t].n[v]);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"writes\": {\"upserted\": %llu, \"removed\": %llu, \"readded\": %llu, "
          "\"clears\": %llu, \"unified_changes\": %llu, \"syncs\": %llu},\n"
          "  \"cache\": {\"lookups\": %llu, \"hits\": %llu, \"dram_hits\": %llu, \"misses\": %llu, "
          "\"admissions\": %llu, \"evictions\": %llu, \"invalidations\": %llu}\n}\n",
          (unsigned long long)x->writes.upserts, (unsigned long long)x->writes.removes,
          (unsigned long long)x->writes.readds, (unsigned long long)x->writes.clears,
          (unsigned long long)x->writes.unified_changes, (unsigned long long)x->writes.syncs,
          (unsigned long long)c->lookups, (unsigned long long)c->hits,
          (unsigned long long)c->dram_hits, (unsigned long long)c->misses,
          (unsigned long long)c->admissions, (unsigned long long)c->evictions,
          (unsigned long long)c->invalidations);
  if (fclose(f) != 0) {
    fprintf(stderr, "error: %s: write failed\n", path);
    return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- main */

/* Every row of every table, after the run, through reader r (made with
 * MAX_IDS ids per table) at iteration `iter` of its way to ask: each batch
 * takes the next MAX_IDS rows of every table, a table that has run out
 * starting over (every corpus holds MAX_IDS rows or more). Each batch is
 * asked twice, with a sync between, so that the second reads from the cache
 * the rows the first admitted: asked once, in order, every row would be a
 * miss (evicted before it comes round again). Nothing is in flight, so the
 * rule asks for exactly the last version written. */
static void final_pass(stress *s, reader *r, uint64_t iter) {
  uint64_t most = 0;
  for (uint32_t t = 0; t < s->n_tables; t++)
    if (s->tables[t].shape->corpus > most) most = s->tables[t].shape->corpus;
  for (uint64_t k0 = 0; k0 < most; k0 += MAX_IDS) {
    for (uint32_t t = 0; t < s->n_tables; t++) {
      lane *l = &r->lanes[t];
      l->n = MAX_IDS;
      for (size_t i = 0; i < l->n; i++) {
        l->rows[i] = (k0 + i) % s->tables[t].shape->corpus;
        l->ids[i] = row_id(&s->tables[t], l->rows[i]);
      }
    }
    ask_and_check(r, iter);
    cache_ok(s, "fl_cache_sync", fl_cache_sync(s->cache));
    ask_and_check(r, iter);
  }
}

static void sleep_s(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Starts the threads, lets them run for the configured time, stops them. */
static int run(stress *s, reader *readers, writer *writers, double *seconds) {
  uint32_t nr = 0, nw = 0;
  int ok = 1;
  double t0 = fl_now_s();
  /* nr and nw count the threads started, to be joined. */
  for (; ok && nr < s->o.readers; nr += ok)
    ok = pthread_create(&readers[nr].thread, NULL, reader_main, &readers[nr]) == 0;
  for (; ok && nw < s->o.writers; nw += ok)
    ok = pthread_create(&writers[nw].thread, NULL, writer_main, &writers[nw]) == 0;
  if (ok) sleep_s(s->o.seconds);
  else fprintf(stderr, "error: cannot start a thread\n");
  atomic_store(&s->stop, 1);
  for (uint32_t i = 0; i < nr; i++) pthread_join(readers[i].thread, NULL);
  for (uint32_t i = 0; i < nw; i++) pthread_join(writers[i].thread, NULL);
  *seconds = fl_now_s() - t0;
  return ok;
}

static void add_up(const stress *s, const reader *readers, const writer *writers, totals *x) {
  for (uint32_t i = 0; i < s->o.readers; i++) {
    x->queries += readers[i].queries;
    x->asked[readers[i].how] += readers[i].queries;
    for (uint32_t t = 0; t < s->n_tables; t++)
      for (int v = 0; v < N_VERDICTS; v++) x->per_table[t].n[v] += readers[i].tally[t].n[v];
  }
  for (uint32_t i = 0; i < s->o.writers; i++) {
    const write_counts *n = &writers[i].n;
    x->writes.upserts += n->upserts;
    x->writes.removes += n->removes;
    x->writes.readds += n->readds;
    x->writes.clears += n->clears;
    x->writes.unified_changes += n->unified_changes;
    x->writes.syncs += n->syncs;
  }
}

/* After a sync, the final pass every way: each ask (fl_query twice on
 * CUDA: its even iterations pass host buffers, its odd ones device buffers),
 * through a reader made for it (hold: reader 0's, idle now). Counted into x
 * apart and in the totals; 0 when a final reader cannot be set up. */
static int finish(stress *s, totals *x) {
  cache_ok(s, "fl_cache_sync", fl_cache_sync(s->cache));
  int ok = 1;
  for (int a = 0; ok && a < N_ASKS; a++) {
    reader r;
    ok = reader_init(s, &r, 0, (ask)a, 1);
    for (uint64_t iter = 0; ok && iter < (a == ASK_QUERY && s->cuda ? 2u : 1u); iter++) {
      final_pass(s, &r, iter);
      x->final_ways++;
    }
    for (uint32_t t = 0; ok && t < s->n_tables; t++) {
      x->final_rows += checked(&r.tally[t]);
      x->final_violations += violations(&r.tally[t]);
      for (int v = 0; v < N_VERDICTS; v++) x->per_table[t].n[v] += r.tally[t].n[v];
    }
    if (r.s) reader_free(&r);
  }
  for (uint32_t t = 0; t < s->n_tables; t++) {
    x->rows += checked(&x->per_table[t]);
    x->violations += violations(&x->per_table[t]);
  }
  x->failed_calls = atomic_load(&s->errors);
  x->violations += x->failed_calls;
  fl_cache_stats_get(s->cache, &x->cache, NULL, 0);
  return ok;
}

int main(int argc, char **argv) {
  stress s = {0};
  int p = parse(argc, argv, &s.o);
  if (p != 0) return p > 0 ? 0 : 2;
  s.n_tables = s.o.tables;
  reader *readers = calloc(s.o.readers, sizeof *readers);
  writer *writers = calloc(s.o.writers ? s.o.writers : 1, sizeof *writers);
  totals x = {.per_table = NULL};
  s.n_holds = s.o.readers;
  s.holds = calloc(s.n_holds, sizeof *s.holds);
  for (uint32_t i = 0; s.holds && i < s.n_holds; i++) atomic_init(&s.holds[i], HOLD_NONE);
  int ok = readers && writers && s.holds && make_store(&s) && make_cache(&s);
  ok = ok && (x.per_table = calloc(s.n_tables, sizeof *x.per_table)) != NULL;
  for (uint32_t i = 0; ok && i < s.o.readers; i++)
    ok = reader_init(&s, &readers[i], i, ask_of(s.o.asks, i), 0);
  for (uint32_t i = 0; ok && i < s.o.writers; i++) {
    writers[i] = (writer){.s = &s, .index = i, .rng = fl_hash2(s.o.seed + 1, ~(uint64_t)i)};
    ok = (writers[i].vectors = malloc(WRITE_ROWS * s.widest)) != NULL;
  }
  ok = ok && run(&s, readers, writers, &x.seconds);
  if (ok) {
    add_up(&s, readers, writers, &x);
    ok = finish(&s, &x);
  }
  if (ok) {
    print_report(&s, &x);
    if (s.o.json) ok = write_json(&s, &x, s.o.json);
  }
  for (uint32_t i = 0; readers && i < s.o.readers; i++)
    if (readers[i].s) reader_free(&readers[i]);
  for (uint32_t i = 0; writers && i < s.o.writers; i++) free(writers[i].vectors);
  fl_cache_destroy(s.cache);
  fl_store_destroy(s.store);
  for (uint32_t t = 0; s.tables && t < s.n_tables; t++) free(s.tables[t].state);
  free(s.tables);
  free(readers);
  free(writers);
  free(s.holds);
  free(x.per_table);
  return !ok || x.violations ? 1 : 0;
}
