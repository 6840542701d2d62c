"""Store, Cache, Table and their statistics (see docs/PYTHON.md)."""

from __future__ import annotations

import ctypes
import os
import sys
import weakref
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar, Union

import numpy as np

from . import _lib
from ._buffers import (HOST, dlpack_order, empty_like, from_capsule, ids_view, stream_handle,
                       stream_source, torch_order, vectors_view)
from ._handle import Handle
from .errors import InvalidArgument, from_status

_T = TypeVar("_T", bound="_Owner")

L = _lib.lib
PathLike = Union[str, "os.PathLike[str]"]
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
_ENCODINGS = {"size_aware": _lib.FL_ENCODING_SIZE_AWARE, "fixed": _lib.FL_ENCODING_FIXED}


def _choice(what: str, value: str, options: Mapping[str, int]) -> int:
    if value not in options:
        raise InvalidArgument(f"{what}: expected one of {sorted(options)}, got {value!r}")
    return options[value]


def _path(p: PathLike) -> bytes:
    return os.fsencode(os.fspath(p))


def version() -> str:
    """The C library's version, "MAJOR.MINOR.PATCH" (fl_version)."""
    return L.fl_version().decode()


def cuda_device_count() -> int:
    """Number of usable CUDA devices; 0 without a GPU or driver (fl_cuda_device_count)."""
    return int(L.fl_cuda_device_count())


def synthetic_value(seed: int, table: int, id: int, j: int) -> float:
    """The value Store.fill_synthetic writes at element j of row `id` of table index
    `table` (fl_synthetic_value; fp16 tables hold it rounded to float16)."""
    return float(L.fl_synthetic_value(seed, table, id, j))


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


@dataclass(frozen=True)
class StoreTableStats:
    """One table's store statistics (fl_store_table_stats)."""

    rows: int  #: rows held
    bytes: int  #: bytes of vectors held
    lookups: int  #: ids looked up since create
    misses: int  #: of which not found


@dataclass(frozen=True)
class CacheTableStats:
    """One table's cache statistics (fl_cache_table_stats)."""

    lookups: int
    hits: int
    dram_hits: int
    misses: int


@dataclass(frozen=True)
class CacheStats:
    """Every field of fl_cache_stats (see include/fleche.h), plus `tables`: the
    per-table statistics by table name."""

    queries: int
    lookups: int
    hits: int
    dram_hits: int
    misses: int
    admissions: int
    evictions: int
    invalidations: int
    pool_bytes_used: int
    pool_bytes: int
    index_bytes: int
    index_entries: int
    index_slots: int
    unified_entries: int
    ns_index: float
    ns_hit_copy: float
    ns_miss_fetch: float
    ns_admission: float
    ns_admission_wait: float
    unique_misses: int
    ns_store_gather: float
    gpu_ns_index: float
    gpu_ns_hit_copy: float
    ns_miss_host_cpu: float
    zero_copy_rows: int
    rounds_shed: int
    rounds_starved: int
    slabs_recycled: int
    tables: Dict[str, CacheTableStats] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float:
        """hits / lookups (0.0 before any lookup)."""
        return self.hits / self.lookups if self.lookups else 0.0

    def as_dict(self) -> Dict[str, Any]:
        """The statistics as a plain dict (per-table entries as dicts too)."""
        return asdict(self)


class _Owner:
    """What Store, Cache and Encoding share about their lifetime: a C handle in
    self._h (a _handle.Handle), the fl_*_last_error of its kind, close(), use
    as a context manager, and a finalizer that closes the handle if the user
    did not."""

    _h: Handle
    _last_error: Any  # the ctypes function fl_<kind>_last_error

    def close(self) -> None:
        """Destroys the C object after the calls in flight (idempotent); later
        calls raise InvalidArgument."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def _check(self, st: int, ptr: Any) -> None:
        """Raises the exception of status st with the handle's last message."""
        if st != _lib.FL_OK:
            raise from_status(st, self._last_error(ptr).decode())

    def _call(self, fn: Any, *args: Any) -> None:
        """Calls fn(handle, *args) while the handle stays open; raises on error."""
        ptr = self._h.enter()
        try:
            self._check(fn(ptr, *args), ptr)
        finally:
            self._h.leave()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is not None:
            h.close()


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


class Store(_Owner, _Tables):
    """The CPU-DRAM store holding every vector of every table (fl_store).

    Every method is thread-safe (the C store is); close() waits for calls in
    flight. Use it as a context manager, or call close(): closing a store
    closes its caches first.

    Args:
        tables: the tables, in index order.
        threads: gather pool size (0 = one per core).
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


class _NoTensor:
    """Stands for torch.Tensor in isinstance checks when torch is not loaded."""


_ABSENT = object()  # query(): no output given for a table


def host_view(v: Any) -> Any:
    """v, a view (see _buffers), if it is of host memory; else InvalidArgument."""
    if v[3] != HOST:
        raise InvalidArgument("this call takes host memory only (NumPy arrays, CPU tensors), "
                              f"got an array on CUDA device {v[3]}")
    return v


class Cache(_Owner):
    """A cache in front of a Store (fl_cache): host backend here, CUDA with a GPU.

    Every method is thread-safe; many threads may query at once (each on its
    own stream with CUDA). The cache keeps its store alive, and is destroyed
    before it. Use it as a context manager, or call close().

    Keyword arguments map to fl_config fields; None keeps the library default
    (fl_config_default): budget_bytes 1 GiB, admit_probability 0.5, key_bits 64,
    max_load 0.5, watermarks 0.95/0.80, unified_entries 0, host_threads 0 (all
    cores), seed 0x5eed, zero_copy_rows 0 (CUDA: batches with at most that many
    distinct misses of dense tables read them in place from the store).
    backend "auto" picks CUDA when a GPU is usable (env FL_BACKEND=host|cuda
    overrides "auto"). missing: "zero" (absent hashed ids
    answer zero vectors) or "error" (queries raise NotFound).
    """

    def __init__(self, store: Store, *, budget_bytes: Optional[int] = None,
                 backend: str = "auto", layout: str = "flat",
                 admit_probability: Optional[float] = None, key_bits: Optional[int] = None,
                 unified_entries: Optional[int] = None, host_threads: Optional[int] = None,
                 missing: str = "zero", device: Optional[int] = None,
                 encoding: str = "size_aware", max_load: Optional[float] = None,
                 high_watermark: Optional[float] = None, low_watermark: Optional[float] = None,
                 seed: Optional[int] = None, profile: bool = False,
                 zero_copy_rows: Optional[int] = None) -> None:
        if not isinstance(store, Store):
            raise InvalidArgument(f"Cache: expected a fleche.Store, got {type(store).__name__}")
        cfg = _lib.fl_config()
        L.fl_config_default(ctypes.byref(cfg))
        cfg.backend = _choice("backend", backend, _BACKENDS)
        cfg.layout = _choice("layout", layout, _LAYOUTS)
        cfg.encoding = _choice("encoding", encoding, _ENCODINGS)
        cfg.missing = _choice("missing", missing, _MISSING)
        cfg.profile = int(bool(profile))
        for name, value in (("budget_bytes", budget_bytes), ("admit_probability", admit_probability),
                            ("key_bits", key_bits), ("unified_entries", unified_entries),
                            ("host_threads", host_threads), ("device", device),
                            ("max_load", max_load), ("high_watermark", high_watermark),
                            ("low_watermark", low_watermark), ("seed", seed),
                            ("zero_copy_rows", zero_copy_rows)):
            if value is not None:
                if isinstance(getattr(cfg, name), int) and (not isinstance(value, (int, np.integer))
                                                            or value < 0):
                    raise InvalidArgument(f"Cache {name}: expected a non-negative int, "
                                          f"got {value!r}")
                setattr(cfg, name, value)
        self._store = store
        sptr = store._h.enter()
        try:
            out = ctypes.c_void_p()
            st = L.fl_cache_create(sptr, ctypes.byref(cfg), ctypes.byref(out))
            if st != _lib.FL_OK:
                raise from_status(st, L.fl_cache_last_error(None).decode())
            self._h = Handle(out.value, L.fl_cache_destroy, "cache", parent=store._h)
        finally:
            store._h.leave()
        store._caches.add(self)
        self._backend = _BACKEND_NAMES[L.fl_cache_backend(out.value)]
        self._n_tables = len(store.tables)
        self._device = cfg.device  # the CUDA ordinal of the cache's memory
        self._keys: Dict[TableRef, Tuple[int, int, str, str, str]] = {}  # see _key_info

    # ------------------------------------------------------------ plumbing

    _last_error = L.fl_cache_last_error

    @property
    def store(self) -> Store:
        """The store this cache is over."""
        return self._store

    @property
    def backend(self) -> str:
        """"host" or "cuda": the backend in use (fl_cache_backend)."""
        return self._backend

    # ------------------------------------------------------------ queries

    def query(self, queries: Mapping[TableRef, Any], out: Optional[Mapping[TableRef, Any]] = None,
              stream: Any = None) -> Dict[TableRef, Any]:
        """Looks up the vectors of a batch of ids across tables (one fl_query).

        Nothing is copied in Python: C reads the ids and writes the outputs in
        place, and runs without the GIL, so queries from several Python
        threads run in parallel. A serving loop over fixed buffers saves the
        checks of every call with prepare().

        Args:
            queries: table (name or index) -> ids. Ids are uint64 or int64 (bits
                taken as uint64), 1-D, C-contiguous: NumPy arrays, torch tensors
                (CPU or CUDA), or any object with __dlpack__ on the CPU or (CUDA
                backend) a CUDA device, such as CuPy arrays.
            out: optional table -> output with the same keys: (len(ids), dim)
                arrays of the table's dtype (float32 or float16), C-contiguous,
                writable; of the same kinds as ids (CUDA backend: host or
                device memory, whatever the ids are).
            stream: the CUDA stream of the call: an int cudaStream_t (0: the
                legacy default stream), a torch.cuda.Stream or a
                cupy.cuda.Stream. None: the current stream of the arrays'
                framework (torch's for torch CUDA tensors, CuPy's for CuPy
                arrays), else the legacy default stream. Work pending on the
                arrays' current stream is ordered before the call (as DLPack
                producers do). The host backend ignores it.
        Returns:
            a dict with the keys of `queries`: the `out` arrays when given, else
            new arrays of the kind of the ids on their device (torch tensors for
            torch ids, CuPy arrays for CuPy ids, NumPy arrays for other host
            ids). Device outputs (CUDA backend) are complete when `stream`
            reaches the point of this call; host outputs are complete on return.
        Raises:
            InvalidArgument (bad table, dtype, shape, layout, device: checked
            before C), OutOfRange (a dense id >= corpus size), NotFound
            (missing="error"), and the other fleche.Error subclasses with the
            library's message.
        """
        b = self._bind(queries, out, stream)
        self._launch(b, b.handle)
        return b.result

    def prepare(self, queries: Mapping[TableRef, Any],
                out: Optional[Mapping[TableRef, Any]] = None) -> "PreparedQuery":
        """Binds fixed ids and output buffers once, for a serving loop that
        refills the ids in place and runs the same query again and again
        (like TensorRT bindings or a CUDA graph's buffers).

        Every check of query() is done here, once, with the same exceptions;
        missing outputs are allocated here as query() would allocate them (for
        torch outputs, on torch's current stream now), and fl_query_prepare
        makes the C handle (on CUDA it finds once where each buffer lives, and
        its runs replay the lookup's launches as one CUDA graph).
        PreparedQuery.run() then only orders the streams and calls
        fl_prepared_run (launch() and wait(): fl_prepared_launch and
        fl_prepared_wait). The cache's C object is destroyed only once its
        prepared queries are closed (or collected), even after Cache.close().

        Between runs the caller may change the contents of the ids (fill them
        in place: ids[:] = ..., ids.copy_(...)), never their address, shape,
        dtype or device (no resize, no rebinding of the name to a new array:
        C would read the old buffer). Keep one PreparedQuery per thread: its
        outputs are overwritten by each run.

        Args:
            queries: table -> ids, as for query().
            out: optional table -> output, as for query().
        Returns:
            a PreparedQuery holding the buffers (they stay alive with it).
        Raises:
            InvalidArgument (bad table, dtype, shape, layout, device; the cache
            is closed) and Unsupported, as query() does, before C is called.
        """
        if self._h.closed:
            raise InvalidArgument("the cache is closed")
        b = self._bind(queries, out, None)
        ptr = self._h.enter()
        try:
            made = ctypes.c_void_p()
            self._check(L.fl_query_prepare(ptr, b.address, b.count, ctypes.byref(made)), ptr)
            handle = Handle(made.value, L.fl_prepared_destroy, "prepared query", parent=self._h)
        finally:
            self._h.leave()
        return PreparedQuery(self, b, queries, handle)

    def _bind(self, queries: Mapping[TableRef, Any], out: Optional[Mapping[TableRef, Any]],
              stream: Any) -> "_Binding":
        """The checks of a query, shared by query() and prepare(): checks every
        ids and output array (allocating the outputs when `out` is None) and
        builds the fl_query arguments. `stream` is query()'s argument: it
        decides the stream (b.handle) that DLPack producers order their pending
        work before and that CuPy outputs are allocated on."""
        if type(queries) is not dict and not isinstance(queries, Mapping):  # (dict: faster)
            raise InvalidArgument(f"query: expected a mapping of table -> ids, got "
                                  f"{type(queries).__name__}")
        if out is not None and type(out) is not dict and not isinstance(out, Mapping):
            raise InvalidArgument(f"query out: expected a mapping of table -> array, got "
                                  f"{type(out).__name__}")
        handle = stream_handle(stream)
        source = self._stream_source(queries, out) if self._backend == "cuda" else None
        if handle is None:
            handle = source() if source is not None else 0
        torch = sys.modules.get("torch")
        tensor = torch.Tensor if torch is not None else _NoTensor
        words: List[int] = []  # the fl_table_query entries, _lib.QUERY_WORDS words each
        owners: List[Any] = []  # keep the arrays (or DLPack capsules) alive while C uses them
        dlpack: List[Tuple[Any, str]] = []  # CUDA DLPack objects, for their stream order
        result: Dict[TableRef, Any] = {}
        torch_device = False
        for key, ids in queries.items():
            tk = type(key)
            info = self._keys.get(key) if tk is str or tk is int else None
            if info is None:
                info = self._key_info(key)
            i, dim, dtype, what_ids, what_out = info
            iv = ids_view(ids, what_ids, handle)
            n = iv[1][0]
            if out is None:
                o = empty_like(ids, iv[3], n, dim, dtype, handle)
            else:
                o = out.get(key, _ABSENT)
                if o is _ABSENT:
                    raise InvalidArgument(f"query out: no output for table {key!r}")
            ov = vectors_view(o, n, dim, dtype, what_out, True, handle)
            if iv[3] != HOST or ov[3] != HOST:
                self._check_devices(key, iv[3], ov[3])
                torch_device = torch_device or isinstance(ids, tensor) or isinstance(o, tensor)
            if from_capsule(iv):
                dlpack.append((ids, what_ids))
            if from_capsule(ov):
                dlpack.append((o, what_out))
            words += (i, iv[0], n, ov[0])
            owners += (iv[5], ov[5])
            result[key] = o
        if out is not None and len(out) != len(result):
            extra = [key for key in out if key not in queries]
            raise InvalidArgument(f"query out: outputs for tables not queried: {extra}")
        allocated = ([o for o in result.values() if isinstance(o, tensor) and o.is_cuda]
                     if torch_device and out is None else [])
        return _Binding(array("Q", words), result, owners, handle, source, torch_device,
                        dlpack, allocated)

    def _launch(self, b: "_Binding", handle: int, prepared: Optional[Handle] = None,
                call: Any = None) -> None:
        """Runs a bound query on stream `handle`: makes it wait for torch's
        current stream when the two differ (record_stream of the outputs
        fleche allocated, once per stream), then one fl_query, or with
        `prepared` one call(prepared, handle) (fl_prepared_run or
        fl_prepared_launch), GIL released."""
        if b.torch_device:
            consumer = torch_order(handle, self._device)
            if consumer is not None and b.allocated and handle not in b.recorded:
                for o in b.allocated:  # torch's allocator may reuse them only after `handle`
                    o.record_stream(consumer)
                b.recorded.add(handle)
        if prepared is None:
            self._call(L.fl_query, b.address, b.count, handle)
        else:
            self._call_prepared(prepared, call, handle)

    def _call_prepared(self, prepared: Handle, fn: Any, *args: Any) -> None:
        """Calls fn(prepared's pointer, *args) (fl_prepared_*) while the cache
        and the prepared query stay open; raises on error with the cache's
        message (C records a prepared query's failures on its cache)."""
        ptr = self._h.enter()  # a closed cache refuses prepared runs too
        try:
            pptr = prepared.enter()
            try:
                self._check(fn(pptr, *args), ptr)
            finally:
                prepared.leave()
        finally:
            self._h.leave()

    def _key_info(self, key: TableRef) -> Tuple[int, int, str, str, str]:
        """(index, dim, dtype name, ids label, out label) of a table key, cached
        for str and int keys."""
        i = self._store.table_index(key)
        t = self._store.tables[i]
        info = (i, t.dim, t.dtype, f"query {key!r} ids", f"query {key!r} out")
        if type(key) is str or type(key) is int:
            self._keys[key] = info
        return info

    def _stream_source(self, queries: Mapping[TableRef, Any],
                       out: Optional[Mapping[TableRef, Any]]) -> Optional[Callable[[], int]]:
        """What gives the stream of stream=None: the current stream of the
        framework of the first ids (or, for host ids, of the first output);
        None: the legacy default stream, 0."""
        for arrays in (queries, out or {}):
            first = next(iter(arrays.values()), None)
            source = stream_source(first, self._device) if first is not None else None
            if source is not None:
                return source
        return None

    def _check_devices(self, key: TableRef, *devices: int) -> None:
        """Device arrays need the CUDA backend, on the cache's device."""
        for d in devices:
            if d == HOST:
                continue
            if self._backend == "host":
                raise InvalidArgument(f"query {key!r}: the host backend takes host memory "
                                      f"only, got an array on CUDA device {d}")
            if d != self._device:
                raise InvalidArgument(f"query {key!r}: an array is on CUDA device {d}, the "
                                      f"cache on device {self._device}")

    # ------------------------------------------------------------ control

    def sync(self) -> None:
        """Waits until every admission enqueued so far is published and counted
        (fl_cache_sync). Host backend: returns at once."""
        self._call(L.fl_cache_sync)

    def reserve(self, keys: int, queries: int) -> None:
        """Allocates the query buffers for one query of up to `keys` ids in up to
        `queries` tables ahead of time (fl_cache_reserve). Host backend: no-op."""
        self._call(L.fl_cache_reserve, keys, queries)

    def set_unified_entries(self, n: int) -> None:
        """Sets how many index entries may point into the store (the unified
        index; fl_cache_set_unified_entries)."""
        self._call(L.fl_cache_set_unified_entries, n)

    def clear(self) -> None:
        """Drops every cached entry (fl_cache_clear)."""
        self._call(L.fl_cache_clear)

    def stats(self) -> CacheStats:
        """A snapshot of the statistics, totals and per table (fl_cache_stats_get)."""
        s = _lib.fl_cache_stats()
        per = (_lib.fl_cache_table_stats * self._n_tables)()
        self._call(L.fl_cache_stats_get, ctypes.byref(s), per, self._n_tables)
        tables = {t.name: CacheTableStats(p.lookups, p.hits, p.dram_hits, p.misses)
                  for t, p in zip(self._store.tables, per)}
        return CacheStats(*(getattr(s, name) for name, _ in _lib.fl_cache_stats._fields_),
                          tables=tables)

    def reset_stats(self) -> None:
        """Zeroes the statistics (fl_cache_stats_reset)."""
        ptr = self._h.enter()
        try:
            L.fl_cache_stats_reset(ptr)
        finally:
            self._h.leave()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._backend
        return f"<fleche.Cache {state} over {self._store!r}>"



class _Binding:
    """The checked buffers of one query and its fl_query arguments
    (Cache._bind): built at each Cache.query call, once for all the runs of a
    PreparedQuery."""

    __slots__ = ("words", "address", "count", "result", "owners", "handle", "source",
                 "torch_device", "dlpack", "allocated", "recorded")

    def __init__(self, words: array, result: Dict[TableRef, Any], owners: List[Any],
                 handle: int, source: Optional[Callable[[], int]], torch_device: bool,
                 dlpack: List[Tuple[Any, str]], allocated: List[Any]) -> None:
        self.words = words  # the fl_table_query array, _lib.QUERY_WORDS words a table; never resized
        self.address: int = words.buffer_info()[0]  # its address, what fl_query gets
        self.count = len(result)  # tables in the query
        self.result = result  # table key -> output, in the caller's order
        self.owners = owners  # arrays or DLPack capsules: alive as long as the binding
        self.handle = handle  # the stream of the bind: query()'s stream
        self.source = source  # the stream of stream=None at a run (None: 0)
        self.torch_device = torch_device  # a torch tensor in device memory: torch_order
        self.dlpack = dlpack  # (object, label) read from CUDA DLPack capsules
        self.allocated = allocated  # torch CUDA outputs fleche allocated (record_stream)
        self.recorded: Set[int] = set()  # the streams `allocated` has recorded


class PreparedQuery:
    """A query with its buffers bound once (Cache.prepare): run() costs one
    fl_prepared_run and the stream ordering, none of query()'s checks;
    launch() then wait() split a run so that the calling thread does not
    wait for the host's part of it (fl_prepared_launch, fl_prepared_wait).

        q = cache.prepare({"user": ids}, out={"user": vecs})   # or out=None: allocated here
        for batch in batches:
            ids[:] = batch                 # refill in place: same address, shape, dtype
            q.run()                        # writes q.outputs["user"] (here: vecs)

    The prepared query keeps its ids and outputs alive. One thread at a time
    runs it (the outputs are shared by its runs); give each thread its own.
    Use it as a context manager, or call close(), to release the buffers.
    """

    def __init__(self, cache: Cache, binding: _Binding, queries: Mapping[TableRef, Any],
                 handle: Handle) -> None:
        self._cache = cache
        self._b: Optional[_Binding] = binding
        self._ids = dict(queries)
        self._h = handle  # the fl_prepared; a dependent of the cache's handle

    @property
    def cache(self) -> Cache:
        """The cache this query runs on."""
        return self._cache

    @property
    def ids(self) -> Dict[TableRef, Any]:
        """Table key -> the bound ids (fill these in place between runs)."""
        return self._ids

    @property
    def outputs(self) -> Dict[TableRef, Any]:
        """Table key -> the bound outputs, in the order of the ids: the `out`
        arrays given to prepare(), or the ones it allocated. run() returns
        this same dict."""
        return self._binding().result

    @property
    def closed(self) -> bool:
        return self._b is None

    def _binding(self) -> _Binding:
        b = self._b
        if b is None:
            raise InvalidArgument("the prepared query is closed")
        return b

    def run(self, stream: Any = None) -> Dict[TableRef, Any]:
        """Looks up the current contents of the bound ids into the bound
        outputs (one fl_prepared_run, GIL released).

        Args:
            stream: as for Cache.query: an int cudaStream_t, a
                torch.cuda.Stream or a cupy.cuda.Stream; None: the current
                stream of the arrays' framework now (torch's, CuPy's), else 0.
                Work pending on the arrays' current stream is ordered before
                the call. The host backend ignores it.
        Returns:
            the outputs (the same dict and arrays at every run). Device
            outputs are complete when the stream reaches the point of this
            call; host outputs are complete on return.
        Raises:
            InvalidArgument (this query or its cache is closed, a bad stream),
            OutOfRange (a dense id >= corpus size), NotFound (missing="error"),
            and the other fleche.Error subclasses with the library's message;
            also the failure of an earlier launch() that wait() did not
            report (this run then does nothing: run again).
        """
        b = self._binding()
        self._start(b, stream, L.fl_prepared_run)
        return b.result

    def launch(self, stream: Any = None) -> None:
        """Starts a run without waiting for the host's part of it (one
        fl_prepared_launch, GIL released); wait() then gives its status.

        CUDA, a query of the flat layout whose outputs are all device memory,
        from its second run on: the call enqueues the run (one graph launch)
        on the stream and returns; the cache's answerer thread gathers the
        rows the GPU cannot read in place meanwhile. The outputs are complete
        when the stream reaches the point of this call, provided wait()
        returns without raising. Every other run (host backend, per-table
        layout, the first run, host outputs) answers before returning, as
        run() does: on the host backend the outputs are complete on return
        and wait() has nothing to wait for.

        Args:
            stream: as for run().
        Raises:
            as run(): checks and failures found before the run is enqueued
            (on the host backend, every failure), and the failure of an
            earlier launch that wait() did not report (this launch then does
            nothing: launch again). A failure found by the host's part of
            this launch (an id out of range, missing="error") raises from
            wait(), or else from the next launch() or run().
        """
        self._start(self._binding(), stream, L.fl_prepared_launch)

    def wait(self) -> None:
        """Waits for the host's part of the last launch() (fl_prepared_wait,
        GIL released; not for the stream: device outputs are complete when
        the stream gets there). Returns at once when nothing is in flight
        (nothing launched, host backend, or already waited for).

        Raises:
            InvalidArgument (this query or its cache is closed), OutOfRange,
            NotFound and the other fleche.Error subclasses with the library's
            message, for the last launch's failure, once: that run's outputs
            are undefined and nothing of it is admitted; the query and the
            cache stay usable.
        """
        self._binding()
        self._cache._call_prepared(self._h, L.fl_prepared_wait)

    def _start(self, b: _Binding, stream: Any, call: Any) -> None:
        """run() and launch(): the stream of `stream` (None: the arrays'
        current one), its ordering after the DLPack objects' pending work,
        then call (fl_prepared_run or fl_prepared_launch) on it."""
        if stream is None:
            handle = b.source() if b.source is not None else 0
        else:
            handle = stream_handle(stream)
        for obj, what in b.dlpack:
            dlpack_order(obj, what, handle)
        self._cache._launch(b, handle, self._h, call)

    def close(self) -> None:
        """Destroys the C handle after a run in flight and releases the buffers
        (idempotent); later runs raise InvalidArgument."""
        self._b = None
        self._ids = {}
        self._h.close()

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is not None:
            h.close()

    def __enter__(self) -> "PreparedQuery":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._b is None else f"{len(self._ids)} tables"
        return f"<fleche.PreparedQuery {state} on {self._cache!r}>"
