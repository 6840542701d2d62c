/* fleche._fast: Cache.query(queries, out=...)'s per-table work in C.
 *
 * query() walks the two dicts, reads each NumPy array (through the buffer
 * protocol) or torch tensor (through fleche._torch_view's reader when the
 * package has one for the running torch, else its own accessors), checks
 * it, fills the fl_table_query array and calls fl_query with the GIL
 * released. Called without `out` (and without a stream), it makes the
 * outputs as Cache._bind would (empty_like): NumPy arrays for NumPy ids,
 * torch tensors for torch ids through the reader's at::empty (torch.empty
 * from Python costs a few us a tensor; without the reader such calls take
 * the Python path). It accepts only calls it can answer exactly as the Python path
 * (Cache._bind, fleche/_buffers.py) would, with the same pointers and
 * stream. Anything else, including every call that would raise, it
 * declines (returns None) before any side effect, and Cache.query then
 * takes the Python path, which raises the error or handles the rare case
 * (keys seen for the first time, DLPack objects, CuPy, explicit
 * non-mapping types). So the checks' messages live in Python only; this
 * file decides acceptance, never an error.
 *
 * Why C: in Python each table cost about 3 us of dict walking, attribute
 * reads and tuple building, against about 2 us per table for the whole C
 * query on a GPU. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "fleche.h"
#include "_fast_view.h"

typedef fl_status (*fast_query_fn)(fl_cache *, const fl_table_query *, uint32_t, void *);

/* What the Python side hands over once (init) or per call. */
static fast_query_fn fast_fl_query; /* libfleche's fl_query (use_query) */
static PyObject *fast_ndarray;      /* numpy.ndarray */
static PyObject *fast_torch_facts;  /* _buffers.torch_facts: fn(torch) -> tuple, below */
static PyObject *fast_torch_order;  /* _buffers.torch_order: fn(handle, device) */
static PyObject *fast_torch_name;   /* "torch", the sys.modules key */

/* torch's facts, once torch is imported (NULL before): the Tensor type,
 * the dtypes a query takes (uint64 may be NULL: older torch), and
 * fn(device) -> torch's current stream as an int. */
static PyObject *fast_tensor, *fast_int64, *fast_uint64, *fast_float32, *fast_float16;
static PyObject *fast_torch_stream;
/* fleche._torch_view's reader of exact torch.Tensor objects, NULL when the
 * package was built without it or for another torch: a query of 52
 * tensors costs 2.5 us of C with it, 15.3 through the seven accessor calls
 * a tensor (fast_tensor_view; torch 1.13, host backend, 26 x 1). */
static const fast_torch_reader *fast_torch_read;
static PyObject *fast_torch_reader_capsule; /* the capsule it came in, or None */

/* Interned attribute names of torch tensors. */
static PyObject *s_dtype, *s_is_cuda, *s_is_cpu, *s_get_device, *s_is_contiguous, *s_shape,
    *s_data_ptr;

/* The references one call holds until fl_query returns: another thread may
 * drop the dicts' entries while C runs without the GIL. */
typedef struct {
  fl_table_query *q;  /* count entries */
  PyObject **refs;    /* 2 per table: ids and out (NULL where bufs holds it) */
  Py_buffer *bufs;    /* 2 per table: NumPy buffers (obj NULL when unused) */
  Py_ssize_t count;
} fast_call;

/* ------------------------------------------------------------ reading arrays */

/* The dtype of a NumPy buffer format; DT_OTHER for any other (a byte order
 * prefix included: those arrays take the Python path). */
static fast_dtype fast_format_dtype(const char *f, Py_ssize_t itemsize) {
  if (f == NULL || f[0] == '\0' || f[1] != '\0') return DT_OTHER;
  switch (f[0]) {
    case 'L': case 'Q': return itemsize == 8 ? DT_UINT64 : DT_OTHER;
    case 'l': case 'q': return itemsize == 8 ? DT_INT64 : DT_OTHER;
    case 'f': return itemsize == 4 ? DT_FLOAT32 : DT_OTHER;
    case 'e': return itemsize == 2 ? DT_FLOAT16 : DT_OTHER;
    default: return DT_OTHER;
  }
}

/* A C-contiguous NumPy array of at most 2 dimensions into v, its buffer
 * into *buf (released by the caller). 1: read; 0: declined. */
static int fast_numpy(PyObject *a, fast_view *v, Py_buffer *buf) {
  if (PyObject_GetBuffer(a, buf, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    buf->obj = NULL;
    return 0;
  }
  if (buf->ndim < 1 || buf->ndim > 2 || !PyBuffer_IsContiguous(buf, 'C')) return 0;
  v->addr = (uintptr_t)buf->buf;
  v->ndim = buf->ndim;
  for (int k = 0; k < buf->ndim; k++) v->shape[k] = buf->shape[k];
  v->dtype = fast_format_dtype(buf->format, buf->itemsize);
  v->device = FAST_HOST;
  v->torch = v->torch_cuda = 0;
  v->readonly = buf->readonly;
  return v->dtype != DT_OTHER;
}

/* An attribute (or, with call, a method's result) that must be a bool. */
static int fast_flag(PyObject *t, PyObject *name, int call) {
  PyObject *r = call ? PyObject_CallMethodNoArgs(t, name) : PyObject_GetAttr(t, name);
  if (r == NULL) {
    PyErr_Clear();
    return -1;
  }
  int flag = r == Py_True ? 1 : r == Py_False ? 0 : -1;
  Py_DECREF(r);
  return flag;
}

/* A C-contiguous torch tensor on the CPU or a CUDA device, of at most 2
 * dimensions, into v. 1: read; 0: declined (any error is cleared: the
 * Python path meets it again and raises it). */
static int fast_tensor_view(PyObject *t, fast_view *v) {
  PyObject *dt = PyObject_GetAttr(t, s_dtype);
  if (dt == NULL) goto declined;
  v->dtype = dt == fast_int64 ? DT_INT64 : dt == fast_uint64 ? DT_UINT64
           : dt == fast_float32 ? DT_FLOAT32 : dt == fast_float16 ? DT_FLOAT16 : DT_OTHER;
  Py_DECREF(dt);
  if (v->dtype == DT_OTHER) return 0;
  int cuda = fast_flag(t, s_is_cuda, 0);
  if (cuda < 0 || (!cuda && fast_flag(t, s_is_cpu, 0) != 1)) return 0;
  v->device = FAST_HOST;
  if (cuda) {
    PyObject *d = PyObject_CallMethodNoArgs(t, s_get_device);
    if (d == NULL) goto declined;
    long device = PyLong_AsLong(d);
    Py_DECREF(d);
    if (device < 0 || device > INT32_MAX) goto declined;
    v->device = (int)device;
  }
  if (fast_flag(t, s_is_contiguous, 1) != 1) return 0;
  PyObject *shape = PyObject_GetAttr(t, s_shape);
  if (shape == NULL) goto declined;
  int ok = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) >= 1 && PyTuple_GET_SIZE(shape) <= 2;
  v->ndim = ok ? (int)PyTuple_GET_SIZE(shape) : 0;
  for (int k = 0; k < v->ndim; k++) v->shape[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
  Py_DECREF(shape);
  if (!ok || PyErr_Occurred()) goto declined;
  PyObject *p = PyObject_CallMethodNoArgs(t, s_data_ptr);
  if (p == NULL) goto declined;
  v->addr = (uintptr_t)PyLong_AsUnsignedLongLong(p);
  Py_DECREF(p);
  if (PyErr_Occurred()) goto declined;
  v->torch = 1;
  v->torch_cuda = cuda;
  v->readonly = 0;
  return 1;
declined:
  PyErr_Clear();
  return 0;
}

/* Makes `capsule` (FAST_TORCH_READER_CAPSULE, or None) the torch reader.
 * 0, or -1 with an exception. */
static int fast_set_torch_reader(PyObject *capsule) {
  const fast_torch_reader *read = NULL;
  if (capsule != Py_None) {
    read = PyCapsule_GetPointer(capsule, FAST_TORCH_READER_CAPSULE);
    if (read == NULL) return -1;
  }
  Py_XSETREF(fast_torch_reader_capsule, Py_NewRef(capsule));
  fast_torch_read = read;
  return 0;
}

/* Loads torch's facts once torch is in sys.modules. 0, or -1 with an
 * exception (torch_facts failed, as `torch.Tensor` would in Python). */
static int fast_load_torch(void) {
  if (fast_tensor != NULL) return 0;
  PyObject *torch = PyImport_GetModule(fast_torch_name);
  if (torch == NULL) return PyErr_Occurred() ? -1 : 0;
  PyObject *facts = PyObject_CallOneArg(fast_torch_facts, torch);
  Py_DECREF(torch);
  if (facts == NULL) return -1;
  if (!PyTuple_Check(facts) || PyTuple_GET_SIZE(facts) != 7) {
    Py_DECREF(facts);
    PyErr_SetString(PyExc_TypeError, "fleche._fast: torch_facts must return 7 items");
    return -1;
  }
  if (fast_set_torch_reader(PyTuple_GET_ITEM(facts, 6)) != 0) {
    Py_DECREF(facts);
    return -1;
  }
  PyObject **slots[6] = {&fast_tensor, &fast_int64, &fast_uint64, &fast_float32, &fast_float16,
                         &fast_torch_stream};
  for (int k = 0; k < 6; k++) {
    PyObject *item = PyTuple_GET_ITEM(facts, k);
    *slots[k] = item == Py_None ? NULL : Py_NewRef(item);
  }
  Py_DECREF(facts);
  return 0;
}

/* Reads one array: 1 read, 0 declined, -1 error. A NumPy array's buffer
 * stays in *buf; a tensor's reference in *ref. */
static int fast_view_of(PyObject *a, fast_view *v, Py_buffer *buf, PyObject **ref) {
  if (fast_tensor != NULL && PyObject_TypeCheck(a, (PyTypeObject *)fast_tensor)) {
    *ref = Py_NewRef(a);
    if (fast_torch_read == NULL || Py_TYPE(a) != (PyTypeObject *)fast_tensor)
      return fast_tensor_view(a, v);
    if (!fast_torch_read->read(a, v)) return 0;
    v->torch = 1;
    v->torch_cuda = v->device != FAST_HOST;
    v->readonly = 0;
    return 1;
  }
  if (PyObject_TypeCheck(a, (PyTypeObject *)fast_ndarray)) return fast_numpy(a, v, buf);
  return 0;
}

/* ------------------------------------------------------------ the call */

static void fast_call_free(fast_call *c) {
  for (Py_ssize_t k = 0; k < 2 * c->count; k++) {
    Py_XDECREF(c->refs[k]);
    if (c->bufs[k].obj != NULL) PyBuffer_Release(&c->bufs[k]);
  }
  PyMem_Free(c->q);
}

static int fast_call_alloc(fast_call *c, Py_ssize_t count) {
  size_t bytes = (size_t)count * (sizeof(fl_table_query) + 2 * sizeof(PyObject *) +
                                  2 * sizeof(Py_buffer));
  char *block = PyMem_Calloc(1, bytes);
  if (block == NULL) return -1;
  c->q = (fl_table_query *)block;
  c->bufs = (Py_buffer *)(block + count * sizeof(fl_table_query));
  c->refs = (PyObject **)(block + count * (sizeof(fl_table_query) + 2 * sizeof(Py_buffer)));
  c->count = count;
  return 0;
}

/* The table (index, dim, dtype) of a key from Cache._keys, whose values
 * are Cache._key_info tuples: (index, dim, dtype name, ...). 1: found; 0:
 * declined (a key not cached yet: the Python path caches it). */
static int fast_table(PyObject *keys, PyObject *key, uint32_t *index, Py_ssize_t *dim,
                      fast_dtype *dtype) {
  if (!PyUnicode_CheckExact(key) && !PyLong_CheckExact(key)) return 0;
  PyObject *info = PyDict_GetItemWithError(keys, key);
  if (info == NULL || !PyTuple_Check(info) || PyTuple_GET_SIZE(info) < 3) {
    PyErr_Clear();
    return 0;
  }
  *index = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(info, 0));
  *dim = PyLong_AsSsize_t(PyTuple_GET_ITEM(info, 1));
  PyObject *name = PyTuple_GET_ITEM(info, 2);
  *dtype = !PyUnicode_Check(name) ? DT_OTHER
           : PyUnicode_CompareWithASCIIString(name, "float32") == 0 ? DT_FLOAT32
           : PyUnicode_CompareWithASCIIString(name, "float16") == 0 ? DT_FLOAT16 : DT_OTHER;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return *dtype != DT_OTHER;
}

/* Whether ids and an output pass the checks of _bind besides the output's
 * shape: ids uint64/int64 and 1-D, the output of the table's dtype and
 * writable, device memory only on the cache's device (cache device
 * FAST_HOST: the host backend, which takes none). */
static int fast_accepts_kinds(const fast_view *iv, const fast_view *ov, fast_dtype dtype,
                              int cache_device) {
  if ((iv->dtype != DT_UINT64 && iv->dtype != DT_INT64) || iv->ndim != 1) return 0;
  if (ov->dtype != dtype || ov->readonly) return 0;
  for (int k = 0; k < 2; k++) {
    int d = k ? ov->device : iv->device;
    if (d != FAST_HOST && (cache_device == FAST_HOST || d != cache_device)) return 0;
  }
  return 1;
}

/* Whether the ids and output of one table pass every check of _bind: those
 * of fast_accepts_kinds, and the output (n, dim) or (n*dim,). */
static int fast_accepts(const fast_view *iv, const fast_view *ov, Py_ssize_t dim,
                        fast_dtype dtype, int cache_device) {
  if (!fast_accepts_kinds(iv, ov, dtype, cache_device)) return 0;
  Py_ssize_t n = iv->shape[0];
  return ov->ndim == 2 ? ov->shape[0] == n && ov->shape[1] == dim : ov->shape[0] == n * dim;
}

/* Whether a query's stream=None takes torch's current stream
 * (Cache._stream_source): when its first ids, or else (host ids) its first
 * output, is a torch CUDA tensor. */
static int fast_torch_source(const fast_view *first_ids, PyObject *first_out) {
  if (first_ids->torch_cuda) return 1;
  return first_ids->device == FAST_HOST && first_out != NULL && fast_tensor != NULL &&
         PyObject_TypeCheck(first_out, (PyTypeObject *)fast_tensor) &&
         fast_flag(first_out, s_is_cuda, 0) == 1;
}

/* Runs the filled call: its stream (the `stream` argument, or else torch's
 * current one when `source`, or else the legacy default stream), the stream
 * order of Cache._launch (the stream waits for torch's current one when
 * `torch_device` and they differ), then fl_query with the GIL released.
 * 1: ran, *st its status; 0: declined, nothing done; -1: an exception. */
static int fast_run(fast_call *c, void *cache, int cache_device, PyObject *stream, int source,
                    int torch_device, fl_status *st) {
  uintptr_t handle = 0;
  int from_torch = 0;
  if (stream != Py_None) {
    handle = (uintptr_t)PyLong_AsUnsignedLongLong(stream);
    if (PyErr_Occurred()) { /* a handle C cannot take: ctypes says why */
      PyErr_Clear();
      return 0;
    }
  } else if (cache_device != FAST_HOST && source) {
    PyObject *device = PyLong_FromLong(cache_device);
    if (device == NULL) return -1;
    PyObject *s = PyObject_CallOneArg(fast_torch_stream, device);
    Py_DECREF(device);
    if (s == NULL) return -1;
    handle = (uintptr_t)PyLong_AsUnsignedLongLong(s);
    Py_DECREF(s);
    if (PyErr_Occurred()) return -1;
    from_torch = 1;
  }
  if (torch_device && !from_torch) {
    PyObject *r = PyObject_CallFunction(fast_torch_order, "Ki", (unsigned long long)handle,
                                        cache_device);
    if (r == NULL) return -1;
    Py_DECREF(r);
  }
  fast_query_fn call = fast_fl_query;
  fl_status status;
  Py_BEGIN_ALLOW_THREADS
  status = call((fl_cache *)cache, c->q, (uint32_t)c->count, (void *)handle);
  Py_END_ALLOW_THREADS
  *st = status;
  return 1;
}

/* The arguments every query form starts with: the fl_cache pointer (an
 * int, from Handle.enter) and the cache's CUDA ordinal (-1 on the host
 * backend). 0, or -1 with an exception. */
static int fast_cache_args(PyObject *const *args, void **cache, int *cache_device) {
  *cache = PyLong_AsVoidPtr(args[0]);
  long device = PyLong_AsLong(args[1]);
  if (PyErr_Occurred()) return -1;
  if (device < FAST_HOST || device > INT32_MAX) {
    PyErr_SetString(PyExc_ValueError, "query: device out of range");
    return -1;
  }
  *cache_device = (int)device;
  return 0;
}

/* A new output for one table's read ids (iv) in a call without `out`, as
 * _buffers.empty_like makes it: a NumPy array for NumPy ids, a torch
 * tensor on the ids' device for torch ids (made by the reader). 1: *o
 * made; 0: declined; -1: an exception. */
static int fast_new_out(PyObject *ids, const fast_view *iv, Py_ssize_t dim, fast_dtype dtype,
                        PyObject **o) {
  Py_ssize_t n = iv->shape[0];
  if (iv->torch) {
    if (fast_torch_read == NULL) return 0;
    *o = fast_torch_read->empty(ids, n, dim, dtype);
    return *o != NULL;
  }
  if (iv->device != FAST_HOST) return 0;
  *o = PyObject_CallFunction(fast_ndarray, "((nn)s)", n, dim,
                             dtype == DT_FLOAT16 ? "float16" : "float32");
  return *o != NULL ? 1 : -1;
}

/* query(cache, device, keys, queries, out, stream) -> the result dict (the
 * outputs by the queries' keys), an int fl_status when fl_query failed (the
 * caller raises with the cache's message on this thread), or None:
 * declined, nothing done. cache: the fl_cache pointer (an int, from
 * Handle.enter); device: the cache's CUDA ordinal, -1 on the host backend;
 * keys: Cache._keys; stream: a cudaStream_t int, or None for the default of
 * the arrays (as Cache._bind picks it); out: a dict, or None for new
 * outputs (fast_new_out; then stream must be None). */
static PyObject *fast_query(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "query: 6 arguments");
    return NULL;
  }
  PyObject *keys = args[2], *queries = args[3], *out = args[4], *stream = args[5];
  void *cache;
  int cache_device;
  if (fast_cache_args(args, &cache, &cache_device) != 0) return NULL;
  int given = out != Py_None;
  if (fast_fl_query == NULL || !PyDict_CheckExact(queries) || !PyDict_CheckExact(keys) ||
      (given ? !PyDict_CheckExact(out) : stream != Py_None))
    Py_RETURN_NONE;
  Py_ssize_t count = PyDict_GET_SIZE(queries);
  if (count == 0 || count > UINT32_MAX || (given && PyDict_GET_SIZE(out) != count))
    Py_RETURN_NONE;
  if (fast_load_torch() != 0) return NULL;
  fast_call c;
  if (fast_call_alloc(&c, count) != 0) return PyErr_NoMemory();
  PyObject *result = PyDict_New();
  if (result == NULL) goto fail;
  int torch_device = 0;
  fast_view first_ids = {0};
  Py_ssize_t pos = 0, t = 0;
  PyObject *key, *ids;
  while (PyDict_Next(queries, &pos, &key, &ids)) {
    if (t == count) goto declined; /* the dict grew under us */
    uint32_t index;
    Py_ssize_t dim;
    fast_dtype dtype;
    if (!fast_table(keys, key, &index, &dim, &dtype)) goto declined;
    fast_view iv, ov;
    if (!fast_view_of(ids, &iv, &c.bufs[2 * t], &c.refs[2 * t])) goto declined;
    PyObject *o, *made = NULL;
    if (given) {
      o = PyDict_GetItemWithError(out, key);
      if (o == NULL) {
        PyErr_Clear();
        goto declined;
      }
    } else {
      int r = fast_new_out(ids, &iv, dim, dtype, &made);
      if (r < 0) goto fail;
      if (r == 0) goto declined;
      o = made;
    }
    /* A made output lives on in the result and the view, by their references. */
    int ok = fast_view_of(o, &ov, &c.bufs[2 * t + 1], &c.refs[2 * t + 1]) &&
             fast_accepts(&iv, &ov, dim, dtype, cache_device);
    int set = ok ? PyDict_SetItem(result, key, o) : 0;
    Py_XDECREF(made);
    if (set != 0) goto fail;
    if (!ok) goto declined;
    if (iv.device != FAST_HOST || ov.device != FAST_HOST) torch_device |= iv.torch || ov.torch;
    if (t == 0) first_ids = iv;
    c.q[t] = (fl_table_query){index, (const uint64_t *)iv.addr, (size_t)iv.shape[0],
                              (void *)ov.addr};
    t++;
  }
  if (t != count) goto declined;
  /* Made outputs are of the ids' kind: the ids alone pick the stream. */
  PyObject *first_out = NULL;
  pos = 0;
  if (given) PyDict_Next(out, &pos, &key, &first_out);
  fl_status st;
  int ran = fast_run(&c, cache, cache_device, stream, fast_torch_source(&first_ids, first_out),
                     torch_device, &st);
  if (ran < 0) goto fail;
  if (ran == 0) goto declined;
  fast_call_free(&c);
  if (st != FL_OK) {
    Py_DECREF(result);
    return PyLong_FromLong(st);
  }
  return result;
declined:
  fast_call_free(&c);
  Py_XDECREF(result);
  Py_RETURN_NONE;
fail:
  fast_call_free(&c);
  Py_XDECREF(result);
  return NULL;
}

/* A count of query_packed: an int >= 0, else -1 (declined). */
static Py_ssize_t fast_count(PyObject *o) {
  if (!PyLong_CheckExact(o)) return -1;
  Py_ssize_t n = PyLong_AsSsize_t(o);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  return n;
}

/* query_packed(cache, device, keys, tables, ids, counts, out, stream) ->
 * out, an int fl_status when fl_query failed, or None: declined, nothing
 * done (Cache.query_packed's Python path then splits the call into
 * query()'s, which raises what is wrong). tables and counts: lists or
 * tuples of one length, each table once; ids: 1-D, the tables' ids one
 * table after the other; out: their vectors the same way, 1-D, or (rows,
 * dim) when every table has dimension dim. The rest as query()'s. */
static PyObject *fast_query_packed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 8) {
    PyErr_SetString(PyExc_TypeError, "query_packed: 8 arguments");
    return NULL;
  }
  PyObject *keys = args[2], *tables = args[3], *ids = args[4], *counts = args[5],
           *out = args[6], *stream = args[7];
  void *cache;
  int cache_device;
  if (fast_cache_args(args, &cache, &cache_device) != 0) return NULL;
  if (fast_fl_query == NULL || !PyDict_CheckExact(keys) ||
      !(PyList_CheckExact(tables) || PyTuple_CheckExact(tables)) ||
      !(PyList_CheckExact(counts) || PyTuple_CheckExact(counts)))
    Py_RETURN_NONE;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(tables);
  if (count == 0 || count > UINT32_MAX || PySequence_Fast_GET_SIZE(counts) != count)
    Py_RETURN_NONE;
  if (fast_load_torch() != 0) return NULL;
  fast_call c;
  if (fast_call_alloc(&c, count) != 0) return PyErr_NoMemory();
  fast_view iv, ov;
  if (!fast_view_of(ids, &iv, &c.bufs[0], &c.refs[0]) ||
      !fast_view_of(out, &ov, &c.bufs[1], &c.refs[1]) || iv.ndim != 1)
    goto declined;
  /* dim: the tables' one dimension, or -1 when they differ. Each count is
   * at most the ids left, so no sum below overflows. */
  Py_ssize_t rows = 0, elems = 0, dim = 0;
  fast_dtype dtype = DT_OTHER;
  for (Py_ssize_t t = 0; t < count; t++) {
    uint32_t index;
    Py_ssize_t d;
    fast_dtype dt;
    Py_ssize_t n = fast_count(PySequence_Fast_GET_ITEM(counts, t));
    if (n < 0 || n > iv.shape[0] - rows ||
        !fast_table(keys, PySequence_Fast_GET_ITEM(tables, t), &index, &d, &dt) ||
        (t > 0 && dt != dtype))
      goto declined;
    for (Py_ssize_t u = 0; u < t; u++)
      if (c.q[u].table == index) goto declined;
    dim = t == 0 || dim == d ? d : -1;
    dtype = dt;
    /* Offsets for now; addresses below. */
    c.q[t] = (fl_table_query){index, (const uint64_t *)(uintptr_t)rows, (size_t)n,
                              (void *)(uintptr_t)elems};
    rows += n;
    elems += n * d;
  }
  if (!fast_accepts_kinds(&iv, &ov, dtype, cache_device) || iv.shape[0] != rows) goto declined;
  if (ov.ndim == 2 ? dim < 0 || ov.shape[0] != rows || ov.shape[1] != dim : ov.shape[0] != elems)
    goto declined;
  size_t elem_bytes = dtype == DT_FLOAT16 ? 2 : 4;
  for (Py_ssize_t t = 0; t < count; t++) {
    c.q[t].ids = (const uint64_t *)(iv.addr + (uintptr_t)c.q[t].ids * 8);
    c.q[t].out = (void *)(ov.addr + (uintptr_t)c.q[t].out * elem_bytes);
  }
  int source = stream == Py_None && cache_device != FAST_HOST && fast_torch_source(&iv, out);
  int torch_device = (iv.device != FAST_HOST || ov.device != FAST_HOST) && (iv.torch || ov.torch);
  fl_status st;
  int ran = fast_run(&c, cache, cache_device, stream, source, torch_device, &st);
  fast_call_free(&c);
  if (ran < 0) return NULL;
  if (ran == 0) Py_RETURN_NONE;
  return st == FL_OK ? Py_NewRef(out) : PyLong_FromLong(st);
declined:
  fast_call_free(&c);
  Py_RETURN_NONE;
}

/* init(ndarray, torch_facts, torch_order): the package's types and helpers. */
static PyObject *fast_init(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ndarray, *facts, *order;
  if (!PyArg_ParseTuple(args, "O!OO", &PyType_Type, &ndarray, &facts, &order)) return NULL;
  Py_XSETREF(fast_ndarray, Py_NewRef(ndarray));
  Py_XSETREF(fast_torch_facts, Py_NewRef(facts));
  Py_XSETREF(fast_torch_order, Py_NewRef(order));
  Py_RETURN_NONE;
}

/* use_query(address) -> the previous address: the fl_query that query()
 * calls (the package's libfleche; tests put a spy there). */
static PyObject *fast_use_query(PyObject *self, PyObject *address) {
  (void)self;
  void *fn = PyLong_AsVoidPtr(address);
  if (PyErr_Occurred()) return NULL;
  PyObject *previous = PyLong_FromVoidPtr((void *)fast_fl_query);
  fast_fl_query = (fast_query_fn)fn;
  return previous;
}

/* use_torch_reader(capsule or None) -> the previous one: the reader of
 * exact torch.Tensor objects (torch_facts gives the package's; tests turn
 * it off and on). Loads torch's facts first, which would otherwise set it
 * later. */
static PyObject *fast_use_torch_reader(PyObject *self, PyObject *capsule) {
  (void)self;
  if (fast_load_torch() != 0) return NULL;
  PyObject *previous = Py_NewRef(fast_torch_reader_capsule ? fast_torch_reader_capsule : Py_None);
  if (fast_set_torch_reader(capsule) != 0) {
    Py_DECREF(previous);
    return NULL;
  }
  return previous;
}

static PyMethodDef fast_methods[] = {
    {"query", (PyCFunction)(void (*)(void))fast_query, METH_FASTCALL,
     "query(cache, device, keys, queries, out, stream): Cache.query's fast path"},
    {"query_packed", (PyCFunction)(void (*)(void))fast_query_packed, METH_FASTCALL,
     "query_packed(cache, device, keys, tables, ids, counts, out, stream): "
     "Cache.query_packed's fast path"},
    {"init", fast_init, METH_VARARGS, "init(ndarray, torch_facts, torch_order)"},
    {"use_query", fast_use_query, METH_O, "use_query(address) -> previous fl_query address"},
    {"use_torch_reader", fast_use_torch_reader, METH_O,
     "use_torch_reader(capsule or None) -> the previous reader of torch tensors"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fleche._fast",
    .m_doc = "Cache.query's per-table work in C",
    .m_size = -1,
    .m_methods = fast_methods,
};

PyMODINIT_FUNC PyInit__fast(void) {
  PyObject **names[] = {&s_dtype, &s_is_cuda, &s_is_cpu, &s_get_device, &s_is_contiguous,
                        &s_shape, &s_data_ptr, &fast_torch_name};
  const char *text[] = {"dtype", "is_cuda", "is_cpu", "get_device", "is_contiguous",
                        "shape", "data_ptr", "torch"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    *names[k] = PyUnicode_InternFromString(text[k]);
    if (*names[k] == NULL) return NULL;
  }
  return PyModule_Create(&fast_module);
}
