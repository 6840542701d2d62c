"""Encoding: the flat-key encoding of a set of tables (fl_encoding), on its own.

A cache builds one internally from its store's tables; this class lets a user
see the codes (prefix lengths, collision rates) and encode or decode ids the
way the cache does, e.g. to size key_bits before building a cache.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Sequence, Tuple

import numpy as np

from . import _lib
from ._buffers import host_view, ids_view
from ._handle import Handle, _Owner
from ._lib import lib as L
from ._tables import _ENCODINGS, Table, TableRef, _choice, _Tables, table_descs
from .errors import InvalidArgument, from_status


@dataclass(frozen=True)
class TableCode:
    """One table's code in an encoding (fl_table_code_report)."""

    prefix: int  #: the table-id code, right-aligned in prefix_len bits
    prefix_len: int  #: bits of the code
    feature_bits: int  #: key_bits - prefix_len: bits left for the id
    lossless: bool  #: distinct ids always give distinct keys
    collision_rate: float  #: expected fraction of the corpus's ids sharing a key (0 if lossless)


class Encoding(_Owner, _Tables):
    """The flat-key encoding of `tables` into keys of key_bits (32 or 64) bits
    (fl_encoding). Thread-safe; a context manager, or call close().

    Args:
        tables: the tables, in index order (as given to Store).
        key_bits: 64 (default) or 32.
        scheme: "size_aware" (shorter prefixes for larger tables, the cache's
            default) or "fixed" (one prefix length for every table).
    """

    def __init__(self, tables: Sequence[Table], key_bits: int = 64,
                 scheme: str = "size_aware") -> None:
        descs, _names = table_descs("Encoding", tables)
        code = _choice("scheme", scheme, _ENCODINGS)
        if not isinstance(key_bits, (int, np.integer)) or key_bits < 0:
            raise InvalidArgument(f"Encoding key_bits: expected 32 or 64, got {key_bits!r}")
        out = ctypes.c_void_p()
        st = L.fl_encoding_create(descs, len(descs), key_bits, code, ctypes.byref(out))
        if st != _lib.FL_OK:
            raise from_status(st, L.fl_encoding_last_error(None).decode())
        self._h = Handle(out.value, L.fl_encoding_destroy, "encoding")
        self._set_tables(tables)
        self._key_bits = int(key_bits)
        self._scheme = scheme

    _last_error = L.fl_encoding_last_error

    @property
    def key_bits(self) -> int:
        """The key width in bits, 32 or 64, as created."""
        return self._key_bits

    @property
    def scheme(self) -> str:
        """"size_aware" or "fixed", as created."""
        return self._scheme

    @property
    def lossless(self) -> bool:
        """True when every table is lossless: decode() then inverts encode()."""
        ptr = self._h.enter()
        try:
            return bool(L.fl_encoding_lossless(ptr))
        finally:
            self._h.leave()

    def report(self, table: TableRef) -> TableCode:
        """One table's code (fl_encoding_report)."""
        r = _lib.fl_table_code_report()
        self._call(L.fl_encoding_report, self.table_index(table), ctypes.byref(r))
        return TableCode(r.prefix, r.prefix_len, r.feature_bits, bool(r.lossless),
                         r.collision_rate)

    def encode(self, table: TableRef, ids: Any, *, use_gpu: bool = False) -> np.ndarray:
        """The uint64 keys of a table's ids (fl_encoding_encode).

        Args:
            ids: host ids, uint64 or int64, 1-D, C-contiguous.
            use_gpu: run the query path's encode kernel on the GPU (NoDevice
                without one); the answer is the same.
        Raises:
            OutOfRange: a dense id >= the table's corpus size (the message
                names table, id and index).
        """
        i = self.table_index(table)
        idv = host_view(ids_view(ids, f"encode {self._tables[i].name!r} ids"))
        n = idv[1][0]
        keys = np.empty(n, dtype=np.uint64)
        self._call(L.fl_encoding_encode, i, idv[0], n, keys.ctypes.data, int(bool(use_gpu)))
        return keys

    def decode(self, keys: Any) -> Tuple[np.ndarray, np.ndarray]:
        """(table indices as uint32, ids as uint64) of keys (fl_encoding_decode).

        Raises Unsupported when the encoding is lossy, InvalidArgument for a
        key that no table's id encodes to."""
        kv = host_view(ids_view(keys, "decode keys"))
        n = kv[1][0]
        tables = np.empty(n, dtype=np.uint32)
        ids = np.empty(n, dtype=np.uint64)
        self._call(L.fl_encoding_decode, kv[0], n, tables.ctypes.data, ids.ctypes.data)
        return tables, ids

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._key_bits}-bit {self._scheme}"
        return f"<fleche.Encoding {state}: {[t.name for t in self._tables]}>"
