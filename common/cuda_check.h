/* cuda_check.h: a failed CUDA call as fl_status, its message naming the call and place. */
#ifndef FL_COMMON_CUDA_CHECK_H
#define FL_COMMON_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "common/error.h"

/* FL_OK for cudaSuccess; otherwise records "CALL failed: REASON (FILE:LINE)"
 * for handle and returns FL_ERR_CUDA. err: a cudaError_t, or an int holding
 * one (the kernel launchers return int). */
static inline fl_status fl_cuda_check(const void *handle, int err, const char *call,
                                      const char *file, int line) {
  if (err == (int)cudaSuccess) return FL_OK;
  return fl_fail(handle, FL_ERR_CUDA, "%s failed: %s (%s:%d)", call,
                 cudaGetErrorString((cudaError_t)err), file, line);
}

/* Loads one module's kernels (load: its fl_*_kernels_load, which returns a
 * cudaError_t): FL_OK, or FL_ERR_CUDA recorded for handle, naming the
 * module ("the query kernels") and the reason. */
fl_status fl_load_module(const void *handle, const char *what, int (*load)(void));

/* The one check of a CUDA call: its fl_status, the failure recorded for
 * handle. Callers with cleanup keep it (`st = FL_CUDA_CHECK(h, call);`) and
 * go to their cleanup when it is not FL_OK. */
#define FL_CUDA_CHECK(handle, call) fl_cuda_check((handle), (int)(call), #call, __FILE__, __LINE__)

/* FL_CUDA_CHECK, returning its failure from the enclosing function (the
 * call is named as written: not passed on through FL_CUDA_CHECK, which
 * would name it macro-expanded). */
#define FL_CUDA_TRY(handle, call)                                                       \
  do {                                                                                  \
    fl_status fl_st_ = fl_cuda_check((handle), (int)(call), #call, __FILE__, __LINE__); \
    if (fl_st_ != FL_OK) return fl_st_;                                                 \
  } while (0)

#endif
