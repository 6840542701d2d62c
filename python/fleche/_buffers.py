"""Checked views of the arrays a call hands to C: ids, vectors and outputs.

A view is read in place: nothing is ever copied or converted, and a wrong
dtype, shape, layout or device raises before C is called. Where a view comes
from, fastest first:

- torch tensors (CPU or CUDA): their own accessors (data_ptr, dtype,
  is_contiguous, get_device). These are the facts a DLPack capsule carries,
  without building one: a __dlpack__ call costs microseconds a tensor, more
  than the whole query may spend in Python.
- NumPy arrays: .ctypes.data and flags.
- any other object with __dlpack__: on the CPU through numpy.from_dlpack; on a
  CUDA device (kDLCUDA, kDLCUDAHost, kDLCUDAManaged: CuPy, JAX, ...) by reading
  the DLPack capsule (DLManagedTensor) with ctypes.

Stream order follows the DLPack protocol: the consumer (fleche) names the
stream it will use and the producer makes that stream wait for the work
already enqueued on the producer's current stream. __dlpack__(stream=...) does
that for DLPack objects; torch_order() does the same for torch tensors.
"""

from __future__ import annotations

import ctypes
import re
import sys
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .errors import InvalidArgument, Unsupported

HOST = -1  # the device of a view of host memory (pageable, pinned or NumPy)

# A view: (address, shape, dtype name ("uint64", "float16", ...), device
# (HOST or a CUDA ordinal), read-only, owner). The owner keeps the memory
# alive while C uses it: the array itself, or the DLPack capsule, whose
# destructor releases the producer's memory (the capsule is never renamed
# "used_dltensor", so the producer's deleter runs when it is collected).
View = Tuple[int, Tuple[int, ...], str, int, bool, Any]

_ID_DTYPES = ("uint64", "int64")

# DLPack (dlpack.h, the legacy unversioned ABI that __dlpack__ returns when
# the consumer passes no max_version).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_STREAM_LEGACY = 1  # __dlpack__(stream=1): CUDA's legacy default stream (0 is not allowed)
_DL_KINDS = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}


class _DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", _DLDevice),
        ("ndim", c_int32),
        ("dtype", _DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),  # in elements; NULL: compact row-major
        ("byte_offset", c_uint64),
    ]


class _DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer  # PyDLL: holds the GIL, raises
_capsule_pointer.restype = c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _c_contiguous(shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]]) -> bool:
    """Whether strides (in elements; None: compact) lay shape out row-major
    without gaps. Dimensions of size 1 may have any stride."""
    if strides is None or 0 in shape:
        return True
    step = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != step:
            return False
        step *= size
    return True


def _dlpack_stream(handle: int) -> int:
    """A cudaStream_t as the DLPack protocol spells it: 1 for the legacy default."""
    return handle or _DL_STREAM_LEGACY


def dlpack_order(obj: Any, what: str, stream: int) -> Any:
    """obj.__dlpack__(stream=...): the producer makes `stream` wait for the
    work pending on its current stream (DLPack stream semantics). Returns the
    capsule; a prepared query calls it at each run for the ordering alone."""
    try:
        return obj.__dlpack__(stream=_dlpack_stream(stream))
    except (TypeError, ValueError, RuntimeError, BufferError) as e:
        raise InvalidArgument(f"{what}: __dlpack__ failed: {e}") from e


def from_capsule(v: View) -> bool:
    """Whether view v was read from a CUDA DLPack capsule (its owner): its
    producer orders its pending work only through __dlpack__(stream)."""
    return type(v[5]).__name__ == "PyCapsule"


def _capsule_view(obj: Any, what: str, stream: int) -> View:
    """The view of a CUDA DLPack object, read from its capsule. The producer
    makes `stream` wait for its pending work (DLPack stream semantics)."""
    capsule = dlpack_order(obj, what, stream)
    try:
        managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    except ValueError as e:  # a capsule of another name (a versioned one, or used)
        raise InvalidArgument(f"{what}: __dlpack__ did not return a DLPack capsule: {e}") from e
    t = managed.dl_tensor
    ndim = t.ndim
    shape = tuple(t.shape[k] for k in range(ndim))
    strides = tuple(t.strides[k] for k in range(ndim)) if t.strides else None
    dt = t.dtype
    dtype = f"{_DL_KINDS.get(dt.code, f'code{dt.code}_')}{dt.bits}"
    if dt.lanes != 1:
        dtype += f"x{dt.lanes}"
    if not _c_contiguous(shape, strides):
        raise InvalidArgument(f"{what}: the array must be C-contiguous (strides {strides} "
                              "elements); use a contiguous copy")
    host = t.device.device_type in (_DL_CPU, _DL_CUDA_HOST)
    device = HOST if host else t.device.device_id
    return (t.data or 0) + t.byte_offset, shape, dtype, device, False, capsule


# torch dtype -> NumPy-style name, filled on first use (torch is never imported here).
_TORCH_NAMES: Dict[Any, str] = {}


def _torch_view(t: Any, what: str) -> View:
    if t.is_cuda:
        device = t.get_device()
    elif t.is_cpu:
        device = HOST
    else:
        raise Unsupported(f"{what}: torch tensors on {t.device.type} are not supported "
                          "(CPU and CUDA are)")
    if t.layout is not sys.modules["torch"].strided:
        raise InvalidArgument(f"{what}: {t.layout} tensors are not supported (dense, "
                              "torch.strided ones are); use .to_dense()")
    if not t.is_contiguous():
        raise InvalidArgument(f"{what}: the tensor must be C-contiguous (strides "
                              f"{t.stride()}); use .contiguous()")
    name = _TORCH_NAMES.get(t.dtype)
    if name is None:
        name = _TORCH_NAMES[t.dtype] = str(t.dtype).split(".")[-1]
    return t.data_ptr(), t.shape, name, device, False, t


def view(obj: Any, what: str, stream: int = 0) -> View:
    """The view of a C-contiguous array (InvalidArgument otherwise). `stream`
    is the CUDA stream C will use, for DLPack producers to order their
    pending work before it."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_view(obj, what)
    if isinstance(obj, np.ndarray) or not hasattr(obj, "__dlpack__"):
        return _numpy_view(obj, what)
    kind = int(obj.__dlpack_device__()[0]) if hasattr(obj, "__dlpack_device__") else _DL_CPU
    if kind == _DL_CPU:
        return _numpy_view(np.from_dlpack(obj), what)
    if kind not in (_DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise Unsupported(f"{what}: DLPack device type {kind} is neither host nor CUDA memory")
    return _capsule_view(obj, what, stream)


def _numpy_view(arr: Any, what: str) -> View:
    if not isinstance(arr, np.ndarray):
        raise InvalidArgument(
            f"{what}: expected a NumPy array or an object with __dlpack__ (torch, CuPy), got "
            f"{type(arr).__name__} (for a list, use numpy.asarray(ids, dtype=numpy.uint64))")
    flags = arr.flags
    if not flags.c_contiguous:
        raise InvalidArgument(f"{what}: the array must be C-contiguous (strides {arr.strides}); "
                              "use numpy.ascontiguousarray")
    name = _NUMPY_NAMES.get(arr.dtype)
    if name is None:
        name = _NUMPY_NAMES[arr.dtype] = arr.dtype.name
    writable = flags.writeable
    try:  # the buffer protocol: much faster than arr.ctypes.data
        address = ctypes.addressof(ctypes.c_char.from_buffer(arr)) if writable else None
    except ValueError:  # an empty array
        address = None
    if address is None:
        address = arr.ctypes.data
    return address, arr.shape, name, HOST, not writable, arr


# NumPy dtype -> its name (dtype.name is slow: computed in Python each time).
_NUMPY_NAMES: Dict[np.dtype, str] = {}


def host_view(v: Any) -> Any:
    """v, a View, if it is of host memory; else InvalidArgument."""
    if v[3] != HOST:
        raise InvalidArgument("this call takes host memory only (NumPy arrays, CPU tensors), "
                              f"got an array on CUDA device {v[3]}")
    return v


def ids_view(obj: Any, what: str, stream: int = 0) -> View:
    """The view of ids (or keys): uint64 or int64 (bits taken as uint64), 1-D, C-contiguous."""
    v = view(obj, what, stream)
    if v[2] not in _ID_DTYPES:
        raise InvalidArgument(f"{what}: ids must be uint64 or int64, got {v[2]} "
                              "(convert with .astype(numpy.uint64) or .to(torch.int64))")
    if len(v[1]) != 1:
        raise InvalidArgument(f"{what}: ids must be a 1-D array, got shape {tuple(v[1])} "
                              "(flatten it with .ravel())")
    return v


def vectors_view(obj: Any, n: int, dim: int, dtype: str, what: str, writable: bool,
                 stream: int = 0) -> View:
    """The view of vectors: shape (n, dim) (or (n*dim,) flat), dtype `dtype`
    (a name), C-contiguous; writable when `writable`."""
    v = view(obj, what, stream)
    if v[2] != dtype:
        raise InvalidArgument(f"{what}: expected {dtype} vectors (the table's dtype), got {v[2]}")
    shape = tuple(v[1])
    if shape != (n, dim) and shape != (n * dim,):
        raise InvalidArgument(f"{what}: expected shape ({n}, {dim}), got {shape}")
    if writable and v[4]:
        raise InvalidArgument(f"{what}: the output array is read-only")
    return v


def stream_handle(stream: Any) -> Optional[int]:
    """A cudaStream_t as an int, or None when `stream` is None (the caller
    picks the default): an int, or an object with .cuda_stream
    (torch.cuda.Stream) or .ptr (cupy.cuda.Stream)."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise InvalidArgument("stream: expected None, an int handle or a stream object, got bool")
    if isinstance(stream, int):
        if stream < 0:
            raise InvalidArgument(f"stream: a cudaStream_t is not negative, got {stream}")
        return stream
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise InvalidArgument(
        f"stream: expected None, an int handle, or an object with .cuda_stream or .ptr, "
        f"got {type(stream).__name__}")


def stream_source(obj: Any, device: int) -> Optional[Callable[[], int]]:
    """A function returning the current stream of the framework of `obj` on
    `device`, as an int: torch's for torch CUDA tensors, CuPy's for CuPy
    arrays; None for other objects (they have no current stream). Which
    function depends on the kind of `obj` only, so a prepared query picks it
    once and calls it at each run."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return (lambda: _torch_stream(torch, device)) if obj.is_cuda else None
    if type(obj).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415 (present: obj is a CuPy array)

        def cupy_stream() -> int:
            with cupy.cuda.Device(device):
                return int(cupy.cuda.get_current_stream().ptr)

        return cupy_stream
    return None


def _torch_stream(torch: Any, device: int) -> int:
    return int(_stream_getter(torch)(device))


def _stream_getter(torch: Any) -> Callable[[int], int]:
    """fn(device) -> torch's current stream of `device` as an int."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object: faster
    return raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)


def torch_reader(torch: Any) -> Any:
    """fleche._torch_view's READER capsule when the package has that module
    and it was compiled against the running torch's version, else None."""
    try:
        from . import _torch_view  # noqa: PLC0415 (optional, and only after torch)
    except ImportError:
        return None
    release = re.match(r"\d+\.\d+\.\d+", torch.__version__)
    return _torch_view.READER if release and release.group() == _torch_view.TORCH_VERSION else None


def torch_facts(torch: Any) -> Tuple[Any, ...]:
    """What fleche._fast reads torch tensors with, once torch is imported:
    (torch.Tensor, torch.int64, torch.uint64 or None (older torch),
    torch.float32, torch.float16, fn(device) -> torch's current stream,
    the reader of exact tensors or None (torch_reader))."""
    return (torch.Tensor, torch.int64, getattr(torch, "uint64", None), torch.float32,
            torch.float16, _stream_getter(torch), torch_reader(torch))


def torch_order(handle: int, device: int) -> Optional[Any]:
    """Makes stream `handle` wait for the work enqueued so far on torch's
    current stream of `device`, as a DLPack producer does for its consumer.
    Returns the consumer stream as a torch stream when the two differ (the
    outputs fleche allocated must then record_stream it), else None."""
    torch = sys.modules["torch"]
    if _torch_stream(torch, device) == handle:
        return None
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    consumer = (torch.cuda.ExternalStream(handle, device=device) if handle
                else torch.cuda.default_stream(device))
    consumer.wait_event(event)
    return consumer


def empty_like(ids: Any, device: int, n: int, dim: int, dtype: str, stream: int) -> Any:
    """A new (n, dim) output of the kind of `ids` on its device: a torch tensor
    for torch ids, a CuPy array for CuPy ids, NumPy for other host ids.
    Other device arrays need `out` (InvalidArgument)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(ids, torch.Tensor):
        return torch.empty((n, dim), dtype=getattr(torch, dtype), device=ids.device)
    if device == HOST:
        return np.empty((n, dim), dtype=dtype)
    if type(ids).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415 (present: ids is a CuPy array)

        # Allocated on the query's stream: CuPy's pool then reuses the memory
        # only after that stream has passed the query.
        s = cupy.cuda.ExternalStream(stream) if stream else cupy.cuda.Stream.null
        with cupy.cuda.Device(device), s:
            return cupy.empty((n, dim), dtype=dtype)
    raise InvalidArgument(f"device ids of type {type(ids).__name__}: pass out= "
                          "(fleche allocates device outputs only for torch and CuPy ids)")
