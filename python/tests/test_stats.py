"""Statistics, control calls and the library itself."""

import ctypes
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import fleche
from fleche import _lib


def test_cache_stats_has_every_c_field(cache):
    names = [f.name for f in dataclasses.fields(fleche.CacheStats)]
    assert names[:-1] == [n for n, _ in _lib.fl_cache_stats._fields_]
    assert names[-1] == "tables"


def test_cache_stats_values(store, cache):
    ids = np.array([1, 2, 2, 3], dtype=np.uint64)
    cache.query({"user": ids, "ctx": ids})
    cache.sync()
    st = cache.stats()
    assert (st.queries, st.lookups, st.misses, st.hits) == (1, 8, 8, 0)
    assert st.unique_misses == 6  # distinct ids per query
    assert st.admissions == 6 and st.index_entries == 6
    assert st.pool_bytes > 0 and st.index_bytes > 0 and st.index_slots > 0
    assert st.pool_bytes_used > 0
    assert st.ns_index > 0 and st.ns_miss_fetch > 0
    assert st.tables["user"] == fleche.CacheTableStats(4, 0, 0, 4)
    assert st.tables["item"] == fleche.CacheTableStats(0, 0, 0, 0)
    cache.query({"user": ids})
    st = cache.stats()
    assert st.tables["user"].hits == 4 and st.hit_rate == pytest.approx(4 / 12)
    d = st.as_dict()
    assert d["tables"]["user"]["hits"] == 4 and d["lookups"] == 12
    cache.reset_stats()
    assert cache.stats().lookups == 0
    cache.clear()
    assert cache.stats().index_entries == 0


def test_zero_copy_is_cuda_only(store):
    # The host backend takes the setting and gathers every miss itself.
    with fleche.Cache(store, backend="host", host_threads=2, zero_copy_rows=1024) as c:
        c.query({"user": np.array([1, 2, 2], dtype=np.uint64)})
        st = c.stats()
        assert st.unique_misses == 2 and st.zero_copy_rows == 0
        assert st.rounds_shed == st.rounds_starved == st.slabs_recycled == 0  # the host backend admits inline: no rounds
        assert st.shift_opens == 0  # two lookups: no hot set has moved
        assert st.allocations == 0  # the host backend makes no CUDA buffer
    with pytest.raises(fleche.InvalidArgument, match="zero_copy_rows"):
        fleche.Cache(store, backend="host", zero_copy_rows=-1)


def test_store_stats(store):
    st = store.stats("user")
    assert st.rows == 1000 and st.bytes == 1000 * 16 * 4
    store.gather("item", np.array([1 << 63 | 1, 1 << 63 | 2], dtype=np.uint64))
    st = store.stats("item")
    assert st.rows == 5000 and st.bytes == 5000 * 32 * 2
    assert st.lookups >= 2 and st.misses >= 2


def test_reserve_unified_and_sync(store, cache):
    cache.reserve(1 << 16, 4)  # host backend: nothing to do
    cache.reserve(1 << 16, 4, callers=8)
    for callers in (0, 63):
        with pytest.raises(fleche.InvalidArgument, match="callers, not 1 to 62"):
            cache.reserve(1 << 16, 4, callers=callers)
    with pytest.raises(fleche.Unsupported, match="unified_entries"):
        cache.set_unified_entries(100)  # created with none: no room for pointers
    with fleche.Cache(store, budget_bytes=8 << 20, backend="host", host_threads=2,
                      admit_policy="coin", admit_probability=0.0, unified_entries=1) as c:
        c.set_unified_entries(100)
        ids = np.arange(200, dtype=np.uint64)
        for _ in range(3):
            np.testing.assert_array_equal(c.query({"user": ids})["user"], store.gather("user", ids))
        c.sync()
        st = c.stats()
        assert st.lookups == st.hits + st.dram_hits + st.misses
        assert 0 < st.dram_hits and st.unified_entries <= 100


def test_library_info():
    assert re.fullmatch(r"\d+\.\d+\.\d+", fleche.version())
    assert fleche.cuda_device_count() >= 0
    assert fleche.library_path().is_file()


def test_every_header_function_is_exported():
    header = Path(__file__).resolve().parents[2] / "include" / "fleche.h"
    if not header.exists():
        pytest.skip("not run from a checkout")
    names = set(re.findall(r"\b(fl_[a-z0-9_]+)\(", header.read_text()))
    assert {"fl_store_create", "fl_query", "fl_prepared_wait"} <= names  # the pattern finds them
    lib = ctypes.CDLL(str(fleche.library_path()))
    missing = [n for n in sorted(names) if not hasattr(lib, n)]
    assert not missing, f"add to python/exports.c: {missing}"
