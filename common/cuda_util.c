/* cuda_util.c: device discovery shared by every module. */
#include <cuda_runtime_api.h>
#include "include/fleche.h"

int fl_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}
