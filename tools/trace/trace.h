/* trace.h: lookup traces for the replay benchmark. Skip to "interface".
 *
 * A trace is a sequence of batches; a batch holds, per table, the ids looked
 * up in that table (one fl_table_query per table feeds fl_query). Four sources
 * produce batches through one handle, fl_trace:
 * - Criteo Kaggle TSV/CSV as published: one row = one sample, column C<c> ->
 *   table c-1, hex values taken as raw ids (hashed tables), empty fields
 *   skipped, label and dense columns optional and ignored;
 * - the plain text trace: one "table id" lookup per line;
 * - our binary .fltr trace (docs/TRACES.md), written by fl_fltr_writer;
 * - the Zipf generator (fl_zipf_spec), deterministic from its seed.
 *
 * Errors follow the library's convention: calls return fl_status and record a
 * message naming file and line or byte offset, read back with
 * fl_trace_last_error(handle) (NULL handle: the last failed open/create). */
#ifndef FL_TOOLS_TRACE_TRACE_H
#define FL_TOOLS_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "include/fleche.h"
#include "tools/criteo_tables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- interface */

enum { FL_TRACE_MAX_TABLES = 1024 };

typedef struct fl_trace_table {
  char name[16];        /* "C1".."C26" for Criteo columns, "t<i>" otherwise */
  uint64_t cardinality; /* dense: every id is < cardinality; hashed: expected
                           distinct ids, 0 when unknown */
  fl_id_kind id_kind;
} fl_trace_table;

/* Per-table id lists; grown by the readers, reused across batches. */
typedef struct fl_trace_batch {
  uint32_t n_tables;
  uint64_t samples; /* samples in the batch (Criteo rows, generator samples;
                       text traces: lines) */
  size_t *n;        /* n[t]: ids of table t in this batch */
  size_t *cap;      /* cap[t]: capacity of ids[t] */
  uint64_t **ids;   /* ids[t][0 .. n[t]) */
} fl_trace_batch;

fl_status fl_trace_batch_init(fl_trace_batch *b, uint32_t n_tables);
void fl_trace_batch_free(fl_trace_batch *b);
/* Empties every table's list (keeps the memory). */
void fl_trace_batch_clear(fl_trace_batch *b);
/* Makes room for n ids in table t (FL_ERR_OUT_OF_MEMORY). */
fl_status fl_trace_batch_reserve(fl_trace_batch *b, uint32_t t, size_t n);
/* Appends one id to table t, growing the list. */
fl_status fl_trace_batch_push(fl_trace_batch *b, uint32_t t, uint64_t id);
/* Sum of n[t]. */
size_t fl_trace_batch_lookups(const fl_trace_batch *b);

typedef struct fl_trace fl_trace;

typedef enum fl_trace_format {
  FL_TRACE_AUTO = 0, /* by content: .fltr magic, else 2 fields a line = text, else Criteo */
  FL_TRACE_CRITEO = 1,
  FL_TRACE_TEXT = 2,
  FL_TRACE_FLTR = 3
} fl_trace_format;

/* Opens a trace file. batch_size: samples per batch for Criteo (rows), lookups
 * per batch for text traces; ignored for .fltr, whose batches are stored. */
fl_status fl_trace_open(const char *path, fl_trace_format format, uint32_t batch_size,
                        fl_trace **out);
/* Criteo TSV/CSV (delimiter from the first line, a "C1"-style header line is
 * skipped): 26 hashed tables C1..C26. */
fl_status fl_trace_open_criteo(const char *path, uint32_t batch_samples, fl_trace **out);
/* Text trace: "table id" per line (table decimal; id decimal or 0x-hex; '#'
 * comments and blank lines skipped). The open validates the whole file; the
 * table count is the largest table + 1, or n_tables when non-zero (then a
 * larger table is an error). Tables are hashed. */
fl_status fl_trace_open_text(const char *path, uint32_t batch_lookups, uint32_t n_tables,
                             fl_trace **out);
fl_status fl_trace_open_fltr(const char *path, fl_trace **out);

/* The Zipf generator: per batch, per table, `batch_samples` ids whose rank r
 * follows Zipf(exponent) over [0, cardinality) (rank 0 hottest), scattered by
 * the table's fixed bijection keyed by (seed, table). From batch switch_batch
 * on (0: never), ranks follow switch_exponent and the bijection is re-keyed, so
 * the hot set moves (a workload change for the tuner). Tables are dense. */
typedef struct fl_zipf_spec {
  uint32_t n_tables;
  const uint64_t *cardinality; /* n_tables entries, each >= 1; copied */
  double exponent;             /* > 0; 1.05 in the default workload */
  uint64_t seed;
  uint32_t batch_samples;
  uint64_t n_batches;
  uint64_t switch_batch;       /* 0 = no switch */
  double switch_exponent;
  uint32_t threads;            /* generator threads, 0 = all cores */
  int hashed;                  /* 1: raw 64-bit ids (fl_mix64 of the dense id), hashed tables */
} fl_zipf_spec;
fl_status fl_trace_open_zipf(const fl_zipf_spec *spec, fl_trace **out);

void fl_trace_close(fl_trace *t);
const char *fl_trace_last_error(const fl_trace *t);
const char *fl_trace_path(const fl_trace *t); /* "<zipf>" for the generator */
uint32_t fl_trace_num_tables(const fl_trace *t);
const fl_trace_table *fl_trace_tables(const fl_trace *t);
/* Batches in the trace, 0 when unknown before reading it all (Criteo). */
uint64_t fl_trace_num_batches(const fl_trace *t);
/* Reads the next batch into b (re-initialised for this trace's tables when its
 * table count differs). *got = 0 and b empty at the end of the trace. */
fl_status fl_trace_next(fl_trace *t, fl_trace_batch *b, int *got);
/* Back to the first batch. */
fl_status fl_trace_rewind(fl_trace *t);

/* .fltr writer: header at create, one record per batch, the end record at
 * close. Errors name the path; close reports under handle NULL. */
typedef struct fl_fltr_writer fl_fltr_writer;
fl_status fl_fltr_create(const char *path, const fl_trace_table *tables, uint32_t n_tables,
                         fl_fltr_writer **out);
fl_status fl_fltr_write(fl_fltr_writer *w, const fl_trace_batch *b);
/* Writes the end record and closes; frees w whatever the outcome. */
fl_status fl_fltr_close(fl_fltr_writer *w);
const char *fl_fltr_last_error(const fl_fltr_writer *w);
/* Copies every batch of `in` (from its start) to a new .fltr file; *batches
 * (optional) receives the count. Errors are recorded under handle NULL. */
fl_status fl_trace_convert(fl_trace *in, const char *path, uint64_t *batches);

#ifdef __cplusplus
}
#endif
#endif
