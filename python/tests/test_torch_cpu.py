"""torch CPU tensors, which need torch but no GPU: as ids and outputs of queries
and prepared queries on the host backend, behind the DLPack protocol alone,
and in Store and Encoding calls. The oracle is Store.gather of the same ids as
NumPy arrays.

Skipped without torch, except under --require-torch-cpu (python/ci.sh, which
installs torch's CPU build), where a skip fails (conftest.py).
"""

import numpy as np
import pytest

import fleche
from conftest import HASHED_IDS, TABLES, DLPackOnly, as_torch, random_ids

torch = pytest.importorskip("torch", reason="torch is not installed (python/ci.sh installs "
                                            "its CPU build)")

pytestmark = pytest.mark.torch_cpu


def test_tensors_in_and_out_match_the_store(store, cache):
    rng = np.random.default_rng(11)
    q = {t.name: random_ids(rng, t, 64, 0.2) for t in store.tables}
    got = cache.query({name: as_torch(ids) for name, ids in q.items()})
    assert set(got) == set(q)
    for name, ids in q.items():
        t = store.table(name)
        assert isinstance(got[name], torch.Tensor) and got[name].device.type == "cpu"
        assert got[name].dtype == getattr(torch, t.dtype) and tuple(got[name].shape) == (64, t.dim)
        np.testing.assert_array_equal(got[name].numpy(), store.gather(name, ids))
    out = torch.full((64, 16), float("nan"))
    res = cache.query({"user": as_torch(q["user"])}, out={"user": out})
    assert res["user"] is out
    np.testing.assert_array_equal(out.numpy(), store.gather("user", q["user"]))


def test_bad_tensors(cache):
    ids = torch.tensor([1, 2, 3], dtype=torch.int64)
    with pytest.raises(fleche.InvalidArgument, match="int32"):
        cache.query({"user": ids.to(torch.int32)})
    with pytest.raises(fleche.InvalidArgument, match="C-contiguous"):
        cache.query({"user": torch.arange(10)[::2]})
    with pytest.raises(fleche.InvalidArgument, match="1-D"):
        cache.query({"user": ids.reshape(3, 1).expand(3, 2).contiguous()})
    with pytest.raises(fleche.InvalidArgument, match="float16"):
        cache.query({"user": ids}, out={"user": torch.empty((3, 16), dtype=torch.float16)})
    with pytest.raises(fleche.InvalidArgument, match=r"\(3, 16\)"):
        cache.query({"user": ids}, out={"user": torch.empty((3, 15))})


def test_prepared_query_of_tensors_refilled_in_place(store, cache):
    rng = np.random.default_rng(31)
    ids = as_torch(np.zeros(32, np.uint64))
    q = cache.prepare({"item": ids})
    out = q.outputs["item"]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16
    for _ in range(3):
        want = random_ids(rng, store.table("item"), 32, 0.2)
        ids.copy_(as_torch(want))
        assert q.run()["item"] is out
        np.testing.assert_array_equal(out.numpy(), store.gather("item", want))


def test_tensor_behind_dlpack_only(store, cache):
    # Neither a tensor nor a NumPy array to fleche: read through numpy.from_dlpack.
    ids_np = np.array([5, 999, 5, 0], np.uint64)
    got = cache.query({"user": DLPackOnly(as_torch(ids_np))})["user"]
    assert isinstance(got, np.ndarray) and got.shape == (4, 16)
    np.testing.assert_array_equal(got, store.gather("user", ids_np))


def test_store_and_encoding_calls_take_tensors(store):
    ids = as_torch(HASHED_IDS["ad"][:3])
    vecs = torch.arange(3 * 4, dtype=torch.float32).reshape(3, 4)
    store.upsert("ad", ids, vecs)
    np.testing.assert_array_equal(store.gather("ad", ids), vecs.numpy())
    out = torch.full((3, 4), float("nan"))
    assert store.gather("ad", ids, out=out) is out
    np.testing.assert_array_equal(out.numpy(), vecs.numpy())
    store.remove("ad", ids[:1])
    np.testing.assert_array_equal(store.gather("ad", HASHED_IDS["ad"][:3]),
                                  np.concatenate([np.zeros((1, 4), np.float32), vecs[1:].numpy()]))
    dense = np.array([7, 0, 999], np.uint64)
    with fleche.Encoding(TABLES) as e:
        np.testing.assert_array_equal(e.encode("user", as_torch(dense)), e.encode("user", dense))
