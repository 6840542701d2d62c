/* _fast_view.h: the facts of one array as fleche._fast reads them (its
 * fast_view), shared with the optional torch reader fleche._torch_view
 * (_torch_view.cc), which fills them from the tensor's C++ object, makes
 * new tensors, and hands _fast both in a capsule. C and C++. */
#ifndef FLECHE_FAST_VIEW_H
#define FLECHE_FAST_VIEW_H

#include <Python.h>
#include <stdint.h>

enum { FAST_HOST = -1 }; /* the device of host memory, as _buffers.HOST */

typedef enum { DT_OTHER, DT_UINT64, DT_INT64, DT_FLOAT32, DT_FLOAT16 } fast_dtype;

/* The facts of one array, as _buffers.View has them. */
typedef struct fast_view {
  uintptr_t addr;
  Py_ssize_t shape[2];
  int ndim;
  fast_dtype dtype;
  int device;      /* FAST_HOST or a CUDA ordinal */
  int torch;       /* a torch tensor (its device memory orders through torch_order) */
  int torch_cuda;  /* a torch CUDA tensor: a stream source (Cache._stream_source) */
  int readonly;
} fast_view;

/* What fleche._torch_view gives _fast for exact torch.Tensor objects (the
 * caller checked the type), from the tensor's C++ object:
 * read: 1 when the tensor is strided, C-contiguous, of 1 or 2 dimensions
 *   and on the CPU or a CUDA device, with v filled as _fast's accessor path
 *   fills it (dtype DT_OTHER for a dtype a query never takes); 0: declined
 *   (the accessor path then reads it). Never raises.
 * empty: a new (n, dim) tensor of dtype (DT_FLOAT32 or DT_FLOAT16) on the
 *   device of `like`, as torch.empty((n, dim), dtype=..., device=like.device)
 *   makes it (on a CUDA device, from torch's caching allocator on that
 *   device's current stream); NULL, with no exception set, when torch
 *   failed (the caller declines). */
typedef struct fast_torch_reader {
  int (*read)(PyObject *tensor, fast_view *v);
  PyObject *(*empty)(PyObject *like, Py_ssize_t n, Py_ssize_t dim, fast_dtype dtype);
} fast_torch_reader;

/* The capsule name of fleche._torch_view.READER. */
#define FAST_TORCH_READER_CAPSULE "fleche._torch_view.READER"

#endif
