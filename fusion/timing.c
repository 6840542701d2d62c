/* timing.c: each thread's account of its last query (fl_query_timing_last),
 * which the query path's phases add to. */
#include "fusion/query.h"

static _Thread_local fl_query_timing timing;

fl_query_timing *fl_query_timing_here(void) { return &timing; }

void fl_query_timing_last(fl_query_timing *out) {
  if (out) *out = timing;
}
