"""fleche.Encoding (fl_encoding_*) on the host: reports, encode, decode, errors."""

import numpy as np
import pytest

import fleche
from conftest import TABLES

DENSE = [fleche.Table("a", 1000, 4), fleche.Table("b", 1 << 20, 8), fleche.Table("c", 3, 2)]


def test_dense_tables_are_lossless_and_round_trip():
    with fleche.Encoding(DENSE) as e:
        assert e.lossless and e.key_bits == 64 and e.scheme == "size_aware"
        prefixes = set()
        for i, t in enumerate(DENSE):
            r = e.report(t.name)
            assert r == e.report(i)
            assert r.prefix_len + r.feature_bits == 64
            assert r.lossless and r.collision_rate == 0.0
            prefixes.add((r.prefix, r.prefix_len))
        assert len(prefixes) == len(DENSE)
        rng = np.random.default_rng(0)
        keys, want_tables, want_ids = [], [], []
        for i, t in enumerate(DENSE):
            ids = rng.integers(0, t.corpus_size, 50).astype(np.uint64)
            k = e.encode(t.name, ids)
            assert k.dtype == np.uint64 and k.shape == (50,)
            np.testing.assert_array_equal(k, e.encode(i, ids.astype(np.int64)))
            keys.append(k)
            want_tables.append(np.full(50, i, np.uint32))
            want_ids.append(ids)
        tables, ids = e.decode(np.concatenate(keys))
        assert tables.dtype == np.uint32 and ids.dtype == np.uint64
        np.testing.assert_array_equal(tables, np.concatenate(want_tables))
        np.testing.assert_array_equal(ids, np.concatenate(want_ids))
        assert e.decode(np.concatenate(keys).astype(np.int64))[1].shape == (150,)


def test_distinct_ids_give_distinct_keys():
    with fleche.Encoding(DENSE, key_bits=32) as e:
        keys = np.concatenate([e.encode(t.name, np.arange(t.corpus_size, dtype=np.uint64))
                               for t in DENSE[::2]])
        assert len(np.unique(keys)) == len(keys)
        assert keys.max() < 1 << 32


def test_hashed_tables_are_lossy_and_refuse_decode():
    with fleche.Encoding(TABLES, key_bits=32) as e:
        assert not e.lossless
        item = e.report("item")
        assert not item.lossless
        # 5000 ids in 2^feature_bits keys: that fraction of them shares a key
        assert item.collision_rate == pytest.approx(5000 / 2**item.feature_bits, rel=0.01)
        assert item.prefix_len + item.feature_bits == 32
        keys = e.encode("item", np.array([1, 2, 1 << 63], dtype=np.uint64))
        assert keys.shape == (3,)
        with pytest.raises(fleche.Unsupported):
            e.decode(keys)


def test_fixed_scheme_gives_one_prefix_length():
    with fleche.Encoding(DENSE, scheme="fixed") as e:
        assert len({e.report(t.name).prefix_len for t in DENSE}) == 1


def test_empty_batches():
    with fleche.Encoding(DENSE) as e:
        assert e.encode("a", np.empty(0, np.uint64)).shape == (0,)
        tables, ids = e.decode(np.empty(0, np.uint64))
        assert tables.shape == ids.shape == (0,)


def test_errors():
    with fleche.Encoding(DENSE) as e:
        with pytest.raises(fleche.OutOfRange) as err:  # from C, naming table and id
            e.encode("a", np.array([5, 1000], np.uint64))
        assert "1000" in str(err.value)
        with pytest.raises(fleche.InvalidArgument, match="int32"):
            e.encode("a", np.array([1], np.int32))
        with pytest.raises(fleche.InvalidArgument, match="1-D"):
            e.decode(np.zeros((2, 2), np.uint64))
        with pytest.raises(fleche.InvalidArgument, match="unknown table 'z'"):
            e.report("z")
        with pytest.raises(fleche.InvalidArgument):  # a key no table's id encodes to
            e.decode(np.array([np.iinfo(np.uint64).max], np.uint64))
    with pytest.raises(fleche.InvalidArgument, match="encoding is closed"):
        e.encode("a", np.array([1], np.uint64))
    with pytest.raises(fleche.InvalidArgument) as err:  # from C
        fleche.Encoding(DENSE, key_bits=48)
    assert "key_bits" in str(err.value) or "48" in str(err.value)
    with pytest.raises(fleche.InvalidArgument, match="scheme"):
        fleche.Encoding(DENSE, scheme="short")
    with pytest.raises(fleche.InvalidArgument, match="at least one table"):
        fleche.Encoding([])


@pytest.mark.skipif(fleche.cuda_device_count() > 0, reason="a GPU is present")
def test_gpu_encode_without_gpu():
    with fleche.Encoding(DENSE) as e, pytest.raises(fleche.NoDevice):
        e.encode("a", np.array([1], np.uint64), use_gpu=True)


@pytest.mark.skipif(fleche.cuda_device_count() == 0, reason="no GPU")
def test_gpu_encode_matches_host():
    with fleche.Encoding(TABLES) as e:
        for t in TABLES:
            ids = np.arange(min(t.corpus_size, 500), dtype=np.uint64)
            np.testing.assert_array_equal(e.encode(t.name, ids, use_gpu=True), e.encode(t.name, ids))
