// bench_linear_probe.cu: a plain linear-probing table, the floor the cache's
// fused index kernel is measured against (see bench_linear_probe.h).
#include "tools/bench_linear_probe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace {

constexpr uint64_t kEmpty = ~0ull;

__device__ uint64_t home(uint64_t key, uint64_t slots) {
  key ^= key >> 33;  // murmur3 finalizer
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return __umul64hi(key, slots);
}

__global__ void insert(uint64_t *keys, uint64_t *vals, uint64_t slots, const uint64_t *in, uint64_t n) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint64_t k = in[i], s = home(k, slots);
  for (;;) {
    unsigned long long old = atomicCAS((unsigned long long *)&keys[s], kEmpty, k);
    if (old == kEmpty || old == k) {
      vals[s] = i + 1;
      return;
    }
    s = s + 1 == slots ? 0 : s + 1;
  }
}

__global__ void find(const uint64_t *keys, const uint64_t *vals, uint64_t slots, const uint64_t *q,
                     uint64_t n, uint64_t *out, unsigned long long *found) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint64_t k = q[i], s = home(k, slots), v = 0;
  for (;;) {
    uint64_t cur = keys[s];
    if (cur == k) { v = vals[s]; break; }
    if (cur == kEmpty) break;
    s = s + 1 == slots ? 0 : s + 1;
  }
  out[i] = v;
  if (v) atomicAdd(found, 1ull);
}

}  // namespace

extern "C" int fl_bench_linear_probe(const uint64_t *keys, uint64_t n_keys, uint64_t slots,
                                     const uint64_t *queries, uint64_t n_queries, int reps,
                                     double *ms, uint64_t *found) {
  uint64_t *d_keys = nullptr, *d_vals = nullptr, *d_in = nullptr, *d_q = nullptr, *d_out = nullptr;
  unsigned long long *d_found = nullptr;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaError_t e = cudaMalloc(&d_keys, slots * 8);
  if (!e) e = cudaMalloc(&d_vals, slots * 8);
  if (!e) e = cudaMalloc(&d_in, n_keys * 8);
  if (!e) e = cudaMalloc(&d_q, n_queries * 8);
  if (!e) e = cudaMalloc(&d_out, n_queries * 8);
  if (!e) e = cudaMalloc(&d_found, 8);
  if (!e) e = cudaMemset(d_keys, 0xff, slots * 8);
  if (!e) e = cudaMemcpy(d_in, keys, n_keys * 8, cudaMemcpyHostToDevice);
  if (!e) e = cudaMemcpy(d_q, queries, n_queries * 8, cudaMemcpyHostToDevice);
  if (!e) {
    insert<<<(unsigned)((n_keys + 255) / 256), 256>>>(d_keys, d_vals, slots, d_in, n_keys);
    e = cudaDeviceSynchronize();
  }
  std::vector<float> t;
  for (int r = 0; r < reps && !e; r++) {
    cudaMemset(d_found, 0, 8);
    cudaEventRecord(a);
    find<<<(unsigned)((n_queries + 255) / 256), 256>>>(d_keys, d_vals, slots, d_q, n_queries,
                                                       d_out, d_found);
    cudaEventRecord(b);
    e = cudaEventSynchronize(b);
    float x = 0;
    cudaEventElapsedTime(&x, a, b);
    t.push_back(x);
  }
  unsigned long long f = 0;
  if (!e) e = cudaMemcpy(&f, d_found, 8, cudaMemcpyDeviceToHost);
  *found = f;
  std::sort(t.begin(), t.end());
  *ms = t.empty() ? 0 : t[t.size() / 2];
  cudaFree(d_keys);
  cudaFree(d_vals);
  cudaFree(d_in);
  cudaFree(d_q);
  cudaFree(d_out);
  cudaFree(d_found);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return (int)e;
}
