/* bench_linear_probe.h: the baseline of the index benchmark: a plain 64-bit
 * linear-probing hash table on the GPU (one thread per key, keys and values
 * in two arrays, no versions, no encoding), built and probed by
 * bench_linear_probe.cu. */
#ifndef FL_TOOLS_BENCH_LINEAR_PROBE_H
#define FL_TOOLS_BENCH_LINEAR_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inserts n_keys distinct keys (host array) into a table of `slots` slots,
 * then times `reps` finds of the n_queries query keys (host array, all
 * present) with events. Writes the median find time in ms; returns a
 * cudaError_t (0 = success). found receives how many queries were found in the
 * last rep (must equal n_queries). */
int fl_bench_linear_probe(const uint64_t *keys, uint64_t n_keys, uint64_t slots,
                          const uint64_t *queries, uint64_t n_queries, int reps, double *ms,
                          uint64_t *found);

#ifdef __cplusplus
}
#endif
#endif
