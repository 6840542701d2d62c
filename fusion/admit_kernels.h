/* admit_kernels.h: the launcher of a CUDA admission round (admit_kernels.cu):
 * choosing, slot granting, copying and publishing a batch's unique misses on
 * the maintenance stream, with no host work per row. */
#ifndef FL_FUSION_ADMIT_KERNELS_H
#define FL_FUSION_ADMIT_KERNELS_H

#include "cache/admit_round.h"
#include "fusion/query_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A batch's unique misses as a round reads them; device pointers (uniq_refs
 * in m is pinned host memory). */
typedef struct fl_admit_batch {
  fl_index_view v;
  const fl_code *codes;        /* per table */
  const uint32_t *table_cls;   /* per table: slab class in the part's pool */
  const fl_batch_arg *args;
  const uint64_t *key_offsets; /* the args' first positions */
  uint32_t n_args;
  uint64_t n_keys;             /* uids are [0, n_keys) */
  fl_miss_out m;
  const uint64_t *stage_base;  /* per arg: its rows' byte offset in staging */
  const uint8_t *staging;      /* the unique rows fetched from the store */
  uint32_t *choice;            /* per uid: scratch for the round */
  uint64_t seed, threshold;    /* the coin (cache/admission.h) */
  uint32_t now;                /* batch counter: the coin's input, the LRU clock */
  uint64_t pointer_room;       /* unified-index pointers the part may still take */
} fl_admit_batch;

/* What a round's kernels read from the head of its input block. */
typedef struct fl_admit_args {
  fl_admit_batch b;
  uint64_t n_miss; /* missed positions: their set slots are emptied after the round */
} fl_admit_args;

/* An fl_round_kernels (cache/admit_round.h): adds a round's kernels to the
 * part's round graph, arguments in args_d (an fl_admit_args): choose (coin, priority bucket by in-batch count, pointer
 * candidates), grant (stocks the new slots; reservoir slots per class, most
 * frequent rows first), publish (row copy into the slot, index insert;
 * slots not published go back), restock, and the emptying of the batch's
 * miss set. Grids are sized for keys_cap keys, the loops stride. */
int fl_admit_round_nodes(fl_launch_to to, const void *args_d, fl_admit_dev d, uint64_t keys_cap);

#ifdef __cplusplus
}
#endif
#endif
