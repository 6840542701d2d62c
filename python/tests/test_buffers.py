"""The views of _buffers on the host: the DLPack capsule reader (run here on
NumPy's CPU capsules; on a GPU it reads CUDA ones) and stream handles."""

import numpy as np
import pytest

import fleche
from fleche import _buffers


class CpuCapsule:
    """Hands NumPy's DLPack capsule to the CUDA reader (NumPy takes no stream)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.a.__dlpack__()


@pytest.mark.parametrize("a", [
    np.arange(10, dtype=np.int64),
    np.arange(10, dtype=np.uint64)[3:],  # a pointer (or byte_offset) past the start
    np.zeros((4, 3), dtype=np.float16),
    np.zeros((5, 1), dtype=np.float32)[1:3],
    np.zeros((0, 7), dtype=np.float32),
])
def test_capsule_view_reads_address_shape_dtype(a):
    src = CpuCapsule(a)
    address, shape, dtype, device, readonly, owner = _buffers._capsule_view(src, "x", 0)
    assert (address, shape, dtype, device, readonly) == (a.ctypes.data, a.shape, a.dtype.name,
                                                         _buffers.HOST, False)
    assert type(owner).__name__ == "PyCapsule"
    assert src.streams == [1]  # the legacy default stream, as DLPack spells it


def test_capsule_view_stream_and_strides():
    src = CpuCapsule(np.arange(10, dtype=np.int64))
    _buffers._capsule_view(src, "x", 0x1234)
    assert src.streams == [0x1234]
    for a in (np.arange(10, dtype=np.int64)[::2], np.zeros((3, 4), np.float32).T):
        with pytest.raises(fleche.InvalidArgument, match="C-contiguous"):
            _buffers._capsule_view(CpuCapsule(a), "x", 0)


def test_capsule_view_names_other_dtypes():
    assert _buffers._capsule_view(CpuCapsule(np.zeros(2, np.int32)), "x", 0)[2] == "int32"
    assert _buffers._capsule_view(CpuCapsule(np.zeros(2, np.float64)), "x", 0)[2] == "float64"


def test_contiguity_rule():
    c = _buffers._c_contiguous
    assert c((3, 4), None) and c((3, 4), (4, 1)) and c((3, 1), (1, 7)) and c((0, 4), (9, 9))
    assert not c((3, 4), (1, 3)) and not c((5,), (2,))


class OtherDevice:
    def __dlpack__(self, stream=None):
        raise AssertionError("not called")

    def __dlpack_device__(self):
        return (8, 0)  # kDLMetal


def test_other_dlpack_devices_are_unsupported(cache):
    with pytest.raises(fleche.Unsupported, match="device type 8"):
        cache.query({"user": OtherDevice()})


def test_stream_handles():
    class TorchLike:
        cuda_stream = 77

    class CupyLike:
        ptr = 88

    h = _buffers.stream_handle
    assert (h(None), h(0), h(5), h(TorchLike()), h(CupyLike())) == (None, 0, 5, 77, 88)
    for bad in (True, -1, "s", 1.0):
        with pytest.raises(fleche.InvalidArgument, match="stream"):
            h(bad)
