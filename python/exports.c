/* exports.c: keeps every function of include/fleche.h in libfleche.so, and
 * reports the layout of the structs that the Python package mirrors.
 *
 * The library's cc_library targets are static archives, and the linker only
 * takes the archive members that something references; a shared object has
 * no main to reference them. This table references every public function, so
 * the linker keeps them all; python/fleche.lds then exports exactly fl_*.
 * python/tests/test_stats.py checks that every function declared in
 * fleche.h resolves in the built library (add new API functions here). */
#include <stddef.h>

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

/* ------------------------------------------------ layouts for the package
 *
 * python/fleche/_lib.py mirrors some structs of fleche.h as ctypes
 * Structures, written by hand. At import it reads this table and compares
 * each mirror's size and each field's offset and size with what the compiler
 * made of the header (_lib.check_layout), raising ImportError on a
 * difference. Every field of a mirrored struct has its row here: renaming or
 * removing one in fleche.h stops this file's build, and a field added to the
 * header but not here is reported by python/tests/test_layout.py. Not part of
 * fleche.h's API: only the package calls it. */

typedef struct fl_python_layout_row {
  const char *type;  /* the struct's typedef name, e.g. "fl_config" */
  const char *field; /* a field's name; NULL: the row of the struct itself */
  size_t offset;     /* bytes from the struct's start to the field; 0 for the struct */
  size_t size;       /* bytes of the field, or of the whole struct */
} fl_python_layout_row;

#define FL_STRUCT_ROW(T) {#T, NULL, 0, sizeof(T)}
#define FL_FIELD_ROW(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}

static const fl_python_layout_row fl_python_layout_rows_[] = {
    FL_STRUCT_ROW(fl_table_desc),
    FL_FIELD_ROW(fl_table_desc, name),
    FL_FIELD_ROW(fl_table_desc, corpus_size),
    FL_FIELD_ROW(fl_table_desc, dim),
    FL_FIELD_ROW(fl_table_desc, dtype),
    FL_FIELD_ROW(fl_table_desc, id_kind),

    FL_STRUCT_ROW(fl_table_query),
    FL_FIELD_ROW(fl_table_query, table),
    FL_FIELD_ROW(fl_table_query, ids),
    FL_FIELD_ROW(fl_table_query, n),
    FL_FIELD_ROW(fl_table_query, out),

    FL_STRUCT_ROW(fl_table_code_report),
    FL_FIELD_ROW(fl_table_code_report, prefix),
    FL_FIELD_ROW(fl_table_code_report, prefix_len),
    FL_FIELD_ROW(fl_table_code_report, feature_bits),
    FL_FIELD_ROW(fl_table_code_report, lossless),
    FL_FIELD_ROW(fl_table_code_report, collision_rate),

    FL_STRUCT_ROW(fl_store_table_stats),
    FL_FIELD_ROW(fl_store_table_stats, rows),
    FL_FIELD_ROW(fl_store_table_stats, bytes),
    FL_FIELD_ROW(fl_store_table_stats, lookups),
    FL_FIELD_ROW(fl_store_table_stats, misses),

    FL_STRUCT_ROW(fl_config),
    FL_FIELD_ROW(fl_config, backend),
    FL_FIELD_ROW(fl_config, device),
    FL_FIELD_ROW(fl_config, layout),
    FL_FIELD_ROW(fl_config, key_bits),
    FL_FIELD_ROW(fl_config, encoding),
    FL_FIELD_ROW(fl_config, budget_bytes),
    FL_FIELD_ROW(fl_config, max_load),
    FL_FIELD_ROW(fl_config, admit_probability),
    FL_FIELD_ROW(fl_config, admit_policy),
    FL_FIELD_ROW(fl_config, high_watermark),
    FL_FIELD_ROW(fl_config, low_watermark),
    FL_FIELD_ROW(fl_config, unified_entries),
    FL_FIELD_ROW(fl_config, seed),
    FL_FIELD_ROW(fl_config, host_threads),
    FL_FIELD_ROW(fl_config, missing),
    FL_FIELD_ROW(fl_config, profile),
    FL_FIELD_ROW(fl_config, zero_copy_rows),

    FL_STRUCT_ROW(fl_cache_stats),
    FL_FIELD_ROW(fl_cache_stats, queries),
    FL_FIELD_ROW(fl_cache_stats, lookups),
    FL_FIELD_ROW(fl_cache_stats, hits),
    FL_FIELD_ROW(fl_cache_stats, dram_hits),
    FL_FIELD_ROW(fl_cache_stats, misses),
    FL_FIELD_ROW(fl_cache_stats, admissions),
    FL_FIELD_ROW(fl_cache_stats, evictions),
    FL_FIELD_ROW(fl_cache_stats, invalidations),
    FL_FIELD_ROW(fl_cache_stats, pool_bytes_used),
    FL_FIELD_ROW(fl_cache_stats, pool_bytes),
    FL_FIELD_ROW(fl_cache_stats, index_bytes),
    FL_FIELD_ROW(fl_cache_stats, index_entries),
    FL_FIELD_ROW(fl_cache_stats, index_slots),
    FL_FIELD_ROW(fl_cache_stats, unified_entries),
    FL_FIELD_ROW(fl_cache_stats, ns_index),
    FL_FIELD_ROW(fl_cache_stats, ns_hit_copy),
    FL_FIELD_ROW(fl_cache_stats, ns_miss_fetch),
    FL_FIELD_ROW(fl_cache_stats, ns_admission),
    FL_FIELD_ROW(fl_cache_stats, ns_admission_wait),
    FL_FIELD_ROW(fl_cache_stats, unique_misses),
    FL_FIELD_ROW(fl_cache_stats, ns_store_gather),
    FL_FIELD_ROW(fl_cache_stats, gpu_ns_index),
    FL_FIELD_ROW(fl_cache_stats, gpu_ns_hit_copy),
    FL_FIELD_ROW(fl_cache_stats, ns_miss_host_cpu),
    FL_FIELD_ROW(fl_cache_stats, zero_copy_rows),
    FL_FIELD_ROW(fl_cache_stats, zero_copy_limit),
    FL_FIELD_ROW(fl_cache_stats, rounds_shed),
    FL_FIELD_ROW(fl_cache_stats, rounds_starved),
    FL_FIELD_ROW(fl_cache_stats, slabs_recycled),
    FL_FIELD_ROW(fl_cache_stats, shift_opens),
    FL_FIELD_ROW(fl_cache_stats, allocations),
    FL_FIELD_ROW(fl_cache_stats, zero_copy_stale),
    FL_FIELD_ROW(fl_cache_stats, prefetches),
    FL_FIELD_ROW(fl_cache_stats, prefetch_lookups),
    FL_FIELD_ROW(fl_cache_stats, prefetch_misses),

    FL_STRUCT_ROW(fl_cache_table_stats),
    FL_FIELD_ROW(fl_cache_table_stats, lookups),
    FL_FIELD_ROW(fl_cache_table_stats, hits),
    FL_FIELD_ROW(fl_cache_table_stats, dram_hits),
    FL_FIELD_ROW(fl_cache_table_stats, misses),
};

/* Row i of the table above into *type, *field, *offset and *size: 1; past
 * the last row: 0 (nothing written). Thread-safe (constant data). */
int fl_python_layout(size_t i, const char **type, const char **field, size_t *offset,
                     size_t *size);

int fl_python_layout(size_t i, const char **type, const char **field, size_t *offset,
                     size_t *size) {
  if (i >= sizeof fl_python_layout_rows_ / sizeof fl_python_layout_rows_[0]) return 0;
  const fl_python_layout_row *r = &fl_python_layout_rows_[i];
  *type = r->type;
  *field = r->field;
  *offset = r->offset;
  *size = r->size;
  return 1;
}
