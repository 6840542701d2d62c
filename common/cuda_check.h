/* cuda_check.h: turning CUDA errors into fl_status with a message naming the
 * call (for .cu files and C files that link cudart). */
#ifndef FL_COMMON_CUDA_CHECK_H
#define FL_COMMON_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include "common/error.h"

#define FL_CUDA_TRY(handle, call)                                                      \
  do {                                                                                 \
    cudaError_t fl_e_ = (call);                                                        \
    if (fl_e_ != cudaSuccess)                                                          \
      return fl_fail((handle), FL_ERR_CUDA, "%s failed: %s (%s:%d)", #call,            \
                     cudaGetErrorString(fl_e_), __FILE__, __LINE__);                   \
  } while (0)

#endif
