/* fleche._torch_view: reads a torch tensor's facts for fleche._fast from
 * the tensor's C++ object (at::Tensor), where the accessor path of _fast.c
 * makes seven Python calls on it (dtype, is_cuda, is_cpu, get_device,
 * is_contiguous, shape, data_ptr: 0.25 us a tensor with torch 1.13 on a
 * 2-core CPU machine, 0.5 to 0.9 with torch 2.11 on the H200's host, so 13
 * to 47 us for a query of 26 tables' ids and outputs), and makes the
 * outputs of a query called without `out` (at::empty, where torch.empty
 * from Python costs a few us a tensor). The module holds one capsule,
 * READER (a fast_torch_reader, _fast_view.h), and the torch
 * version it was compiled against, TORCH_VERSION: at::Tensor's layout is
 * torch's own, so fleche._buffers hands the reader to _fast only when the
 * running torch is that version.
 *
 * Optional: built only against an installed torch (python/setup.py with
 * FLECHE_TORCH=1, tools/gpu_python.sh); without it _fast reads tensors
 * through their accessors, with the same results. Imported only once torch
 * is (its libraries are then loaded). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ATen/ATen.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

#include "_fast_view.h"

namespace {

fast_dtype dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Long: return DT_INT64;
    case c10::ScalarType::Float: return DT_FLOAT32;
    case c10::ScalarType::Half: return DT_FLOAT16;
    default: break;
  }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  if (t == c10::ScalarType::UInt64) return DT_UINT64;
#endif
  return DT_OTHER;
}

// The caller checked that `obj` is exactly a torch.Tensor. The checks are
// those the accessor path makes, in its order; any C++ exception declines.
int read_tensor(PyObject *obj, fast_view *v) noexcept {
  try {
    const at::Tensor &t = THPVariable_Unpack(obj);
    if (!t.defined() || t.layout() != c10::kStrided) return 0;
    v->dtype = dtype_of(t.scalar_type());
    if (v->dtype == DT_OTHER) return 0;
    const c10::Device d = t.device();
    if (!d.is_cuda() && !d.is_cpu()) return 0;
    v->device = d.is_cuda() ? d.index() : FAST_HOST;
    if (d.is_cuda() && v->device < 0) return 0;
    if (!t.is_contiguous()) return 0;
    const int64_t dims = t.dim();
    if (dims < 1 || dims > 2) return 0;
    v->ndim = (int)dims;
    for (int64_t k = 0; k < dims; k++) v->shape[k] = (Py_ssize_t)t.size(k);
    v->addr = reinterpret_cast<uintptr_t>(t.data_ptr());
    return 1;
  } catch (...) {
    return 0;
  }
}

PyObject *empty(PyObject *like, Py_ssize_t n, Py_ssize_t dim, fast_dtype dtype) noexcept {
  try {
    const at::Tensor &t = THPVariable_Unpack(like);
    at::TensorOptions options = at::TensorOptions()
                                    .dtype(dtype == DT_FLOAT16 ? at::kHalf : at::kFloat)
                                    .device(t.device());
    PyObject *o = THPVariable_Wrap(at::empty({(int64_t)n, (int64_t)dim}, options));
    if (o == nullptr) PyErr_Clear();
    return o;
  } catch (...) {
    return nullptr;
  }
}

const fast_torch_reader torch_reader = {read_tensor, empty};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "fleche._torch_view",
                      "fleche._fast's reader of torch tensors", -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_view(void) {
  PyObject *m = PyModule_Create(&module);
  if (m == nullptr) return nullptr;
  PyObject *reader = PyCapsule_New(const_cast<fast_torch_reader *>(&torch_reader),
                                   FAST_TORCH_READER_CAPSULE, nullptr);
  if (reader == nullptr || PyModule_AddObject(m, "READER", reader) != 0 ||
      PyModule_AddStringConstant(m, "TORCH_VERSION", TORCH_VERSION) != 0) {
    Py_XDECREF(reader);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
