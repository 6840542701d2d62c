// model_delay.cu: the replay's stand-in model (model_delay.h).
#include <cuda_runtime_api.h>

#include "tools/model_delay.h"

namespace {

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void wait_ns(uint64_t ns) {
  const uint64_t end = now_ns() + ns;
  while (now_ns() < end) __nanosleep(1000);
}

}  // namespace

extern "C" int fl_model_delay(void *stream, uint64_t ns) {
  wait_ns<<<1, 1, 0, (cudaStream_t)stream>>>(ns);
  return (int)cudaGetLastError();
}
