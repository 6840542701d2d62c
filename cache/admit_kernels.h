/* admit_kernels.h: the launcher of a CUDA admission round (admit_kernels.cu):
 * choosing, slot granting, copying and publishing a batch's unique misses on
 * the maintenance stream, with no host work per row. */
#ifndef FL_CACHE_ADMIT_KERNELS_H
#define FL_CACHE_ADMIT_KERNELS_H

#include "cache/admit.h"
#include "cache/admit_round.h"
#include "common/launch_to.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a round's kernels read from the head of its input block. */
typedef struct fl_admit_args {
  fl_admit_batch b;
  uint64_t n_miss; /* missed positions: their set slots are emptied after the round */
} fl_admit_args;

/* Adds a round's kernels to the part's round graph (admit_round.c builds
 * it: common/launch_to.h), arguments in args_d (an fl_admit_args): under
 * TinyLFU the sketch's count and aging, then choose (the policy's rule,
 * priority bucket by in-batch count, pointer candidates), grant (stocks the new slots; reservoir slots per class, most
 * frequent rows first), publish (row copy into the slot, index insert;
 * slots not published go back), restock, and the emptying of the batch's
 * miss set. Grids are sized for keys_cap keys, the loops stride. */
int fl_admit_round_nodes(fl_launch_to to, const void *args_d, fl_admit_dev d, uint64_t keys_cap);

/* Loads the round's kernels (fl_load_kernels); a cudaError_t. */
int fl_admit_kernels_load(void);

#ifdef __cplusplus
}
#endif
#endif
