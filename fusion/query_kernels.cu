// query_kernels.cu: the fused query kernels. One launch of fused_index covers
// every table of a query (self-identification through the scan) and
// deduplicates the misses (miss_set.h), one launch of copy_hits moves every
// hit vector with several threads per vector, and scatter expands the unique
// rows fetched from the store into every missed position. Slabs are read without
// locks: batch-based reclamation keeps them unreused until the query ends.
#include "fusion/query_kernels.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

// Loads the scan into shared memory; returns the block's copy.
__device__ const uint64_t *load_scan(uint64_t *smem, const uint64_t *scan, uint32_t n) {
  for (uint32_t i = threadIdx.x; i <= n; i += blockDim.x) smem[i] = scan[i];
  __syncthreads();
  return smem;
}

// The grid's last block copies the counters into pinned host memory and
// raises the flag the host polls. Threads that wrote host memory (unique ids
// and references) fence at system scope first, so that the host sees their
// writes once it sees the flag.
__device__ void publish(const fl_publish &p, const unsigned long long *counters, bool wrote_host) {
  __shared__ bool last;
  if (wrote_host) __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(p.blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every block's counter updates
  const volatile uint32_t *src = (const volatile uint32_t *)counters;
  for (uint32_t i = threadIdx.x; i < p.words; i += blockDim.x) p.dst[i] = src[i];
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) *(volatile uint32_t *)p.flag = 1u;
}

__global__ void fused_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                            const uint64_t *scan_g, uint32_t n_args, uint64_t threads,
                            const uint32_t *now_p, uint64_t *locs, fl_miss_out m,
                            fl_publish pub) {
  extern __shared__ uint64_t scan_s[];
  const uint64_t *scan = load_scan(scan_s, scan_g, n_args);
  const uint32_t now = *now_p;
  bool wrote_host = false;
  for (uint64_t base = blockIdx.x * (uint64_t)blockDim.x; base < threads;
       base += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t tid = base + threadIdx.x;
    bool miss = false, pointer = false;
    int fresh = 0;
    uint32_t q = 0;
    uint64_t pos = 0, id = 0, dram = 0, slot = 0;
    if (tid < threads) {
      q = fl_batch_find(scan, n_args + 1, tid);
      const fl_batch_arg a = args[q];
      uint64_t i = tid - scan[q];
      if (i < a.n) {
        pos = a.key_offset + i;
        id = a.ids[i];
        uint64_t key, loc = FL_LOC_NONE;
        fl_code code = codes[a.table];
        if (fl_code_encode(&code, v.key_bits, id, &key) != 0) {
          atomicMin(&m.counters[1], (unsigned long long)pos);
        } else {
          int64_t s = fl_index_find(&v, key, &loc);
          if (s >= 0) fl_index_touch(&v, s, now);
          if (s < 0 || (loc & FL_LOC_DRAM_BIT)) {
            /* A unified-index pointer goes to the host with the misses, but
             * with its row address: the store lookup is skipped. */
            dram = s >= 0 ? loc : 0;
            pointer = dram != 0;
            loc = FL_LOC_NONE;
            miss = true;
            slot = fl_miss_set_insert(&m.set, fl_miss_set_base(a.key_offset, q), a.n, id, &fresh);
            fl_add32(&m.set.count[slot], 1);
          }
        }
        locs[pos] = loc;
      }
    }
    // Warp-aggregated appends, one atomic per warp and list: a warp serves
    // one arg (the scan rounds each arg to whole warps).
    const unsigned lane = threadIdx.x & 31u, below = (1u << lane) - 1u;
    unsigned mask = __ballot_sync(0xffffffffu, miss);
    if (!mask) continue;
    unsigned leader = __ffs(mask) - 1;
    unsigned long long first = 0;
    if (lane == leader) first = atomicAdd(&m.counters[0], (unsigned long long)__popc(mask));
    first = __shfl_sync(0xffffffffu, first, leader);
    if (miss) {
      m.pos[first + __popc(mask & below)] = (uint32_t)pos;
      m.slot[first + __popc(mask & below)] = (uint32_t)slot;
    }
    uint32_t *per_arg = m.per_arg + FL_MISS_COUNTERS * q;
    unsigned ptr_mask = __ballot_sync(0xffffffffu, pointer);
    for (int kind = 0; kind < 2; kind++) {
      unsigned want = kind ? ptr_mask : mask & ~ptr_mask;
      unsigned uniq = __ballot_sync(0xffffffffu, fresh && pointer == (kind == 1));
      uint32_t o = 0;
      if (lane == leader) {
        if (uniq) o = fl_add32(&per_arg[kind], __popc(uniq));
        if (want) fl_add32(&per_arg[2 + kind], __popc(want));
      }
      o = __shfl_sync(0xffffffffu, o, leader);
      if (fresh && pointer == (kind == 1)) {
        const fl_batch_arg &a = args[q];
        uint64_t uid = fl_miss_uid(a.key_offset, a.n, kind, o + __popc(uniq & below));
        m.set.uid[slot] = (uint32_t)uid;
        m.uniq_slot[uid] = (uint32_t)slot;
        m.uniq_ids[uid] = id;
        if (kind) m.uniq_refs[uid] = dram;
        wrote_host = true;
      }
    }
  }
  publish(pub, m.counters, wrote_host);
}

template <typename T>
__device__ void copy_units(uint8_t *dst, const uint8_t *src, uint32_t unit) {
  *(T *)(dst + unit * sizeof(T)) = *(const T *)(src + unit * sizeof(T));
}

__device__ void copy_unit(uint8_t *dst, const uint8_t *src, uint32_t width, uint32_t unit) {
  if (width == 16) copy_units<uint4>(dst, src, unit);
  else if (width == 4) copy_units<uint32_t>(dst, src, unit);
  else copy_units<uint16_t>(dst, src, unit);
}

__global__ void copy_hits(const fl_batch_arg *args, const uint64_t *scan_g, uint32_t n_args,
                          uint64_t threads, const uint64_t *locs) {
  extern __shared__ uint64_t scan_s[];
  const uint64_t *scan = load_scan(scan_s, scan_g, n_args);
  for (uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; tid < threads;
       tid += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t q = fl_batch_find(scan, n_args + 1, tid);
    const fl_batch_arg &a = args[q];
    uint64_t j = tid - scan[q];
    uint64_t k = j / a.lanes;
    if (k >= a.n) continue;
    uint64_t loc = locs[a.key_offset + k];
    if (loc == FL_LOC_NONE) continue;
    // Slab rows are 16-byte aligned, so the width chosen for `out` fits them.
    copy_unit(a.out + k * a.vec_bytes, (const uint8_t *)loc, a.width, (uint32_t)(j % a.lanes));
  }
}

// One warp per missed position: copies its unique row from the staging.
__global__ void scatter(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                        fl_miss_out m, const uint64_t *stage_base, const uint8_t *staging,
                        uint64_t n) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t r = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; r < n; r += warps) {
    uint32_t pos = m.pos[r];
    const fl_batch_arg &a = args[fl_batch_find(key_offsets, n_args, pos)];
    uint32_t ua = 0;
    uint64_t row = 0;
    int pointer;
    fl_miss_resolve(key_offsets, args, n_args, m.per_arg, m.set.uid[m.slot[r]], &ua, &row, &pointer);
    uint8_t *dst = a.out + (pos - a.key_offset) * a.vec_bytes;
    const uint8_t *s = staging + stage_base[ua] + row * a.vec_bytes;
    // Staged rows start 16-byte aligned per arg but pack at vec_bytes, so
    // the unit must divide the source address too.
    uint32_t width = fl_batch_width(a.vec_bytes, (uint64_t)dst | (uint64_t)s);
    for (uint32_t u = lane; u < a.vec_bytes / width; u += 32) copy_unit(dst, s, width, u);
  }
}

// Empties the set slots a batch used (those of its missed positions), so the
// next batch of the same shape needs no memset of the whole set.
__global__ void miss_reset(fl_miss_set set, const uint32_t *slot, uint64_t n) {
  for (uint64_t m = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; m < n;
       m += (uint64_t)gridDim.x * blockDim.x) {
    set.ids[slot[m]] = FL_MISS_SET_EMPTY;
    set.count[slot[m]] = 0;
  }
}

unsigned grid_for(uint64_t threads) {
  uint64_t g = (threads + kThreads - 1) / kThreads;
  if (g > 132ull * 64) g = 132ull * 64;  // grid-stride beyond ~64 blocks per SM
  return (unsigned)(g ? g : 1);
}

}  // namespace

extern "C" int fl_launch_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                               const uint64_t *scan, uint32_t n_args, uint64_t threads,
                               uint64_t n_keys, const uint32_t *now, uint64_t *locs, fl_miss_out m,
                               fl_publish pub, int clear_set, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  uint64_t slots = fl_miss_set_slots(n_keys, n_args);
  cudaError_t e = cudaSuccess;
  if (clear_set) e = cudaMemsetAsync(m.set.ids, 0xff, slots * sizeof *m.set.ids, s);
  if (e == cudaSuccess && clear_set)
    e = cudaMemsetAsync(m.set.count, 0, slots * sizeof *m.set.count, s);
  if (e != cudaSuccess) return (int)e;
  size_t smem = (n_args + 1) * sizeof(uint64_t);
  fused_index<<<grid_for(threads), kThreads, smem, s>>>(v, codes, args, scan, n_args, threads,
                                                         now, locs, m, pub);
  return (int)cudaGetLastError();
}

extern "C" int fl_launch_copy_hits(const fl_batch_arg *args, const uint64_t *scan,
                                   uint32_t n_args, uint64_t threads, const uint64_t *locs,
                                   void *stream) {
  if (threads == 0) return 0;
  size_t smem = (n_args + 1) * sizeof(uint64_t);
  copy_hits<<<grid_for(threads), kThreads, smem, (cudaStream_t)stream>>>(args, scan, n_args,
                                                                         threads, locs);
  return (int)cudaGetLastError();
}

extern "C" int fl_launch_scatter(const fl_batch_arg *args, const uint64_t *key_offsets,
                                 uint32_t n_args, fl_miss_out m, const uint64_t *stage_base,
                                 const uint8_t *staging, uint64_t n, void *stream) {
  if (n == 0) return 0;
  scatter<<<grid_for(n * 32), kThreads, 0, (cudaStream_t)stream>>>(args, key_offsets, n_args, m,
                                                                    stage_base, staging, n);
  return (int)cudaGetLastError();
}

extern "C" int fl_launch_miss_reset(fl_miss_out m, uint64_t n, void *stream) {
  if (n == 0) return 0;
  miss_reset<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(m.set, m.slot, n);
  return (int)cudaGetLastError();
}
