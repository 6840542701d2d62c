"""File round trips: FLST (save/load), NumPy pairs, HugeCTR folders."""

import numpy as np

import fleche
from conftest import HASHED_IDS, TABLES


def test_save_load_round_trip(store, tmp_path):
    path = tmp_path / "model.flst"
    store.save(path)
    with fleche.Store.load(str(path), threads=2) as loaded:
        assert loaded.tables == store.tables
        for t in store.tables:
            ids = (np.arange(t.corpus_size, dtype=np.uint64) if t.ids == "dense"
                   else HASHED_IDS[t.name])
            np.testing.assert_array_equal(loaded.gather(t.name, ids), store.gather(t.name, ids))
            assert loaded.stats(t.name).rows == store.stats(t.name).rows


def test_npy_round_trip_and_numpy_files(store, tmp_path):
    for t in store.tables:
        ids_p, vec_p = tmp_path / f"{t.name}_ids.npy", tmp_path / f"{t.name}_vec.npy"
        store.export_npy(t.name, ids_p, vec_p)
        ids, vecs = np.load(ids_p), np.load(vec_p)
        assert ids.dtype == np.int64 and vecs.dtype == t.numpy_dtype
        assert vecs.shape == (store.stats(t.name).rows, t.dim)
        np.testing.assert_array_equal(vecs, store.gather(t.name, ids))
        with fleche.Store(TABLES) as fresh:
            fresh.import_npy(t.name, ids_p, vec_p)
            np.testing.assert_array_equal(fresh.gather(t.name, ids), vecs)


def test_import_npy_written_by_numpy(tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 2**62, 100, dtype=np.int64)
    vecs = rng.standard_normal((100, 8)).astype(np.float32)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "vecs.npy", vecs)
    with fleche.Store([fleche.Table("h", 100, 8, ids="hashed")]) as s:
        s.import_npy("h", tmp_path / "ids.npy", tmp_path / "vecs.npy")
        with fleche.Cache(s, backend="host", budget_bytes=8 << 20) as c:
            np.testing.assert_array_equal(c.query({"h": ids})["h"], vecs)


def test_hugectr_round_trip(store, tmp_path):
    for name in ("user", "ad"):  # fp32 tables only
        folder = tmp_path / f"{name}_sparse"
        folder.mkdir()
        store.export_hugectr(name, folder)
        assert (folder / "key").exists() and (folder / "emb_vector").exists()
        keys = np.fromfile(folder / "key", dtype=np.int64)
        assert len(keys) == store.stats(name).rows
        t = store.table(name)
        emb = np.fromfile(folder / "emb_vector", dtype=np.float32).reshape(-1, t.dim)
        np.testing.assert_array_equal(emb, store.gather(name, keys))
        with fleche.Store(TABLES) as fresh:
            fresh.import_hugectr(name, folder)
            assert fresh.stats(name).rows == store.stats(name).rows
            np.testing.assert_array_equal(fresh.gather(name, keys), emb)
