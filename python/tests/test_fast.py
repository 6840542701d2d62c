"""fleche._fast, Cache.query's C path, against the Python path it stands in
for (Cache._bind): every call C accepts, _bind accepts with the same
fl_table_query entries and the same result (called without `out`: outputs
of the same kind, shape, dtype and device, C's own); every call _bind
refuses, C declines (so the error is raised by Python, with its message);
and the usual calls (NumPy arrays, torch CPU tensors) are accepted. C's
fl_query is a spy here: nothing runs."""


import numpy as np
import pytest

import fleche
from fleche import _fast

N = 5


def address(a) -> int:
    return a.data_ptr() if hasattr(a, "data_ptr") else a.__array_interface__["data"][0]


def outcome(cache, spans, queries, out, stream=None) -> str:
    """"accepted" (by both, the same entries and result), "declined" (by C,
    accepted by Python) or "refused" (by both: Python raises). out None: C
    makes the outputs, which must be of the kind, shape, dtype and device
    _bind makes them, C's entries _bind's but for the outputs, the new
    arrays'."""
    try:
        b = cache._bind(queries, out, None)  # also caches the keys, as a first query does
    except fleche.Error:
        b = None
    got = _fast.query(cache._h.ptr, cache._fast_device, cache._keys, queries, out, stream)
    if b is None:
        assert got is None, "C accepted a call that Python refuses"
        return "refused"
    if got is None:
        return "declined"
    assert list(got) == list(b.result)
    if out is not None:
        assert spans[-1] == list(b.words) and all(got[k] is b.result[k] for k in got)
        return "accepted"
    words = spans[-1]
    for k, (key, want) in enumerate(b.result.items()):
        o = got[key]
        assert (type(o), o.shape, o.dtype) == (type(want), want.shape, want.dtype)
        assert str(getattr(o, "device", "host")) == str(getattr(want, "device", "host"))
        assert words[4 * k:4 * k + 3] == list(b.words[4 * k:4 * k + 3])
        assert o.shape[0] == 0 or words[4 * k + 3] == address(o)
    return "accepted"


def numpy_cases():
    ids = np.arange(N, dtype=np.uint64)
    out = np.empty((N, 16), np.float32)
    item_out = np.empty(N * 32, np.float16)
    readonly = np.empty((N, 16), np.float32)
    readonly.flags.writeable = False
    return [
        ("uint64, 2-D and flat outputs", {"user": ids, "item": ids}, {"user": out, "item": item_out},
         "accepted"),
        ("int64 ids, index keys", {0: ids.astype(np.int64)}, {0: out}, "accepted"),
        ("empty ids", {"user": ids[:0]}, {"user": out[:0]}, "accepted"),
        ("big-endian ids", {"user": ids.astype(">u8")}, {"user": out}, "declined"),
        ("int32 ids", {"user": ids.astype(np.int32)}, {"user": out}, "refused"),
        ("float ids", {"user": ids.astype(np.float64)}, {"user": out}, "refused"),
        ("2-D ids", {"user": ids.reshape(N, 1)}, {"user": out}, "refused"),
        ("strided ids", {"user": np.arange(2 * N, dtype=np.uint64)[::2]}, {"user": out},
         "refused"),
        ("fp16 output of an fp32 table", {"user": ids}, {"user": np.empty((N, 16), np.float16)},
         "refused"),
        ("wrong output shape", {"user": ids}, {"user": out[:, :15]}, "refused"),
        ("Fortran-order output", {"user": ids}, {"user": np.asfortranarray(out)}, "refused"),
        ("read-only output", {"user": ids}, {"user": readonly}, "refused"),
        ("a list of ids", {"user": [1, 2]}, {"user": out[:2]}, "refused"),
        ("unknown table", {"nope": ids}, {"nope": out}, "refused"),
        ("no output for a table", {"user": ids, "ad": ids}, {"user": out}, "refused"),
        ("an output for a table not queried", {"user": ids},
         {"user": out, "ad": np.empty((N, 4), np.float32)}, "refused"),
    ]


@pytest.mark.parametrize("case", numpy_cases(), ids=lambda c: c[0])
def test_numpy(cache, spans, case):
    _, queries, out, want = case
    assert outcome(cache, spans, queries, out) == want


@pytest.mark.parametrize("case", [c for c in numpy_cases()  # those of ids only
                                  if "output" not in c[0] or c[0].startswith("uint64")],
                         ids=lambda c: c[0])
def test_numpy_made_outputs(cache, spans, case):
    _, queries, _, want = case
    assert outcome(cache, spans, queries, None) == want


def test_made_outputs_take_no_stream(cache, spans):
    # A stream given with no `out`: Python allocates (and orders CuPy's) on it.
    assert outcome(cache, spans, {"user": np.arange(N, dtype=np.uint64)}, None, 0) == "declined"


@pytest.fixture(params=["accessors", "reader"])
def torch_reads(request):
    """(torch, whether the reader is on): _fast reading exact tensors
    through their accessors, or through fleche._torch_view's reader (which
    python/ci.sh builds: under --require-torch-cpu this case may not skip).
    The reader also makes the outputs of torch ids in calls without `out`;
    without it those calls take the Python path."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    reader = None
    if request.param == "reader":
        reader = fleche._buffers.torch_reader(torch)
        if reader is None:
            pytest.skip("fleche._torch_view is not built for this torch (FLECHE_TORCH=1)")
    previous = _fast.use_torch_reader(reader)
    yield torch, reader is not None
    _fast.use_torch_reader(previous)


@pytest.mark.torch_cpu
def test_torch_cpu(cache, spans, torch_reads):
    torch, reader = torch_reads
    ids = torch.arange(N, dtype=torch.int64)
    out = torch.empty((N, 16))
    cases = [
        ({"user": ids}, {"user": out}, "accepted"),
        ({"item": ids}, {"item": torch.empty(N * 32, dtype=torch.float16)}, "accepted"),
        ({"user": ids}, {"user": np.empty((N, 16), np.float32)}, "accepted"),  # mixed kinds
        ({"user": ids[1:]}, {"user": out[1:]}, "accepted"),  # views at an offset
        ({"user": ids}, {"user": torch.nn.Parameter(out)}, "accepted"),  # a subclass
        ({"user": ids}, {"user": out.requires_grad_(False).clone().requires_grad_()}, "accepted"),
        ({"user": ids.to(torch.int32)}, {"user": out}, "refused"),
        ({"user": torch.arange(2 * N)[::2]}, {"user": out}, "refused"),
        ({"user": ids}, {"user": torch.empty((16, N)).t()}, "refused"),
        ({"user": ids}, {"user": torch.empty((1, 16)).expand(N, 16)}, "refused"),
        ({"user": ids}, {"user": out.to(torch.float16)}, "refused"),
        ({"user": ids}, {"user": torch.empty((N, 15))}, "refused"),
        ({"user": ids}, {"user": torch.empty((N, 4, 4))}, "refused"),
        ({"user": torch.tensor(3)}, {"user": out[:1]}, "refused"),
        ({"user": ids.to_sparse()}, {"user": out}, "refused"),
        ({"user": ids}, {"user": torch.empty((N, 16), device="meta")}, "refused"),
    ]
    assert [outcome(cache, spans, q, o) for q, o, _ in cases] == [want for _, _, want in cases]
    made = "accepted" if reader else "declined"
    ids_cases = [
        ({"user": ids, "item": ids}, made),
        ({"user": ids[1:]}, made),
        ({"user": ids[:0]}, made),
        ({"user": ids.numpy()}, "accepted"),  # NumPy ids: a NumPy output
        ({"user": ids.to(torch.int32)}, "refused"),
        ({"user": torch.arange(2 * N)[::2]}, "refused"),
    ]
    assert ([outcome(cache, spans, q, None) for q, _ in ids_cases] ==
            [want for _, want in ids_cases])
