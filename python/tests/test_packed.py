"""Cache.query_packed: a batch's ids in one array, table after table, and its
vectors in one output. The oracle is Store.gather of each table's ids. Its C
path (fleche._fast.query_packed) is held to the Python path it stands in for
(fleche/_packed.py, then Cache._bind over the slices) as test_fast.py holds
query(): every call C accepts, Python accepts with the same fl_table_query
entries; every call Python refuses, C declines. torch CUDA tensors:
test_cuda.py."""

import re

import numpy as np
import pytest

import fleche
from conftest import HASHED_IDS, random_ids
from fleche import _fast
from fleche._packed import unpack


def packed(store, tables, counts, seed=0, miss_fraction=0.2):
    """(ids, per-table ids, want): random ids of `tables`, packed, and the
    store's vectors of them, packed (1-D)."""
    rng = np.random.default_rng(seed)
    parts = [random_ids(rng, store.table(t), n, miss_fraction) for t, n in zip(tables, counts)]
    ids = np.concatenate(parts) if parts else np.empty(0, np.uint64)
    want = np.concatenate([store.gather(t, p).reshape(-1) for t, p in zip(tables, parts)])
    return ids, parts, want


@pytest.mark.parametrize("given", [False, True], ids=["allocated", "out given"])
def test_tables_of_several_dimensions_match_the_store(store, cache, given):
    tables, counts = ["user", "ad"], [37, 21]  # fp32, dimensions 16 and 4
    for seed in range(3):  # the later calls hit rows the first ones admitted
        ids, _, want = packed(store, tables, counts, seed)
        out = np.full(37 * 16 + 21 * 4, np.nan, np.float32) if given else None
        got = cache.query_packed(tables, ids, counts, out)
        assert got.shape == (37 * 16 + 21 * 4,) and got.dtype == np.float32
        if given:
            assert got is out
        np.testing.assert_array_equal(got, want)
    assert cache.stats().hits > 0


def test_tables_of_one_dimension_fill_a_two_dimensional_output():
    tables = [fleche.Table("a", 500, 8), fleche.Table("b", 900, 8, ids="hashed"),
              fleche.Table("c", 50, 8)]
    with fleche.Store(tables, threads=2) as s:
        s.fill_synthetic("a", 1)
        s.fill_synthetic("c", 2)
        b_ids = np.arange(900, dtype=np.uint64) * np.uint64(7919)
        s.upsert("b", b_ids, np.random.default_rng(3).standard_normal((900, 8)).astype(np.float32))
        with fleche.Cache(s, budget_bytes=4 << 20, backend="host") as c:
            rng = np.random.default_rng(4)
            parts = [rng.integers(0, 500, 40).astype(np.uint64), rng.choice(b_ids, 30),
                     rng.integers(0, 50, 9).astype(np.uint64)]
            ids = np.concatenate(parts)
            want = np.concatenate([s.gather(t, p) for t, p in zip("abc", parts)])
            got = c.query_packed(("a", "b", "c"), ids, (40, 30, 9))
            assert got.shape == (79, 8)
            np.testing.assert_array_equal(got, want)
            out = np.zeros((79, 8), np.float32)
            assert c.query_packed([0, 1, 2], ids, [40, 30, 9], out) is out
            np.testing.assert_array_equal(out, want)


def test_tables_with_no_ids(store, cache):
    ids, _, want = packed(store, ["user", "ad"], [0, 5])
    got = cache.query_packed(["user", "ad"], ids, [0, 5], np.empty(20, np.float32))
    np.testing.assert_array_equal(got, want)
    got = cache.query_packed(["user", "ad"], ids[:0], [0, 0], np.empty(0, np.float32))
    assert got.shape == (0,)


@pytest.mark.parametrize("given", [False, True], ids=["allocated", "out given"])
def test_fp16_tables(store, cache, given):
    tables, counts = ["ctx", "item"], [12, 30]
    for seed in range(2):  # the first call caches the tables' keys; C takes the second
        ids, _, want = packed(store, tables, counts, seed)
        got = cache.query_packed(tables, ids, counts, np.empty(12 * 8 + 30 * 32, np.float16)
                                 if given else None)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------ errors


def bad_calls():
    """(what, tables, ids, counts, out, message): calls that raise
    InvalidArgument with `message`, before C is called."""
    u = np.arange(4, dtype=np.uint64)
    ua = np.concatenate([u, HASHED_IDS["ad"][:3]])
    out = np.empty(4 * 16 + 3 * 4, np.float32)
    return [
        ("a string of tables", "user", u, [4], out[:64], "list or tuple of tables"),
        ("no tables", [], u[:0], [], out[:0], "at least one table"),
        ("a table twice", ["user", 0], np.concatenate([u, u]), [4, 4],
         np.empty(128, np.float32), "named twice"),
        ("an unknown table", ["nope"], u, [4], out[:64], "nope"),
        ("fewer counts than tables", ["user", "ad"], ua, [4], out, "2 tables but 1 counts"),
        ("a float count", ["user", "ad"], ua, [4, 3.0], out, "must be an int"),
        ("a negative count", ["user", "ad"], ua, [8, -1], out, "negative"),
        ("counts that miss ids", ["user", "ad"], ua, [4, 2], out, "add up to 6 ids"),
        ("counts past any array", ["user", "ad"], ua, [2**62, 2**62], out,
         f"add up to {2**63} ids"),
        ("2-D ids", ["user"], u.reshape(2, 2), [4], out[:64], "1-D"),
        ("tables of two dtypes", ["user", "ctx"], u, [2, 2], out[:48], "dtypes differ"),
        ("a short output", ["user", "ad"], ua, [4, 3], out[:-1], "expected 76 elements"),
        ("a 2-D output over two dimensions", ["user", "ad"], ua, [4, 3],
         np.empty((7, 16), np.float32), "one dimension"),
        ("a 2-D output of the wrong shape", ["user"], u, [4], np.empty((4, 8), np.float32),
         "expected shape (4, 16)"),
        ("an fp16 output of fp32 tables", ["user", "ad"], ua, [4, 3],
         np.empty(76, np.float16), "float32"),
        ("int32 ids", ["user"], u.astype(np.int32), [4], out[:64], "uint64 or int64"),
        ("a list of ids", ["user"], [0, 1, 2, 3], [4], out[:64], "1-D array that slices"),
    ]


@pytest.mark.parametrize("case", range(len(bad_calls())))
def test_bad_calls_raise_and_write_nothing(cache, case):
    what, tables, ids, counts, out, message = bad_calls()[case]
    if isinstance(out, np.ndarray):
        out[...] = 7
    with pytest.raises(fleche.InvalidArgument, match=re.escape(message)):
        cache.query_packed(tables, ids, counts, out)
    assert np.all(out == 7), what
    assert cache.stats().queries == 0, what


# ------------------------------------------------------------ the C path against the Python path


def outcome(cache, spans, tables, ids, counts, out) -> str:
    """"accepted" (by both, the same entries), "declined" (by C, accepted by
    Python) or "refused" (by both: Python raises)."""
    try:  # also caches the keys, as a first query does
        queries, outs, _, _ = unpack(tables, ids, counts, out, cache._key_info, lambda a: 0)
        b = cache._bind(queries, outs, None)
    except fleche.Error:
        b = None
    got = _fast.query_packed(cache._h.ptr, cache._fast_device, cache._keys, tables, ids, counts,
                             out, None)
    if b is None:
        assert got is None, "C accepted a call that Python refuses"
        return "refused"
    if got is None:
        return "declined"
    assert got is out and spans[-1] == list(b.words)
    return "accepted"


def parity_cases():
    u = np.arange(4, dtype=np.uint64)
    ua = np.concatenate([u, HASHED_IDS["ad"][:3]])
    out = np.empty(76, np.float32)
    return [(what, t, i, c, o, "refused") for what, t, i, c, o, _ in bad_calls()] + [
        ("lists", ["user", "ad"], ua, [4, 3], out, "accepted"),
        ("tuples, index keys, int64 ids", (0, 3), ua.view(np.int64), (4, 3), out, "accepted"),
        ("a 2-D output", ["user"], u, [4], np.empty((4, 16), np.float32), "accepted"),
        ("a table with no ids", ["user", "ad"], ua[4:], [0, 3], out[64:], "accepted"),
        ("fp16 tables", ["item", "ctx"], np.concatenate([HASHED_IDS["item"][:2], u]), [2, 4],
         np.empty(96, np.float16), "accepted"),
        ("NumPy int counts", ["user", "ad"], ua, [np.int64(4), 3], out, "declined"),
        ("big-endian ids", ["user"], u.astype(">u8"), [4], out[:64], "declined"),
        ("a read-only output", ["user"], u, [4], np.frombuffer(bytes(256), np.float32),
         "refused"),
        ("strided ids", ["user"], np.arange(8, dtype=np.uint64)[::2], [4], out[:64], "refused"),
    ]


def test_c_path_matches_python_path(store, cache, spans):
    cases = parity_cases()
    got = [outcome(cache, spans, t, i, c, o) for _, t, i, c, o, _ in cases]
    assert got == [want for *_, want in cases], [w for w, *_ in cases]


def test_an_allocating_call_takes_the_c_path(store, cache, spans):
    # Once its tables are known, a call without `out` allocates the output
    # and goes to C like one with it (C's fl_query is the spy here).
    tables, counts = ["user", "ad"], [4, 3]
    ids, _, want = packed(store, tables, counts)
    np.testing.assert_array_equal(cache.query_packed(tables, ids, counts), want)  # Python path
    calls = len(spans)
    got = cache.query_packed(tables, ids, counts)
    assert got.shape == (76,) and got.dtype == np.float32
    assert len(spans) == calls + 1, "the second call went to C"
    assert spans[-1] == [0, ids.ctypes.data, 4, got.ctypes.data,
                         3, ids.ctypes.data + 4 * 8, 3, got.ctypes.data + 64 * 4]
    declined = cache.query_packed(tables, ids, counts, stream=0)  # a stream: the Python path
    assert len(spans) == calls + 1 and declined.shape == (76,)


@pytest.mark.torch_cpu
def test_torch_cpu_tensors(store, cache, spans):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    ua = np.concatenate([np.arange(4, dtype=np.uint64), HASHED_IDS["ad"][:3]])
    ids = torch.from_numpy(ua.view(np.int64).copy())
    cases = [
        (ids, torch.empty(76), "accepted"),
        (ids, np.empty(76, np.float32), "accepted"),  # mixed kinds
        (ids.to(torch.int32), torch.empty(76), "refused"),
        (ids, torch.empty(76, dtype=torch.float16), "refused"),
        (torch.arange(14)[::2], torch.empty(76), "refused"),
    ]
    assert [outcome(cache, spans, ["user", "ad"], i, [4, 3], o) for i, o, _ in cases] == \
        [want for *_, want in cases]


@pytest.mark.torch_cpu
def test_torch_cpu_results_match_the_store(store, cache):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    tables, counts = ["user", "ad"], [9, 6]
    ids, _, want = packed(store, tables, counts, seed=5)
    t_ids = torch.from_numpy(ids.view(np.int64).copy())
    got = cache.query_packed(tables, t_ids, counts)
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (9 * 16 + 6 * 4,)
    np.testing.assert_array_equal(got.numpy(), want)
    out = torch.zeros(9 * 16 + 6 * 4)
    assert cache.query_packed(tables, t_ids, counts, out) is out
    np.testing.assert_array_equal(out.numpy(), want)
