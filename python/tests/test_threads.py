"""Four threads querying one cache at once, each checking against the store."""

import threading

import numpy as np

import fleche
from conftest import in_four_threads, random_ids


def test_four_threads_query_concurrently(store):
    def work(cache: fleche.Cache, rng: np.random.Generator) -> None:
        for _ in range(40):
            q = {t.name: random_ids(rng, t, int(rng.integers(1, 300)), 0.1)
                 for t in store.tables if rng.random() < 0.8}
            got = cache.query(q)
            for name, ids in q.items():
                np.testing.assert_array_equal(got[name], store.gather(name, ids))

    assert in_four_threads(store, work).queries == 160


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
