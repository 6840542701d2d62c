/* encode_gpu.c: fl_encoding_encode(use_gpu = 1) on host buffers: stages ids
 * on the device, runs the encode kernel, copies keys back. Synchronous; uses a
 * stream of its own, so concurrent callers do not serialise on the default
 * stream. */
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdio.h>

#include "common/cuda_check.h"
#include "common/error.h"
#include "encoding/encoder.h"

fl_status fl_encoding_encode_gpu(const fl_encoding *e, uint32_t table, const uint64_t *ids,
                                 size_t n, uint64_t *keys) {
  if (fl_cuda_device_count() <= 0)
    return fl_fail(e, FL_ERR_NO_DEVICE, "fl_encoding_encode: table %u: no usable CUDA device",
                   table);
  fl_status st = FL_OK;
  cudaStream_t stream = NULL;
  uint64_t *d_ids = NULL, *d_keys = NULL;
  unsigned long long *d_bad = NULL, bad = 0;
  size_t bytes = n * sizeof(uint64_t);
  /* Each step runs while every one before it succeeded. */
  st = FL_CUDA_CHECK(e, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (st == FL_OK) st = FL_CUDA_CHECK(e, cudaMalloc((void **)&d_ids, bytes ? bytes : 1));
  if (st == FL_OK) st = FL_CUDA_CHECK(e, cudaMalloc((void **)&d_keys, bytes ? bytes : 1));
  if (st == FL_OK) st = FL_CUDA_CHECK(e, cudaMalloc((void **)&d_bad, sizeof *d_bad));
  if (st == FL_OK && n)
    st = FL_CUDA_CHECK(e, cudaMemcpyAsync(d_ids, ids, bytes, cudaMemcpyHostToDevice, stream));
  if (st == FL_OK)
    st = FL_CUDA_CHECK(e, fl_encode_launch(fl_encoding_codes(e)[table], fl_encoding_key_bits(e),
                                           d_ids, n, d_keys, d_bad, stream));
  if (st == FL_OK)
    st = FL_CUDA_CHECK(e, cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
  if (st == FL_OK) st = FL_CUDA_CHECK(e, cudaStreamSynchronize(stream));
  if (st != FL_OK) goto done;
  if (bad != ~0ull) {
    st = fl_fail(e, FL_ERR_OUT_OF_RANGE,
                 "fl_encoding_encode: table %u '%s': id %" PRIu64 " (index %llu) is not below "
                 "its corpus size %" PRIu64,
                 table, fl_encoding_table_name(e, table), ids[bad], bad,
                 fl_encoding_codes(e)[table].corpus);
    goto done;
  }
  /* Keys are written only after every id passed: a failed call changes nothing. */
  if (n)
    st = FL_CUDA_CHECK(e, cudaMemcpyAsync(keys, d_keys, bytes, cudaMemcpyDeviceToHost, stream));
  if (st == FL_OK) st = FL_CUDA_CHECK(e, cudaStreamSynchronize(stream));
done:
  cudaFree(d_ids);
  cudaFree(d_keys);
  cudaFree(d_bad);
  if (stream) cudaStreamDestroy(stream);
  if (st == FL_ERR_CUDA) {
    /* The call's message, prefixed with the call and table it served. */
    char why[512];
    snprintf(why, sizeof why, "%s", fl_error_get(e));
    st = fl_fail(e, FL_ERR_CUDA, "fl_encoding_encode: table %u: %s", table, why);
  }
  return st;
}
