/* stress_judge.c: what counts as a violation: the rule of stress.c's opening
 * comment for a returned row (judge), a failed library or CUDA call, and the
 * first SHOW_MAX of them described on stderr. */
#include <stdio.h>
#include <string.h>

#include "tools/stress.h"

const char *const verdict_key[N_VERDICTS] = {"rows_ok", "zero_rows", "unwritten", "torn",
                                            "stale",   "future",    "bad_zero"};

/* 1 when each of the n bytes at p is `byte`. */
static int all_bytes(const unsigned char *p, size_t n, unsigned char byte) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != byte) return 0;
  return 1;
}

/* The last remove of row st announced by clock value `end`, while a hold at
 * or below end keeps a second one from being announced (stress.c's opening comment). */
static uint64_t last_remove_by(const row_state *st, uint64_t end) {
  uint64_t last = atomic_load(&st->removing);
  return last <= end ? last : atomic_load(&st->removing_prev);
}

verdict judge(const table *t, uint64_t id, const void *row, const row_state *st,
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

/* Counts a failed call as a violation; describes the first few. */
static void call_failed(stress *s, const char *call, const char *status, const char *msg) {
  atomic_fetch_add(&s->errors, 1);
  if (atomic_fetch_add(&s->shown, 1) < SHOW_MAX)
    fprintf(stderr, "violation: %s failed: %s: %s\n", call, status, msg);
}

int cache_ok(stress *s, const char *call, fl_status st) {
  if (st != FL_OK) call_failed(s, call, fl_status_name(st), fl_cache_last_error(s->cache));
  return st == FL_OK;
}

int store_ok(stress *s, const char *call, fl_status st) {
  if (st != FL_OK) call_failed(s, call, fl_status_name(st), fl_store_last_error(s->store));
  return st == FL_OK;
}

int cuda_ok(stress *s, const char *call, cudaError_t e) {
  if (e != cudaSuccess) call_failed(s, call, cudaGetErrorName(e), cudaGetErrorString(e));
  return e == cudaSuccess;
}

void describe(stress *s, const table *t, uint64_t id, verdict v, uint64_t got,
                     uint64_t before, uint64_t end) {
  if (atomic_fetch_add(&s->shown, 1) >= SHOW_MAX) return;
  fprintf(stderr, "violation: table %s, id %llu: %s (the row spells version %llu; before the "
          "query, version %llu was complete%s; the answer was complete at clock %llu)\n",
          t->name, (unsigned long long)id, verdict_key[v], (unsigned long long)got,
          (unsigned long long)(before >> 1), before & 1 ? ", a remove" : "",
          (unsigned long long)end);
}
