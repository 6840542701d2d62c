/* stress.h: what the files of the stress run (//tools:stress) share: its
 * limits, the options, the tables and their rows' version words, the
 * verdicts, the run's shared state, the writer and reader threads, and the
 * calls between the files, each under the file that defines it. The rules
 * they keep (the row encoding, the version words, the check) are stated in
 * stress.c's opening comment. */
#ifndef FL_TOOLS_STRESS_H
#define FL_TOOLS_STRESS_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

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
#define UNIFIED_ON 2048u     /* unified index entries when switched on (--unified's default) */

/* ---------------------------------------------------------------- options (stress_opts.c) */

/* How a reader asks. */
typedef enum ask { ASK_QUERY, ASK_PREPARED_RUN, ASK_PREPARED_LAUNCH, N_ASKS } ask;
extern const char *const ask_key[N_ASKS];

typedef struct opts {
  fl_backend backend;
  fl_layout layout;
  double seconds;
  uint32_t readers, writers, tables;
  uint64_t budget_kb, seed, zero_copy_rows;
  uint64_t unified; /* unified entries when switched on; 0: a cache without (32-bit locations) */
  unsigned asks; /* bit per ask used by readers 1, 2, ... in turn */
  const char *json;
} opts;

/* 0 to run, 1 after --help, -1 on a usage error. */
int parse(int argc, char **argv, opts *o);
/* Reader `index`'s way to ask: the asks chosen, in turn. */
ask ask_of(unsigned asks, uint32_t index);

/* ---------------------------------------------------------------- rows (stress_rows.c) */

/* Table i has shape i % 3: the three row kinds the cache serves differently
 * (dense or hashed lookups, slab classes of 64, 48 and 32 bytes). */
typedef struct shape {
  const char *kind;
  uint64_t corpus;
  uint32_t dim;
  fl_dtype dtype;
  fl_id_kind id_kind;
} shape;

extern const shape shapes[3];

/* The version words of one row (stress.c's opening comment). */
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

uint64_t row_id(const table *t, uint64_t k);
/* Row (t, id, version) into out (row_bytes). */
void encode_row(const table *t, uint64_t id, uint64_t version, void *out);
/* The version a row's digits spell, or 0 when they are not integers 0..1023
 * (not a row any writer wrote). */
uint64_t decode_version(const table *t, const void *row);

static inline uint64_t next(uint64_t *rng) { return fl_mix64(*rng += 0x9e3779b97f4a7c15ull); }

/* A row index skewed to the low end: P(k < x * corpus) = x^(1/3), so the
 * hottest 1% of rows draw a fifth of the lookups (and of the writes). */
static inline uint64_t skewed(uint64_t *rng, uint64_t corpus) {
  double u = (double)(next(rng) >> 11) * 0x1p-53;
  return (uint64_t)(u * u * u * (double)corpus);
}

/* ---------------------------------------------------------------- the run's state */

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
  _Atomic uint64_t clock;  /* the last write number taken (stress.c) */
  _Atomic uint64_t *holds; /* per reader: the end it checks against, HOLD_NONE or
                              HOLD_PENDING (stress.c) */
  uint32_t n_holds;
  atomic_int stop;
  _Atomic uint64_t errors; /* failed library or CUDA calls */
  atomic_uint shown;       /* violations described so far */
} stress;

/* ---------------------------------------------------------------- verdicts (stress_judge.c) */

extern const char *const verdict_key[N_VERDICTS];

/* The rule of stress.c's opening comment for one returned row; *got gets the
 * version it spells. scratch holds one row. */
verdict judge(const table *t, uint64_t id, const void *row, const row_state *st,
              uint64_t before, uint64_t end, void *scratch, uint64_t *got);
/* Describes violation v on stderr, while fewer than SHOW_MAX have been. */
void describe(stress *s, const table *t, uint64_t id, verdict v, uint64_t got, uint64_t before,
              uint64_t end);
/* Each: 1 when the call succeeded, else counts it as a violation (describing
 * the first few) and returns 0. */
int cache_ok(stress *s, const char *call, fl_status st);
int store_ok(stress *s, const char *call, fl_status st);
int cuda_ok(stress *s, const char *call, cudaError_t e);

/* ---------------------------------------------------------------- setup (stress_setup.c) */

/* The store, every row of every table at version 1; 0 on failure, said on stderr. */
int make_store(stress *s);
/* A small cache over the store (admission 0.5, --unified entries). */
int make_cache(stress *s);

/* ---------------------------------------------------------------- writers (stress_writer.c) */

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

/* A writer thread: writes its rows until s->stop (writer 0 also maintains). */
void *writer_main(void *arg);

/* ---------------------------------------------------------------- readers (stress_reader.c) */

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

/* Reader `index` (its hold: s->holds[index]), asking the way `how`; a
 * prepared one of MAX_IDS ids per table when `full`. */
int reader_init(stress *s, reader *r, uint32_t index, ask how, int full);
void reader_free(reader *r);
/* A reader thread: draws, asks and checks until s->stop. */
void *reader_main(void *arg);
/* One query of the lanes' ids, and its check under the reader's hold. */
void ask_and_check(reader *r, uint64_t iter);

/* ---------------------------------------------------------------- report (stress_report.c) */

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

/* Rows a tally counts, and its violations. */
uint64_t checked(const tally *t);
uint64_t violations(const tally *t);
/* The summary line and table on stdout. */
void print_report(const stress *s, const totals *x);
/* The summary as JSON into path; 0 when it cannot be written (said on stderr). */
int write_json(const stress *s, const totals *x, const char *path);

#endif
