/* hd.h: FL_HD marks inline logic compiled both by nvcc (for kernels) and by
 * the host C compiler (for the host backend and CI tests): one source of truth
 * for every algorithm that runs on both sides. */
#ifndef FL_COMMON_HD_H
#define FL_COMMON_HD_H

#include <stdint.h>

#ifdef __CUDACC__
#define FL_HD __host__ __device__ __forceinline__
#else
#define FL_HD static inline
#endif

#endif
