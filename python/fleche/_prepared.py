"""PreparedQuery: a query whose buffers are bound once (Cache.prepare) and run
many times (fl_prepared_*); and _Binding, the checked buffers of one query
and its fl_query arguments, which Cache.query builds at each call."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ._buffers import dlpack_order, stream_handle
from ._handle import Handle
from ._lib import lib as L
from ._tables import TableRef
from .errors import InvalidArgument

if TYPE_CHECKING:
    from ._cache import Cache


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
