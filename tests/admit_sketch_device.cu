// admit_sketch_device.cu: for admit_sketch_test only (admit_sketch_device.h):
// the sketch's FL_HD additions and aging, run by device threads.
#include "tests/admit_sketch_device.h"

#include <cuda_runtime.h>

#include "cache/admit_sketch.h"

namespace {

__global__ void add(fl_sketch_view s, const uint64_t *keys, const uint32_t *times, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) fl_sketch_add(&s, keys[i], times[i]);
}

__global__ void age(fl_sketch_view s, uint32_t k) {
  uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (w <= s.mask) s.word[w] = fl_sketch_age_word(s.word[w], k);
}

}  // namespace

extern "C" int fl_test_sketch_on_device(const uint64_t *keys, const uint32_t *times, size_t n,
                                        uint32_t halvings, uint32_t *words, uint64_t n_words) {
  uint64_t *dk = nullptr;
  uint32_t *dt = nullptr, *dw = nullptr;
  cudaError_t e = cudaMalloc(&dk, n * 8);
  if (e == cudaSuccess) e = cudaMalloc(&dt, n * 4);
  if (e == cudaSuccess) e = cudaMalloc(&dw, n_words * 4);
  if (e == cudaSuccess) e = cudaMemcpy(dk, keys, n * 8, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dt, times, n * 4, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dw, words, n_words * 4, cudaMemcpyHostToDevice);
  fl_sketch_view s = {dw, n_words - 1};
  if (e == cudaSuccess) {
    add<<<(unsigned)((n + 255) / 256), 256>>>(s, dk, dt, n);
    if (halvings) age<<<(unsigned)((n_words + 255) / 256), 256>>>(s, halvings);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(words, dw, n_words * 4, cudaMemcpyDeviceToHost);
  cudaFree(dk);
  cudaFree(dt);
  cudaFree(dw);
  return (int)e;
}
