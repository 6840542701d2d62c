// query_kernels.cu: the fused query kernels. One launch of fused_index covers
// every table of a query (self-identification through the scan), one launch
// of copy_hits moves every hit vector with several threads per vector, and
// scatter writes the rows fetched from the store. Slabs are read without
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

__global__ void fused_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                            const uint64_t *scan_g, uint32_t n_args, uint64_t threads,
                            uint32_t now, uint64_t *locs, uint32_t *miss_pos, uint64_t *miss_ids,
                            uint64_t *miss_locs, unsigned long long *counters) {
  extern __shared__ uint64_t scan_s[];
  const uint64_t *scan = load_scan(scan_s, scan_g, n_args);
  for (uint64_t base = blockIdx.x * (uint64_t)blockDim.x; base < threads;
       base += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t tid = base + threadIdx.x;
    bool miss = false;
    uint64_t pos = 0, id = 0, dram = 0;
    if (tid < threads) {
      uint32_t q = fl_batch_find(scan, n_args + 1, tid);
      const fl_batch_arg a = args[q];
      uint64_t i = tid - scan[q];
      if (i < a.n) {
        pos = a.key_offset + i;
        id = a.ids[i];
        uint64_t key, loc = FL_LOC_NONE;
        fl_code code = codes[a.table];
        if (fl_code_encode(&code, v.key_bits, id, &key) != 0) {
          atomicMin(&counters[1], (unsigned long long)pos);
        } else {
          int64_t slot = fl_index_find(&v, key, &loc);
          if (slot >= 0) fl_index_touch(&v, slot, now);
          if (slot < 0 || (loc & FL_LOC_DRAM_BIT)) {
            /* A unified-index pointer goes to the host with the misses, but
             * with its row address: the store lookup is skipped. */
            dram = slot >= 0 ? loc : 0;
            loc = FL_LOC_NONE;
            miss = true;
          }
        }
        locs[pos] = loc;
      }
    }
    // Warp-aggregated append to the miss list: one atomic per warp.
    unsigned mask = __ballot_sync(0xffffffffu, miss);
    if (mask) {
      unsigned lane = threadIdx.x & 31u;
      unsigned leader = __ffs(mask) - 1;
      unsigned long long first = 0;
      if (lane == leader) first = atomicAdd(&counters[0], (unsigned long long)__popc(mask));
      first = __shfl_sync(0xffffffffu, first, leader);
      if (miss) {
        unsigned long long slot = first + __popc(mask & ((1u << lane) - 1u));
        miss_pos[slot] = (uint32_t)pos;
        miss_ids[slot] = id;
        miss_locs[slot] = dram;
      }
    }
  }
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

// One warp per fetched row.
__global__ void scatter(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                        const uint8_t *src, const uint64_t *src_off, const uint32_t *pos,
                        uint64_t n) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t r = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; r < n; r += warps) {
    uint32_t q = fl_batch_find(key_offsets, n_args, pos[r]);
    const fl_batch_arg &a = args[q];
    uint8_t *dst = a.out + (pos[r] - a.key_offset) * a.vec_bytes;
    const uint8_t *s = src + src_off[r];
    // Staged rows start 16-byte aligned per query but pack at vec_bytes, so
    // the unit must divide the source offset too.
    uint32_t width = fl_batch_width(a.vec_bytes, (uint64_t)dst | src_off[r]);
    for (uint32_t u = lane; u < a.vec_bytes / width; u += 32) copy_unit(dst, s, width, u);
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
                               uint32_t now, uint64_t *locs, uint32_t *miss_pos,
                               uint64_t *miss_ids, uint64_t *miss_locs, unsigned long long *counters,
                               void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  cudaError_t e = cudaMemsetAsync(counters, 0, sizeof *counters, s);
  if (e == cudaSuccess) e = cudaMemsetAsync(counters + 1, 0xff, sizeof *counters, s);
  if (e != cudaSuccess) return (int)e;
  size_t smem = (n_args + 1) * sizeof(uint64_t);
  fused_index<<<grid_for(threads), kThreads, smem, s>>>(v, codes, args, scan, n_args, threads,
                                                         now, locs, miss_pos, miss_ids, miss_locs, counters);
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
                                 uint32_t n_args, const uint8_t *src, const uint64_t *src_off,
                                 const uint32_t *pos, uint64_t n, void *stream) {
  if (n == 0) return 0;
  scatter<<<grid_for(n * 32), kThreads, 0, (cudaStream_t)stream>>>(args, key_offsets, n_args, src,
                                                                    src_off, pos, n);
  return (int)cudaGetLastError();
}
