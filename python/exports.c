/* exports.c: keeps every function of include/fleche.h in libfleche.so.
 *
 * The library's cc_library targets are static archives, and the linker only
 * takes the archive members that something references; a shared object has
 * no main to reference them. This table references every public function, so
 * the linker keeps them all; python/fleche.lds then exports exactly fl_*.
 * python/tests/test_exports.py checks that every function declared in
 * fleche.h resolves in the built library (add new API functions here). */
#include "include/fleche.h"

#ifdef FL_PYTHON_NEEDS_SYSTEM_MALLOC
#error "build //:fleche_shared with --define=fl_malloc=system: the static jemalloc's initial-exec TLS makes a library that dlopen refuses"
#endif

__attribute__((used)) const void *const fl_python_exports_[] = {
    (const void *)&fl_cache_backend,
    (const void *)&fl_cache_clear,
    (const void *)&fl_cache_create,
    (const void *)&fl_cache_destroy,
    (const void *)&fl_cache_last_error,
    (const void *)&fl_cache_reserve,
    (const void *)&fl_cache_set_unified_entries,
    (const void *)&fl_cache_stats_get,
    (const void *)&fl_cache_stats_reset,
    (const void *)&fl_cache_sync,
    (const void *)&fl_cluster_config_default,
    (const void *)&fl_config_default,
    (const void *)&fl_cuda_device_count,
    (const void *)&fl_encoding_create,
    (const void *)&fl_encoding_decode,
    (const void *)&fl_encoding_destroy,
    (const void *)&fl_encoding_encode,
    (const void *)&fl_encoding_last_error,
    (const void *)&fl_encoding_lossless,
    (const void *)&fl_encoding_report,
    (const void *)&fl_prepared_destroy,
    (const void *)&fl_prepared_launch,
    (const void *)&fl_prepared_run,
    (const void *)&fl_prepared_wait,
    (const void *)&fl_query,
    (const void *)&fl_query_prepare,
    (const void *)&fl_status_name,
    (const void *)&fl_store_copy,
    (const void *)&fl_store_create,
    (const void *)&fl_store_create_cluster,
    (const void *)&fl_store_destroy,
    (const void *)&fl_store_export_hugectr,
    (const void *)&fl_store_export_npy,
    (const void *)&fl_store_fill_synthetic,
    (const void *)&fl_store_gather,
    (const void *)&fl_store_import_hugectr,
    (const void *)&fl_store_import_npy,
    (const void *)&fl_store_last_error,
    (const void *)&fl_store_load,
    (const void *)&fl_store_num_tables,
    (const void *)&fl_store_open_cluster,
    (const void *)&fl_store_remove,
    (const void *)&fl_store_save,
    (const void *)&fl_store_set_local_budget,
    (const void *)&fl_store_stats,
    (const void *)&fl_store_table,
    (const void *)&fl_store_tier_stats_get,
    (const void *)&fl_store_tier_stats_reset,
    (const void *)&fl_store_upsert,
    (const void *)&fl_synthetic_value,
    (const void *)&fl_version,
};
