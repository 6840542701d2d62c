// encode_kernel.cu: the GPU batch encode, running fl_code_encode from
// flat_key.h (the same code as the host path, so keys are identical).
#include <cuda_runtime.h>

#include "common/launch_to.h"
#include "encoding/encoder.h"

namespace {

// Grid-stride over ids; an out-of-range id leaves its key unwritten and lowers
// *first_bad to its index (atomicMin: the smallest index wins whatever the
// thread order, so the message names the same id as the host path).
__global__ void fl_encode_kernel(fl_code code, uint32_t key_bits, const uint64_t *ids,
                                 uint64_t n, uint64_t *keys, unsigned long long *first_bad) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t key;
    if (fl_code_encode(&code, key_bits, ids[i], &key))
      atomicMin(first_bad, (unsigned long long)i);
    else
      keys[i] = key;
  }
}

}  // namespace

extern "C" int fl_encode_launch(fl_code code, uint32_t key_bits, const uint64_t *ids, uint64_t n,
                                uint64_t *keys, unsigned long long *first_bad, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaMemsetAsync(first_bad, 0xff, sizeof *first_bad, s);
  if (err != cudaSuccess || n == 0) return err;
  const unsigned threads = 256;
  uint64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535) blocks = 65535;  // grid-stride covers the rest
  void *params[] = {&code, &key_bits, &ids, &n, &keys, &first_bad};
  return fl_launch_kernel(fl_launch_on(stream), (const void *)fl_encode_kernel,
                          (unsigned)blocks, threads, 0, params);
}
