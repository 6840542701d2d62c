"""Turning ids, vectors and outputs into (address, count) pairs for C.

Host buffers are NumPy arrays, or objects with __dlpack__ on the CPU (read
through numpy.from_dlpack, no copy). Device buffers are objects with
__cuda_array_interface__ (torch CUDA tensors, CuPy arrays, Numba arrays).
Nothing is ever copied or converted: a wrong dtype, shape or layout raises
InvalidArgument before C is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from .errors import InvalidArgument, Unsupported

_ID_DTYPES = (np.dtype(np.uint64), np.dtype(np.int64))
_DLPACK_CPU = 1  # kDLCPU
_DLPACK_CUDA = (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


@dataclass
class Buffer:
    """A checked buffer: its address, shape and dtype, and the object holding it."""

    address: int
    shape: Tuple[int, ...]
    dtype: np.dtype
    device: bool  # True: CUDA device memory (from __cuda_array_interface__)
    owner: Any  # keeps the memory alive while C uses it


def _cuda_interface(obj: Any, what: str) -> Tuple[Buffer, bool]:
    """Reads __cuda_array_interface__: the buffer and whether it is read-only."""
    cai = obj.__cuda_array_interface__
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        expect = []
        step = dtype.itemsize
        for s in reversed(shape):
            expect.append(step)
            step *= s
        if tuple(strides) != tuple(reversed(expect)) and int(np.prod(shape)) > 1:
            raise InvalidArgument(f"{what}: the device array must be C-contiguous "
                                  f"(strides {tuple(strides)})")
    address, readonly = cai["data"]
    return Buffer(int(address or 0), shape, dtype, True, obj), bool(readonly)


def _host_array(obj: Any, what: str) -> np.ndarray:
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__dlpack_device__"):
            kind = int(obj.__dlpack_device__()[0])
            if kind != _DLPACK_CPU:
                raise Unsupported(
                    f"{what}: DLPack device type {kind} is not host memory; pass device "
                    "arrays through __cuda_array_interface__ (torch CUDA tensors, CuPy)")
        return np.from_dlpack(obj)
    raise InvalidArgument(
        f"{what}: expected a NumPy array or an object with __dlpack__ or "
        f"__cuda_array_interface__, got {type(obj).__name__} "
        "(for a list, use numpy.asarray(ids, dtype=numpy.uint64))")


def _host_buffer(arr: np.ndarray, what: str, problem: str, fix: str) -> Buffer:
    """The Buffer of a checked host array, which C reads in place: it must be
    C-contiguous."""
    if not arr.flags.c_contiguous:
        raise InvalidArgument(f"{what}: {problem} (strides {arr.strides}); use {fix}")
    return Buffer(arr.ctypes.data, arr.shape, arr.dtype, False, arr)


def ids_buffer(obj: Any, what: str) -> Buffer:
    """Checks an id array: uint64 or int64 (bits taken as uint64), 1-D, C-contiguous."""
    if not isinstance(obj, np.ndarray) and hasattr(obj, "__cuda_array_interface__"):
        buf, _ = _cuda_interface(obj, what)
        shape, dtype = buf.shape, buf.dtype
    else:
        arr = _host_array(obj, what)
        shape, dtype = arr.shape, arr.dtype
        buf = None
    if dtype not in _ID_DTYPES:
        raise InvalidArgument(f"{what}: ids must be uint64 or int64, got {dtype} "
                              "(convert with .astype(numpy.uint64))")
    if len(shape) != 1:
        raise InvalidArgument(f"{what}: ids must be a 1-D array, got shape {tuple(shape)} "
                              "(flatten it with .ravel())")
    return buf if buf is not None else _host_buffer(arr, what, "ids must be C-contiguous",
                                                    "numpy.ascontiguousarray(ids)")


def vectors_buffer(obj: Any, n: int, dim: int, dtype: np.dtype, what: str,
                   writable: bool) -> Buffer:
    """Checks a vector array: shape (n, dim) (or (n*dim,) flat), `dtype`, C-contiguous."""
    if not isinstance(obj, np.ndarray) and hasattr(obj, "__cuda_array_interface__"):
        buf, readonly = _cuda_interface(obj, what)
        shape, have = buf.shape, buf.dtype
        arr = None
    else:
        arr = _host_array(obj, what)
        shape, have, readonly = arr.shape, arr.dtype, not arr.flags.writeable
        buf = None
    if have != dtype:
        raise InvalidArgument(f"{what}: expected {dtype} vectors (the table's dtype), got {have}")
    if tuple(shape) not in ((n, dim), (n * dim,)):
        raise InvalidArgument(f"{what}: expected shape ({n}, {dim}), got {tuple(shape)}")
    if writable and readonly:
        raise InvalidArgument(f"{what}: the output array is read-only")
    return buf if buf is not None else _host_buffer(arr, what, "the array must be C-contiguous",
                                                    "numpy.ascontiguousarray")


def stream_handle(stream: Any) -> Optional[int]:
    """A cudaStream_t as an int: None (legacy default stream), an int, or an object
    with .cuda_stream (torch.cuda.Stream) or .ptr (cupy.cuda.Stream)."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise InvalidArgument("stream: expected None, an int handle or a stream object, got bool")
    if isinstance(stream, int):
        return stream or None
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value or None
    raise InvalidArgument(
        f"stream: expected None, an int handle, or an object with .cuda_stream or .ptr, "
        f"got {type(stream).__name__}")
