"""ctypes declarations of include/fleche.h and the loaded libfleche.so.

Every function is declared with argtypes/restype. The library is a ctypes
CDLL, so each foreign call releases the GIL while it runs (ctypes does that for
CDLL functions): queries from several Python threads run in parallel in C.
The structs are mirrored by hand; at import, check_layout compares each
mirror with the layout the library reports, and raises ImportError on a
difference.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Dict, Optional, Tuple, Type

# fl_status
FL_OK = 0
FL_ERR_INVALID_ARGUMENT = 1
FL_ERR_OUT_OF_RANGE = 2
FL_ERR_NOT_FOUND = 3
FL_ERR_OUT_OF_MEMORY = 4
FL_ERR_CUDA = 5
FL_ERR_NO_DEVICE = 6
FL_ERR_IO = 7
FL_ERR_FORMAT = 8
FL_ERR_UNSUPPORTED = 9
FL_ERR_UNAVAILABLE = 10

# enums
FL_FP32, FL_FP16 = 0, 1
FL_IDS_DENSE, FL_IDS_HASHED = 0, 1
FL_MISSING_ZERO, FL_MISSING_ERROR = 0, 1
FL_ENCODING_SIZE_AWARE, FL_ENCODING_FIXED = 0, 1
FL_BACKEND_AUTO, FL_BACKEND_HOST, FL_BACKEND_CUDA = 0, 1, 2
FL_LAYOUT_FLAT, FL_LAYOUT_PER_TABLE = 0, 1
FL_ADMIT_COIN, FL_ADMIT_TINYLFU = 0, 1


class fl_table_desc(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("corpus_size", c_uint64),
        ("dim", c_uint32),
        ("dtype", c_int),
        ("id_kind", c_int),
    ]


class fl_table_query(Structure):
    _fields_ = [
        ("table", c_uint32),
        ("ids", c_void_p),
        ("n", c_size_t),
        ("out", c_void_p),
    ]


# Cache.query packs its fl_table_query entries as 4 uint64 words (table,
# ids, n, out): the uint32 table and its 4 bytes of padding fill word 0 on
# the little-endian LP64 machines this library is built for.
QUERY_WORDS = 4
assert (ctypes.sizeof(fl_table_query) == 8 * QUERY_WORDS and fl_table_query.ids.offset == 8
        and fl_table_query.n.offset == 16 and fl_table_query.out.offset == 24
        and sys.byteorder == "little"), "fl_table_query is not 4 little-endian words here"


class fl_table_code_report(Structure):
    _fields_ = [
        ("prefix", c_uint64),
        ("prefix_len", c_uint32),
        ("feature_bits", c_uint32),
        ("lossless", c_int),
        ("collision_rate", c_double),
    ]


class fl_store_table_stats(Structure):
    _fields_ = [
        ("rows", c_uint64),
        ("bytes", c_uint64),
        ("lookups", c_uint64),
        ("misses", c_uint64),
    ]


class fl_config(Structure):
    _fields_ = [
        ("backend", c_int),
        ("device", c_int),
        ("layout", c_int),
        ("key_bits", c_uint32),
        ("encoding", c_int),
        ("budget_bytes", c_uint64),
        ("max_load", c_double),
        ("admit_probability", c_double),
        ("admit_policy", c_int),
        ("high_watermark", c_double),
        ("low_watermark", c_double),
        ("unified_entries", c_uint64),
        ("seed", c_uint64),
        ("host_threads", c_uint32),
        ("missing", c_int),
        ("profile", c_int),
        ("zero_copy_rows", c_uint64),
    ]


class fl_cache_stats(Structure):
    _fields_ = [
        ("queries", c_uint64),
        ("lookups", c_uint64),
        ("hits", c_uint64),
        ("dram_hits", c_uint64),
        ("misses", c_uint64),
        ("admissions", c_uint64),
        ("evictions", c_uint64),
        ("invalidations", c_uint64),
        ("pool_bytes_used", c_uint64),
        ("pool_bytes", c_uint64),
        ("index_bytes", c_uint64),
        ("index_entries", c_uint64),
        ("index_slots", c_uint64),
        ("unified_entries", c_uint64),
        ("ns_index", c_double),
        ("ns_hit_copy", c_double),
        ("ns_miss_fetch", c_double),
        ("ns_admission", c_double),
        ("ns_admission_wait", c_double),
        ("unique_misses", c_uint64),
        ("ns_store_gather", c_double),
        ("gpu_ns_index", c_double),
        ("gpu_ns_hit_copy", c_double),
        ("ns_miss_host_cpu", c_double),
        ("zero_copy_rows", c_uint64),
        ("zero_copy_limit", c_uint64),
        ("rounds_shed", c_uint64),
        ("rounds_starved", c_uint64),
        ("slabs_recycled", c_uint64),
        ("shift_opens", c_uint64),
        ("allocations", c_uint64),
        ("zero_copy_stale", c_uint64),
        ("prefetches", c_uint64),
        ("prefetch_lookups", c_uint64),
        ("prefetch_misses", c_uint64),
    ]


class fl_cache_table_stats(Structure):
    _fields_ = [
        ("lookups", c_uint64),
        ("hits", c_uint64),
        ("dram_hits", c_uint64),
        ("misses", c_uint64),
    ]


def library_path() -> Path:
    """Path of the libfleche.so this package loads (env FLECHE_LIBRARY overrides)."""
    env = os.environ.get("FLECHE_LIBRARY")
    return Path(env) if env else Path(__file__).resolve().parent / "libfleche.so"


def _load() -> ctypes.CDLL:
    path = library_path()
    if not path.is_file():
        raise ImportError(
            f"fleche: {path} is missing; install the package with `pip install ./python` "
            "from the repository checkout (it builds the library with ./bazelw)"
        )
    return ctypes.CDLL(str(path))


lib = _load()

_status = c_int
_store_p = c_void_p
_cache_p = c_void_p
_prepared_p = c_void_p
_encoding_p = c_void_p
_u64p = c_void_p  # ids: raw addresses of NumPy / device buffers


def _decl(name: str, restype, *argtypes) -> None:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


_decl("fl_status_name", c_char_p, c_int)
_decl("fl_version", c_char_p)
_decl("fl_cuda_device_count", c_int)

_decl("fl_encoding_create", _status, POINTER(fl_table_desc), c_uint32, c_uint32, c_int,
      POINTER(_encoding_p))
_decl("fl_encoding_destroy", None, _encoding_p)
_decl("fl_encoding_last_error", c_char_p, _encoding_p)
_decl("fl_encoding_lossless", c_int, _encoding_p)
_decl("fl_encoding_report", _status, _encoding_p, c_uint32, POINTER(fl_table_code_report))
_decl("fl_encoding_encode", _status, _encoding_p, c_uint32, _u64p, c_size_t, _u64p, c_int)
_decl("fl_encoding_decode", _status, _encoding_p, _u64p, c_size_t, c_void_p, _u64p)

_decl("fl_store_create", _status, POINTER(fl_table_desc), c_uint32, c_uint32, POINTER(_store_p))
_decl("fl_store_destroy", None, _store_p)
_decl("fl_store_last_error", c_char_p, _store_p)
_decl("fl_store_num_tables", c_uint32, _store_p)
_decl("fl_store_table", _status, _store_p, c_uint32, POINTER(fl_table_desc))
_decl("fl_store_fill_synthetic", _status, _store_p, c_uint32, c_uint64)
_decl("fl_synthetic_value", c_float, c_uint64, c_uint32, c_uint64, c_uint32)
_decl("fl_store_upsert", _status, _store_p, c_uint32, _u64p, c_size_t, c_void_p)
_decl("fl_store_remove", _status, _store_p, c_uint32, _u64p, c_size_t)
_decl("fl_store_gather", _status, _store_p, POINTER(fl_table_query), c_uint32, c_int,
      POINTER(c_uint64))
_decl("fl_store_stats", _status, _store_p, c_uint32, POINTER(fl_store_table_stats))
_decl("fl_store_save", _status, _store_p, c_char_p)
_decl("fl_store_load", _status, c_char_p, c_uint32, POINTER(_store_p))
_decl("fl_store_import_npy", _status, _store_p, c_uint32, c_char_p, c_char_p)
_decl("fl_store_export_npy", _status, _store_p, c_uint32, c_char_p, c_char_p)
_decl("fl_store_import_hugectr", _status, _store_p, c_uint32, c_char_p)
_decl("fl_store_export_hugectr", _status, _store_p, c_uint32, c_char_p)

_decl("fl_config_default", None, POINTER(fl_config))
_decl("fl_cache_create", _status, _store_p, POINTER(fl_config), POINTER(_cache_p))
_decl("fl_cache_destroy", None, _cache_p)
_decl("fl_cache_last_error", c_char_p, _cache_p)
_decl("fl_cache_backend", c_int, _cache_p)
# queries: an address (a ctypes array of fl_table_query, or QUERY_WORDS words each)
_decl("fl_query", _status, _cache_p, c_void_p, c_uint32, c_void_p)
_decl("fl_prefetch", _status, _cache_p, c_void_p, c_uint32, c_void_p)
_decl("fl_query_prepare", _status, _cache_p, c_void_p, c_uint32, POINTER(_prepared_p))
_decl("fl_prepared_run", _status, _prepared_p, c_void_p)
_decl("fl_prepared_launch", _status, _prepared_p, c_void_p)
_decl("fl_prepared_wait", _status, _prepared_p)
_decl("fl_prepared_destroy", None, _prepared_p)
_decl("fl_cache_sync", _status, _cache_p)
_decl("fl_cache_reserve", _status, _cache_p, c_uint64, c_uint32, c_uint32)
_decl("fl_cache_set_unified_entries", _status, _cache_p, c_uint64)
_decl("fl_cache_clear", _status, _cache_p)
_decl("fl_cache_stats_get", _status, _cache_p, POINTER(fl_cache_stats),
      POINTER(fl_cache_table_stats), c_uint32)
_decl("fl_cache_stats_reset", None, _cache_p)


def version() -> str:
    """The C library's version, "MAJOR.MINOR.PATCH" (fl_version)."""
    return lib.fl_version().decode()


def cuda_device_count() -> int:
    """Number of usable CUDA devices; 0 without a GPU or driver (fl_cuda_device_count)."""
    return int(lib.fl_cuda_device_count())


# ------------------------------------------------------------ layout check

MIRRORS: Tuple[Type[Structure], ...] = (
    fl_table_desc, fl_table_query, fl_table_code_report, fl_store_table_stats, fl_config,
    fl_cache_stats, fl_cache_table_stats,
)  # every Structure above, each named as the C struct it mirrors

# struct name -> {field name, or None for the struct itself: (offset, size) in bytes}
Layouts = Dict[str, Dict[Optional[str], Tuple[int, int]]]


def c_layouts() -> Layouts:
    """The layouts of the mirrored structs as the library was compiled: the
    rows of fl_python_layout (python/exports.c)."""
    if not hasattr(lib, "fl_python_layout"):
        raise ImportError(f"fleche: {library_path()} does not export fl_python_layout, so its "
                          "structs cannot be checked against this package: rebuild it "
                          "(pip install ./python)")
    _decl("fl_python_layout", c_int, c_size_t, POINTER(c_char_p), POINTER(c_char_p),
          POINTER(c_size_t), POINTER(c_size_t))
    layouts: Layouts = {}
    type_, field, offset, size = c_char_p(), c_char_p(), c_size_t(), c_size_t()
    i = 0
    while lib.fl_python_layout(i, ctypes.byref(type_), ctypes.byref(field), ctypes.byref(offset),
                               ctypes.byref(size)):
        name = field.value.decode() if field.value is not None else None
        layouts.setdefault((type_.value or b"").decode(), {})[name] = (offset.value, size.value)
        i += 1
    return layouts


def check_layout(mirror: Type[Structure], layouts: Layouts) -> None:
    """Raises ImportError, naming the struct and both values, when the ctypes
    Structure `mirror` differs from the C struct of its class name in
    `layouts` (c_layouts()): in size, or in a field's name, offset or size."""
    name = mirror.__name__
    ours = f"its ctypes mirror ({__name__}.{name})"
    theirs = f"libfleche.so ({library_path()})"
    c = layouts.get(name)
    if c is None:
        raise ImportError(f"fleche: {theirs} reports no layout of struct {name}; "
                          "add its rows to python/exports.c")
    c_size, py_size = c[None][1], ctypes.sizeof(mirror)
    if c_size != py_size:
        raise ImportError(f"fleche: struct {name} is {c_size} bytes in {theirs} but {py_size} "
                          f"bytes in {ours}; update the mirror to include/fleche.h")
    py_fields = {f[0]: (getattr(mirror, f[0]).offset, getattr(mirror, f[0]).size)
                 for f in mirror._fields_}
    fields = {f for f in c if f is not None} | set(py_fields)
    # by offset, C's field first: a renamed field is reported by its C name
    for field in sorted(fields, key=lambda f: ((c.get(f) or py_fields[f])[0], f not in c, f)):
        c_at, py_at = c.get(field), py_fields.get(field)
        if c_at != py_at:
            raise ImportError(f"fleche: field {name}.{field} is {_where(c_at)} in {theirs} but "
                              f"{_where(py_at)} in {ours}; update the mirror to include/fleche.h")


def _where(at: Optional[Tuple[int, int]]) -> str:
    return "absent" if at is None else f"at offset {at[0]} ({at[1]} bytes)"


_LAYOUTS = c_layouts()
for _mirror in MIRRORS:
    check_layout(_mirror, _LAYOUTS)
