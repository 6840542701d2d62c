"""Lifetime of a native handle (fl_store *, fl_cache *) shared by Python threads.

A handle counts the calls in flight; close() waits for them, then destroys the
native object, so closing from one thread while another queries is safe (the
query finishes first; later calls raise). A store's handle also counts the
caches over it ("dependents"): the store is destroyed only after its last
cache, whatever order the garbage collector finalizes them in.

_Owner is what the Python objects over a handle (Store, Cache, Encoding)
share: close(), use as a context manager, a finalizer, and calls that raise
the exception of a failed status with the handle's last message.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, TypeVar

from . import _lib
from .errors import InvalidArgument, from_status

_T = TypeVar("_T", bound="_Owner")


class Handle:
    """A native pointer with in-flight call counting and ordered destruction."""

    __slots__ = ("ptr", "_destroy", "_what", "_lock", "_cond", "_active", "_closed", "_deps",
                 "_pending", "_parent")

    def __init__(self, ptr: int, destroy: Callable[[int], None], what: str,
                 parent: Optional["Handle"] = None) -> None:
        self.ptr: Optional[int] = ptr
        self._destroy = destroy
        self._what = what
        # enter() and leave() take the lock itself (a C context manager: a
        # query pays for two); close() waits on the condition over it.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active = 0
        self._closed = False
        self._deps = 0
        self._pending = False
        self._parent = parent
        if parent is not None:
            with parent._cond:
                parent._deps += 1

    @property
    def closed(self) -> bool:
        return self._closed

    def enter(self) -> int:
        """Starts a call: the pointer, or InvalidArgument when closed. Pair with leave()."""
        with self._lock:
            if self._closed:
                raise InvalidArgument(f"the {self._what} is closed")
            self._active += 1
            return self.ptr  # type: ignore[return-value]

    def leave(self) -> None:
        """Ends a call started by enter()."""
        with self._lock:
            self._active -= 1
            if self._active == 0 and self._closed:  # close() is waiting
                self._cond.notify_all()

    def close(self) -> None:
        """Refuses new calls, waits for those in flight, destroys the native object
        (a store with caches left: when the last of them is destroyed)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            while self._active:
                self._cond.wait()
            if self._deps:
                self._pending = True
                return
        self._destroy_now()

    def _destroy_now(self) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr:
            self._destroy(ptr)
        if self._parent is not None:
            self._parent._dependent_gone()
            self._parent = None

    def _dependent_gone(self) -> None:
        with self._cond:
            self._deps -= 1
            ready = self._deps == 0 and self._pending
            if ready:
                self._pending = False
        if ready:
            self._destroy_now()


class _Owner:
    """What Store, Cache and Encoding share about their lifetime: a C handle in
    self._h (a Handle), the fl_*_last_error of its kind, close(), use
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
