/* bench_graph_floor.h: the fixed cost of a prepared query's graph with no
 * lookup in it (bench_graph_floor.cu): the floors a small batch is measured
 * against. Each shape is a graph of the small batch's grid (26 blocks of
 * 256 threads) whose kernel's last block raises a flag in pinned host
 * memory, as the fused index kernel publishes its counters; the host
 * launches it, polls the flag, then synchronizes the stream. */
#ifndef FL_TOOLS_BENCH_GRAPH_FLOOR_H
#define FL_TOOLS_BENCH_GRAPH_FLOOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fl_floor_shape {
  FL_FLOOR_KERNEL = 0,         /* the publishing kernel alone */
  FL_FLOOR_UPLOAD_KERNEL,      /* a header upload (host to device, header_bytes) before it */
  FL_FLOOR_UPLOAD_TWO,         /* then a second kernel (the hit copy's place) */
  FL_FLOOR_UPLOAD_TWO_EARLY,   /* the second launched early (programmatic edge) */
  FL_FLOOR_KERNEL_READS_HOST,  /* the kernel alone, each block first reading 8 bytes
                                  of pinned host memory (per-run values read in place) */
  FL_FLOOR_KERNEL_NEW_PARAMS,  /* the kernel alone, its parameters set anew before each
                                  launch (cudaGraphExecKernelNodeSetParams: per-run values
                                  carried as parameters) */
  FL_FLOOR_TWO_EARLY_NEW_PARAMS, /* no upload, two kernels, the second launched early, the
                                    first's parameters set anew before each launch */
  FL_FLOOR_PLAIN_LAUNCH,       /* the kernel launched on the stream, no graph */
  FL_FLOOR_UPLOAD_FOUR_EARLY,  /* upload and four kernels, each after the first launched
                                  early (a launch's index, hit copy and gate kernels) */
  FL_FLOOR_UPLOAD_TWO_EARLY_IF, /* the same with the last two in an IF node's body,
                                   skipped (the first kernel sets its condition to 0) */
  FL_FLOOR_SHAPES
} fl_floor_shape;

typedef struct fl_floor_result {
  double batch_p50_us, batch_p90_us; /* launch to the stream's synchronization */
  double flag_p50_us;                /* launch to the flag seen by the host */
} fl_floor_result;

/* Times `reps` runs of every shape (after 200 warm-up runs each); fills
 * out[FL_FLOOR_SHAPES] and returns a cudaError_t (0 = success). */
int fl_bench_graph_floor(uint64_t header_bytes, int reps, fl_floor_result *out);

/* The shape's name, for tables and JSON. */
const char *fl_floor_shape_name(int shape);

#ifdef __cplusplus
}
#endif
#endif
