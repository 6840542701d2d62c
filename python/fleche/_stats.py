"""The statistics a Store and a Cache report, as frozen dataclasses
(fl_store_table_stats, fl_cache_stats, fl_cache_table_stats)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict


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
    zero_copy_limit: int
    rounds_shed: int
    rounds_starved: int
    slabs_recycled: int
    shift_opens: int
    allocations: int
    zero_copy_stale: int
    prefetches: int
    prefetch_lookups: int
    prefetch_misses: int
    tables: Dict[str, CacheTableStats] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float:
        """hits / lookups (0.0 before any lookup)."""
        return self.hits / self.lookups if self.lookups else 0.0

    def as_dict(self) -> Dict[str, Any]:
        """The statistics as a plain dict (per-table entries as dicts too)."""
        return asdict(self)
