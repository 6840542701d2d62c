"""Cache.prepare and PreparedQuery.run (and launch/wait) on the host backend:
answers against Store.gather while the bound ids are refilled in place,
outputs written in place, the checks of query() at prepare time, errors,
lifetime, and threads."""

import numpy as np
import pytest

import fleche
from conftest import HASHED_IDS, in_four_threads, random_ids

N = {"user": 64, "item": 40, "ctx": 17, "ad": 33}  # ids per table in a batch


@pytest.fixture
def c_calls(monkeypatch):
    """The C query calls made, by name: fl_query, fl_query_prepare,
    fl_prepared_run, fl_prepared_launch and fl_prepared_wait (spies on the
    ctypes functions)."""
    lib = fleche._lib.lib
    calls = []

    def spy_on(name):
        real = getattr(lib, name)

        def spy(*args):
            calls.append(name)
            return real(*args)

        monkeypatch.setattr(lib, name, spy)

    for name in ("fl_query", "fl_query_prepare", "fl_prepared_run", "fl_prepared_launch",
                 "fl_prepared_wait"):
        spy_on(name)
    return calls


def refill(rng: np.random.Generator, store: fleche.Store, ids: dict) -> dict:
    """Writes new random ids (some absent from the store) into the arrays in
    place; returns a copy of them for the oracle."""
    for name, a in ids.items():
        a[:] = random_ids(rng, store.table(name), len(a), miss_fraction=0.2)
    return {name: a.copy() for name, a in ids.items()}


def check(store: fleche.Store, got: dict, want_ids: dict) -> None:
    for name, ids in want_ids.items():
        np.testing.assert_array_equal(got[name], store.gather(name, ids))


def test_runs_match_the_store_as_ids_are_refilled(store, cache):
    rng = np.random.default_rng(21)
    ids = {name: np.zeros(n, np.uint64) for name, n in N.items()}
    addresses = {name: a.ctypes.data for name, a in ids.items()}
    with cache.prepare(ids) as q:
        outs = q.outputs
        assert isinstance(q, fleche.PreparedQuery) and list(outs) == list(N)
        for name, o in outs.items():
            t = store.table(name)
            assert isinstance(o, np.ndarray) and o.shape == (N[name], t.dim)
            assert o.dtype == t.numpy_dtype
        out_addresses = {name: o.ctypes.data for name, o in outs.items()}
        for _ in range(8):
            want = refill(rng, store, ids)
            got = q.run()
            assert got is outs
            assert all(got[name] is outs[name] for name in N)
            check(store, got, want)
        assert {name: o.ctypes.data for name, o in q.outputs.items()} == out_addresses
    assert {name: a.ctypes.data for name, a in ids.items()} == addresses
    st = cache.stats()
    assert st.queries == 8
    assert st.hits > 0 and st.misses > 0 and st.admissions > 0


def test_caller_outputs_are_written_in_place(store, cache):
    rng = np.random.default_rng(22)
    ids = {"user": np.zeros(50, np.int64), 2: np.zeros(9, np.uint64)}  # names and indices
    outs = {"user": np.full((50, 16), np.nan, np.float32),
            2: np.full(9 * 8, np.nan, np.float16)}  # a flat (n * dim,) output too
    addresses = {k: o.ctypes.data for k, o in outs.items()}
    q = cache.prepare(ids, out=outs)
    assert q.ids["user"] is ids["user"]
    for _ in range(3):
        ids["user"][:] = rng.integers(0, 1000, 50)
        ids[2][:] = rng.integers(0, 300, 9).astype(np.uint64)
        got = q.run()
        assert got["user"] is outs["user"] and got[2] is outs[2]
        assert {k: o.ctypes.data for k, o in outs.items()} == addresses
        np.testing.assert_array_equal(outs["user"],
                                      store.gather("user", ids["user"].astype(np.uint64)))
        np.testing.assert_array_equal(outs[2].reshape(9, 8), store.gather("ctx", ids[2]))
    q.close()


def test_streams_are_accepted_and_ignored_by_host(store, cache):
    ids = np.array([4, 5], np.uint64)
    q = cache.prepare({"user": ids})
    want = store.gather("user", ids)

    class FakeStream:
        cuda_stream = 0

    for s in (None, 0, FakeStream()):
        np.testing.assert_array_equal(q.run(stream=s)["user"], want)
    with pytest.raises(fleche.InvalidArgument, match="stream"):
        q.run(stream="default")


@pytest.mark.parametrize("queries, out, exc, words", [
    ({"user": np.array([1, 2], np.int32)}, None, fleche.InvalidArgument, "int32"),
    ({"user": np.zeros((2, 2), np.uint64)}, None, fleche.InvalidArgument, "1-D"),
    ({"user": np.arange(10, dtype=np.uint64)[::2]}, None, fleche.InvalidArgument, "C-contiguous"),
    ({"user": [1, 2]}, None, fleche.InvalidArgument, "list"),
    ({"nope": np.zeros(2, np.uint64)}, None, fleche.InvalidArgument, "unknown table 'nope'"),
    ({9: np.zeros(2, np.uint64)}, None, fleche.InvalidArgument, "unknown table index 9"),
    ([np.zeros(2, np.uint64)], None, fleche.InvalidArgument, "mapping"),
    ({"user": np.zeros(3, np.uint64)}, {"user": np.empty((3, 16), np.float16)},
     fleche.InvalidArgument, "float16"),
    ({"user": np.zeros(3, np.uint64)}, {"user": np.empty((4, 16), np.float32)},
     fleche.InvalidArgument, r"\(4, 16\)"),
    ({"user": np.zeros(3, np.uint64)}, {"user": np.empty((16, 3), np.float32).T},
     fleche.InvalidArgument, "C-contiguous"),
    ({"user": np.zeros(3, np.uint64)}, {"ctx": np.empty((3, 8), np.float16)},
     fleche.InvalidArgument, "no output for table 'user'"),
    ({"user": np.zeros(3, np.uint64)},
     {"user": np.empty((3, 16), np.float32), "ctx": np.empty((3, 8), np.float16)},
     fleche.InvalidArgument, "not queried"),
    ({"user": np.zeros(3, np.uint64)}, [np.empty((3, 16), np.float32)],
     fleche.InvalidArgument, "mapping"),
])
def test_bad_inputs_raise_at_prepare_before_c(cache, c_calls, queries, out, exc, words):
    with pytest.raises(exc, match=words):
        cache.prepare(queries, out=out)
    assert not c_calls


def test_read_only_output_raises_at_prepare(cache, c_calls):
    ro = np.empty((3, 16), np.float32)
    ro.flags.writeable = False
    with pytest.raises(fleche.InvalidArgument, match="read-only"):
        cache.prepare({"user": np.zeros(3, np.uint64)}, out={"user": ro})
    assert not c_calls


def test_errors_from_c_at_run(cache):
    ids = np.array([5, 6], np.uint64)
    q = cache.prepare({"user": ids})
    q.run()
    ids[1] = 1000  # a dense id >= the corpus size
    with pytest.raises(fleche.OutOfRange, match="1000"):
        q.run()
    ids[1] = 7
    q.run()  # usable again


def test_run_after_close(store, cache, c_calls):
    ids = np.array([1, 2], np.uint64)
    q = cache.prepare({"user": ids})
    q.run()
    assert c_calls == ["fl_query_prepare", "fl_prepared_run"]  # one C handle, no fl_query
    n = c_calls.count("fl_prepared_run")
    q.close()
    q.close()  # idempotent
    assert q.closed and "closed" in repr(q)
    with pytest.raises(fleche.InvalidArgument, match="prepared query is closed"):
        q.run()
    with pytest.raises(fleche.InvalidArgument, match="prepared query is closed"):
        q.outputs
    q2 = cache.prepare({"user": ids})
    cache.close()
    with pytest.raises(fleche.InvalidArgument, match="the cache is closed"):
        q2.run()
    with pytest.raises(fleche.InvalidArgument, match="the cache is closed"):
        cache.prepare({"user": ids})
    q2.close()  # the cache's C object goes with its last prepared query
    assert c_calls.count("fl_prepared_run") == n
    q3 = None
    with fleche.Cache(store, backend="host", budget_bytes=8 << 20) as c:
        q3 = c.prepare({"user": ids})
    with pytest.raises(fleche.InvalidArgument, match="the cache is closed"):
        q3.run()  # the store closes its caches too
    store.close()
    with pytest.raises(fleche.InvalidArgument, match="closed"):
        q3.run()


def test_buffers_stay_alive_with_the_query(store, cache):
    q = cache.prepare({"user": np.arange(5, dtype=np.uint64)})  # no other reference to the ids
    ids = q.ids["user"]
    for _ in range(2):
        np.testing.assert_array_equal(q.run()["user"], store.gather("user", ids))


def test_empty_batch_and_empty_mapping(cache):
    assert cache.prepare({"user": np.empty(0, np.uint64)}).run()["user"].shape == (0, 16)
    assert cache.prepare({}).run() == {}


@pytest.mark.parametrize("how", ["run", "launch"])
def test_four_threads_each_with_its_own_prepared_query(store, how):
    def work(cache: fleche.Cache, rng: np.random.Generator) -> None:
        ids = {name: np.zeros(int(rng.integers(1, 300)), np.uint64) for name in N}
        q = cache.prepare(ids)
        outs = dict(q.outputs)
        for _ in range(40):
            want = refill(rng, store, ids)
            if how == "run":
                got = q.run()
            else:
                q.launch()
                q.wait()
                got = q.outputs
            assert all(got[name] is outs[name] for name in N)
            check(store, got, want)

    st = in_four_threads(store, work)
    assert st.queries == 160 and st.admissions > 0


# ------------------------------------------------------------ launch() and wait()


def test_launches_match_the_store_as_ids_are_refilled(store, cache, c_calls):
    rng = np.random.default_rng(23)
    ids = {name: np.zeros(n, np.uint64) for name, n in N.items()}
    with cache.prepare(ids) as q:
        outs = dict(q.outputs)
        for name, o in outs.items():
            o[...] = np.nan  # nothing written yet: a launch that did nothing fails check()
        for _ in range(8):
            want = refill(rng, store, ids)
            assert q.launch() is None
            q.wait()
            assert all(q.outputs[name] is outs[name] for name in N)
            check(store, outs, want)  # the new ids' answers, not the last launch's
    assert c_calls == ["fl_query_prepare"] + ["fl_prepared_launch", "fl_prepared_wait"] * 8
    st = cache.stats()
    assert st.queries == 8
    assert st.hits > 0 and st.misses > 0 and st.admissions > 0


def test_launch_on_the_host_backend_answers_before_returning(store, cache):
    # The host backend answers in fl_prepared_launch, as fl_prepared_run:
    # the outputs are complete before wait(), and launches and runs mix.
    ids = np.array([3, 4, 5], np.uint64)
    q = cache.prepare({"user": ids}, out={"user": np.full((3, 16), np.nan, np.float32)})
    for k in range(3):
        ids[:] = [3 + k, 999 - k, 7 * k]
        q.launch(stream=0)
        np.testing.assert_array_equal(q.outputs["user"], store.gather("user", ids))
        q.wait()
        ids[0] = 500 + k
        np.testing.assert_array_equal(q.run()["user"], store.gather("user", ids))


def test_wait_with_nothing_launched(store, cache, c_calls):
    ids = np.array([1, 2], np.uint64)
    q = cache.prepare({"user": ids})
    q.wait()  # nothing launched yet
    q.run()
    q.wait()  # after a run
    q.launch()
    q.wait()
    q.wait()  # twice
    np.testing.assert_array_equal(q.outputs["user"], store.gather("user", ids))
    assert c_calls.count("fl_prepared_wait") == 4


def test_errors_from_c_at_launch(store, cache):
    # The C contract: a failure the launch can return (every one on the host
    # backend, which answers in the launch) raises from launch(); one found
    # by the launch's host part raises from wait(), or else from the next
    # launch() or run(). Either way, once, and the query stays usable.
    ids = np.array([5, 6, 7], np.uint64)
    q = cache.prepare({"user": ids})
    q.launch()
    q.wait()
    ids[1] = 1000  # a dense id >= the corpus size
    with pytest.raises(fleche.OutOfRange, match="1000"):
        q.launch()
        q.wait()
    q.wait()  # reported once
    ids[1] = 8
    q.launch()
    q.wait()
    np.testing.assert_array_equal(q.outputs["user"], store.gather("user", ids))
    assert cache.query({"user": ids})["user"].shape == (3, 16)  # the cache too


def test_launch_raises_out_of_range_on_the_host_backend(cache):
    ids = np.array([5, 1000], np.uint64)
    q = cache.prepare({"user": ids})
    with pytest.raises(fleche.OutOfRange, match="1000"):
        q.launch()  # the host backend answers in the launch: the error is its own
    q.wait()  # nothing left to report
    before = cache.stats()
    ids[1] = 6
    q.launch()
    q.wait()
    assert cache.stats().queries == before.queries + 1


def test_missing_error_from_a_launch(store):
    absent = np.uint64((1 << 63) | 12345)  # HASHED_IDS are below 2**63: not in the store
    with fleche.Cache(store, backend="host", budget_bytes=8 << 20, missing="error") as c:
        ids = np.array([HASHED_IDS["ad"][0], absent], np.uint64)
        q = c.prepare({"ad": ids})
        with pytest.raises(fleche.NotFound, match=str(absent)):
            q.launch()
            q.wait()
        q.wait()
        ids[1] = HASHED_IDS["ad"][1]
        q.launch()
        q.wait()
        np.testing.assert_array_equal(q.outputs["ad"], store.gather("ad", ids))


def test_launch_and_wait_after_close(store, cache, c_calls):
    ids = np.array([1, 2], np.uint64)
    q = cache.prepare({"user": ids})
    q.launch()
    q.close()
    n = len(c_calls)
    with pytest.raises(fleche.InvalidArgument, match="prepared query is closed"):
        q.launch()
    with pytest.raises(fleche.InvalidArgument, match="prepared query is closed"):
        q.wait()
    q2 = cache.prepare({"user": ids})
    q2.launch()
    cache.close()
    with pytest.raises(fleche.InvalidArgument, match="the cache is closed"):
        q2.launch()
    with pytest.raises(fleche.InvalidArgument, match="the cache is closed"):
        q2.wait()
    assert len(c_calls) == n + 2  # prepare and launch of q2: nothing after the closes
    q2.close()
    with pytest.raises(fleche.InvalidArgument, match="prepared query is closed"):
        q2.wait()


@pytest.mark.parametrize("status, exc", [
    (fleche._lib.FL_ERR_OUT_OF_RANGE, fleche.OutOfRange),
    (fleche._lib.FL_ERR_NOT_FOUND, fleche.NotFound),
    (fleche._lib.FL_ERR_CUDA, fleche.CudaError),
])
def test_wait_raises_the_exception_of_its_status(cache, monkeypatch, status, exc):
    # The host backend's wait never fails (its launches answer in the call):
    # a stand-in fl_prepared_wait returns what a CUDA launch's host part may.
    q = cache.prepare({"user": np.array([1], np.uint64)})
    q.launch()
    seen = []

    def failing_wait(p):
        seen.append(p)
        return status

    monkeypatch.setattr(fleche._lib.lib, "fl_prepared_wait", failing_wait)
    with pytest.raises(exc):
        q.wait()
    assert seen == [q._h.ptr]  # the query's own C handle
    monkeypatch.undo()
    q.wait()
