/* distinct.h: distinct ids per table of a whole trace (the first pass of a
 * replay over hashed ids: the store needs a row for every id that appears). */
#ifndef FL_TOOLS_TRACE_DISTINCT_H
#define FL_TOOLS_TRACE_DISTINCT_H

#include "tools/trace/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open-addressing set of uint64 ids (linear probing, load <= 1/2). */
typedef struct fl_idset {
  uint64_t *slots; /* capacity entries; empty slots hold FL_IDSET_EMPTY */
  size_t capacity; /* a power of two */
  size_t count;    /* distinct ids held, including FL_IDSET_EMPTY itself */
  int has_empty;   /* the id equal to FL_IDSET_EMPTY was added */
} fl_idset;
#define FL_IDSET_EMPTY UINT64_MAX

void fl_idset_free(fl_idset *s);
fl_status fl_idset_add(fl_idset *s, uint64_t id);
/* Writes the ids (any order) to out[0 .. count). */
void fl_idset_list(const fl_idset *s, uint64_t *out);

/* Scans `t` from its start to its end (at most max_batches batches, 0 = all):
 * sets[i] (n_tables entries, zeroed by the caller) receives table i's distinct
 * ids; *batches and *max_ids (optional) the batches read and the largest
 * per-table id count of one batch. Rewinds `t` afterwards. */
fl_status fl_trace_distinct(fl_trace *t, uint64_t max_batches, fl_idset *sets, uint64_t *batches,
                            size_t *max_ids);

#ifdef __cplusplus
}
#endif
#endif
