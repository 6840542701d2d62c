"""Threads: four threads querying one cache at once, each checking against the
store; and close() while queries are in flight."""

import ctypes
import threading
import time

import numpy as np
import pytest

import fleche
from conftest import TABLES, fill, in_four_threads, random_ids

WAIT_S = 30  # the longest any step waits for another thread before the test fails


def test_four_threads_query_concurrently(store):
    compared = []  # rows compared with the store, per table queried

    def work(cache: fleche.Cache, rng: np.random.Generator) -> None:
        for _ in range(40):
            q = {t.name: random_ids(rng, t, int(rng.integers(1, 300)), 0.1)
                 for t in store.tables if rng.random() < 0.8}
            got = cache.query(q)
            for name, ids in q.items():
                np.testing.assert_array_equal(got[name], store.gather(name, ids))
                compared.append(len(ids))

    st = in_four_threads(store, work)
    assert st.queries == 160
    assert st.lookups == sum(compared) > 0  # every row the cache looked up was compared


@pytest.mark.parametrize("closing", ["cache", "store"])
def test_close_waits_for_queries_in_flight(monkeypatch, closing):
    """close() refuses new calls, waits for the calls in flight, then destroys
    the C object (fleche/_handle.py); Store.close() closes its caches first.
    Four threads are held inside fl_query (a spy on both of its paths) when
    close() is called: close() must neither return nor destroy anything until
    they are released; each held query then answers the store's rows, and
    each thread's next query raises InvalidArgument."""
    lib = fleche._lib.lib
    log = []  # what happened, in order (list.append is atomic)
    inside = threading.Semaphore(0)  # one release per query that reached fl_query
    release = threading.Event()
    destroyed = set()

    def spy_destroy(name: str):
        real = getattr(lib, name)

        def destroy(ptr):
            destroyed.add(name)
            log.append(name)
            real(ptr)

        monkeypatch.setattr(lib, name, destroy)

    for name in ("fl_cache_destroy", "fl_store_destroy"):  # before the handles take them
        spy_destroy(name)
    store = fleche.Store(TABLES, threads=2)
    fill(store)
    cache = fleche.Cache(store, backend="host", budget_bytes=8 << 20, host_threads=2)
    rng = np.random.default_rng(8)
    batches = [{t.name: random_ids(rng, t, 200, 0.1) for t in TABLES} for _ in range(4)]
    wants = [{name: store.gather(name, ids) for name, ids in q.items()} for q in batches]

    real_query = lib.fl_query

    def held_query(*args):
        log.append("fl_query in")
        inside.release()
        release.wait(WAIT_S)
        if "fl_cache_destroy" in destroyed:  # instead of a use after free
            raise AssertionError("the cache was destroyed while a query was in flight")
        st = real_query(*args)
        log.append("fl_query out")
        return st

    # Held on both paths: the ctypes function and the pointer fleche._fast calls.
    monkeypatch.setattr(lib, "fl_query", held_query)
    spy = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                           ctypes.c_void_p)(held_query)
    previous = fleche._fast.use_query(ctypes.cast(spy, ctypes.c_void_p).value)
    answered, refused, errors = [], [], []

    def worker(k: int) -> None:
        try:
            got = cache.query(batches[k])  # held in fl_query until release
            for name, want in wants[k].items():
                np.testing.assert_array_equal(got[name], want)
            answered.append(k)
            cache.query(batches[k])  # after close(): refused
        except fleche.InvalidArgument as e:
            refused.append(str(e))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    closer = threading.Thread(target=lambda: ((cache if closing == "cache" else store).close(),
                                              log.append("close returned")), daemon=True)
    try:
        for _ in threads:
            assert inside.acquire(timeout=WAIT_S), "a query did not reach fl_query"
        closer.start()
        deadline = time.monotonic() + WAIT_S
        while not cache.closed:  # close() has begun: new calls are refused
            assert time.monotonic() < deadline, "close() did not close the cache"
            time.sleep(0.001)
        with pytest.raises(fleche.InvalidArgument, match="the cache is closed"):
            cache.query(batches[0])
        closer.join(0.2)
        assert closer.is_alive(), "close() returned while four queries were in fl_query"
        assert log == ["fl_query in"] * 4
    finally:
        release.set()
    closer.join(WAIT_S)
    for t in threads:
        t.join(WAIT_S)
    fleche._fast.use_query(previous)
    assert not closer.is_alive() and not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert sorted(answered) == [0, 1, 2, 3]
    assert refused == ["the cache is closed"] * 4
    destroys = ["fl_cache_destroy"] + (["fl_store_destroy"] if closing == "store" else [])
    assert log == ["fl_query in"] * 4 + ["fl_query out"] * 4 + destroys + ["close returned"]
    store.close()
