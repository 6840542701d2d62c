"""Bad input: the right exception, with a useful message, before or from C."""

import os

import numpy as np
import pytest

import fleche

IDS = np.array([1, 2, 3], dtype=np.uint64)


def test_hierarchy():
    for cls, base in [(fleche.InvalidArgument, ValueError), (fleche.OutOfRange, IndexError),
                      (fleche.NotFound, LookupError), (fleche.OutOfMemory, MemoryError),
                      (fleche.IoError, OSError)]:
        assert issubclass(cls, fleche.Error) and issubclass(cls, base)
    for cls in (fleche.CudaError, fleche.NoDevice, fleche.FormatError, fleche.Unsupported):
        assert issubclass(cls, fleche.Error)
    assert fleche.IoError is not IOError
    assert fleche.FormatError("x").status_name == "FL_ERR_FORMAT"


@pytest.mark.parametrize("ids, words", [
    (np.array([1, 2], dtype=np.int32), ["uint64 or int64", "int32"]),
    (np.array([1.0]), ["uint64 or int64", "float64"]),
    (np.zeros((2, 2), dtype=np.uint64), ["1-D", "(2, 2)"]),
    (np.arange(10, dtype=np.uint64)[::2], ["C-contiguous"]),
    ([1, 2, 3], ["NumPy array", "list"]),
])
def test_bad_ids(cache, ids, words):
    with pytest.raises(fleche.InvalidArgument) as e:
        cache.query({"user": ids})
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("table, out, words", [
    ("user", np.empty((3, 16), dtype=np.float16), ["float32", "float16"]),
    ("item", np.empty((3, 32), dtype=np.float32), ["float16", "float32"]),
    ("user", np.empty((3, 8), dtype=np.float32), ["(3, 16)", "(3, 8)"]),
    ("user", np.empty((4, 16), dtype=np.float32), ["(3, 16)", "(4, 16)"]),
    ("user", np.empty((16, 3), dtype=np.float32).T, ["C-contiguous"]),
])
def test_bad_outputs(cache, table, out, words):
    with pytest.raises(fleche.InvalidArgument) as e:
        cache.query({table: IDS}, out={table: out})
    for w in words:
        assert w in str(e.value), str(e.value)


def test_read_only_and_missing_outputs(cache):
    ro = np.empty((3, 16), dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(fleche.InvalidArgument, match="read-only"):
        cache.query({"user": IDS}, out={"user": ro})
    with pytest.raises(fleche.InvalidArgument, match="no output for table 'user'"):
        cache.query({"user": IDS}, out={"ctx": np.empty((3, 8), np.float16)})
    with pytest.raises(fleche.InvalidArgument, match="not queried"):
        cache.query({"user": IDS}, out={"user": np.empty((3, 16), np.float32),
                                         "ctx": np.empty((3, 8), np.float16)})


def test_unknown_tables_and_bad_mapping(cache):
    with pytest.raises(fleche.InvalidArgument, match="unknown table 'nope'"):
        cache.query({"nope": IDS})
    with pytest.raises(fleche.InvalidArgument, match="unknown table index 9"):
        cache.query({9: IDS})
    with pytest.raises(fleche.InvalidArgument, match="mapping"):
        cache.query([IDS])
    with pytest.raises(fleche.InvalidArgument, match="stream"):
        cache.query({"user": IDS}, stream="default")


def test_out_of_range_from_c(cache):
    with pytest.raises(fleche.OutOfRange) as e:
        cache.query({"user": np.array([5, 1000], dtype=np.uint64)})
    assert "'user'" in str(e.value) and "1000" in str(e.value)
    assert e.value.status_name == "FL_ERR_OUT_OF_RANGE"
    with pytest.raises(fleche.OutOfRange):  # int64 -1 is 2^64-1
        cache.query({"ctx": np.array([-1], dtype=np.int64)})


def test_store_errors(store, tmp_path):
    with pytest.raises(fleche.InvalidArgument) as e:  # from C: dense tables hold every id
        store.remove("user", IDS)
    assert "user" in str(e.value) or "dense" in str(e.value)
    with pytest.raises(fleche.InvalidArgument, match="float32"):
        store.upsert("user", IDS, np.zeros((3, 16), dtype=np.float64))
    with pytest.raises(fleche.InvalidArgument, match=r"\(3, 16\)"):
        store.upsert("user", IDS, np.zeros((2, 16), dtype=np.float32))
    with pytest.raises(fleche.OutOfRange):
        store.upsert("user", np.array([1000], np.uint64), np.zeros((1, 16), np.float32))
    with pytest.raises(fleche.Error):  # HugeCTR is fp32 only
        store.export_hugectr("item", tmp_path / "h")


def test_bad_table_descriptions():
    with pytest.raises(fleche.InvalidArgument, match="dtype"):
        fleche.Table("t", 10, 4, dtype="int8")
    with pytest.raises(fleche.InvalidArgument, match="ids"):
        fleche.Table("t", 10, 4, ids="sparse")
    with pytest.raises(fleche.InvalidArgument) as e:  # from C: dim 1..4096
        fleche.Store([fleche.Table("t", 10, 5000)])
    assert "dim" in str(e.value)
    with pytest.raises(fleche.InvalidArgument, match="unique"):
        fleche.Store([fleche.Table("t", 10, 4), fleche.Table("t", 10, 4)])


def test_bad_cache_configs(store):
    with pytest.raises(fleche.InvalidArgument) as e:  # from C, naming the field
        fleche.Cache(store, backend="host", budget_bytes=16)
    assert "budget" in str(e.value)
    with pytest.raises(fleche.InvalidArgument, match="key_bits"):
        fleche.Cache(store, backend="host", key_bits=48)
    with pytest.raises(fleche.InvalidArgument, match="backend"):
        fleche.Cache(store, backend="tpu")
    with pytest.raises(fleche.InvalidArgument, match="budget_bytes"):
        fleche.Cache(store, backend="host", budget_bytes=-1)
    with pytest.raises(fleche.InvalidArgument, match="admit_policy"):
        fleche.Cache(store, backend="host", admit_policy="lru")


@pytest.mark.skipif(fleche.cuda_device_count() > 0, reason="a GPU is present")
def test_cuda_backend_without_gpu(store):
    with pytest.raises(fleche.NoDevice):
        fleche.Cache(store, backend="cuda")


def test_files_errors(store, tmp_path):
    with pytest.raises(fleche.IoError) as e:
        fleche.Store.load(tmp_path / "absent.flst")
    assert "absent.flst" in str(e.value)
    assert isinstance(e.value, OSError)
    bad = tmp_path / "bad.flst"
    bad.write_bytes(b"not a store at all, just some bytes" * 10)
    with pytest.raises(fleche.FormatError) as e:
        fleche.Store.load(bad)
    assert "bad.flst" in str(e.value)
    good = tmp_path / "good.flst"
    store.save(good)
    data = good.read_bytes()
    trunc = tmp_path / "trunc.flst"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(fleche.FormatError):
        fleche.Store.load(trunc)
    ids, vecs = tmp_path / "i.npy", tmp_path / "v.npy"
    np.save(ids, np.arange(3, dtype=np.int64))
    np.save(vecs, np.zeros((3, 16), dtype=np.float16))  # user is fp32
    with pytest.raises(fleche.FormatError):
        store.import_npy("user", ids, vecs)


def test_closed_handles(store):
    c = fleche.Cache(store, backend="host", budget_bytes=8 << 20)
    c.close()
    c.close()
    with pytest.raises(fleche.InvalidArgument, match="cache is closed"):
        c.query({"user": IDS})
    c2 = fleche.Cache(store, backend="host", budget_bytes=8 << 20)
    store.close()  # closes its caches first
    assert c2.closed
    with pytest.raises(fleche.InvalidArgument, match="store is closed"):
        store.gather("user", IDS)


def test_cache_keeps_store_alive():
    import gc
    s = fleche.Store([fleche.Table("t", 10, 4)])
    s.fill_synthetic("t", 1)
    c = fleche.Cache(s, backend="host", budget_bytes=8 << 20)
    del s
    gc.collect()
    got = c.query({"t": np.array([3], np.uint64)})["t"]
    assert got[0, 1] == np.float32(fleche.synthetic_value(1, 0, 3, 1))
    c.close()
