"""Cache.query_packed's arguments as query()'s: the checks of a packed batch
(its ids one table after the other in one array, its vectors the same way
in one output), the output allocated when none is given, and the slices of
both arrays that query() takes, one per table. This is the Python path of
query_packed; fleche._fast takes the usual call in C, declines what it
cannot do exactly as this path would, and this path raises what is wrong."""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from ._buffers import HOST, empty_like, ids_view
from ._tables import TableRef
from .errors import InvalidArgument

# (index, dim, dtype name, ids label, out label): Cache._key_info's tuple.
KeyInfo = Tuple[int, int, str, str, str]


def _tables(tables: Any, info: Callable[[TableRef], KeyInfo]) -> List[KeyInfo]:
    """The tables' infos, each table named once."""
    if isinstance(tables, (str, bytes)) or not isinstance(tables, Sequence):
        raise InvalidArgument(f"query_packed tables: expected a list or tuple of tables (names or "
                              f"indices), got {type(tables).__name__}")
    if len(tables) == 0:
        raise InvalidArgument("query_packed tables: expected at least one table")
    infos, seen = [], {}
    for key in tables:
        i = info(key)
        if i[0] in seen:
            raise InvalidArgument(f"query_packed tables: table {key!r} is named twice "
                                  f"(also as {seen[i[0]]!r}); one query takes a table once")
        seen[i[0]] = key
        infos.append(i)
    return infos


def _counts(counts: Any, tables: Sequence[TableRef]) -> List[int]:
    if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence):
        raise InvalidArgument(f"query_packed counts: expected a list or tuple of ints, got "
                              f"{type(counts).__name__}")
    if len(counts) != len(tables):
        raise InvalidArgument(f"query_packed: {len(tables)} tables but {len(counts)} counts")
    out = []
    for key, c in zip(tables, counts):
        try:
            n = operator.index(c)
        except TypeError:
            raise InvalidArgument(f"query_packed counts: the count of table {key!r} must be an "
                                  f"int, got {type(c).__name__}") from None
        if n < 0:
            raise InvalidArgument(f"query_packed counts: the count of table {key!r} is negative "
                                  f"({n})")
        out.append(n)
    return out


def _new_out(ids: Any, device: int, rows: int, elems: int, dims: List[int], dtype: str,
             handle: int) -> Any:
    """The output query_packed allocates: of the kind of the ids (as query()
    allocates), (rows, dim) when the tables share dimension dim, else 1-D."""
    if len(dims) == 1:
        return empty_like(ids, device, rows, dims[0], dtype, handle)
    return empty_like(ids, device, elems, 1, dtype, handle).reshape(-1)


def quick_out(tables: Any, ids: Any, counts: Any, keys: Dict[TableRef, KeyInfo]) -> Any:
    """The output of a usual call without `out`, allocated with no check
    beyond what its shape needs, or None (then unpack allocates, with every
    check): tables named before (in `keys`, Cache._keys), plain int counts,
    one dtype, and NumPy or torch ids, whose outputs need no stream (torch
    allocates on its current stream, which the call then runs on)."""
    if type(tables) not in (list, tuple) or type(counts) not in (list, tuple):
        return None
    if not tables or len(tables) != len(counts):
        return None
    torch = sys.modules.get("torch")
    if type(ids) is not np.ndarray and (torch is None or type(ids) is not torch.Tensor):
        return None
    rows = elems = 0
    dims, dtypes = set(), set()
    for key, n in zip(tables, counts):
        info = keys.get(key) if type(key) is str or type(key) is int else None
        if info is None or type(n) is not int or n < 0:
            return None
        rows += n
        elems += n * info[1]
        dims.add(info[1])
        dtypes.add(info[2])
    if len(dtypes) != 1:
        return None
    return _new_out(ids, HOST, rows, elems, sorted(dims), dtypes.pop(), 0)


def unpack(tables: Any, ids: Any, counts: Any, out: Any, info: Callable[[TableRef], KeyInfo],
           stream: Callable[[Any], int]) -> Tuple[Dict[TableRef, Any], Dict[TableRef, Any], Any,
                                                    bool]:
    """(queries, outs, out, allocated): query()'s two dicts of slices, the
    whole output (`out`, or a new one when None) and whether it is new.
    info: Cache._key_info (raises for an unknown table); stream(ids): the
    query's stream for ids (where a new output is allocated)."""
    infos = _tables(tables, info)
    ns = _counts(counts, tables)
    rows = sum(ns)
    shape = getattr(ids, "shape", None)
    if shape is None or not hasattr(ids, "__getitem__"):
        raise InvalidArgument(f"query_packed ids: expected a 1-D array that slices (NumPy, torch, "
                              f"CuPy), got {type(ids).__name__}")
    if len(shape) != 1:
        raise InvalidArgument(f"query_packed ids: ids must be a 1-D array, got shape "
                              f"{tuple(shape)}")
    if shape[0] != rows:
        raise InvalidArgument(f"query_packed ids: the counts add up to {rows} ids, the array "
                              f"holds {shape[0]}")
    dtypes = sorted({i[2] for i in infos})
    if len(dtypes) > 1:
        raise InvalidArgument(f"query_packed tables: their dtypes differ ({', '.join(dtypes)}); "
                              "one output holds one dtype")
    dims = sorted({i[1] for i in infos})
    elems = sum(n * i[1] for n, i in zip(ns, infos))
    allocated = out is None
    if allocated:
        handle = stream(ids)
        device = ids_view(ids, "query_packed ids", handle)[3]
        out = _new_out(ids, device, rows, elems, dims, dtypes[0], handle)
    oshape = tuple(getattr(out, "shape", ()))
    if len(oshape) == 2:
        if len(dims) != 1:
            raise InvalidArgument(f"query_packed out: a 2-D output needs tables of one dimension, "
                                  f"these have {dims}; pass a 1-D output of {elems} "
                                  "elements")
        if oshape != (rows, dims[0]):
            raise InvalidArgument(f"query_packed out: expected shape ({rows}, {dims[0]}) "
                                  f"or ({elems},), got {oshape}")
    elif oshape != (elems,):
        raise InvalidArgument(f"query_packed out: expected {elems} elements (the counts times "
                              f"the tables' dimensions) in a 1-D array, got shape {oshape}")
    queries: Dict[TableRef, Any] = {}
    outs: Dict[TableRef, Any] = {}
    at = row_at = 0
    for key, n, i in zip(tables, ns, infos):
        queries[key] = ids[at:at + n]
        outs[key] = out[at:at + n] if len(oshape) == 2 else out[row_at:row_at + n * i[1]]
        at += n
        row_at += n * i[1]
    return queries, outs, out, allocated
