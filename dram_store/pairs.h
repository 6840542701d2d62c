/* pairs.h: what the NumPy and HugeCTR formats share: a table stored as two
 * files, ids (int64) and vectors (rows in id order), imported atomically with
 * respect to errors and exported as one consistent snapshot. */
#ifndef FL_DRAM_STORE_PAIRS_H
#define FL_DRAM_STORE_PAIRS_H

#include "dram_store/store_impl.h"

/* Checks every id (dense range: FL_ERR_OUT_OF_RANGE naming ids_path and the
 * id's byte offset, ids_off being the offset of ids[0]) before writing any,
 * then upserts the n rows. */
fl_status fl_pairs_import(fl_store *s, fl_table *t, const uint64_t *ids, size_t n,
                          const void *vectors, const char *ids_path, uint64_t ids_off);

/* Writes a file header for `rows` rows of t into buf (at most
 * FL_PAIRS_HEADER_MAX bytes) and returns its length; `vectors` picks the file. */
#define FL_PAIRS_HEADER_MAX 256
typedef size_t (*fl_pairs_header_fn)(const fl_table *t, uint64_t rows, int vectors, char *buf);

/* Writes every row of t: ids (int64) to ids_path, vectors to vectors_path,
 * each after the header `head` makes (head may be NULL: no header). Holds the
 * table's write lock throughout; each file appears only when complete. */
fl_status fl_pairs_export(fl_store *s, fl_table *t, const char *ids_path,
                          const char *vectors_path, fl_pairs_header_fn head);

#endif
