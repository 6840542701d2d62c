"""Exceptions: one subclass of fleche.Error per fl_status.

A failed C call raises the subclass of its status with the library's message
(fl_store_last_error / fl_cache_last_error: it names the table, id, file or
offset). Mistakes the package catches before calling C (dtype, shape,
contiguity, unknown table names) raise InvalidArgument (a ValueError too).
"""

from __future__ import annotations

from typing import Dict, Type

from . import _lib


class Error(Exception):
    """Base of every fleche exception.

    Attributes:
        status: the fl_status code (int, 1..9).
        status_name: its C name, e.g. "FL_ERR_FORMAT".
        message: the library's message (or the package's, for checks done in Python).
    """

    status: int = -1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def status_name(self) -> str:
        return _lib.lib.fl_status_name(self.status).decode()

    def __str__(self) -> str:
        return self.message


class InvalidArgument(Error, ValueError):
    """FL_ERR_INVALID_ARGUMENT: bad config, unknown table, bad buffers, wrong dtype/shape."""

    status = _lib.FL_ERR_INVALID_ARGUMENT


class OutOfRange(Error, IndexError):
    """FL_ERR_OUT_OF_RANGE: a dense table's id >= its corpus size."""

    status = _lib.FL_ERR_OUT_OF_RANGE


class NotFound(Error, LookupError):
    """FL_ERR_NOT_FOUND: an id a hashed table does not hold, under missing='error'."""

    status = _lib.FL_ERR_NOT_FOUND


class OutOfMemory(Error, MemoryError):
    """FL_ERR_OUT_OF_MEMORY: a host or GPU allocation failed."""

    status = _lib.FL_ERR_OUT_OF_MEMORY


class CudaError(Error):
    """FL_ERR_CUDA: a CUDA call failed; the message names it."""

    status = _lib.FL_ERR_CUDA


class NoDevice(Error):
    """FL_ERR_NO_DEVICE: the CUDA backend was asked for and no GPU is usable."""

    status = _lib.FL_ERR_NO_DEVICE


class IoError(Error, OSError):
    """FL_ERR_IO: opening, reading or writing a file failed (also an OSError)."""

    status = _lib.FL_ERR_IO


class FormatError(Error):
    """FL_ERR_FORMAT: a file is truncated, corrupted or of another format."""

    status = _lib.FL_ERR_FORMAT


class Unsupported(Error):
    """FL_ERR_UNSUPPORTED: a valid request this build (or this package) cannot serve."""

    status = _lib.FL_ERR_UNSUPPORTED


class Unavailable(Error):
    """FL_ERR_UNAVAILABLE: a remote tier (Redis Cluster) did not answer in time."""

    status = _lib.FL_ERR_UNAVAILABLE


BY_STATUS: Dict[int, Type[Error]] = {
    cls.status: cls
    for cls in (InvalidArgument, OutOfRange, NotFound, OutOfMemory, CudaError, NoDevice,
                IoError, FormatError, Unsupported, Unavailable)
}


def from_status(status: int, message: str) -> Error:
    """The exception of a failed call's status, carrying `message`."""
    cls = BY_STATUS.get(status)
    if cls is None:
        err = Error(f"status {status}: {message}")
        err.status = status
        return err
    return cls(message or _lib.lib.fl_status_name(status).decode())
