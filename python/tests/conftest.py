"""Fixtures: stores of dense and hashed tables, fp32 and fp16, on the host backend;
helpers shared by the test files; and --require-torch-cpu (python/ci.sh), under
which the torch_cpu cases must run and pass: a skip of one of them fails it,
and a run in which none passed fails."""

import ctypes
import threading
from typing import Callable, Dict, Iterator

import numpy as np
import pytest

import fleche
from fleche import _fast

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
                      admit_policy="coin", admit_probability=1.0) as c:
        yield c


class DLPackOnly:
    """An array that fleche sees only through the DLPack protocol (neither a
    NumPy array, a torch tensor nor a CuPy array to it)."""

    def __init__(self, a) -> None:
        self._a = a

    def __dlpack__(self, stream=None, **kw):
        return self._a.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def as_torch(ids: np.ndarray, device: str = "cpu"):
    """uint64 ids as an int64 torch tensor (the same bits) on `device`."""
    import torch  # noqa: PLC0415 (only the torch tests call this)

    return torch.from_numpy(ids.view(np.int64).copy()).to(device)


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
    with fleche.Cache(store, backend="host", budget_bytes=256 << 10, host_threads=2) as cache:
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


# ------------------------------------------------------------ --require-torch-cpu

TORCH_CPU = "torch_cpu"  # the marker of the cases that need torch but no GPU
_outcomes = pytest.StashKey[Dict[str, str]]()  # torch_cpu case -> its outcome, in run order


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--require-torch-cpu", action="store_true",
                     help=f"the {TORCH_CPU} cases must run and pass: a skip of one fails it, "
                          "and the run fails if none of them passed (python/ci.sh)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{TORCH_CPU}: needs torch, not a GPU; under "
                                       "--require-torch-cpu it may not skip")
    config.stash[_outcomes] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[None]:
    report = (yield).get_result()
    if not item.config.getoption("--require-torch-cpu") or not item.get_closest_marker(TORCH_CPU):
        return
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under --require-torch-cpu: {reason}"
    outcomes = item.config.stash[_outcomes]
    if report.failed:
        outcomes[item.nodeid] = "failed"
    elif report.when == "call":
        outcomes.setdefault(item.nodeid, "passed")


def pytest_sessionfinish(session: pytest.Session) -> None:
    outcomes = session.config.stash[_outcomes]
    if session.config.getoption("--require-torch-cpu") and "passed" not in outcomes.values():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if not config.getoption("--require-torch-cpu"):
        return
    outcomes = config.stash[_outcomes]
    terminalreporter.section("torch CPU cases (--require-torch-cpu)")
    for nodeid, outcome in outcomes.items():
        terminalreporter.line(f"{outcome.upper()} {nodeid}")
    passed = sum(o == "passed" for o in outcomes.values())
    terminalreporter.line(f"torch CPU cases: {passed} of {len(outcomes)} passed"
                          + ("" if passed else f"; no {TORCH_CPU} case passed: the run fails "
                                               "(is torch installed?)"))


@pytest.fixture
def spans():
    """The fl_table_query entries of each fl_query that _fast calls (a spy
    returning FL_OK)."""
    calls = []

    def query(cache, queries, n, stream):
        qs = (fleche._lib.fl_table_query * n).from_address(queries)
        calls.append([w for q in qs for w in (q.table, q.ids or 0, q.n, q.out or 0)])
        return 0

    spy = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                           ctypes.c_void_p)(query)
    previous = _fast.use_query(ctypes.cast(spy, ctypes.c_void_p).value)
    yield calls
    _fast.use_query(previous)
