/* query_kernels.h: launchers of the fused query kernels (query_kernels.cu).
 * Each enqueues on `stream`, or on `to` (a stream, or a graph being built:
 * the prepared query's), and returns a cudaError_t as int. */
#ifndef FL_FUSION_QUERY_KERNELS_H
#define FL_FUSION_QUERY_KERNELS_H

#include "cache/index.h"
#include "common/launch_to.h"
#include "batch/batch.h"
#include "batch/miss_set.h"
#include "fusion/zero_copy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most queries one launch takes (the scan lives in shared memory). */
#define FL_LAUNCH_MAX_QUERIES 1024u

/* Where the fused index kernel's last block leaves the counters for the host
 * (pinned host memory, device-mapped), so that the caller polls a flag
 * instead of waiting for a download. */
typedef struct fl_publish {
  unsigned *blocks_done; /* device: 0 before the launch */
  uint32_t *dst;         /* host: the counters' copy (words 32-bit words) */
  uint32_t *flag;        /* host: 0 before the launch, 1 once dst and every
                            uniq_ids / uniq_refs write are visible */
  uint32_t words;
} fl_publish;

/* The self-identified fused index kernel: encodes every key of every query
 * (codes indexed by arg.table), probes the index, writes locs[pos] (0 = not a
 * cached vector), and deduplicates misses and unified-index hits into unique
 * rows (miss_set.h). The counters must hold their start values (counters[0]
 * and per_arg 0, counters[1] ~0). The launcher clears the set when clear_set
 * (else it must be empty already: an admission round empties what its batch
 * used, admit_kernels.h). scan: n_args + 1
 * thread offsets (1 thread per key). now: the batch counter, read from device
 * memory (a launch graph replays the launch with each run's value there).
 * The counters end up in pub (see fl_publish). */
int fl_launch_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                    const uint64_t *scan, uint32_t n_args, uint64_t threads, uint64_t n_keys,
                    const uint32_t *now, uint64_t *locs, fl_miss_out m, fl_publish pub,
                    int clear_set, fl_launch_to to);
/* What copy_hits needs to read a batch's misses in place (zero_copy.h):
 * the tables readable in place (zc, per table), the most unique rows a
 * batch read in place has (limit; 0: none is), whether pointer rows count
 * (pointers: one-shot runs), the store's seqlock stripes (device-mapped),
 * the args' first positions, and the device's upload block: its staging
 * offsets and rows. */
typedef struct fl_in_place {
  const fl_zc_table *zc;
  uint64_t limit;
  int pointers;
  const uint32_t *seq;
  const uint64_t *key_offsets;
  uint64_t *stage_base;
  uint8_t *staging;
} fl_in_place;
/* The calibration's reads in place (zc_calibrate.c): n rows of one table
 * into dst (device), one warp a row, as copy_hits reads misses: dense rows
 * ids[0..n) (rows: the table's rows as the device sees them, vec_bytes
 * each), or, rows NULL, hashed rows at the references ids[0..n) with their
 * slots' headers (slots: the table's layout). */
int fl_launch_zc_probe(const uint8_t *rows, fl_slot_layout slots, uint32_t table,
                       uint32_t vec_bytes, const uint64_t *ids, uint32_t n, const uint32_t *seq,
                       uint8_t *dst, void *stream);
/* The gate of a prepared query's graph (query_cuda.c): while the graph
 * waits on the device, the host gathers the batch's rows that are its to
 * gather into pinned staging, then raises the gate: it writes this run's
 * ticket (or the ticket | FL_GATE_FAILED when the run failed: nothing to
 * scatter) to a word of pinned memory that the graph polls. The host makes
 * no copy or launch for it: one could wait behind another thread's synchronous
 * call, which waits for the stream held at the gate. Tickets stay below
 * FL_GATE_FAILED and are never 0. */
#define FL_GATE_FAILED 0x80000000u
/* Pinned host memory, device-mapped, one per prepared query: the gate's word
 * (raised by the host), then the out-of-range id of a run that has one, as
 * the gate kernel reads it for the host's message, and that run's ticket
 * once the id is there. */
typedef struct fl_gate_bad {
  uint32_t raised;
  uint32_t ticket;
  uint64_t id;
} fl_gate_bad;
typedef struct fl_gate {
  const uint32_t *raised;          /* &bad->raised */
  fl_gate_bad *bad;
  const uint32_t *ticket;          /* device: this run's ticket (in the uploaded header) */
  uint32_t *open;                  /* device: the ticket once the gate opened for this run */
  const uint64_t *host_stage_base; /* pinned, device-mapped: the host's staging offsets */
  const uint8_t *host_staging;     /* and rows */
} fl_gate;
/* After the hit copy: hands the host a run's out-of-range id
 * (fl_gate_bad), then, when the batch has rows for the host
 * (fl_zc_host_rows, decided on the device), waits for the gate, then copies
 * the host's staging offsets and the rows of the args not read in place
 * into the device's staging (stage_base, staging: the admission round reads
 * them there) and scatters every missed position, host rows straight from
 * the host's staging. Nothing when the host has no row or the gate says the
 * run failed. */
int fl_launch_gated_scatter(const fl_batch_arg *args, const uint64_t *key_offsets,
                            uint32_t n_args, fl_miss_out m, const fl_zc_table *zc, uint64_t limit,
                            fl_gate g, uint64_t *stage_base, uint8_t *staging, fl_launch_to to);
/* Decoupled hit copy: scan gives arg.lanes threads per key. Then, for a
 * batch that takes the device path (decided on the device from m's counters
 * as the host decides it: fl_zc_mode over ip.limit), its qualifying rows,
 * read straight from the store under the row seqlocks: with every unique
 * row read so (FL_ZC_ALL), into every missed position (no scatter follows)
 * and the staging; else the dense misses into the staging, for the scatter
 * that follows the host's rows. Either way it writes every arg's staging
 * offset to ip.stage_base (as fl_misses_layout does), and the staged rows
 * are the admission round's. A hashed pointer row read at its reference
 * has its m.uniq_refs entry rewritten once read: the reference with its
 * low bit cleared when the slot held the id, else 0 (its positions are
 * left for the host: it fetches the row by id and scatters). */
int fl_launch_copy_hits(const fl_batch_arg *args, const uint64_t *scan, uint32_t n_args,
                        uint64_t threads, const uint64_t *locs, fl_miss_out m, fl_in_place ip,
                        fl_launch_to to);
/* Writes each of the n missed positions of m its unique row, staged per arg
 * at staging + stage_base[arg] (fl_miss_row order); key_offsets: the args'
 * first positions, ascending. */
int fl_launch_scatter(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                      fl_miss_out m, const uint64_t *stage_base, const uint8_t *staging,
                      uint64_t n, void *stream);

/* Loads every kernel above (fl_load_kernels); a cudaError_t. */
int fl_query_kernels_load(void);

#ifdef __cplusplus
}
#endif
#endif
