"""Fixtures: stores of dense and hashed tables, fp32 and fp16, on the host backend."""

import threading
from typing import Callable, Iterator

import numpy as np
import pytest

import fleche

TABLES = [
    fleche.Table("user", 1000, 16),  # dense fp32
    fleche.Table("item", 5000, 32, dtype="float16", ids="hashed"),
    fleche.Table("ctx", 300, 8, dtype="float16"),  # dense fp16
    fleche.Table("ad", 2000, 4, ids="hashed"),  # hashed fp32
]
HASHED_IDS = {
    "item": np.random.default_rng(1).integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64),
    "ad": np.random.default_rng(2).integers(0, 2**63, 2000, dtype=np.int64).astype(np.uint64),
}


def fill(store: fleche.Store, seed: int = 42) -> None:
    """Synthetic dense tables; hashed tables get HASHED_IDS with random vectors."""
    rng = np.random.default_rng(seed)
    for i, t in enumerate(store.tables):
        if t.ids == "dense":
            store.fill_synthetic(t.name, seed)
        else:
            ids = HASHED_IDS[t.name]
            vecs = rng.standard_normal((len(ids), t.dim)).astype(t.numpy_dtype)
            store.upsert(t.name, ids, vecs)


@pytest.fixture
def store() -> Iterator[fleche.Store]:
    with fleche.Store(TABLES, threads=2) as s:
        fill(s)
        yield s


@pytest.fixture
def cache(store: fleche.Store) -> Iterator[fleche.Cache]:
    with fleche.Cache(store, budget_bytes=8 << 20, backend="host", host_threads=2,
                      admit_probability=1.0) as c:
        yield c


def random_ids(rng: np.random.Generator, t: fleche.Table, n: int, miss_fraction: float = 0.0) -> np.ndarray:
    """n ids of table t with duplicates; for hashed tables, some ids the store lacks."""
    if t.ids == "dense":
        return rng.integers(0, t.corpus_size, n).astype(np.uint64)
    ids = rng.choice(HASHED_IDS[t.name], n)
    misses = rng.random(n) < miss_fraction
    ids[misses] = rng.integers(0, 2**63, int(misses.sum()), dtype=np.int64).astype(np.uint64) | np.uint64(1 << 63)
    return ids


def in_four_threads(store: fleche.Store,
                    work: Callable[[fleche.Cache, np.random.Generator], None]) -> fleche.CacheStats:
    """Runs work(cache, rng) on 4 threads started together, over one small cache
    (evictions happen too); re-raises the first error, checks that the counters
    add up, and returns the cache's statistics."""
    with fleche.Cache(store, backend="host", budget_bytes=256 << 10, host_threads=2,
                      admit_probability=0.5) as cache:
        errors = []
        barrier = threading.Barrier(4)

        def worker(seed: int) -> None:
            try:
                rng = np.random.default_rng(seed)
                barrier.wait()
                work(cache, rng)
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        st = cache.stats()
        assert st.lookups == st.hits + st.dram_hits + st.misses
        assert st.hits > 0 and st.evictions > 0
        return st
