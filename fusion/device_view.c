/* device_view.c: caller pointers resolved to device addresses
 * (device_view.h). A query's buffers mostly lie in a few allocations (one
 * block of ids, a caching allocator's segments), and every driver call takes
 * the driver's locks, which at times stall every thread's calls for a
 * millisecond or more (tools/driver_calls.c): one call per allocation, not
 * per buffer. */
#include "fusion/device_view.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "common/mutant.h"
#include "fusion/query.h"

typedef CUresult (*get_attributes_fn)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
static get_attributes_fn get_attributes; /* NULL: the runtime's lookup, one per buffer */
static pthread_once_t found = PTHREAD_ONCE_INIT;

/* The driver's cuPointerGetAttributes, which tells an allocation's range
 * (cudart is linked statically: the runtime gives the driver's entry). */
static void find_get_attributes(void) {
  void *f = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault,
                                       &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    get_attributes = (get_attributes_fn)f;
  else
    (void)cudaGetLastError();
}

static void remember(fl_view_ranges *r, uintptr_t lo, uintptr_t size) {
  uint32_t i = r->n < FL_VIEW_RANGES ? r->n++ : r->next++ % FL_VIEW_RANGES;
  r->lo[i] = lo;
  r->hi[i] = lo + size;
}

const void *fl_device_view(fl_view_ranges *r, const void *p) {
  const uintptr_t a = (uintptr_t)p;
  for (uint32_t i = 0; i < r->n; i++)
    if (FL_MUTANT_ON(28) || (a >= r->lo[i] && a < r->hi[i])) return p;
  pthread_once(&found, find_get_attributes);
  if (get_attributes) {
    CUpointer_attribute what[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUmemorytype type = 0;
    CUdeviceptr dev = 0, lo = 0;
    size_t size = 0;
    void *data[4] = {&type, &dev, &lo, &size};
    /* Unregistered host memory: success, every attribute 0. */
    if (get_attributes(4, what, data, (CUdeviceptr)a) == CUDA_SUCCESS) {
      if (!type || !dev) return NULL;
      if (dev == a && lo <= a && a - lo < size) remember(r, lo, size);
      return (const void *)(uintptr_t)dev;
    }
  }
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return at.type == cudaMemoryTypeUnregistered ? NULL : at.devicePointer;
}

void fl_query_cuda_views(const fl_table_query *queries, uint32_t n_queries, fl_query_view *views) {
  fl_view_ranges r = {0};
  for (uint32_t i = 0; i < n_queries; i++) {
    views[i].ids = queries[i].n ? fl_device_view(&r, queries[i].ids) : NULL;
    views[i].out = queries[i].n ? (uint8_t *)fl_device_view(&r, queries[i].out) : NULL;
  }
}
