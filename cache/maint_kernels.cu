// maint_kernels.cu: CUDA kernels for index maintenance (reset, age histogram,
// eviction, erase; admission rounds are in fusion/admit_kernels.cu). All run
// on the cache's maintenance stream, one at a time, so index writers never
// race on a key (see index.h).
#include "cache/maint_kernels.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

unsigned grid_for(uint64_t n) {
  uint64_t g = (n + kThreads - 1) / kThreads;
  if (g > 65535ull * 16) g = 65535ull * 16;  // grid-stride loops cover the rest
  return (unsigned)(g ? g : 1);
}

__global__ void reset_kernel(fl_index_view v) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x)
    fl_index_clear_slot(&v, i);
}

__global__ void histogram_kernel(fl_index_view v, fl_entry_kind kind, uint32_t now,
                                 unsigned long long *hist) {
  __shared__ unsigned int local[FL_AGE_BUCKETS];
  for (unsigned b = threadIdx.x; b < FL_AGE_BUCKETS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x)
    if (fl_index_is_kind(&v, i, kind)) atomicAdd(&local[fl_index_age_bucket(now, *fl_index_ts(&v, i))], 1u);
  __syncthreads();
  for (unsigned b = threadIdx.x; b < FL_AGE_BUCKETS; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], (unsigned long long)local[b]);
}

__global__ void evict_kernel(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b, uint64_t quota,
                             uint64_t *locs, unsigned long long *counters) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x) {
    if (!fl_index_is_kind(&v, i, kind)) continue;
    uint32_t bucket = fl_index_age_bucket(now, *fl_index_ts(&v, i));
    if (bucket < b) continue;
    if (bucket == b && atomicAdd(&counters[1], 1ull) >= quota) continue;
    uint64_t l = fl_index_erase_slot(&v, i);
    if (l != FL_LOC_NONE) locs[atomicAdd(&counters[0], 1ull)] = l;
  }
}

__global__ void erase_kernel(fl_index_view v, const uint64_t *keys, uint64_t n, uint64_t *locs) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x)
    locs[i] = fl_index_erase(&v, keys[i]);
}

}  // namespace

extern "C" int fl_launch_index_reset(fl_index_view v, void *stream) {
  reset_kernel<<<grid_for(v.slots), kThreads, 0, (cudaStream_t)stream>>>(v);
  return (int)cudaGetLastError();
}

extern "C" int fl_launch_age_histogram(fl_index_view v, fl_entry_kind kind, uint32_t now,
                                       unsigned long long *hist, void *stream) {
  cudaError_t e = cudaMemsetAsync(hist, 0, FL_AGE_BUCKETS * sizeof *hist, (cudaStream_t)stream);
  if (e != cudaSuccess) return (int)e;
  histogram_kernel<<<grid_for(v.slots), kThreads, 0, (cudaStream_t)stream>>>(v, kind, now, hist);
  return (int)cudaGetLastError();
}

extern "C" int fl_launch_evict(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b,
                               uint64_t quota, uint64_t *locs, unsigned long long *counters,
                               void *stream) {
  cudaError_t e = cudaMemsetAsync(counters, 0, 2 * sizeof *counters, (cudaStream_t)stream);
  if (e != cudaSuccess) return (int)e;
  evict_kernel<<<grid_for(v.slots), kThreads, 0, (cudaStream_t)stream>>>(v, kind, now, b, quota,
                                                                         locs, counters);
  return (int)cudaGetLastError();
}

extern "C" int fl_launch_erase(fl_index_view v, const uint64_t *keys, uint64_t n, uint64_t *locs,
                               void *stream) {
  if (n == 0) return 0;
  erase_kernel<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(v, keys, n, locs);
  return (int)cudaGetLastError();
}
