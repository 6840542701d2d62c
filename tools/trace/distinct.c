/* distinct.c: the id set and the distinct-ids pass over a trace. */
#include "tools/trace/distinct.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hash.h"

void fl_idset_free(fl_idset *s) {
  free(s->slots);
  memset(s, 0, sizeof *s);
}

static void insert(uint64_t *slots, size_t cap, uint64_t id) {
  for (size_t i = fl_mix64(id) & (cap - 1);; i = (i + 1) & (cap - 1))
    if (slots[i] == FL_IDSET_EMPTY || slots[i] == id) {
      slots[i] = id;
      return;
    }
}

static fl_status grow(fl_idset *s) {
  size_t cap = s->capacity ? 2 * s->capacity : 1024;
  uint64_t *p = malloc(cap * sizeof *p);
  if (!p) return FL_ERR_OUT_OF_MEMORY;
  memset(p, 0xff, cap * sizeof *p); /* every slot FL_IDSET_EMPTY */
  for (size_t i = 0; i < s->capacity; i++)
    if (s->slots[i] != FL_IDSET_EMPTY) insert(p, cap, s->slots[i]);
  free(s->slots);
  s->slots = p;
  s->capacity = cap;
  return FL_OK;
}

fl_status fl_idset_add(fl_idset *s, uint64_t id) {
  if (id == FL_IDSET_EMPTY) {
    s->count += !s->has_empty;
    s->has_empty = 1;
    return FL_OK;
  }
  if (2 * (s->count + 1) > s->capacity && grow(s) != FL_OK) return FL_ERR_OUT_OF_MEMORY;
  for (size_t i = fl_mix64(id) & (s->capacity - 1);; i = (i + 1) & (s->capacity - 1)) {
    if (s->slots[i] == id) return FL_OK;
    if (s->slots[i] == FL_IDSET_EMPTY) {
      s->slots[i] = id;
      s->count++;
      return FL_OK;
    }
  }
}

void fl_idset_list(const fl_idset *s, uint64_t *out) {
  size_t k = 0;
  for (size_t i = 0; i < s->capacity; i++)
    if (s->slots[i] != FL_IDSET_EMPTY) out[k++] = s->slots[i];
  if (s->has_empty) out[k] = FL_IDSET_EMPTY;
}

fl_status fl_trace_distinct(fl_trace *t, uint64_t max_batches, fl_idset *sets, uint64_t *batches,
                            size_t *max_ids) {
  fl_trace_batch b = {0};
  fl_status s = fl_trace_rewind(t);
  uint64_t n = 0;
  size_t most = 0;
  int got = 1;
  while (s == FL_OK && (max_batches == 0 || n < max_batches)) {
    s = fl_trace_next(t, &b, &got);
    if (s != FL_OK || !got) break;
    n++;
    for (uint32_t i = 0; s == FL_OK && i < b.n_tables; i++) {
      if (b.n[i] > most) most = b.n[i];
      for (size_t k = 0; k < b.n[i]; k++)
        if (fl_idset_add(&sets[i], b.ids[i][k]) != FL_OK) {
          s = fl_fail(t, FL_ERR_OUT_OF_MEMORY, "%s: out of memory counting distinct ids",
                      fl_trace_path(t));
          break;
        }
    }
  }
  fl_trace_batch_free(&b);
  if (s == FL_OK) s = fl_trace_rewind(t);
  if (batches) *batches = n;
  if (max_ids) *max_ids = most;
  return s;
}
