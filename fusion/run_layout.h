/* run_layout.h: one part batch's scratch on the CUDA engine (a device
 * buffer and a pinned host buffer, cache/cuda_state.h): its byte layout,
 * the typed views of it that the engine's phases use, resolved once per
 * run, and the header that the index phase uploads (for query_cuda.c and
 * plan.c).
 *
 * The header (args, scans, offsets, codes, classes, zero-copy tables,
 * counters' start values, the run word and ids given in host memory) has
 * the same offsets on the device and in pinned memory, and goes up as one
 * copy. The rest of the device buffer holds the index phase's outputs, the
 * miss set and the upload block (the staging offsets, then the rows); the
 * rest of the pinned buffer holds what the device publishes (counters,
 * flag, the gate's word), the unique ids and references the gather reads,
 * and the staging the gather fills. Every piece starts 256-byte aligned. */
#ifndef FL_FUSION_RUN_LAYOUT_H
#define FL_FUSION_RUN_LAYOUT_H

#include "cache/cuda_state.h"
#include "fusion/query.h"
#include "fusion/query_kernels.h"

typedef struct fl_run_layout {
  uint64_t args, scan_index, scan_copy, offsets, codes, table_cls, zc, run, ids, header_end;
  /* device */
  uint64_t locs, miss_pos, miss_slot, set_ids, set_count, set_uid, uniq_slot, claim, choice,
      counters, gate, upload, out, total;
  /* host (pinned) */
  uint64_t h_counters, h_flag, h_gate, h_uniq_ids, h_uniq_refs, h_upload, host_total;
  uint64_t counter_bytes; /* 16 + the per-arg counters */
  uint64_t head;          /* the upload block's staging offsets, before its rows */
} fl_run_layout;

/* The header's pieces at one base (device, or its pinned copy). */
typedef struct fl_run_header {
  fl_batch_arg *args;
  uint64_t *scan_index, *scan_copy; /* per arg + 1: index and copy thread offsets */
  uint64_t *offsets;                /* per arg: its first position */
  fl_code *codes;                   /* per table */
  uint32_t *table_cls;              /* per table */
  fl_zc_table *zc;                  /* per table */
  unsigned long long *counters;     /* [0] missed positions, [1] out-of-range position, per arg */
  uint32_t *run;                    /* batch counter, finished blocks, gate ticket */
  uint64_t *ids;                    /* ids given in host memory */
} fl_run_header;

/* A scratch set under a layout, typed. */
typedef struct fl_run_views {
  fl_run_header d, h;        /* the header on the device, and its pinned copy */
  uint64_t *locs;             /* device, per position: slab address or 0 */
  uint32_t *choice;           /* device, per uid: the admission round's scratch */
  uint32_t *gate;             /* device: the gate's verdict (fl_gate.open) */
  uint64_t *stage_base;       /* device upload block: per arg, its rows' staging offset, */
  uint8_t *staging;           /* then the rows, `head` bytes in */
  uint64_t head;
  uint8_t *out;               /* device outputs of outputs in unregistered host memory */
  fl_miss_out m;              /* the index kernel's misses */
  const unsigned long long *h_counters; /* pinned: the counters as published */
  const uint32_t *h_per_arg;  /* their per-arg part */
  uint32_t *h_flag;           /* raised once the counters are published */
  fl_gate_bad *h_gate;        /* the gate word (raised), and a run's out-of-range id */
  uint64_t *h_stage_base;     /* pinned upload block: staging offsets, */
  uint8_t *h_staging;         /* then the rows the host gathers */
} fl_run_views;

/* Lays out a batch with host_ids ids in host memory and out_bytes of
 * outputs in unregistered host memory. */
void fl_run_layout_plan(const fl_part_batch *b, uint64_t host_ids, uint64_t out_bytes,
                         fl_run_layout *l);
/* The views of scratch x under l. */
void fl_run_views_of(const fl_run_layout *l, const fl_scratch *x, fl_run_views *v);
/* What the index kernel publishes to the host (fl_publish). */
fl_publish fl_run_publish(const fl_run_layout *l, const fl_run_views *v);
/* The gate of a launched run's graph (fl_gate). */
fl_gate fl_run_gate(const fl_run_views *v);

/* The batch's header, built once per scratch: where ids and outputs live
 * (dargs: device-usable pointers; the batch's host args keep the caller's
 * for messages; host_out[a]: the caller's output when in unregistered host
 * memory, else NULL), the layout, a scratch set taken for it, and the
 * header's args, scans, offsets, codes and classes filled; index_threads
 * and copy_threads: the launches' thread counts. */
typedef struct fl_run_setup {
  fl_batch_arg *dargs;
  uint8_t **host_out;
  fl_run_layout l;
  fl_scratch *x;
  uint64_t index_threads, copy_threads;
} fl_run_setup;
fl_status fl_run_setup_new(fl_part_batch *b, fl_run_setup *h);
/* Gives back what fl_run_setup_new took. */
void fl_run_setup_free(fl_cache *c, fl_run_setup *h);
/* Per run: copies ids in host memory into the header, sets the counters'
 * start values ([0] no miss yet, [1] no out-of-range key: ~0, per arg
 * zero), the batch counter, no finished block and the gate's ticket;
 * lowers the counters' flag. */
void fl_run_header_refresh(const fl_part_batch *b, const fl_run_setup *h,
                            const fl_run_views *v, uint32_t ticket);

#endif
