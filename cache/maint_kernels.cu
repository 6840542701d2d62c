// maint_kernels.cu: CUDA kernels for index maintenance (reset, age histogram,
// eviction and the compaction and sweep of tombstones after it, erase, and a
// round's eviction; the rest of an admission round is
// in fusion/admit_kernels.cu). All run
// on the cache's maintenance stream, one at a time, so index writers never
// race on a key (see index.h).
#include "cache/maint_kernels.h"

#include <cuda_runtime.h>

#include "cache/evict_pick.h"

namespace {

constexpr int kThreads = 256;

// Blocks per SM for the scans that run while queries do (below).
constexpr unsigned kServingBlocksPerSm = 2;

unsigned grid_for(uint64_t n) {
  uint64_t g = (n + kThreads - 1) / kThreads;
  if (g > 65535ull * 16) g = 65535ull * 16;  // grid-stride loops cover the rest
  return (unsigned)(g ? g : 1);
}

// The grid of an index scan that runs beside queries (an eviction's
// histogram, pick, compaction and sweep): a quarter of each SM's threads.
// Each block loops over its stride until the scan ends, so a grid that
// fills every SM keeps the queries' kernels, launched meanwhile on other
// streams, off the device for the whole scan (2.6 ms stream waits during
// a 68,000-entry eviction on the H200); this leaves them room on every SM.
unsigned serving_grid(uint64_t n) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
    sms = 132;  // the H100's and H200's: it bounds the grid, nothing else
  const unsigned g = grid_for(n), cap = (unsigned)sms * kServingBlocksPerSm;
  return g < cap ? g : cap;
}

__global__ void reset_kernel(fl_index_view v) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x)
    fl_index_clear_slot(&v, i);
}

// Adds the ages of the entries of `kind` to hist.
__device__ void count_ages(fl_index_view v, fl_entry_kind kind, uint32_t now,
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

// Adds a thread's victims to the tally: one atomic per warp (every lane
// of the warp calls it, after its loop).
__device__ void tally_victims(fl_evict_tally tally, unsigned long long sum,
                              unsigned long long n) {
  for (int d = 16; d > 0; d /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, d);
    n += __shfl_down_sync(0xffffffffu, n, d);
  }
  if ((threadIdx.x & 31u) == 0 && n) {
    atomicAdd(&tally.freq->victim_sum, sum);
    atomicAdd(&tally.freq->victim_n, n);
  }
}

// Consecutive tickets of *counter for the lanes of the warp here that want
// one, with one atomic a warp instead of one a lane: an eviction burst
// claims hundreds of thousands of tickets, which lane by lane serialize on
// one address while the kernel holds every SM and the queries beside it
// wait. Lanes that want none get 0.
__device__ unsigned long long warp_claim(unsigned long long *counter, bool want) {
  const unsigned here = __activemask();
  const unsigned wanting = __ballot_sync(here, want);
  if (!want) return 0;
  const unsigned lane = threadIdx.x & 31u;
  const int leader = __ffs(wanting) - 1;
  unsigned long long base = 0;
  if ((int)lane == leader) base = atomicAdd(counter, (unsigned long long)__popc(wanting));
  base = __shfl_sync(wanting, base, leader);
  return base + __popc(wanting & ((1u << lane) - 1u));
}

// Tombstones the picked entries of `kind` (evict_pick.h): those older than
// bucket b, and `quota` of bucket b, claimed through *in_b. At most cap are
// taken, each claiming its place in locs through *taken before its erase,
// so that no slab is removed without a place to go: the t-th taken goes to
// locs[(at + t) % ring_cap] (a ring of ring_cap >= cap free places from at).
// Cached entries taken are tallied for TinyLFU when tally.freq is set.
__device__ void evict_picked(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b,
                             uint64_t quota, unsigned long long *in_b,
                             unsigned long long *taken, uint64_t *locs, uint64_t cap,
                             uint64_t at, uint64_t ring_cap, fl_evict_tally tally) {
  unsigned long long sum = 0, n = 0;
  bool counting = tally.freq && kind == FL_ENTRY_CACHED;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x) {
    // Every lane reaches both claims (warp_claim), wanting a ticket or not.
    const bool live = fl_index_is_kind(&v, i, kind);
    const uint32_t bucket = live ? fl_index_age_bucket(now, *fl_index_ts(&v, i)) : 0;
    const bool at_b = live && bucket == b;
    bool take = live && bucket > b;
    if (warp_claim(in_b, at_b) < quota && at_b) take = true;
    unsigned long long t = warp_claim(taken, take);
    if (!take || t >= cap) continue;
    uint64_t key = fl_index_key(&v, i);
    uint64_t loc = fl_index_erase_slot(&v, i);
    locs[(at + t) % ring_cap] = loc;
    if (counting && loc != FL_LOC_NONE) sum += fl_sketch_estimate(&tally.sketch, key), n++;
  }
  if (counting) tally_victims(tally, sum, n);
}

// After an eviction, before the next inserts, two kernels (index.h): keys
// move back into their clusters' tombstones, one thread a cluster; then the
// tombstones no chain needs become never-used, one thread a slot.
__device__ void compact_all(fl_index_view v) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x)
    if (fl_index_cluster_start(&v, i)) fl_index_compact_cluster(&v, i);
}

__device__ void sweep_all(fl_index_view v) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < v.slots;
       i += (uint64_t)gridDim.x * blockDim.x)
    fl_index_sweep_slot(&v, i);
}

__global__ void histogram_kernel(fl_index_view v, fl_entry_kind kind, uint32_t now,
                                 unsigned long long *hist) {
  count_ages(v, kind, now, hist);
}

__global__ void evict_kernel(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b, uint64_t quota,
                             uint64_t *locs, unsigned long long *counters, fl_evict_tally tally) {
  evict_picked(v, kind, now, b, quota, &counters[1], &counters[0], locs, v.slots, 0, v.slots,
               tally);
}

__global__ void compact_kernel(fl_index_view v) { compact_all(v); }
__global__ void sweep_kernel(fl_index_view v) { sweep_all(v); }

__global__ void erase_kernel(fl_index_view v, const uint64_t *keys, uint64_t n, uint64_t *locs) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x)
    locs[i] = fl_index_erase(&v, keys[i]);
}

// A round's eviction: the histogram, the pick, the evict, with no host in
// between. Each reads `want` and stops at once when it is 0, the common
// case below the high watermark.
__global__ void round_histogram(fl_index_view v, const fl_evict_in *in, fl_evict_dev d) {
  if (in->want) count_ages(v, FL_ENTRY_CACHED, in->now, d.hist);
}

// One block: the bucket walk is sequential and at most FL_AGE_BUCKETS long.
// Leaves the histogram zero for the next round.
__global__ void round_pick(const fl_evict_in *in, fl_evict_dev d) {
  if (in->want == 0) return;
  if (threadIdx.x == 0) {
    uint32_t b;
    uint64_t quota;
    fl_evict_pick((const uint64_t *)d.hist, in->want, &b, &quota);
    d.pick[0] = b, d.pick[1] = quota, d.pick[2] = 0;
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b < FL_AGE_BUCKETS; b += blockDim.x) d.hist[b] = 0;
}

// Hits since the histogram only make entries younger (fl_index_age_bucket),
// so the picked entries are at most `want`.
__global__ void round_evict(fl_index_view v, const fl_evict_in *in, fl_evict_dev d) {
  if (in->want)
    evict_picked(v, FL_ENTRY_CACHED, in->now, (uint32_t)d.pick[0], d.pick[1], &d.pick[2], d.taken,
                 in->ring, in->want, in->at, in->ring_cap, d.tally);
}

__global__ void round_compact(fl_index_view v, const fl_evict_in *in) {
  if (in->want) compact_all(v);
}

__global__ void round_sweep(fl_index_view v, const fl_evict_in *in) {
  if (in->want) sweep_all(v);
}

}  // namespace

extern "C" int fl_launch_round_evict(fl_launch_to to, fl_index_view v, const fl_evict_in *in,
                                     fl_evict_dev d) {
  // Every round runs these, most with nothing to evict (they return at once).
  const unsigned grid = serving_grid(v.slots);
  void *params[] = {&v, &in, &d};
  cudaError_t e = fl_launch_kernel(to, (const void *)round_histogram, grid, kThreads, 0, params);
  void *pick_params[] = {&in, &d};
  if (e == cudaSuccess)
    e = fl_launch_kernel(to, (const void *)round_pick, 1, kThreads, 0, pick_params);
  if (e == cudaSuccess)
    e = fl_launch_kernel(to, (const void *)round_evict, grid, kThreads, 0, params);
  void *tidy_params[] = {&v, &in};
  if (e == cudaSuccess)
    e = fl_launch_kernel(to, (const void *)round_compact, grid, kThreads, 0, tidy_params);
  if (e == cudaSuccess)
    e = fl_launch_kernel(to, (const void *)round_sweep, grid, kThreads, 0, tidy_params);
  return (int)e;
}

extern "C" int fl_launch_index_reset(fl_index_view v, void *stream) {
  void *params[] = {&v};
  return (int)fl_launch_kernel(fl_launch_on(stream), (const void *)reset_kernel,
                               grid_for(v.slots), kThreads, 0, params);
}

extern "C" int fl_launch_age_histogram(fl_index_view v, fl_entry_kind kind, uint32_t now,
                                       unsigned long long *hist, void *stream) {
  cudaError_t e = cudaMemsetAsync(hist, 0, FL_AGE_BUCKETS * sizeof *hist, (cudaStream_t)stream);
  if (e != cudaSuccess) return (int)e;
  void *params[] = {&v, &kind, &now, &hist};
  return (int)fl_launch_kernel(fl_launch_on(stream), (const void *)histogram_kernel,
                               serving_grid(v.slots), kThreads, 0, params);
}

extern "C" int fl_launch_evict(fl_index_view v, fl_entry_kind kind, uint32_t now, uint32_t b,
                               uint64_t quota, uint64_t *locs, unsigned long long *counters,
                               fl_evict_tally tally, void *stream) {
  cudaError_t e = cudaMemsetAsync(counters, 0, 2 * sizeof *counters, (cudaStream_t)stream);
  if (e != cudaSuccess) return (int)e;
  void *params[] = {&v, &kind, &now, &b, &quota, &locs, &counters, &tally};
  const unsigned grid = serving_grid(v.slots);
  e = fl_launch_kernel(fl_launch_on(stream), (const void *)evict_kernel, grid, kThreads, 0, params);
  void *tidy_params[] = {&v};
  if (e == cudaSuccess)
    e = fl_launch_kernel(fl_launch_on(stream), (const void *)compact_kernel, grid, kThreads, 0,
                         tidy_params);
  if (e == cudaSuccess)
    e = fl_launch_kernel(fl_launch_on(stream), (const void *)sweep_kernel, grid, kThreads, 0,
                         tidy_params);
  return (int)e;
}

extern "C" int fl_launch_erase(fl_index_view v, const uint64_t *keys, uint64_t n, uint64_t *locs,
                               void *stream) {
  if (n == 0) return 0;
  void *params[] = {&v, &keys, &n, &locs};
  return (int)fl_launch_kernel(fl_launch_on(stream), (const void *)erase_kernel,
                               grid_for(n), kThreads, 0, params);
}

extern "C" int fl_maint_kernels_load(void) {
  const void *kernels[] = {(const void *)reset_kernel, (const void *)histogram_kernel, (const void *)evict_kernel, (const void *)erase_kernel, (const void *)round_histogram, (const void *)round_pick, (const void *)round_evict, (const void *)compact_kernel, (const void *)sweep_kernel, (const void *)round_compact, (const void *)round_sweep};
  return fl_load_kernels(kernels, (int)(sizeof kernels / sizeof *kernels));
}
