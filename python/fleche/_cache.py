"""Cache: a cache in front of a Store (fl_cache): its config, the checks and
binding of a query's arrays (query(), prepare()), their stream order, and
the cache's control and statistics calls."""

from __future__ import annotations

import ctypes
import sys
from array import array
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _fast, _lib
from ._buffers import (HOST, empty_like, from_capsule, ids_view, stream_handle, stream_source,
                       torch_facts, torch_order, vectors_view)
from ._handle import Handle, _Owner
from ._lib import lib as L
from ._packed import quick_out, unpack
from ._prepared import PreparedQuery, _Binding
from ._stats import CacheStats, CacheTableStats
from ._store import Store
from ._tables import (_ADMIT_POLICIES, _BACKEND_NAMES, _BACKENDS, _ENCODINGS, _LAYOUTS, _MISSING,
                      TableRef, _choice)
from .errors import InvalidArgument, from_status


class _NoTensor:
    """Stands for torch.Tensor in isinstance checks when torch is not loaded."""


_ABSENT = object()  # query(): no output given for a table

ZERO_COPY_AUTO = (1 << 64) - 1  # FL_ZERO_COPY_AUTO: Cache(zero_copy_rows=...) calibrated at create

_fast.init(np.ndarray, torch_facts, torch_order)
_fast.use_query(ctypes.cast(L.fl_query, ctypes.c_void_p).value)


class Cache(_Owner):
    """A cache in front of a Store (fl_cache): host backend here, CUDA with a GPU.

    Every method is thread-safe; many threads may query at once (each on its
    own stream with CUDA). The cache keeps its store alive, and is destroyed
    before it. Use it as a context manager, or call close().

    Keyword arguments map to fl_config fields; None keeps the library default
    (fl_config_default): budget_bytes 1 GiB, admit_policy "tinylfu",
    admit_probability 0.5 (the coin's), key_bits 0 (auto: 32 when every table's
    ids fit them, else 64), max_load 0.6, watermarks 0.98/0.95,
    unified_entries 0 (set it > 0 to change it later), host_threads 0 (all
    cores), seed 0x5eed, zero_copy_rows fleche.ZERO_COPY_AUTO (CUDA: batches with
    at most that many distinct misses of dense tables read them in place from
    the store; AUTO: the cache times both paths at create and picks the count,
    stats().zero_copy_limit; 0: never).
    backend "auto" picks CUDA when a GPU is usable (env FL_BACKEND=host|cuda
    overrides "auto"). missing: "zero" (absent hashed ids
    answer zero vectors) or "error" (queries raise NotFound). admit_policy:
    "tinylfu" (a missed vector enters when its recent frequency beats the
    evicted entries') or "coin" (admit_probability per missed lookup); None
    keeps the library default.
    """

    def __init__(self, store: Store, *, budget_bytes: Optional[int] = None,
                 backend: str = "auto", layout: str = "flat",
                 admit_probability: Optional[float] = None,
                 admit_policy: Optional[str] = None, key_bits: Optional[int] = None,
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
        if admit_policy is not None:
            cfg.admit_policy = _choice("admit_policy", admit_policy, _ADMIT_POLICIES)
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
        # the device memory _fast.query accepts: the cache's device, or none (HOST)
        self._fast_device = self._device if self._backend == "cuda" else HOST
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
        if (type(queries) is dict and (type(out) is dict or out is None and stream is None)
                and not self.closed):
            # The usual call in C (fleche/_fast.c), which makes the outputs
            # when `out` is None; None: declined, nothing done, the Python
            # path below raises or handles the rare case.
            done = self._fast_call(_fast.query, queries, out, stream_handle(stream))
            if done is not None:
                return done
        b = self._bind(queries, out, stream)
        self._launch(b, b.handle)
        return b.result

    def query_packed(self, tables: Sequence[TableRef], ids: Any, counts: Sequence[int],
                     out: Any = None, stream: Any = None) -> Any:
        """Looks up a batch whose ids come in one array, table after table,
        into one output array: one fl_query, as query() over the slices of
        both. This is how a KeyedJaggedTensor holds a batch (its values(),
        with its length_per_key() as counts); with `out` given, the whole
        call costs Python about as much as one table of query() does.

        Args:
            tables: the tables (names or indices), in the order of their ids,
                each at most once: a list or tuple.
            ids: uint64 or int64 (bits taken as uint64), 1-D, C-contiguous,
                sum(counts) ids: counts[0] of tables[0], then counts[1] of
                tables[1], and so on. NumPy arrays, torch tensors (CPU or
                CUDA) or CuPy arrays.
            counts: the number of ids of each table: a list or tuple of ints.
            out: optional output of the tables' dtype (they must share one),
                C-contiguous, writable, of the kind query() takes: the
                vectors table after table, row after row, as a 1-D array of
                sum(counts[t] * dim[t]) elements, or, when every table has
                dimension dim, as a (sum(counts), dim) array.
            stream: as for query().
        Returns:
            `out`, or a new array of the kind of the ids (as query() makes
            them): (sum(counts), dim) when the tables share dimension dim,
            else 1-D.
        Raises:
            InvalidArgument (tables, counts or arrays that do not match, a
            table named twice, tables of different dtypes, and every check
            of query()), and the errors of query().
        """
        if not self.closed:
            # The usual call in C (fleche/_fast.c), with `out` or, without it,
            # one allocated here; None: declined, nothing done, the Python
            # path below raises or handles the rare case.
            fast_out = out
            if fast_out is None and stream is None:
                fast_out = quick_out(tables, ids, counts, self._keys)
            done = None if fast_out is None else self._fast_call(
                _fast.query_packed, tables, ids, counts, fast_out, stream_handle(stream))
            if done is not None:
                return done
        queries, outs, whole, allocated = unpack(tables, ids, counts, out, self._key_info,
                                                 lambda a: self._stream_of({0: a}, None, stream)[0])
        b = self._bind(queries, outs, stream)
        if allocated and b.torch_device:
            b.allocated = [whole]  # as query()'s outputs: record_stream in _launch
        self._launch(b, b.handle)
        return whole

    def prefetch(self, queries: Mapping[TableRef, Any], stream: Any = None) -> None:
        """Names the ids of a coming query so that their misses are fetched
        from the store and cached now (fl_prefetch), while the GPU runs other
        work (the current batch's model): the query that follows finds them
        as hits. Every id not cached is admitted, whatever the admission
        policy, as far as the pool has room. Counted apart from queries
        (stats().prefetches, prefetch_lookups, prefetch_misses).

        Args:
            queries: table (name or index) -> ids, as for query(); no outputs.
            stream: as for query(). CUDA backend: the rows are cached once the
                stream reaches this call (a query on that stream, or on one
                made to wait for it, finds them); use a stream other than the
                one of the work to overlap. Host backend: cached on return.
        Raises:
            InvalidArgument, OutOfRange and the other errors of query(); a
            call that fails admits nothing of the failing batch (see
            fl_prefetch in docs/API.md for calls split into several).
        """
        if type(queries) is not dict and not isinstance(queries, Mapping):
            raise InvalidArgument(f"prefetch: expected a mapping of table -> ids, got "
                                  f"{type(queries).__name__}")
        handle, _ = self._stream_of(queries, None, stream)
        torch = sys.modules.get("torch")
        tensor = torch.Tensor if torch is not None else _NoTensor
        words: List[int] = []
        owners: List[Any] = []  # the arrays (or DLPack capsules), alive while C reads them
        torch_device = False
        for key, ids in queries.items():
            info = self._info_of(key)
            iv = ids_view(ids, info[3], handle)
            if iv[3] != HOST:
                self._check_devices(key, iv[3])
                torch_device = torch_device or isinstance(ids, tensor)
            words += (info[0], iv[0], iv[1][0], 0)
            owners.append(iv[5])
        if torch_device:
            torch_order(handle, self._device)
        q = array("Q", words)
        self._call(L.fl_prefetch, q.buffer_info()[0], len(owners), handle)

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

    def _fast_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(cache pointer, device, keys, *args): a query's C path in
        fleche._fast, with the cache held open. Its result, or None when C
        declined (nothing done); raises the library's error when fl_query
        failed."""
        ptr = self._h.enter()
        try:
            done = fn(ptr, self._fast_device, self._keys, *args)
            if type(done) is int:
                self._check(done, ptr)
        finally:
            self._h.leave()
        return done

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
        handle, source = self._stream_of(queries, out, stream)
        torch = sys.modules.get("torch")
        tensor = torch.Tensor if torch is not None else _NoTensor
        words: List[int] = []  # the fl_table_query entries, _lib.QUERY_WORDS words each
        owners: List[Any] = []  # keep the arrays (or DLPack capsules) alive while C uses them
        dlpack: List[Tuple[Any, str]] = []  # CUDA DLPack objects, for their stream order
        result: Dict[TableRef, Any] = {}
        torch_device = False
        for key, ids in queries.items():
            info = self._info_of(key)
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

    def _info_of(self, key: TableRef) -> Tuple[int, int, str, str, str]:
        """_key_info(key), from its cache for str and int keys."""
        tk = type(key)
        info = self._keys.get(key) if tk is str or tk is int else None
        return info if info is not None else self._key_info(key)

    def _key_info(self, key: TableRef) -> Tuple[int, int, str, str, str]:
        """(index, dim, dtype name, ids label, out label) of a table key, cached
        for str and int keys."""
        i = self._store.table_index(key)
        t = self._store.tables[i]
        info = (i, t.dim, t.dtype, f"query {key!r} ids", f"query {key!r} out")
        if type(key) is str or type(key) is int:
            self._keys[key] = info
        return info

    def _stream_of(self, queries: Mapping[TableRef, Any], out: Optional[Mapping[TableRef, Any]],
                   stream: Any) -> Tuple[int, Optional[Callable[[], int]]]:
        """(handle, source): the stream of a query with these arrays and
        query()'s `stream` argument, and what gives the stream of
        stream=None (_stream_source)."""
        handle = stream_handle(stream)
        source = self._stream_source(queries, out) if self._backend == "cuda" else None
        if handle is None:
            handle = source() if source is not None else 0
        return handle, source

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

    def reserve(self, keys: int, queries: int, callers: int = 1) -> None:
        """Allocates, ahead of time, the query buffers for `callers` threads
        querying at once (1 to 62), each query of up to `keys` ids in up to
        `queries` tables (fl_cache_reserve): while they stay within these, no
        query allocates. Host backend: no-op."""
        self._call(L.fl_cache_reserve, keys, queries, callers)

    def set_unified_entries(self, n: int) -> None:
        """Sets how many index entries may point into the store (the unified
        index; fl_cache_set_unified_entries). Raises Unsupported for n > 0 on a
        cache created with unified_entries 0: its index has no room for
        pointers."""
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
