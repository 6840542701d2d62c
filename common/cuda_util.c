/* cuda_util.c: device discovery and kernel loading, shared by every module. */
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#include "common/fault.h"
#include "include/fleche.h"

int fl_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

fl_status fl_load_module(const void *handle, const char *what, int (*load)(void)) {
  int e = fl_fault_hit(FL_FAULT_KERNEL_LOAD) ? (int)cudaErrorInvalidValue : load();
  if (e == 0) return FL_OK;
  (void)cudaGetLastError();
  return fl_fail(handle, FL_ERR_CUDA, "fl_cache_create: loading %s failed: %s", what,
                 cudaGetErrorString((cudaError_t)e));
}
