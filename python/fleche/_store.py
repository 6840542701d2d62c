"""Store: the CPU-DRAM store holding every vector of every table (fl_store),
its contents, statistics and files; and synthetic_value, the values of its
synthetic model."""

from __future__ import annotations

import ctypes
import os
import weakref
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._buffers import host_view, ids_view, vectors_view
from ._handle import Handle, _Owner
from ._lib import lib as L
from ._stats import StoreTableStats
from ._tables import (_DTYPE_NAMES, _IDS_NAMES, _MISSING, Table, TableRef, _choice, _Tables,
                      table_descs)
from .errors import from_status

if TYPE_CHECKING:
    from ._cache import Cache

PathLike = Union[str, "os.PathLike[str]"]


def _path(p: PathLike) -> bytes:
    return os.fsencode(os.fspath(p))


def synthetic_value(seed: int, table: int, id: int, j: int) -> float:
    """The value Store.fill_synthetic writes at element j of row `id` of table index
    `table` (fl_synthetic_value; fp16 tables hold it rounded to float16)."""
    return float(L.fl_synthetic_value(seed, table, id, j))


class Store(_Owner, _Tables):
    """The CPU-DRAM store holding every vector of every table (fl_store).

    Every method is thread-safe (the C store is); close() waits for calls in
    flight. Use it as a context manager, or call close(): closing a store
    closes its caches first.

    Args:
        tables: the tables, in index order.
        threads: gather pool size (0 = half the cores).
    """

    def __init__(self, tables: Sequence[Table], threads: int = 0) -> None:
        descs, _names = table_descs("Store", tables)
        out = ctypes.c_void_p()
        st = L.fl_store_create(descs, len(descs), threads, ctypes.byref(out))
        if st != _lib.FL_OK:
            raise from_status(st, L.fl_store_last_error(None).decode())
        self._init(out.value)

    def _init(self, ptr: int) -> None:
        self._h = Handle(ptr, L.fl_store_destroy, "store")
        self._caches: "weakref.WeakSet[Cache]" = weakref.WeakSet()
        n = L.fl_store_num_tables(ptr)
        tables = []
        for i in range(n):
            d = _lib.fl_table_desc()
            self._check(L.fl_store_table(ptr, i, ctypes.byref(d)), ptr)
            tables.append(Table(d.name.decode(), d.corpus_size, d.dim,
                                _DTYPE_NAMES[d.dtype], _IDS_NAMES[d.id_kind]))
        self._set_tables(tables)

    @classmethod
    def load(cls, path: PathLike, threads: int = 0) -> "Store":
        """Loads a store saved by save() (the FLST format, docs/FORMATS.md).

        Raises IoError (cannot open or read) or FormatError (truncated,
        corrupted or foreign file; the message names file and byte offset)."""
        out = ctypes.c_void_p()
        st = L.fl_store_load(_path(path), threads, ctypes.byref(out))
        if st != _lib.FL_OK:
            raise from_status(st, L.fl_store_last_error(None).decode())
        self = cls.__new__(cls)
        self._init(out.value)
        return self

    _last_error = L.fl_store_last_error

    # ------------------------------------------------------------ contents

    def fill_synthetic(self, table: TableRef, seed: int) -> None:
        """Fills a table with the deterministic synthetic model (fl_store_fill_synthetic):
        dense tables get synthetic_value(seed, index, id, j) for every row; hashed
        tables get corpus_size rows of scrambled ids (docs/API.md)."""
        self._call(L.fl_store_fill_synthetic, self.table_index(table), seed)

    def upsert(self, table: TableRef, ids: Any, vectors: Any) -> None:
        """Inserts or overwrites rows (fl_store_upsert). Thread-safe with queries;
        caches over the store drop the old values.

        Args:
            ids: uint64 or int64 ids, 1-D, C-contiguous (int64 bits are taken as uint64).
            vectors: shape (len(ids), dim) of the table's dtype, C-contiguous.
        """
        i = self.table_index(table)
        t = self._tables[i]
        idv = host_view(ids_view(ids, f"upsert {t.name!r} ids"))
        vv = host_view(vectors_view(vectors, idv[1][0], t.dim, t.dtype,
                                    f"upsert {t.name!r} vectors", writable=False))
        self._call(L.fl_store_upsert, i, idv[0], idv[1][0], vv[0])

    def remove(self, table: TableRef, ids: Any) -> None:
        """Removes rows of a hashed table (absent ids are ignored; fl_store_remove).
        Dense tables hold every id: InvalidArgument."""
        i = self.table_index(table)
        idv = host_view(ids_view(ids, f"remove {self._tables[i].name!r} ids"))
        self._call(L.fl_store_remove, i, idv[0], idv[1][0])

    def gather(self, table: TableRef, ids: Any, *, missing: str = "zero",
               out: Optional[np.ndarray] = None) -> np.ndarray:
        """Looks ids up in the store itself, bypassing any cache (fl_store_gather).

        The call runs in C without the GIL (ctypes releases it), on the store's
        thread pool; other Python threads keep running.

        Args:
            ids: host ids, uint64 or int64, 1-D, C-contiguous.
            missing: "zero" (absent ids of a hashed table give zero rows) or
                "error" (raise NotFound).
            out: optional (len(ids), dim) array of the table's dtype to fill.
        Returns:
            the (len(ids), dim) vectors (`out` when given).
        """
        i = self.table_index(table)
        t = self._tables[i]
        idv = host_view(ids_view(ids, f"gather {t.name!r} ids"))
        n = idv[1][0]
        if out is None:
            out = np.empty((n, t.dim), dtype=t.numpy_dtype)
        ov = host_view(vectors_view(out, n, t.dim, t.dtype, f"gather {t.name!r} out",
                                    writable=True))
        q = _lib.fl_table_query(i, idv[0], n, ov[0])
        self._call(L.fl_store_gather, ctypes.byref(q), 1,
                   _choice("missing", missing, _MISSING), None)
        return out

    def stats(self, table: TableRef) -> StoreTableStats:
        """One table's statistics (fl_store_stats)."""
        s = _lib.fl_store_table_stats()
        self._call(L.fl_store_stats, self.table_index(table), ctypes.byref(s))
        return StoreTableStats(s.rows, s.bytes, s.lookups, s.misses)

    # ------------------------------------------------------------ files

    def save(self, path: PathLike) -> None:
        """Writes every table to `path` in the FLST format (fl_store_save)."""
        self._call(L.fl_store_save, _path(path))

    def import_npy(self, table: TableRef, ids_path: PathLike, vectors_path: PathLike) -> None:
        """Upserts the rows of a NumPy pair: int64 ids of shape (n,) and vectors of
        shape (n, dim) of the table's dtype (fl_store_import_npy). All or nothing."""
        self._call(L.fl_store_import_npy, self.table_index(table), _path(ids_path),
                   _path(vectors_path))

    def export_npy(self, table: TableRef, ids_path: PathLike, vectors_path: PathLike) -> None:
        """Writes a table's rows as a NumPy pair (fl_store_export_npy)."""
        self._call(L.fl_store_export_npy, self.table_index(table), _path(ids_path),
                   _path(vectors_path))

    def import_hugectr(self, table: TableRef, folder: PathLike) -> None:
        """Upserts the rows of a HugeCTR sparse model folder (`key`, `emb_vector`);
        float32 tables only (fl_store_import_hugectr)."""
        self._call(L.fl_store_import_hugectr, self.table_index(table), _path(folder))

    def export_hugectr(self, table: TableRef, folder: PathLike) -> None:
        """Writes a table as a HugeCTR sparse model folder (fl_store_export_hugectr)."""
        self._call(L.fl_store_export_hugectr, self.table_index(table), _path(folder))

    # ------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Closes the store's caches, then destroys the store (after calls in
        flight). Idempotent; later calls raise InvalidArgument."""
        for cache in list(self._caches):
            cache.close()
        self._h.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._tables)} tables"
        return f"<fleche.Store {state}: {[t.name for t in self._tables]}>"
