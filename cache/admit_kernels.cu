// admit_kernels.cu: a CUDA admission round, five kernels (six in a part of
// one slab class, three more under TinyLFU) added to the part's round graph on the maintenance stream
// (cache/admit_round.h); their arguments are in device memory, uploaded by
// the graph. recycle (one class only): the limbo slabs the host released go
// onto the reservoir, under the round's new slots. TinyLFU only
// (admit_rule.h): count adds every uid's batch count to the part's sketch,
// age halves it when the sample is reached, and after choose, settle keeps
// the additions left and the victim frequency. choose: one thread per uid
// decides (the policy's rule, the pointer rule) and ranks winners per class
// and priority bucket. grant: stocks the reservoirs with the round's
// new slots, then per class the buckets' first ranks (most frequent first)
// and how many winners the reservoir serves. publish: one warp per uid
// copies the row from the staging into its slot, then publishes it in the
// index. restock: slots whose insert did not publish go back on the
// reservoir; the per-round tallies are zeroed for the next round. reset:
// the batch's miss set is emptied for its next use. All index writes of a
// cache run on this one stream, so no two writers race on a key (index.h).
#include "cache/admit_kernels.h"

#include <cuda_runtime.h>

#include "cache/admit_rule.h"

namespace {

constexpr int kThreads = 256;
constexpr uint32_t kNone = 0xffffffffu;
constexpr uint32_t kPointer = 0x80000000u;  // choice: pointer candidate, ordinal below
constexpr uint32_t kRankBits = 27;          // choice: bucket << 27 | rank

unsigned grid_for(uint64_t threads) {
  uint64_t g = (threads + kThreads - 1) / kThreads;
  if (g > 132ull * 64) g = 132ull * 64;
  return (unsigned)(g ? g : 1);
}

// The uid's arg, staging row, kind, flat key and set slot; false when unused.
__device__ bool unique_row(const fl_admit_batch &b, uint64_t uid, uint32_t *arg, uint64_t *row,
                           int *pointer, uint64_t *key, uint64_t *slot) {
  if (!fl_miss_resolve(b.key_offsets, b.args, b.n_args, b.m.per_arg, uid, arg, row, pointer))
    return false;
  const fl_batch_arg &a = b.args[*arg];
  *slot = b.m.uniq_slot[uid];
  uint64_t id = fl_miss_set_id(&b.m.set, fl_miss_set_base(a.key_offset, *arg), a.n, *slot);
  fl_code code = b.codes[a.table];
  fl_code_encode(&code, b.v.key_bits, id, key);  // in range: the index kernel encoded it
  return true;
}

// The host counted the released slabs and the new slots in top[0]: the
// reservoir reads [old top, + recycle_n) released, then fill_n[0] new.
__global__ void recycle(fl_admit_dev d) {
  const fl_evict_in *ev = d.ev;
  uint64_t n = ev->recycle_n, first = d.top[0] - d.fill_n[0] - n;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x)
    d.res[0][first + i] = ev->ring[(ev->recycle_from + i) % ev->ring_cap];
}

// Adds the batch's unique rows, those choose considers, to the sketch
// (additions commute: admit_sketch.h); their uses to the sample count, one
// atomic per warp.
__global__ void count(const fl_admit_args *args, fl_admit_dev d) {
  const fl_admit_batch &b = args->b;
  unsigned long long uses = 0;
  for (uint64_t uid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; uid < b.n_keys;
       uid += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t arg;
    uint64_t row, key, slot;
    int pointer;
    if (unique_row(b, uid, &arg, &row, &pointer, &key, &slot) && !d.skip[b.args[arg].table]) {
      uint32_t n = b.m.set.count[slot];
      fl_sketch_add(&d.sketch, key, n);
      uses += fl_sketch_uses(n);
    }
  }
  for (int s = 16; s > 0; s /= 2) uses += __shfl_down_sync(0xffffffffu, uses, s);
  if ((threadIdx.x & 31u) == 0 && uses) atomicAdd(&d.freq->additions, uses);
}

// Halves every counter as often as the additions call for (most rounds:
// none, and every thread returns at once).
__global__ void age(fl_admit_dev d) {
  uint64_t left;
  uint32_t k = fl_sketch_halvings(d.freq->additions, d.sketch_sample, &left);
  if (k == 0) return;
  for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w <= d.sketch.mask;
       w += (uint64_t)gridDim.x * blockDim.x)
    d.sketch.word[w] = fl_sketch_age_word(d.sketch.word[w], k);
}

// The round's victim frequency: that of the evictions since the last
// round (the round's own first; admit_rule.h). Unchanged until settle.
__device__ uint32_t round_victim(const fl_admit_dev &d) {
  const fl_admit_freq *f = d.freq;
  return fl_admit_victim(f->victim_sum, f->victim_n, f->victim);
}

// One thread, after choose: keeps the round's victim, and the additions
// the halvings left.
__global__ void settle(fl_admit_dev d) {
  uint64_t left;
  fl_sketch_halvings(d.freq->additions, d.sketch_sample, &left);
  d.freq->additions = left;
  d.freq->victim = round_victim(d);
  d.freq->victim_sum = 0;
  d.freq->victim_n = 0;
}

__global__ void choose(const fl_admit_args *args, fl_admit_dev d) {
  const fl_admit_batch &b = args->b;
  uint32_t victim = d.freq ? round_victim(d) : 0;
  for (uint64_t uid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; uid < b.n_keys;
       uid += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t arg, choice = kNone;
    uint64_t row, key, slot;
    int pointer;
    if (unique_row(b, uid, &arg, &row, &pointer, &key, &slot) && !d.skip[b.args[arg].table]) {
      int room = b.pointer_room > 0;
      uint64_t ref = room && !pointer ? b.m.uniq_refs[uid] : 0;
      uint32_t count = b.m.set.count[slot];
      uint32_t estimate = d.freq ? fl_sketch_estimate(&d.sketch, key) : 0;
      int wins = fl_admit_wins(&b.rule, b.now, key, count, estimate, victim);
      fl_admit_choice c = fl_admit_choose(wins, pointer, ref, room);
      if (c == FL_ADMIT_CACHE) {
        uint32_t cls = b.table_cls[b.args[arg].table];
        uint32_t bucket = fl_admit_bucket(count);
        uint32_t rank = atomicAdd(&d.cand[cls * FL_ADMIT_BUCKETS + bucket], 1u);
        if (rank < (1u << kRankBits)) choice = bucket << kRankBits | rank;
      } else if (c == FL_ADMIT_POINTER) {
        unsigned long long o = atomicAdd(&d.count[FL_ROUND_POINTER_CANDIDATES], 1ull);
        if (o < b.pointer_room && o < kPointer - 1) choice = kPointer | (uint32_t)o;
      }
    }
    b.choice[uid] = choice;
  }
}

// One block: the new slots go on top of each class's reservoir (top counts
// them already), then the grants.
__global__ void grant(fl_admit_dev d) {
  uint64_t at = 0;
  for (uint32_t k = 0; k < d.n_classes; k++) {
    uint64_t n = d.fill_n[k], first = d.top[k] - n;
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) d.res[k][first + i] = d.fill[at + i];
    at += n;
  }
  __syncthreads();
  for (uint32_t k = threadIdx.x; k < d.n_classes; k += blockDim.x) {
    uint64_t running = 0;
    for (uint32_t bucket = FL_ADMIT_BUCKETS; bucket-- > 0;) {
      d.base[k * FL_ADMIT_BUCKETS + bucket] = (uint32_t)running;
      running += d.cand[k * FL_ADMIT_BUCKETS + bucket];
    }
    d.wanted[k] = running;
    d.granted[k] = running < d.top[k] ? running : d.top[k];
  }
}

__global__ void publish(const fl_admit_args *args, fl_admit_dev d) {
  const fl_admit_batch &b = args->b;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t uid = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; uid < b.n_keys;
       uid += warps) {
    uint32_t choice = b.choice[uid], arg;
    if (choice == kNone) continue;
    uint64_t row, key, set_slot;
    int pointer;
    unique_row(b, uid, &arg, &row, &pointer, &key, &set_slot);
    if (choice & kPointer) {
      if (lane == 0 && fl_index_insert(&b.v, key, b.m.uniq_refs[uid] | FL_LOC_DRAM_BIT, b.now) ==
                           FL_INSERT_DONE)
        atomicAdd(&d.count[FL_ROUND_POINTERS], 1ull);
      continue;
    }
    const fl_batch_arg &a = b.args[arg];
    uint32_t cls = b.table_cls[a.table];
    uint64_t ord = d.base[cls * FL_ADMIT_BUCKETS + (choice >> kRankBits)] +
                   (choice & ((1u << kRankBits) - 1));
    if (ord >= d.granted[cls]) continue;  // the reservoir ran out: lower priority
    uint64_t slot = d.res[cls][d.top[cls] - 1 - ord];
    // Staged rows pack at vec_bytes: 4-byte words, or 2-byte ones for fp16
    // rows of odd dimension. Slots are 16-byte aligned.
    const uint8_t *src = b.staging + b.stage_base[arg] + row * a.vec_bytes;
    if (((uint64_t)src & 3u) == 0 && (a.vec_bytes & 3u) == 0) {
      for (uint32_t w = lane; w < a.vec_bytes / 4; w += 32)
        ((uint32_t *)slot)[w] = ((const uint32_t *)src)[w];
    } else {
      for (uint32_t w = lane; w < a.vec_bytes / 2; w += 32)
        ((uint16_t *)slot)[w] = ((const uint16_t *)src)[w];
    }
    __threadfence();  // the row before the pointer to it
    __syncwarp();
    if (lane == 0) {
      fl_insert_result r = fl_index_insert(&b.v, key, slot, b.now);
      if (r == FL_INSERT_DONE || r == FL_INSERT_PROMOTED) {
        atomicAdd(&d.count[FL_ROUND_ADMITTED], 1ull);
        if (r == FL_INSERT_PROMOTED) atomicAdd(&d.count[FL_ROUND_PROMOTED], 1ull);
      } else {
        d.ret[cls][atomicAdd(&d.ret_n[cls], 1u)] = slot;
      }
    }
  }
}

// One block per class: the granted slots leave the reservoir's top, the
// returned ones go back on it; the class's tallies start the next round at
// zero.
__global__ void restock(fl_admit_dev d) {
  uint32_t k = blockIdx.x;
  uint64_t keep = d.top[k] - d.granted[k];
  uint32_t back = d.ret_n[k];
  for (uint32_t i = threadIdx.x; i < back; i += blockDim.x) d.res[k][keep + i] = d.ret[k][i];
  for (uint32_t i = threadIdx.x; i < FL_ADMIT_BUCKETS; i += blockDim.x)
    d.cand[k * FL_ADMIT_BUCKETS + i] = 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    d.top[k] = keep + back;
    d.ret_n[k] = 0;
  }
}

// Empties the set slots the batch used (those of its missed positions), so
// the next batch of the same shape on this scratch needs no memset.
__global__ void reset(const fl_admit_args *args) {
  const fl_miss_out &m = args->b.m;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < args->n_miss;
       i += (uint64_t)gridDim.x * blockDim.x)
    fl_miss_set_clear(&m.set, m.slot[i]);
}

}  // namespace

static_assert(sizeof(fl_admit_args) <= FL_ROUND_ARGS_BYTES, "round arguments outgrow their block");

extern "C" int fl_admit_round_nodes(fl_launch_to to, const void *args_d, fl_admit_dev d,
                                    uint64_t keys_cap) {
  const fl_admit_args *a = (const fl_admit_args *)args_d;
  void *ad[] = {&a, &d}, *dev[] = {&d}, *args[] = {&a};
  const dim3 block(kThreads);
  cudaError_t e = cudaSuccess;
  if (d.n_classes == 1)  // a few blocks a SM: most rounds recycle nothing, a burst 235,000 slabs
    e = fl_launch_kernel(to, (const void *)recycle, 132 * 4, block, 0, dev);
  if (d.n_classes && e == cudaSuccess && d.freq) {
    e = fl_launch_kernel(to, (const void *)count, grid_for(keys_cap), block, 0, ad);
    if (e == cudaSuccess)
      e = fl_launch_kernel(to, (const void *)age, grid_for(d.sketch.mask + 1), block, 0, dev);
  }
  if (d.n_classes && e == cudaSuccess) {
    e = fl_launch_kernel(to, (const void *)choose, grid_for(keys_cap), block, 0, ad);
    if (e == cudaSuccess && d.freq) e = fl_launch_kernel(to, (const void *)settle, 1, 1, 0, dev);
    if (e == cudaSuccess) e = fl_launch_kernel(to, (const void *)grant, 1, block, 0, dev);
    if (e == cudaSuccess)
      e = fl_launch_kernel(to, (const void *)publish, grid_for(keys_cap * 32), block, 0, ad);
    if (e == cudaSuccess) e = fl_launch_kernel(to, (const void *)restock, d.n_classes, block, 0, dev);
    if (e == cudaSuccess) e = fl_launch_kernel(to, (const void *)reset, grid_for(keys_cap), block, 0, args);
  }
  return (int)e;
}

extern "C" int fl_admit_kernels_load(void) {
  const void *kernels[] = {(const void *)recycle, (const void *)count,   (const void *)age,
                           (const void *)settle,  (const void *)choose,  (const void *)grant,
                           (const void *)publish, (const void *)restock, (const void *)reset};
  return fl_load_kernels(kernels, (int)(sizeof kernels / sizeof *kernels));
}
