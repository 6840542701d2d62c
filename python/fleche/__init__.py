"""fleche: a flat GPU embedding cache, for NumPy (and PyTorch) users.

ctypes bindings of the C library (include/fleche.h), which is bundled in this
package as libfleche.so. Foreign calls release the GIL.

    import numpy as np, fleche
    with fleche.Store([fleche.Table("user", 1000, 16)]) as store:
        store.fill_synthetic("user", seed=42)
        with fleche.Cache(store, budget_bytes=64 << 20, backend="host") as cache:
            vecs = cache.query({"user": np.array([0, 7, 7], dtype=np.uint64)})["user"]

See docs/PYTHON.md in the repository.
"""

from ._cache import ZERO_COPY_AUTO, Cache
from ._encoding import Encoding, TableCode
from ._lib import cuda_device_count, library_path, version
from ._prepared import PreparedQuery
from ._stats import CacheStats, CacheTableStats, StoreTableStats
from ._store import Store, synthetic_value
from ._tables import Table
from .errors import (
    CudaError,
    Error,
    FormatError,
    InvalidArgument,
    IoError,
    NoDevice,
    NotFound,
    OutOfMemory,
    OutOfRange,
    Unsupported,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "Cache", "CacheStats", "CacheTableStats", "PreparedQuery", "Store", "StoreTableStats", "Table",
    "Encoding", "TableCode", "cuda_device_count", "synthetic_value", "version", "library_path",
    "Error", "InvalidArgument", "OutOfRange", "NotFound", "OutOfMemory", "CudaError",
    "NoDevice", "IoError", "FormatError", "Unsupported", "Unavailable", "ZERO_COPY_AUTO",
]
