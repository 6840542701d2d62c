"""Table (one embedding table's description), the names of the C enums the
API takes ("float16", "hashed", "cuda", ...), and tables named by name or
index (_Tables), as Store and Encoding hold them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

from . import _lib
from .errors import InvalidArgument

TableRef = Union[str, int]

_DTYPES = {"float32": _lib.FL_FP32, "float16": _lib.FL_FP16}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}
_IDS = {"dense": _lib.FL_IDS_DENSE, "hashed": _lib.FL_IDS_HASHED}
_IDS_NAMES = {v: k for k, v in _IDS.items()}
_MISSING = {"zero": _lib.FL_MISSING_ZERO, "error": _lib.FL_MISSING_ERROR}
_BACKENDS = {"auto": _lib.FL_BACKEND_AUTO, "host": _lib.FL_BACKEND_HOST,
             "cuda": _lib.FL_BACKEND_CUDA}
_BACKEND_NAMES = {v: k for k, v in _BACKENDS.items()}
_LAYOUTS = {"flat": _lib.FL_LAYOUT_FLAT, "per_table": _lib.FL_LAYOUT_PER_TABLE}
_ADMIT_POLICIES = {"coin": _lib.FL_ADMIT_COIN, "tinylfu": _lib.FL_ADMIT_TINYLFU}
_ENCODINGS = {"size_aware": _lib.FL_ENCODING_SIZE_AWARE, "fixed": _lib.FL_ENCODING_FIXED}


def _choice(what: str, value: str, options: Mapping[str, int]) -> int:
    if value not in options:
        raise InvalidArgument(f"{what}: expected one of {sorted(options)}, got {value!r}")
    return options[value]


@dataclass(frozen=True)
class Table:
    """One embedding table (fl_table_desc).

    Args:
        name: unique name; queries may name the table by it or by its index.
        corpus_size: dense: number of rows (ids 0..corpus_size-1); hashed: the
            expected number of distinct ids.
        dim: elements per vector, 1..4096.
        dtype: "float32" or "float16" (NumPy dtypes are accepted too).
        ids: "dense" or "hashed" (raw 64-bit ids).
    """

    name: str
    corpus_size: int
    dim: int
    dtype: str = "float32"
    ids: str = "dense"

    def __post_init__(self) -> None:
        try:
            dtype = np.dtype(self.dtype).name
        except TypeError:
            dtype = str(self.dtype)
        _choice(f"table {self.name!r} dtype", dtype, _DTYPES)
        object.__setattr__(self, "dtype", dtype)
        _choice(f"table {self.name!r} ids", self.ids, _IDS)
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgument(f"table name: expected a non-empty str, got {self.name!r}")

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype of this table's vectors."""
        return np.dtype(self.dtype)

    @property
    def row_bytes(self) -> int:
        """Bytes of one vector."""
        return self.dim * self.numpy_dtype.itemsize


def table_descs(what: str, tables: Sequence[Table]) -> Tuple[Any, List[bytes]]:
    """The fl_table_desc array of checked tables (non-empty, fleche.Table, unique
    names), and the encoded names it points to (keep them alive with it)."""
    tables = list(tables)
    if not tables:
        raise InvalidArgument(f"{what}: at least one table is needed")
    for t in tables:
        if not isinstance(t, Table):
            raise InvalidArgument(f"{what}: tables must be fleche.Table, got {type(t).__name__}")
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise InvalidArgument(f"{what}: table names must be unique, got {names}")
    descs = (_lib.fl_table_desc * len(tables))()
    keep = []
    for d, t in zip(descs, tables):
        name = t.name.encode()
        keep.append(name)
        d.name = name
        d.corpus_size = t.corpus_size
        d.dim = t.dim
        d.dtype = _DTYPES[t.dtype]
        d.id_kind = _IDS[t.ids]
    return descs, keep


class _Tables:
    """Tables named by name or index, as Store and Encoding take them."""

    _tables: Tuple[Table, ...]
    _index: Dict[str, int]

    def _set_tables(self, tables: Sequence[Table]) -> None:
        self._tables = tuple(tables)
        self._index = {t.name: i for i, t in enumerate(self._tables)}

    def table_index(self, table: TableRef) -> int:
        """The index of a table given by name or index (InvalidArgument if unknown)."""
        if isinstance(table, (int, np.integer)) and not isinstance(table, bool):
            i = int(table)
            if 0 <= i < len(self._tables):
                return i
            raise InvalidArgument(f"unknown table index {i} (there are "
                                  f"{len(self._tables)} tables)")
        if isinstance(table, str):
            try:
                return self._index[table]
            except KeyError:
                raise InvalidArgument(f"unknown table {table!r} (tables: "
                                      f"{list(self._index)})") from None
        raise InvalidArgument(f"a table is a name (str) or an index (int), got "
                              f"{type(table).__name__}")

    def table(self, table: TableRef) -> Table:
        """The Table given by name or index."""
        return self._tables[self.table_index(table)]

    @property
    def tables(self) -> Tuple[Table, ...]:
        """The tables, in index order."""
        return self._tables
