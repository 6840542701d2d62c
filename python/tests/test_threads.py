"""Four threads querying one cache at once, each checking against the store."""

import threading

import numpy as np

import fleche
from conftest import random_ids


def test_four_threads_query_concurrently(store):
    with fleche.Cache(store, backend="host", budget_bytes=256 << 10, host_threads=2,
                      admit_probability=0.5) as cache:  # small: evictions happen too
        errors = []
        barrier = threading.Barrier(4)

        def worker(seed: int) -> None:
            try:
                rng = np.random.default_rng(seed)
                barrier.wait()
                for _ in range(40):
                    q = {t.name: random_ids(rng, t, int(rng.integers(1, 300)), 0.1)
                         for t in store.tables if rng.random() < 0.8}
                    got = cache.query(q)
                    for name, ids in q.items():
                        np.testing.assert_array_equal(got[name], store.gather(name, ids))
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        st = cache.stats()
        assert st.queries == 160
        assert st.lookups == st.hits + st.dram_hits + st.misses
        assert st.hits > 0 and st.evictions > 0


def test_close_waits_for_queries_in_flight(store):
    cache = fleche.Cache(store, backend="host", budget_bytes=8 << 20)
    ids = np.arange(1000, dtype=np.uint64)
    stop = threading.Event()
    raised = []

    def loop() -> None:
        while not stop.is_set():
            try:
                cache.query({"user": ids})
            except fleche.InvalidArgument as e:  # after close: "the cache is closed"
                raised.append(e)
                return

    t = threading.Thread(target=loop)
    t.start()
    cache.query({"user": ids})
    cache.close()
    stop.set()
    t.join()
    assert all("closed" in str(e) for e in raised)
