"""The CUDA paths, on a GPU: torch CUDA tensors and CuPy arrays in and out, in
place, on the caller's streams (torch CPU tensors: test_torch_cpu.py).

Every case skips without torch or without a CUDA device that both torch and
libfleche.so see; the skip reason says which. The oracle is Store.gather of
the same ids. A spy on fl_query (the ctypes function of fleche._lib.lib, and
the pointer that fleche._fast calls) records the pointers C gets, to check
that they are the tensors' own (no host copy).
"""

import ctypes
import threading

import numpy as np
import pytest

import fleche
from conftest import HASHED_IDS, DLPackOnly, as_torch, random_ids

torch = pytest.importorskip("torch", reason="torch is not installed")

GPUS = (torch.cuda.device_count() if torch.cuda.is_available() else 0,
        fleche.cuda_device_count())  # (torch's, libfleche.so's)
pytestmark = pytest.mark.skipif(min(GPUS) == 0, reason=f"needs a CUDA device: torch sees "
                                                      f"{GPUS[0]}, libfleche.so sees {GPUS[1]}")
DEV = "cuda:0"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16}


def numpy_of(x) -> np.ndarray:
    """A host NumPy copy of a torch tensor or CuPy array (for comparing only)."""
    if isinstance(x, torch.Tensor):
        return x.cpu().numpy()
    return x.get() if hasattr(x, "get") else np.asarray(x)


@pytest.fixture
def c_calls(monkeypatch):
    """The queries C ran during a test: ([(table, ids, n, out), ...], stream)
    per fl_query and per fl_prepared_run or fl_prepared_launch (whose spans
    are the ones its handle was prepared with). fl_query is spied on twice:
    as the ctypes function, and as the function pointer that fleche._fast
    (Cache.query's C path) calls."""
    lib = fleche._lib.lib
    real_query, real_prepare, real_run = lib.fl_query, lib.fl_query_prepare, lib.fl_prepared_run
    real_launch = lib.fl_prepared_launch
    calls, prepared = [], {}

    def spans(queries, n):
        qs = (fleche._lib.fl_table_query * n).from_address(queries) if n else []
        return [(q.table, q.ids, q.n, q.out) for q in qs]

    def query(cache, queries, n, stream):
        calls.append((spans(queries, n), stream or 0))
        return real_query(cache, queries, n, stream)

    def prepare(cache, queries, n, out):
        st = real_prepare(cache, queries, n, out)
        if st == fleche._lib.FL_OK:
            prepared[out._obj.value] = spans(queries, n)
        return st

    def run(p, stream):
        calls.append((prepared[p], stream or 0))
        return real_run(p, stream)

    def launch(p, stream):
        calls.append((prepared[p], stream or 0))
        return real_launch(p, stream)

    monkeypatch.setattr(lib, "fl_query", query)
    monkeypatch.setattr(lib, "fl_query_prepare", prepare)
    monkeypatch.setattr(lib, "fl_prepared_run", run)
    monkeypatch.setattr(lib, "fl_prepared_launch", launch)
    spy = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                           ctypes.c_void_p)(query)
    previous = fleche._fast.use_query(ctypes.cast(spy, ctypes.c_void_p).value)
    yield calls
    fleche._fast.use_query(previous)


@pytest.fixture
def gcache(store):
    with fleche.Cache(store, budget_bytes=64 << 20, backend="cuda", admit_policy="coin",
                      admit_probability=1.0) as c:
        yield c


def test_zero_copy_misses_match_the_store(store):
    # Few dense misses per batch: the GPU reads them in place; hashed ones
    # are gathered on the host in the same batch.
    rng = np.random.default_rng(5)
    with fleche.Cache(store, budget_bytes=64 << 20, backend="cuda", admit_policy="coin",
                      admit_probability=0.0, zero_copy_rows=1024) as c:
        for _ in range(3):
            q = {t.name: random_ids(rng, t, 50, 0.2) for t in store.tables}
            got = c.query({name: as_torch(ids, DEV) for name, ids in q.items()})
            for name, ids in q.items():
                np.testing.assert_array_equal(numpy_of(got[name]), store.gather(name, ids))
        assert c.stats().zero_copy_rows > 0


# ------------------------------------------------------------ (f) CUDA tensors on the host backend


def test_cuda_tensors_on_the_host_backend_are_refused(cache, c_calls):
    with pytest.raises(fleche.InvalidArgument, match="host backend"):
        cache.query({"user": torch.tensor([1, 2], device=DEV)})
    with pytest.raises(fleche.InvalidArgument, match="host backend"):
        cache.query({"user": np.array([1, 2], np.uint64)},
                    out={"user": torch.empty((2, 16), device=DEV)})
    assert not c_calls


# ------------------------------------------------------------ (a) torch CUDA in, torch CUDA out


def test_cuda_tensors_in_and_out_match_the_store(store, gcache, c_calls):
    assert gcache.backend == "cuda"
    rng = np.random.default_rng(3)
    batches = [{t.name: random_ids(rng, t, int(rng.integers(1, 300)), 0.2) for t in store.tables}
               for _ in range(3)]
    for repeat in range(2):  # the second pass finds the first pass's rows admitted: hits
        before = gcache.stats()
        for q in batches:
            tq = {name: as_torch(ids, DEV) for name, ids in q.items()}
            got = gcache.query(tq)
            assert set(got) == set(q)
            spans, _ = c_calls[-1]
            assert len(spans) == len(q)
            for (table, ids_ptr, n, out_ptr), (name, ids) in zip(spans, q.items()):
                t = store.table(name)
                o = got[name]
                assert isinstance(o, torch.Tensor) and o.device == tq[name].device
                assert o.dtype == TORCH_DTYPES[t.dtype] and tuple(o.shape) == (len(ids), t.dim)
                assert (table, ids_ptr, n, out_ptr) == (store.table_index(name),
                                                        tq[name].data_ptr(), len(ids),
                                                        o.data_ptr())
                np.testing.assert_array_equal(numpy_of(o), store.gather(name, ids))
        gcache.sync()
        after = gcache.stats()
        assert after.queries - before.queries == len(batches)
        if repeat == 1:
            assert after.hits > before.hits
    st = gcache.stats()
    assert st.misses > 0 and st.admissions > 0


def test_caller_outputs_are_written_in_place(store, gcache, c_calls):
    ids = {"user": np.array([0, 7, 7, 999], np.uint64), "item": HASHED_IDS["item"][:5],
           "ctx": np.array([3, 1], np.uint64)}
    tids = {name: as_torch(v, DEV) for name, v in ids.items()}
    outs = {name: torch.full((len(v), store.table(name).dim), float("nan"), device=DEV,
                             dtype=TORCH_DTYPES[store.table(name).dtype])
            for name, v in ids.items()}
    for _ in range(2):
        res = gcache.query(tids, out=outs)
        spans, _ = c_calls[-1]
        assert len(spans) == len(ids)
        for (_, ids_ptr, _, out_ptr), name in zip(spans, ids):
            assert res[name] is outs[name]
            assert ids_ptr == tids[name].data_ptr() and out_ptr == outs[name].data_ptr()
            np.testing.assert_array_equal(numpy_of(outs[name]), store.gather(name, ids[name]))
        gcache.sync()
    flat = torch.empty(4 * 16, device=DEV)  # a flat (n * dim,) output is accepted too
    gcache.query({"user": tids["user"]}, out={"user": flat})
    np.testing.assert_array_equal(numpy_of(flat).reshape(4, 16), store.gather("user", ids["user"]))


def test_packed_cuda_tensors_in_and_out(store, gcache, c_calls):
    # query_packed over torch CUDA tensors: C gets slices of the caller's two
    # tensors (the first call caches the tables' keys in Python, the later
    # ones take fleche._fast), and the vectors match the store's.
    rng = np.random.default_rng(8)
    tables, counts = ["user", "ad"], [50, 30]
    for _ in range(3):
        parts = [random_ids(rng, store.table(t), n, 0.2) for t, n in zip(tables, counts)]
        ids = as_torch(np.concatenate(parts), DEV)
        out = torch.full((50 * 16 + 30 * 4,), float("nan"), device=DEV)
        assert gcache.query_packed(tables, ids, counts, out) is out
        spans, _ = c_calls[-1]
        assert spans == [(0, ids.data_ptr(), 50, out.data_ptr()),
                         (3, ids.data_ptr() + 50 * 8, 30, out.data_ptr() + 50 * 16 * 4)]
        want = np.concatenate([store.gather(t, p).reshape(-1) for t, p in zip(tables, parts)])
        np.testing.assert_array_equal(numpy_of(out), want)
    new = gcache.query_packed(tables, ids, counts)  # allocated: a CUDA tensor like the ids
    assert isinstance(new, torch.Tensor) and new.device == ids.device
    np.testing.assert_array_equal(numpy_of(new), want)


def test_out_of_range_on_cuda(gcache):
    with pytest.raises(fleche.OutOfRange) as e:
        gcache.query({"user": torch.tensor([5, 1000], device=DEV)})
    assert "1000" in str(e.value)


# ------------------------------------------------------------ (c) streams


@pytest.mark.parametrize("kind", ["int", "torch", "torch_context", "cupy"])
def test_streams(store, gcache, c_calls, kind):
    ids_np = np.arange(0, 1000, 3, dtype=np.uint64)
    want = store.gather("user", ids_np)
    if kind == "cupy":
        cupy = pytest.importorskip("cupy")
        cs = cupy.cuda.Stream(non_blocking=True)
        handle, sync, arg = cs.ptr, cs.synchronize, cs
    else:
        s = torch.cuda.Stream(device=DEV)
        handle, sync = s.cuda_stream, s.synchronize
        arg = {"int": s.cuda_stream, "torch": s, "torch_context": None}[kind]
    for with_out in (False, True):
        out = {"user": torch.empty((len(ids_np), 16), device=DEV)} if with_out else None
        if kind == "torch_context":  # stream=None: torch's current stream, s
            with torch.cuda.stream(s):
                got = gcache.query({"user": as_torch(ids_np, DEV) * 1}, out=out)["user"]
        else:
            # The ids come from a kernel on torch's current stream, maybe still
            # pending: the call's stream must wait for it (DLPack order).
            ids = as_torch(ids_np, DEV) * 1
            got = gcache.query({"user": ids}, out=out, stream=arg)["user"]
        assert c_calls[-1][1] == handle
        sync()
        np.testing.assert_array_equal(numpy_of(got), want)
    gcache.sync()


def test_default_stream_is_torchs_current(gcache, c_calls):
    gcache.query({"user": torch.tensor([1], device=DEV)})
    assert c_calls[-1][1] == torch.cuda.current_stream(DEV).cuda_stream


def test_outputs_made_in_c(store, gcache, c_calls, monkeypatch):
    # Without out=, C (fleche._fast, through the package's torch reader)
    # makes the outputs of torch ids, on the ids' device and torch's current
    # stream, and the Python binding is not called (after a first query,
    # which takes it to learn the tables' keys).
    if fleche._buffers.torch_reader(torch) is None:
        pytest.skip("fleche._torch_view is not built for this torch (FLECHE_TORCH=1)")

    def no_bind(*args):
        raise AssertionError("the call took the Python path")

    rng = np.random.default_rng(11)
    q = {t.name: random_ids(rng, t, 300, 0.2) for t in store.tables}
    gcache.query({name: as_torch(ids, DEV) for name, ids in q.items()})  # caches the keys
    monkeypatch.setattr(fleche.Cache, "_bind", no_bind)
    s = torch.cuda.Stream(device=DEV)
    with torch.cuda.stream(s):
        got = gcache.query({name: as_torch(ids, DEV) for name, ids in q.items()})
    spans, stream = c_calls[-1]
    assert stream == s.cuda_stream
    s.synchronize()
    for (name, ids), (_, _, n, out_ptr) in zip(q.items(), spans):
        t = store.table(name)
        o = got[name]
        assert o.is_cuda and o.shape == (len(ids), t.dim) and o.dtype == TORCH_DTYPES[t.dtype]
        assert out_ptr == o.data_ptr() and n == len(ids)
        np.testing.assert_array_equal(numpy_of(o), store.gather(name, ids))


def test_four_threads_each_on_its_own_stream(store, gcache):
    rng = np.random.default_rng(9)
    batches = [[{t.name: random_ids(rng, t, 100, 0.1) for t in store.tables} for _ in range(5)]
               for _ in range(4)]
    errors = []

    def work(mine):
        try:
            s = torch.cuda.Stream(device=DEV)
            for q in mine:
                with torch.cuda.stream(s):
                    got = gcache.query({n: as_torch(v, DEV) for n, v in q.items()})
                s.synchronize()
                for name, ids in q.items():
                    np.testing.assert_array_equal(numpy_of(got[name]), store.gather(name, ids))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(b,)) for b in batches]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


# ------------------------------------------------------------ (d) other DLPack objects


def test_cupy_arrays_in_and_out(store, gcache, c_calls):
    cupy = pytest.importorskip("cupy")
    ids_np = HASHED_IDS["ad"][:20]
    ids = cupy.asarray(ids_np)  # uint64
    got = gcache.query({"ad": ids})["ad"]
    assert isinstance(got, cupy.ndarray) and got.dtype == np.float32 and got.shape == (20, 4)
    assert got.device.id == ids.device.id
    (_, ids_ptr, _, out_ptr), = c_calls[-1][0]
    assert ids_ptr == ids.data.ptr and out_ptr == got.data.ptr
    np.testing.assert_array_equal(numpy_of(got), store.gather("ad", ids_np))
    out = cupy.zeros((20, 4), dtype=np.float32)
    res = gcache.query({"ad": ids.view(np.int64)}, out={"ad": out})
    assert res["ad"] is out and c_calls[-1][0][0][3] == out.data.ptr
    np.testing.assert_array_equal(numpy_of(out), store.gather("ad", ids_np))
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:  # stream=None: CuPy's current stream
        got = gcache.query({"ad": ids})["ad"]
    assert c_calls[-1][1] == cs.ptr
    cs.synchronize()
    np.testing.assert_array_equal(numpy_of(got), store.gather("ad", ids_np))
    with pytest.raises(fleche.InvalidArgument, match="int32"):
        gcache.query({"ad": ids.astype(np.int32)})
    with pytest.raises(fleche.InvalidArgument, match="C-contiguous"):
        gcache.query({"ad": ids[::2]})


def test_dlpack_only_objects(store, gcache, c_calls):
    ids_np = np.array([5, 6, 7, 5], np.uint64)
    ids = as_torch(ids_np, DEV)
    out = torch.empty((4, 16), device=DEV)
    res = gcache.query({"user": DLPackOnly(ids)}, out={"user": DLPackOnly(out)})
    assert isinstance(res["user"], DLPackOnly)
    (_, ids_ptr, _, out_ptr), = c_calls[-1][0]
    assert ids_ptr == ids.data_ptr() and out_ptr == out.data_ptr()
    np.testing.assert_array_equal(numpy_of(out), store.gather("user", ids_np))
    view = DLPackOnly(torch.arange(8, device=DEV)[2:6])  # a byte_offset or a moved pointer
    gcache.query({"user": view}, out={"user": DLPackOnly(out)})
    np.testing.assert_array_equal(numpy_of(out), store.gather("user", np.arange(2, 6, dtype=np.uint64)))
    with pytest.raises(fleche.InvalidArgument, match="pass out="):
        gcache.query({"user": DLPackOnly(ids)})
    with pytest.raises(fleche.InvalidArgument, match="C-contiguous"):
        gcache.query({"user": DLPackOnly(torch.arange(8, device=DEV)[::2])},
                     out={"user": torch.empty((4, 16), device=DEV)})
    with pytest.raises(fleche.InvalidArgument, match="int32"):
        gcache.query({"user": DLPackOnly(ids.to(torch.int32))}, out={"user": out})


# ------------------------------------------------------------ (e) bad inputs and mixed memory


def test_bad_cuda_inputs_fail_before_c(gcache, c_calls):
    ids = torch.tensor([1, 2, 3], device=DEV)
    cases = [
        ({"user": ids.to(torch.int32)}, None, "int32"),
        ({"user": ids.float()}, None, "float32"),
        ({"user": torch.arange(10, device=DEV)[::2]}, None, "C-contiguous"),
        ({"user": ids.reshape(3, 1)}, None, "1-D"),
        ({"user": ids}, {"user": torch.empty((3, 16), dtype=torch.float16, device=DEV)},
         "float16"),
        ({"item": ids}, {"item": torch.empty((3, 32), dtype=torch.float32, device=DEV)},
         "float32"),
        ({"user": ids}, {"user": torch.empty((4, 16), device=DEV)}, r"\(4, 16\)"),
        ({"user": ids}, {"user": torch.empty((16, 3), device=DEV).t()}, "C-contiguous"),
    ]
    for q, out, words in cases:
        with pytest.raises(fleche.InvalidArgument, match=words):
            gcache.query(q, out=out)
    with pytest.raises(fleche.InvalidArgument, match="stream"):
        gcache.query({"user": ids}, stream=-5)
    assert not c_calls


@pytest.mark.skipif(GPUS[0] < 2, reason=f"needs 2 CUDA devices: torch sees {GPUS[0]}")
def test_tensor_on_another_device(gcache, c_calls):
    with pytest.raises(fleche.InvalidArgument, match="device 1"):
        gcache.query({"user": torch.tensor([1, 2], device="cuda:1")})
    with pytest.raises(fleche.InvalidArgument, match="device 1"):
        gcache.query({"user": torch.tensor([1, 2], device=DEV)},
                     out={"user": torch.empty((2, 16), device="cuda:1")})
    assert not c_calls


def test_host_and_device_memory_mixed(store, gcache, c_calls):
    """The CUDA backend takes host or device memory for each of ids and out
    (docs/API.md); the results follow the ids' kind when out is not given."""
    ids_np = np.array([9, 8, 7], np.uint64)
    want = store.gather("user", ids_np)
    out = torch.empty((3, 16), device=DEV)  # host ids, device out
    gcache.query({"user": ids_np}, out={"user": out})
    assert c_calls[-1][0][0][1] == ids_np.ctypes.data and c_calls[-1][0][0][3] == out.data_ptr()
    np.testing.assert_array_equal(numpy_of(out), want)
    host_out = np.empty((3, 16), np.float32)  # device ids, host out: complete on return
    gcache.query({"user": as_torch(ids_np, DEV)}, out={"user": host_out})
    np.testing.assert_array_equal(host_out, want)
    got = gcache.query({"user": as_torch(ids_np)})["user"]  # CPU tensor in: CPU tensor out
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    np.testing.assert_array_equal(got.numpy(), want)
    got = gcache.query({"user": ids_np})["user"]  # NumPy in: NumPy out
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------ (g) prepared queries


@pytest.mark.parametrize("with_out", [False, True])
def test_prepared_cuda_tensors_match_the_store(store, gcache, c_calls, with_out):
    rng = np.random.default_rng(32)
    n = {t.name: int(rng.integers(1, 300)) for t in store.tables}
    ids = {name: torch.zeros(k, dtype=torch.int64, device=DEV) for name, k in n.items()}
    outs = ({name: torch.full((k, store.table(name).dim), float("nan"), device=DEV,
                              dtype=TORCH_DTYPES[store.table(name).dtype])
             for name, k in n.items()} if with_out else None)
    q = gcache.prepare(ids, out=outs)
    got = q.outputs
    if with_out:
        assert all(got[name] is outs[name] for name in n)
    ptrs = {name: o.data_ptr() for name, o in got.items()}
    spans_want = [(store.table_index(name), ids[name].data_ptr(), k, ptrs[name])
                  for name, k in n.items()]
    for _ in range(4):  # refilled in place: misses, admissions, then hits
        want = {t.name: random_ids(rng, t, n[t.name], 0.2) for t in store.tables}
        for name, a in want.items():
            ids[name].copy_(as_torch(a, DEV))  # a kernel on torch's current stream
        res = q.run()
        assert res is got
        spans, stream = c_calls[-1]
        assert spans == spans_want  # the tensors' own pointers: no host copy
        assert stream == torch.cuda.current_stream(DEV).cuda_stream
        for name, a in want.items():
            o = res[name]
            assert isinstance(o, torch.Tensor) and o.device == ids[name].device
            assert o.data_ptr() == ptrs[name]
            np.testing.assert_array_equal(numpy_of(o), store.gather(name, a))
        gcache.sync()
    st = gcache.stats()
    assert st.misses > 0 and st.admissions > 0 and st.hits > 0


@pytest.mark.parametrize("how", ["argument", "context"])
def test_prepared_on_a_torch_stream(store, gcache, c_calls, how):
    rng = np.random.default_rng(33)
    ids = torch.zeros(200, dtype=torch.int64, device=DEV)
    q = gcache.prepare({"user": ids})  # outputs allocated on torch's current stream
    ptr = q.outputs["user"].data_ptr()
    s = torch.cuda.Stream(device=DEV)
    for _ in range(3):
        want = rng.integers(0, 1000, 200).astype(np.uint64)
        ids.copy_(as_torch(want, DEV))  # pending on torch's current stream: s must wait for it
        if how == "argument":
            got = q.run(stream=s)["user"]
        else:
            with torch.cuda.stream(s):
                got = q.run()["user"]
        assert c_calls[-1][1] == s.cuda_stream
        s.synchronize()
        assert got.data_ptr() == ptr
        np.testing.assert_array_equal(numpy_of(got), store.gather("user", want))
    gcache.sync()


def test_prepared_bad_cuda_inputs_fail_at_prepare(gcache, c_calls):
    ids = torch.tensor([1, 2, 3], device=DEV)
    with pytest.raises(fleche.InvalidArgument, match="int32"):
        gcache.prepare({"user": ids.to(torch.int32)})
    with pytest.raises(fleche.InvalidArgument, match="C-contiguous"):
        gcache.prepare({"user": torch.arange(10, device=DEV)[::2]})
    with pytest.raises(fleche.InvalidArgument, match="float16"):
        gcache.prepare({"user": ids},
                       out={"user": torch.empty((3, 16), dtype=torch.float16, device=DEV)})
    with pytest.raises(fleche.InvalidArgument, match="pass out="):
        gcache.prepare({"user": DLPackOnly(ids)})
    assert not c_calls


def no_run(p, stream):
    raise AssertionError("fl_prepared_run called: launch() must call fl_prepared_launch")


@pytest.mark.parametrize("how", ["current", "argument"])
def test_prepared_launch_and_wait_match_the_store(store, gcache, c_calls, monkeypatch, how):
    # Device ids and outputs, the flat layout: from the second launch on, the
    # gated graph (the host's part on the answerer thread, fl_prepared_wait).
    monkeypatch.setattr(fleche._lib.lib, "fl_prepared_run", no_run)
    rng = np.random.default_rng(34)
    n = {t.name: int(rng.integers(1, 300)) for t in store.tables}
    ids = {name: torch.zeros(k, dtype=torch.int64, device=DEV) for name, k in n.items()}
    q = gcache.prepare(ids)  # outputs allocated on torch's current stream
    ptrs = {name: o.data_ptr() for name, o in q.outputs.items()}
    spans_want = [(store.table_index(name), ids[name].data_ptr(), k, ptrs[name])
                  for name, k in n.items()]
    s = torch.cuda.Stream(device=DEV) if how == "argument" else None
    for _ in range(6):  # refilled in place: misses, admissions, then hits
        on = s if s is not None else torch.cuda.current_stream(DEV)
        want = {t.name: random_ids(rng, t, n[t.name], 0.2) for t in store.tables}
        for name, a in want.items():
            ids[name].copy_(as_torch(a, DEV))  # pending on torch's current stream
        for o in q.outputs.values():
            o.fill_(float("nan"))  # a launch that wrote nothing fails the check
        assert q.launch(stream=s) is None
        spans, stream = c_calls[-1]
        assert spans == spans_want
        assert stream == on.cuda_stream
        q.wait()
        on.synchronize()
        for name, a in want.items():
            assert q.outputs[name].data_ptr() == ptrs[name]
            np.testing.assert_array_equal(numpy_of(q.outputs[name]), store.gather(name, a))
        gcache.sync()
    st = gcache.stats()
    assert st.misses > 0 and st.admissions > 0 and st.hits > 0


def test_prepared_launch_out_of_range_raises_once_and_stays_usable(store, gcache):
    rng = np.random.default_rng(35)
    ids = torch.zeros(64, dtype=torch.int64, device=DEV)
    q = gcache.prepare({"user": ids})

    def launch_and_check(a: np.ndarray) -> None:
        ids.copy_(as_torch(a, DEV))
        q.launch()
        q.wait()
        torch.cuda.current_stream(DEV).synchronize()
        np.testing.assert_array_equal(numpy_of(q.outputs["user"]), store.gather("user", a))

    for _ in range(2):  # the second launch is the gated graph's
        launch_and_check(rng.integers(0, 1000, 64).astype(np.uint64))
    bad = rng.integers(0, 1000, 64).astype(np.uint64)
    bad[3] = 1000  # a dense id >= the corpus size
    ids.copy_(as_torch(bad, DEV))
    with pytest.raises(fleche.OutOfRange, match="1000"):
        q.launch()  # raises here or, from the answerer, at wait()
        q.wait()
    torch.cuda.synchronize(DEV)  # the failed run's stream is not broken
    q.wait()  # reported once
    for _ in range(3):
        launch_and_check(rng.integers(0, 1000, 64).astype(np.uint64))
    a = rng.integers(0, 1000, 8).astype(np.uint64)
    np.testing.assert_array_equal(numpy_of(gcache.query({"user": as_torch(a, DEV)})["user"]),
                                  store.gather("user", a))


class StreamSpy(DLPackOnly):
    """DLPackOnly that records the streams __dlpack__ is asked to order."""

    def __init__(self, a) -> None:
        super().__init__(a)
        self.streams = []

    def __dlpack__(self, stream=None, **kw):
        self.streams.append(stream)
        return super().__dlpack__(stream=stream, **kw)


def test_prepared_dlpack_objects_order_each_run(store, gcache, c_calls):
    ids_t = torch.zeros(4, dtype=torch.int64, device=DEV)
    out_t = torch.empty((4, 16), device=DEV)
    ids, out = StreamSpy(ids_t), StreamSpy(out_t)
    q = gcache.prepare({"user": ids}, out={"user": out})
    s = torch.cuda.Stream(device=DEV)
    for k in range(2):
        want = np.array([5, 6, 7, 5 + k], np.uint64)
        ids_t.copy_(as_torch(want, DEV))
        assert q.run(stream=s)["user"] is out
        assert ids.streams[-1] == out.streams[-1] == s.cuda_stream
        (_, ids_ptr, _, out_ptr), = c_calls[-1][0]
        assert ids_ptr == ids_t.data_ptr() and out_ptr == out_t.data_ptr()
        s.synchronize()
        np.testing.assert_array_equal(numpy_of(out_t), store.gather("user", want))
    assert len(ids.streams) == 3  # prepare, then one a run


def test_prefetch_on_a_side_stream_caches_the_next_query(store):
    # The model's stream runs on while a side stream names the next batch;
    # the query on the model's stream, made to wait for the side stream,
    # finds every row cached though the coin admits nothing.
    with fleche.Cache(store, budget_bytes=8 << 20, backend="cuda", admit_policy="coin",
                      admit_probability=0.0) as c:
        rng = np.random.default_rng(8)
        q = {t.name: as_torch(random_ids(rng, t, 300), DEV) for t in store.tables}
        n = sum(len(ids) for ids in q.values())
        side = torch.cuda.Stream(device=DEV)
        with torch.cuda.stream(side):
            c.prefetch(q)  # on torch's current stream: `side`
        torch.cuda.current_stream(DEV).wait_stream(side)
        got = c.query(q)
        torch.cuda.current_stream(DEV).synchronize()
        for name, ids in q.items():
            np.testing.assert_array_equal(numpy_of(got[name]), store.gather(name, ids.cpu().numpy()))
        st = c.stats()
        assert (st.prefetches, st.prefetch_misses, st.hits) == (1, n, n)
