"""Cache.query against Store.gather on the host backend."""

import numpy as np
import pytest

import fleche
from conftest import HASHED_IDS, DLPackOnly, random_ids


def test_synthetic_values_match_the_c_function(store, cache):
    ids = np.array([0, 7, 7, 999], dtype=np.uint64)
    got = cache.query({"user": ids})["user"]
    assert got.shape == (4, 16) and got.dtype == np.float32
    for r, i in enumerate(ids):
        for j in (0, 5, 15):
            assert got[r, j] == np.float32(fleche.synthetic_value(42, 0, int(i), j))
    ctx = cache.query({"ctx": np.array([3], dtype=np.uint64)})["ctx"]
    assert ctx.dtype == np.float16
    assert ctx[0, 2] == np.float16(fleche.synthetic_value(42, 2, 3, 2))


@pytest.mark.parametrize("batches", [6])
def test_random_batches_all_tables_match_store(store, cache, batches):
    rng = np.random.default_rng(7)
    for b in range(batches):
        q = {t.name: random_ids(rng, t, int(rng.integers(1, 400)), miss_fraction=0.2)
             for t in store.tables}
        got = cache.query(q)
        assert set(got) == set(q)
        for name, ids in q.items():
            t = store.table(name)
            assert got[name].dtype == t.numpy_dtype and got[name].shape == (len(ids), t.dim)
            np.testing.assert_array_equal(got[name], store.gather(name, ids))
    st = cache.stats()
    assert st.queries == batches
    assert st.hits > 0 and st.misses > 0 and st.admissions > 0


def test_tinylfu_admission_answers_like_the_store(store):
    # A pool far smaller than the model: TinyLFU admits and evicts
    # (cache/admit_rule.h); every answer is still the store's row.
    with fleche.Cache(store, budget_bytes=256 << 10, backend="host", host_threads=2,
                      admit_policy="tinylfu") as cache:
        rng = np.random.default_rng(11)
        for _ in range(20):
            q = {t.name: random_ids(rng, t, int(rng.integers(1, 400)), miss_fraction=0.2)
                 for t in store.tables}
            got = cache.query(q)
            for name, ids in q.items():
                np.testing.assert_array_equal(got[name], store.gather(name, ids))
        st = cache.stats()
        assert st.hits > 0 and st.admissions > 0


def test_misses_are_zero_rows_and_counted(store, cache):
    absent = np.array([1 << 63 | 5, 1 << 63 | 6, 1 << 63 | 5], dtype=np.uint64)
    got = cache.query({"item": absent})["item"]
    assert got.shape == (3, 32) and not got.any()
    assert cache.stats().tables["item"].misses == 3


def test_indices_names_int64_and_outputs(store, cache):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 1000, 50).astype(np.int64)
    out_user = np.full((50, 16), np.nan, dtype=np.float32)
    out_ad = np.empty((10, 4), dtype=np.float32)
    ad_ids = HASHED_IDS["ad"][:10]
    res = cache.query({0: ids, "ad": ad_ids}, out={0: out_user, "ad": out_ad})
    assert res[0] is out_user and res["ad"] is out_ad
    np.testing.assert_array_equal(out_user, store.gather("user", ids.astype(np.uint64)))
    np.testing.assert_array_equal(out_ad, store.gather("ad", ad_ids))
    flat = np.empty(50 * 16, dtype=np.float32)  # a flat (n*dim,) output is accepted too
    cache.query({"user": ids}, out={"user": flat})
    np.testing.assert_array_equal(flat.reshape(50, 16), out_user)


def test_empty_batch_and_empty_mapping(cache):
    assert cache.query({"user": np.empty(0, dtype=np.uint64)})["user"].shape == (0, 16)
    assert cache.query({}) == {}


def test_dlpack_ids_on_cpu(store, cache):
    ids = np.array([1, 2, 3, 2], dtype=np.uint64)
    got = cache.query({"user": DLPackOnly(ids)})["user"]
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, store.gather("user", ids))


class FakeStream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle


def test_streams_are_accepted_and_ignored_by_host(store, cache):
    ids = np.array([4], dtype=np.uint64)
    want = store.gather("user", ids)
    for s in (None, 0, FakeStream(0)):
        np.testing.assert_array_equal(cache.query({"user": ids}, stream=s)["user"], want)


def test_upsert_invalidates_cached_rows(store, cache):
    ids = np.array([11, 12], dtype=np.uint64)
    cache.query({"user": ids})
    cache.query({"user": ids})
    assert cache.stats().hits >= 2
    new = np.arange(32, dtype=np.float32).reshape(2, 16)
    store.upsert("user", ids, new)
    np.testing.assert_array_equal(cache.query({"user": ids})["user"], new)


def test_missing_error_policy(store):
    with fleche.Cache(store, backend="host", budget_bytes=8 << 20, missing="error") as c:
        c.query({"item": HASHED_IDS["item"][:3]})
        with pytest.raises(fleche.NotFound) as e:
            c.query({"item": np.array([1 << 63 | 9], dtype=np.uint64)})
        assert "item" in str(e.value)
    with pytest.raises(fleche.NotFound):
        store.gather("item", np.array([1 << 63 | 9], dtype=np.uint64), missing="error")


def test_remove_then_query_misses(store, cache):
    ids = HASHED_IDS["ad"][:4]
    cache.query({"ad": ids})
    store.remove("ad", ids[:2])
    got = cache.query({"ad": ids})["ad"]
    assert not got[:2].any()
    np.testing.assert_array_equal(got[2:], store.gather("ad", ids[2:]))


def test_layouts_key_bits_and_clear(store):
    rng = np.random.default_rng(5)
    for layout in ("flat", "per_table"):
        for key_bits in (64, 32):
            with fleche.Cache(store, backend="host", layout=layout, key_bits=key_bits,
                              budget_bytes=8 << 20) as c:
                assert c.backend == "host"
                for _ in range(2):
                    q = {t.name: random_ids(rng, t, 100, 0.1) for t in store.tables}
                    got = c.query(q)
                    for name, ids in q.items():
                        np.testing.assert_array_equal(got[name], store.gather(name, ids))
                assert c.stats().index_entries > 0
                c.clear()
                assert c.stats().index_entries == 0


def test_prefetched_rows_are_hits_of_the_next_query(store):
    # A coin at 0 admits nothing a query misses; what prefetch names is
    # cached all the same, and the query after it hits on every id.
    with fleche.Cache(store, budget_bytes=8 << 20, backend="host", host_threads=2,
                      admit_policy="coin", admit_probability=0.0) as cache:
        rng = np.random.default_rng(5)
        q = {t.name: random_ids(rng, t, 300) for t in store.tables}
        n = sum(len(ids) for ids in q.values())
        cache.query(q)
        assert cache.stats().admissions == 0
        cache.prefetch(q)
        st = cache.stats()
        assert (st.prefetches, st.prefetch_lookups, st.prefetch_misses) == (1, n, n)
        assert st.queries == 1 and st.lookups == n
        got = cache.query(q)
        for name, ids in q.items():
            np.testing.assert_array_equal(got[name], store.gather(name, ids))
        assert cache.stats().hits - st.hits == n
        with pytest.raises(fleche.OutOfRange, match="id 99999999"):
            cache.prefetch({"user": np.array([1, 99999999], dtype=np.uint64)})
        with pytest.raises(fleche.InvalidArgument, match="mapping"):
            cache.prefetch([1, 2])
        assert cache.stats().prefetches == 2
