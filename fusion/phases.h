/* phases.h: the CUDA engine's phases, shared by its entry points
 * (query_cuda.c: one-shot and prepared runs) and the prepared query's
 * answerer (plan.c: launched runs): the index phase's launches, the wait for
 * the counters, the store's pool woken ahead, the host's share of the
 * misses, the scatter, the end of a run's reads, and the admission job. */
#ifndef FL_FUSION_PHASES_H
#define FL_FUSION_PHASES_H

#include "cache/admit.h"
#include "fusion/run_layout.h"

/* Names the index kernel's counters in wait failures. */
#define FL_COUNTERS_WHAT "the fused index kernel's counters"

/* The index phase's launches on `to` (a stream, or a prepared query's
 * graph): header upload, index kernel (which publishes the counters to the
 * pinned counters), then the hit copy, which also reads the misses of a
 * batch that takes the device path in place (fl_launch_copy_hits). prof
 * (optional, on a stream): timing events around the kernels. gated (a
 * prepared query's graph): last, the gated scatter of the host's rows
 * (fl_gate). Returns a cudaError_t. */
int fl_phase_index(const fl_part_batch *b, const fl_run_setup *s, const fl_run_views *v,
                   int clear_set, int gated, fl_launch_to to, void **prof);

/* Waits until the device writes `want` to a word of pinned memory: spins
 * on it and, every check_ns, asks the stream whether its kernel failed or
 * ended without writing it (`what` names the kernel and the word). */
fl_status fl_phase_wait_word(fl_cache *c, const uint32_t *word, uint32_t want, uint64_t check_ns,
                             void *stream, const char *what);
/* fl_phase_wait_word for the bits of `mask` only. */
fl_status fl_phase_wait_bits(fl_cache *c, const uint32_t *word, uint32_t mask, uint32_t want,
                             uint64_t check_ns, void *stream, const char *what);

/* Wakes the store's gather pool ahead of a batch whose misses, at its
 * part's recent share (fl_phase_note_misses), would be a large gather: its
 * workers then spin, not sleep, until the counters come. Called once the
 * index phase is enqueued. */
void fl_phase_prewake(const fl_part_batch *b);
/* Adds a batch's missed positions to its part's running share. */
void fl_phase_note_misses(const fl_part_batch *b, uint64_t n_miss);

/* Whether a run reads unified-index pointer rows in place (zero_copy.h):
 * one-shot runs. A prepared query's graph does not: its gate kernels
 * decide without them, and a hashed slot that no longer holds its id
 * would need the host after the graph. */
int fl_phase_pointers_in_place(const fl_part_batch *b);

/* The host's share of a batch's misses once its counters are up: counts the
 * unique rows the hit copy reads in place, lays out the pinned staging and
 * fetches the other rows from the store into it, each stretch uploaded on
 * the batch's stream as it fills when `upload` (else the rows stay in the
 * staging, for a gated scatter); with hashed pointer rows read in place,
 * waits for those reads and fetches the rows whose slot had changed.
 * *host_rows: the rows the host fetched; *in_place: whether the GPU read
 * rows in place (with no host rows: every missed position, so no scatter
 * follows). */
fl_status fl_phase_misses(fl_part_batch *b, const fl_run_views *v, int want_refs, int upload,
                          int *in_place, uint64_t *host_rows);

/* Scatters the fetched rows (uploaded into the device's upload block) to
 * every missed position on the batch's stream: the answer is complete when
 * the stream gets there. */
fl_status fl_phase_scatter(const fl_part_batch *b, const fl_run_views *v, uint64_t n_miss);

/* The run's reads end (reclamation ticket `ticket`), and the scratch frees
 * up, when the stream gets here. */
void fl_phase_end_uses(fl_cache *c, fl_scratch *x, int64_t ticket, void *stream);

/* The admission job of a batch whose misses the views hold (cache/admit.h):
 * takes *gen; release_x: a one-off run's scratch, given back by the job.
 * NULL when out of memory. */
fl_admit_job *fl_phase_admit_job(const fl_part_batch *b, const fl_run_views *v, fl_scratch *x,
                                 uint64_t n_miss, uint64_t **gen, int want_refs, int release_x);

#endif
