/* fleche.h: the public C API of the flat GPU embedding cache.
 *
 * Conventions (learn them once):
 * - Every name starts with fl_. Only opaque handle pointers cross the API:
 *   fl_store (the CPU-DRAM tier holding every embedding), fl_cache (the GPU or
 *   host cache in front of a store) and fl_encoding (a flat-key encoding).
 *   Each has a _create/_destroy pair; _destroy accepts NULL.
 * - Calls return fl_status; FL_OK is 0. After a failed call, the handle's
 *   _last_error() gives a message that names what was wrong (table, id, file,
 *   offset). A failed call changes nothing: store and cache are as they were.
 * - Buffers are a pointer plus a count of elements (ids or vectors), never of
 *   bytes unless the name says bytes. Ids are uint64_t. A vector is `dim`
 *   consecutive elements of its table's element type: float for FL_FP32,
 *   IEEE binary16 bit patterns (uint16_t) for FL_FP16.
 * - Pointers documented as "non-NULL" are checked and rejected with
 *   FL_ERR_INVALID_ARGUMENT (not a crash).
 * - CUDA streams are passed as void * (a cudaStream_t), so this header needs no
 *   CUDA include. NULL is the legacy default stream.
 * - Thread safety is stated for every call in docs/API.md and below.
 */
#ifndef FLECHE_H
#define FLECHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum fl_status {
  FL_OK = 0,
  FL_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, bad config, unknown table */
  FL_ERR_OUT_OF_RANGE = 2,     /* a dense table's id >= its corpus size */
  FL_ERR_NOT_FOUND = 3,        /* missing id under FL_MISSING_ERROR */
  FL_ERR_OUT_OF_MEMORY = 4,    /* host or GPU allocation failed */
  FL_ERR_CUDA = 5,             /* a CUDA call failed; the message names it */
  FL_ERR_NO_DEVICE = 6,        /* CUDA backend asked for, no usable GPU */
  FL_ERR_IO = 7,               /* open/read/write of a file failed */
  FL_ERR_FORMAT = 8,           /* a file is truncated, corrupted or foreign */
  FL_ERR_UNSUPPORTED = 9,      /* valid request this build cannot serve */
  FL_ERR_UNAVAILABLE = 10      /* a remote tier (Redis Cluster) did not answer in time */
} fl_status;

/* Static name of a status ("FL_ERR_FORMAT"). Thread-safe. */
const char *fl_status_name(fl_status s);

/* Library version "MAJOR.MINOR.PATCH". Thread-safe. */
const char *fl_version(void);

/* Number of usable CUDA devices (0 without a GPU or driver). Thread-safe. */
int fl_cuda_device_count(void);

/* ---------------------------------------------------------------- tables */

typedef enum fl_dtype { FL_FP32 = 0, FL_FP16 = 1 } fl_dtype;

typedef enum fl_id_kind {
  FL_IDS_DENSE = 0,  /* ids are 0 .. corpus_size-1 (a dictionary-encoded column) */
  FL_IDS_HASHED = 1  /* ids are raw 64-bit values (e.g. Criteo's 32-bit hex hashes) */
} fl_id_kind;

typedef struct fl_table_desc {
  const char *name;     /* copied at create time; NULL names the table "t<i>" */
  uint64_t corpus_size; /* dense: number of rows; hashed: expected distinct ids */
  uint32_t dim;         /* elements per vector, 1 .. 4096 */
  fl_dtype dtype;
  fl_id_kind id_kind;
} fl_table_desc;

/* One table's part of a batched request: `n` ids of table `table`, answered
 * into `out` (n * dim elements of the table's dtype, row i for ids[i]). */
typedef struct fl_table_query {
  uint32_t table;
  const uint64_t *ids;
  size_t n;
  void *out;
} fl_table_query;

/* What to do with an id that a hashed table does not hold. */
typedef enum fl_missing {
  FL_MISSING_ZERO = 0, /* answer a zero vector and count it as missing */
  FL_MISSING_ERROR = 1 /* fail the call with FL_ERR_NOT_FOUND */
} fl_missing;

/* ------------------------------------------------------------- encoding */

typedef enum fl_encoding_scheme {
  FL_ENCODING_SIZE_AWARE = 0, /* shorter prefixes for larger tables */
  FL_ENCODING_FIXED = 1       /* one prefix length for every table (baseline) */
} fl_encoding_scheme;

typedef struct fl_encoding fl_encoding;

/* One table's code in a flat-key encoding. */
typedef struct fl_table_code_report {
  uint64_t prefix;         /* the table-id code, right-aligned in prefix_len bits */
  uint32_t prefix_len;     /* bits of the code */
  uint32_t feature_bits;   /* key_bits - prefix_len */
  int lossless;            /* 1: distinct ids always give distinct keys */
  double collision_rate;   /* expected fraction of the corpus's ids that share a key
                              with another id of the same table (0 when lossless) */
} fl_table_code_report;

/* Builds the encoding of `n` tables into flat keys of key_bits (32 or 64).
 * Thread-safe (no shared state). */
fl_status fl_encoding_create(const fl_table_desc *tables, uint32_t n, uint32_t key_bits,
                             fl_encoding_scheme scheme, fl_encoding **out);
void fl_encoding_destroy(fl_encoding *e);
/* Message of the calling thread's last failed call on `e` (or on
 * fl_encoding_create when e is NULL); "" when none. */
const char *fl_encoding_last_error(const fl_encoding *e);
/* 1 when every table is lossless. */
int fl_encoding_lossless(const fl_encoding *e);
fl_status fl_encoding_report(const fl_encoding *e, uint32_t table, fl_table_code_report *out);
/* Encodes n ids of one table into keys (host memory). With use_gpu != 0 the
 * batch runs on the GPU through the same kernel code as queries
 * (FL_ERR_NO_DEVICE without one). Dense ids >= corpus give FL_ERR_OUT_OF_RANGE
 * naming table and id. Thread-safe. */
fl_status fl_encoding_encode(const fl_encoding *e, uint32_t table, const uint64_t *ids,
                             size_t n, uint64_t *keys, int use_gpu);
/* Inverse of encode for lossless encodings: table and id of each key.
 * FL_ERR_UNSUPPORTED when the encoding is lossy. Thread-safe. */
fl_status fl_encoding_decode(const fl_encoding *e, const uint64_t *keys, size_t n,
                             uint32_t *tables, uint64_t *ids);

/* ---------------------------------------------------------------- store */

typedef struct fl_store fl_store;

/* Creates an empty store of n_tables tables. Dense tables start with every row
 * zero; hashed tables start empty. `threads` sizes the gather pool
 * (0 = fl_store_default_threads()). */
fl_status fl_store_create(const fl_table_desc *tables, uint32_t n_tables, uint32_t threads,
                          fl_store **out);
/* The gather pool's size that threads = 0 gives: half the online cores, at
 * least 1; the other half stays for the server's own threads. */
uint32_t fl_store_default_threads(void);
/* The store's gather pool size, the calling thread included. */
uint32_t fl_store_threads(const fl_store *s);
void fl_store_destroy(fl_store *s);
/* Message of the calling thread's last failed call on `s` ("" when none;
 * s NULL: the last failed fl_store_create/fl_store_load). */
const char *fl_store_last_error(const fl_store *s);
uint32_t fl_store_num_tables(const fl_store *s);
/* Table descriptor; out->name stays valid while the store lives. */
fl_status fl_store_table(const fl_store *s, uint32_t table, fl_table_desc *out);

/* Deterministic synthetic model: every row of a dense table gets
 * fl_synthetic_value(seed, table, id, j) (rounded to fp16 for fp16 tables). For
 * a hashed table, rows are created for ids 0..corpus_size-1 scrambled by the
 * table's fixed bijection (see docs/API.md). Thread-safe with queries. */
fl_status fl_store_fill_synthetic(fl_store *s, uint32_t table, uint64_t seed);
/* The value fl_store_fill_synthetic writes at element j of (table, id). */
float fl_synthetic_value(uint64_t seed, uint32_t table, uint64_t id, uint32_t j);

/* Inserts or overwrites n rows (vectors: n * dim elements of the table's dtype).
 * Readers never see a torn vector; caches over the store drop the old values.
 * Thread-safe with every other call on the store. */
fl_status fl_store_upsert(fl_store *s, uint32_t table, const uint64_t *ids, size_t n,
                          const void *vectors);
/* Removes n rows of a hashed table (absent ids are ignored). Dense tables hold
 * every id: FL_ERR_INVALID_ARGUMENT. Thread-safe. */
fl_status fl_store_remove(fl_store *s, uint32_t table, const uint64_t *ids, size_t n);
/* Batched multi-threaded lookup: for each query, gathers its rows into q.out
 * (host memory). missing[i] (optional, n_queries entries) receives the number
 * of ids query i did not find. Thread-safe. */
fl_status fl_store_gather(fl_store *s, const fl_table_query *queries, uint32_t n_queries,
                          fl_missing policy, uint64_t *missing);

typedef struct fl_store_table_stats {
  uint64_t rows;    /* rows held */
  uint64_t bytes;   /* bytes of vectors held */
  uint64_t lookups; /* ids looked up since create */
  uint64_t misses;  /* of which not found */
} fl_store_table_stats;
fl_status fl_store_stats(const fl_store *s, uint32_t table, fl_store_table_stats *out);

/* Model files (formats in docs/FORMATS.md). Loading is all or nothing: a
 * truncated or corrupted file fails with FL_ERR_FORMAT naming file and byte
 * offset, and nothing of it becomes visible. Thread-safe with queries. */
/* Our own format: header, per-table metadata, rows, CRC-32C checksums. */
fl_status fl_store_save(fl_store *s, const char *path);
fl_status fl_store_load(const char *path, uint32_t threads, fl_store **out);
/* NumPy pair: ids_path holds int64 ids of shape (n,), vectors_path float32 or
 * float16 of shape (n, dim), matching the table's dtype. Upserts the rows. */
fl_status fl_store_import_npy(fl_store *s, uint32_t table, const char *ids_path,
                              const char *vectors_path);
fl_status fl_store_export_npy(fl_store *s, uint32_t table, const char *ids_path,
                              const char *vectors_path);
/* HugeCTR sparse model folder: `key` (int64 ids) and `emb_vector` (float32
 * rows) files in `folder`. fp32 tables only. Upserts the rows. */
fl_status fl_store_import_hugectr(fl_store *s, uint32_t table, const char *folder);
fl_status fl_store_export_hugectr(fl_store *s, uint32_t table, const char *folder);

/* ------------------------------------------------- store over a Redis Cluster */

/* A store whose full model lives in a Redis Cluster (docs/TIERS.md): the local
 * DRAM tables become a bounded cache of the cluster's rows (CLOCK eviction
 * within local_budget_bytes); gathers fetch what the local tier lacks from the
 * cluster, pipelined per node and batched per hash slot; upserts and removes
 * write the cluster and invalidate every process's local and cache copies. A
 * row that cannot be fetched fails the call (FL_ERR_UNAVAILABLE naming node,
 * slot and key), never a wrong or zero vector. */
typedef struct fl_cluster_config {
  const char *seed;            /* any node: "host:port" or "redis://host:port"; non-NULL, copied */
  const char *ns;              /* key namespace of the model, default "fl"; copied */
  uint64_t local_budget_bytes; /* vector bytes the local tier may hold, 0 = none (every
                                  row is fetched), default 0 */
  uint32_t buckets;            /* hash-tag buckets of a new model (fixed by the model's
                                  creator, read back by others), default 1024 */
  uint32_t connect_timeout_ms; /* one connect, default 500 */
  uint32_t io_timeout_ms;      /* one reply, default 1000 */
  uint32_t retry_ms;           /* how long a call retries an unreachable slot (failover,
                                  migration, cluster down) before FL_ERR_UNAVAILABLE,
                                  default 10000 */
  uint32_t heartbeat_ms;       /* invalidation channel check period; bounds staleness
                                  after a lost message (docs/TIERS.md), default 100 */
} fl_cluster_config;

/* Fills every field with its default (seed NULL). Thread-safe. */
void fl_cluster_config_default(fl_cluster_config *cfg);
/* A store over the cluster's model cfg->ns. When the cluster has no such
 * model yet, it is created with these tables (no rows: dense rows read as
 * zero, hashed ids as missing); otherwise the tables must equal the model's
 * (FL_ERR_INVALID_ARGUMENT naming the first difference). FL_ERR_UNAVAILABLE
 * when the cluster cannot be reached. */
fl_status fl_store_create_cluster(const fl_table_desc *tables, uint32_t n_tables,
                                  uint32_t threads, const fl_cluster_config *cfg,
                                  fl_store **out);
/* A store over the cluster's existing model cfg->ns, its tables read from
 * the cluster (FL_ERR_NOT_FOUND when there is none). */
fl_status fl_store_open_cluster(const fl_cluster_config *cfg, uint32_t threads, fl_store **out);
/* Changes the local tier's budget (rows over it are evicted by later fills).
 * FL_ERR_INVALID_ARGUMENT for a store not over a cluster. Thread-safe. */
fl_status fl_store_set_local_budget(fl_store *s, uint64_t bytes);

/* Called now and then by fl_store_copy: rows of the table copied so far. */
typedef void (*fl_progress_fn)(void *ctx, uint64_t done, uint64_t total);
/* Copies every row of src's table into dst's table of the same number (same
 * dim and dtype), e.g. a loaded model into a cluster store: written in
 * batches; a cluster store (pipelined) then publishes one invalidation of
 * the whole table, a plain one tells its caches each batch's ids. progress
 * may be NULL. src's writers wait while it runs. */
fl_status fl_store_copy(fl_store *dst, fl_store *src, uint32_t table, fl_progress_fn progress,
                        void *ctx);

/* Where a store's gathers were served: the local DRAM tier or the cluster.
 * Any store has the local counters; the cluster ones stay 0 without one. */
typedef struct fl_store_tier_stats {
  uint64_t lookups;            /* rows asked of the store by gathers */
  uint64_t local_hits;         /* of which served by the local DRAM tier */
  uint64_t cluster_rows;       /* rows fetched from the cluster */
  uint64_t cluster_missing;    /* of which the cluster does not hold (hashed ids) */
  uint64_t cluster_fetches;    /* gathers that went to the cluster */
  uint64_t cluster_commands;   /* Redis commands sent (MGET, GET, SET, ...) */
  uint64_t evictions;          /* rows the local tier dropped to stay in budget */
  uint64_t invalidations;      /* change messages from other processes applied */
  uint64_t resyncs;            /* local tier flushes after the change channel broke */
  uint64_t local_bytes;        /* vector bytes the local tier holds now */
  uint64_t local_budget_bytes; /* its budget (a plain store: what it holds) */
  uint64_t model_bytes;        /* the model's vector bytes: corpus sizes x row bytes */
  double ns_local;             /* wall time of the local tier's lookups */
  double ns_cluster;           /* wall time of the cluster fetches */
} fl_store_tier_stats;
/* Counters since create or the last reset. Thread-safe. */
fl_status fl_store_tier_stats_get(const fl_store *s, fl_store_tier_stats *out);
void fl_store_tier_stats_reset(fl_store *s);

/* ---------------------------------------------------------------- cache */

typedef struct fl_cache fl_cache;

typedef enum fl_backend {
  FL_BACKEND_AUTO = 0, /* CUDA when a device is usable, else host */
  FL_BACKEND_HOST = 1, /* same algorithms on CPU threads, cache in host memory */
  FL_BACKEND_CUDA = 2
} fl_backend;

typedef enum fl_layout {
  FL_LAYOUT_FLAT = 0,     /* one index and one slab pool shared by all tables */
  FL_LAYOUT_PER_TABLE = 1 /* baseline: a static index and pool share per table */
} fl_layout;

/* How a missed vector earns its place in the cache (docs/API.md). */
typedef enum fl_admit_policy {
  FL_ADMIT_COIN = 0,   /* with probability admit_probability per missed lookup */
  FL_ADMIT_TINYLFU = 1 /* when its recent frequency (a count-min sketch of the misses,
                          8 to 16 bytes per vector the pool holds, outside budget_bytes)
                          beats that of the entries the last eviction took */
} fl_admit_policy;

typedef struct fl_config {
  fl_backend backend;       /* default AUTO; env FL_BACKEND=host|cuda overrides AUTO */
  int device;               /* CUDA device ordinal, default 0 */
  fl_layout layout;         /* default FLAT */
  uint32_t key_bits;        /* flat key width, 32 or 64; default FL_KEY_BITS_AUTO: 32 when
                               that encodes every table losslessly, else 64 */
  fl_encoding_scheme encoding; /* default SIZE_AWARE */
  uint64_t budget_bytes;    /* cache memory, index plus slab pool, default 1 GiB */
  double max_load;          /* index slots = vectors the pool can hold / max_load; default 0.6 */
  double admit_probability; /* a missed vector enters the cache with this probability per
                               missed lookup (1 - (1-p)^k for k lookups in one batch),
                               default 0.5; FL_ADMIT_COIN only */
  fl_admit_policy admit_policy; /* default FL_ADMIT_TINYLFU */
  double high_watermark;    /* pool use fraction that starts eviction, default 0.98 */
  double low_watermark;     /* eviction stops under this fraction, default 0.95 */
  uint64_t unified_entries; /* index entries pointing into the store, default 0; at 0
                               the index has no room for such pointers (32-bit
                               locations, 4 bytes a slot less): set it > 0 to change
                               it later with fl_cache_set_unified_entries */
  uint64_t seed;            /* admission coin seed, default 0x5eed */
  uint32_t host_threads;    /* host backend threads, 0 = all cores (CUDA: not used; misses
                               are gathered on the store's threads) */
  fl_missing missing;       /* default FL_MISSING_ZERO */
  int profile;              /* CUDA: time the index and hit-copy kernels with events
                               (gpu_ns_* statistics; one more wait per query), default 0 */
  uint64_t zero_copy_rows;  /* CUDA: when a batch has at most this many distinct misses of
                               dense tables (per table in the per-table layout), the GPU
                               reads them straight from the store's memory (zero-copy
                               over PCIe) instead of the host's gather; more take the
                               host path. Default FL_ZERO_COPY_AUTO: fl_cache_create
                               times both paths on this store and device and takes
                               the count up to which in place costs less than the
                               host's path and its reads stay bound by their latency
                               (at most 1.5 times the fewest rows' time; beyond, by
                               PCIe's request rate, which concurrent queries share);
                               stats' zero_copy_limit tells it. When non-zero,
                               fl_cache_create registers the store's dense tables for
                               device access (page-locks them) and goes on without
                               zero-copy reads when it cannot. 0: never (nothing
                               registered) */
} fl_config;

/* cfg.key_bits: the cache picks the width (the default). */
#define FL_KEY_BITS_AUTO 0u

/* cfg.zero_copy_rows: the cache calibrates the limit itself (the default). */
#define FL_ZERO_COPY_AUTO UINT64_MAX

/* Fills every field with its default. Thread-safe. */
void fl_config_default(fl_config *cfg);

/* Creates a cache over `store` (which must outlive it). Fails with
 * FL_ERR_INVALID_ARGUMENT naming the field for a bad config (budget too small
 * for one slab, watermarks out of order, key_bits not 32/64, ...). */
fl_status fl_cache_create(fl_store *store, const fl_config *cfg, fl_cache **out);
void fl_cache_destroy(fl_cache *c);
/* Message of the calling thread's last failed call on `c` ("" when none;
 * c NULL: the last failed fl_cache_create). */
const char *fl_cache_last_error(const fl_cache *c);
fl_backend fl_cache_backend(const fl_cache *c);

/* Looks up every query's ids and writes their vectors into the query's out.
 * ids and out may each be host or device memory (CUDA backend; host backend:
 * host memory only). CUDA backend: the call returns once all work is enqueued
 * on `stream`; out is complete when the stream reaches that point. Misses are
 * fetched from the store and offered for admission. Bad input (unknown table,
 * NULL buffers) fails before anything changes. An id out of range fails with
 * FL_ERR_OUT_OF_RANGE and no admission; the rows of the failing batch's
 * queries are then undefined (CUDA may have copied some hits), see
 * docs/API.md for calls split into several batches.
 * Thread-safe: many host threads may query at once, each on its own stream. */
fl_status fl_query(fl_cache *c, const fl_table_query *queries, uint32_t n_queries, void *stream);

/* Looks ahead: names ids a coming fl_query will ask for, so that their
 * misses are fetched from the store and cached now, while the caller's GPU
 * runs other work (the current batch's model), and the query that follows
 * finds them as hits. Every id not cached is admitted whatever the
 * admission policy says (the caller says it will be used), as far as the
 * pool has room: watermark eviction makes room as for any admission. The
 * queries' out is not read or written (it may be NULL). ids may be host or
 * device memory (CUDA). CUDA: the call returns once its misses are fetched
 * and its admission is enqueued; the rows are cached when `stream` reaches
 * that point: a query on `stream`, or on a stream made to wait for an event
 * recorded there, finds them. Use a stream other than the one of the work
 * it is to overlap. Host backend: cached on return. Bad input fails as
 * fl_query's does: an unknown table or NULL ids before anything runs; an id
 * out of range admits nothing of its batch (a call split into several
 * batches keeps what the batches before it admitted, docs/API.md). Counted
 * apart from queries: fl_cache_stats'
 * prefetches and prefetch_lookups / prefetch_misses, not queries, lookups,
 * hits or misses; the fetch's time and rows count in ns_miss_fetch and
 * unique_misses as a query's do. Thread-safe, with queries and other
 * prefetches. */
fl_status fl_prefetch(fl_cache *c, const fl_table_query *queries, uint32_t n_queries, void *stream);

/* Where the calling thread's last fl_query or fl_prepared_run spent its
 * time, for finding a slow call's cause: wall-clock ns on the calling
 * thread, phases not overlapping (a launch, fl_prepared_launch, records
 * its call only: its answer is another thread's). CUDA: work still on the
 * stream when the call returns is not in it. */
typedef struct fl_query_timing {
  uint64_t total_ns;     /* the call, entry to return */
  uint64_t setup_ns;     /* CUDA: the scratch made ready: a wait for a free set, its growth,
                            a prepared query's wait for its last run */
  uint64_t index_ns;     /* CUDA: from the launch until the index kernel's counters came;
                            host: probes and hit copies */
  uint64_t fetch_ns;     /* the misses: the store's gather, the upload, the scatter */
  uint64_t admission_ns; /* host backend: admission, the wait for the cache's lock included
                            (CUDA admits on the cache's own thread) */
  uint64_t missed;       /* missed positions */
  uint64_t fetched_rows; /* distinct rows the host fetched from the store */
  uint64_t setup_wait_ns; /* CUDA: of setup_ns, waiting for a scratch set that an admission
                             round or a query's stream still used */
  uint64_t setup_grow_ns; /* CUDA: of setup_ns, making or growing a set (device and pinned
                             allocations, which wait for the whole device) */
  uint64_t index_wait_ns; /* CUDA: of index_ns, from the launch's return until the counters
                             came: the device's time, queue included; the rest is the host's
                             (the query's registration and the launch calls) */
  uint64_t setup_find_ns; /* CUDA: of setup_ns, finding where the caller's ids and outputs
                             live (a driver call for each allocation they lie in; 0 for a
                             prepared query) */
} fl_query_timing;
void fl_query_timing_last(fl_query_timing *out);

/* A query whose buffers stay put from call to call, as an inference server's
 * per-model input and output buffers do: fl_query_prepare does fl_query's
 * checks (tables, sizes, NULL buffers) and, on CUDA, finds once where each
 * buffer lives (about 10 us for 26 tables' ids and outputs); each fl_prepared_run
 * then answers for the ids the buffers hold at that moment, as fl_query on
 * the same queries would. The caller keeps the buffers allocated and in
 * place (contents change freely) until fl_prepared_destroy. The handle keeps
 * a copy of `queries`. Runs of one handle must not overlap (one thread at a
 * time); different handles run concurrently like fl_query calls. */
typedef struct fl_prepared fl_prepared;
fl_status fl_query_prepare(fl_cache *c, const fl_table_query *queries, uint32_t n_queries,
                           fl_prepared **out);
fl_status fl_prepared_run(fl_prepared *p, void *stream);
/* fl_prepared_run without waiting for the host's part: on CUDA, for a
 * handle of the flat layout whose outputs are all device memory (or
 * registered), from its second run on, the call enqueues the run (one graph
 * launch) and returns; the cache's answerer thread then reads the run's
 * counters, gathers the rows the GPU cannot read in place and releases the
 * graph, which waits for them on the device before it scatters them.
 * Results are complete when the stream gets there, provided the run
 * succeeded: fl_prepared_wait tells. An all-hit batch, or one whose misses
 * are all read in place (cfg.zero_copy_rows), never waits for the host.
 * Other runs (host backend, per-table layout, the first run, a run after a
 * failed one, outputs in unregistered host memory) answer as
 * fl_prepared_run does before returning. A failure the launch could not
 * return (an id out of range, a row missing under FL_MISSING_ERROR) is
 * reported once, by fl_prepared_wait or else by the handle's next launch or
 * run, which then does not run. */
fl_status fl_prepared_launch(fl_prepared *p, void *stream);
/* Waits for the host's part of the handle's last launch (not for the
 * stream) and returns its status. */
fl_status fl_prepared_wait(fl_prepared *p);
/* NULL does nothing. The cache must still be alive. */
void fl_prepared_destroy(fl_prepared *p);

/* CUDA backend: misses are admitted into the cache on the cache's own
 * maintenance stream after fl_query has returned, overlapping the next
 * queries. A query sees either the state before an admission or the whole
 * admitted vector, never a part. fl_cache_sync waits until every admission
 * enqueued so far is published (later queries see those vectors as hits)
 * and counted in fl_cache_stats. Host backend: admission is done when
 * fl_query returns; this returns at once. Thread-safe. */
fl_status fl_cache_sync(fl_cache *c);

/* Allocates, ahead of time, the query buffers (device and pinned host) for
 * `callers` threads calling fl_query at once (1 to FL_RESERVE_MAX_CALLERS,
 * 62), each call of up to
 * `keys` ids in up to `queries` queries, ids and outputs anywhere, as a
 * server does at start-up: while its calls stay within these, none
 * allocates. Buffers otherwise grow on demand (by 1.5x), and allocating
 * pinned memory holds every thread's CUDA calls meanwhile. It also sizes
 * the admission rounds' eviction rings and reservoirs (and the maintenance
 * buffers) for the evictions of a full pool, which otherwise grow when the
 * pool first fills (fl_cache_stats.allocations counts what still grows).
 * Host backend: nothing to do. Thread-safe. */
fl_status fl_cache_reserve(fl_cache *c, uint64_t keys, uint32_t queries, uint32_t callers);
/* The most callers fl_cache_reserve takes. */
#define FL_RESERVE_MAX_CALLERS 62u

/* Sets how many index entries may point into the store (the unified index).
 * FL_ERR_UNSUPPORTED for n > 0 when the cache was created with
 * cfg.unified_entries 0 (its index has no room for pointers). Thread-safe with
 * queries. */
fl_status fl_cache_set_unified_entries(fl_cache *c, uint64_t n);
/* Drops every cached entry (slabs are reclaimed after in-flight queries). */
fl_status fl_cache_clear(fl_cache *c);

typedef struct fl_cache_stats {
  uint64_t queries;           /* fl_query calls */
  uint64_t lookups;           /* ids looked up */
  uint64_t hits;              /* served from cached vectors */
  uint64_t dram_hits;         /* served through unified-index pointers into the store */
  uint64_t misses;            /* fetched from the store through its hash/array lookup */
  uint64_t admissions;        /* vectors inserted (CUDA: by admission rounds that are
                                 over; fl_cache_sync waits for the rest) */
  uint64_t evictions;         /* vectors evicted for space */
  uint64_t invalidations;     /* vectors dropped because the store changed them */
  uint64_t pool_bytes_used;   /* slab bytes holding live or not yet reclaimed vectors */
  uint64_t pool_bytes;        /* slab pool size */
  uint64_t index_bytes;       /* index size */
  uint64_t index_entries;     /* live entries */
  uint64_t index_slots;       /* capacity */
  uint64_t unified_entries;   /* live entries pointing into the store */
  double ns_index;            /* wall time in encode + index probe */
  double ns_hit_copy;         /* ... in hit copies */
  double ns_miss_fetch;       /* ... fetching misses from the store */
  double ns_admission;        /* ... admitting and evicting (CUDA: preparing the round,
                                 during the fetch: the two overlap) */
  double ns_admission_wait;   /* CUDA: of which waiting for the last round to end */
  uint64_t unique_misses;     /* rows fetched from the store: misses and pointer hits,
                                 once per distinct id and query in a call */
  double ns_store_gather;     /* wall time inside the store's gathers (part of
                                 ns_miss_fetch) */
  double gpu_ns_index;        /* CUDA with cfg.profile: device time of the fused index kernel */
  double gpu_ns_hit_copy;     /* ... of the hit-copy kernel */
  double ns_miss_host_cpu;    /* CPU time (per-thread clocks) of the threads that run the
                                 miss path, outside the store's lookups and gathers:
                                 staging layout, upload enqueues, scatter, admission. The
                                 caller's thread and, on CUDA, the fetch's; work handed to
                                 a thread pool counts the caller's share only */
  uint64_t zero_copy_rows;    /* CUDA: of unique_misses, rows the GPU read from the store in
                                 place (cfg.zero_copy_rows): dense tables' misses, and in
                                 fl_query the unified-index pointer rows */
  uint64_t zero_copy_limit;   /* CUDA: the most distinct dense misses a batch reads in place:
                                 cfg.zero_copy_rows, or the calibrated count under
                                 FL_ZERO_COPY_AUTO; 0 when none are (host backend, nothing
                                 mapped) */
  uint64_t rounds_shed;       /* CUDA: admission rounds dropped before they started, because
                                 a newer batch's round for the same part came first: those
                                 batches' misses were answered but not admitted */
  uint64_t rounds_starved;    /* CUDA: admission rounds that found a slab class with no free
                                 slot and no free page; such a round evicts first */
  uint64_t slabs_recycled;    /* CUDA: evicted slabs an admission round put back on its
                                 reservoir on the device, with no host work per slab (parts
                                 of one slab class); in other parts they return to the pool */
  uint64_t shift_opens;       /* FL_ADMIT_TINYLFU: times a part's lookups began to miss far
                                 more often (its hot set moved) and its admission opened to
                                 every missed row for a while (fl_query) */
  uint64_t allocations;       /* CUDA: device or pinned buffers the cache allocated (each
                                 replacing a smaller one, which is freed) after it was created:
                                 query buffer sets, admission rounds' blocks, reservoirs and
                                 rings, maintenance buffers. Each holds every thread's CUDA calls
                                 meanwhile, and a free waits for the device: fl_cache_reserve
                                 makes them before serving */
  uint64_t zero_copy_stale;   /* CUDA: of zero_copy_rows, hashed rows read at a unified-index
                                 pointer whose slot no longer held the id (the store removed
                                 or moved it meanwhile): fetched again by id */
  uint64_t prefetches;        /* fl_prefetch calls */
  uint64_t prefetch_lookups;  /* ids they named */
  uint64_t prefetch_misses;   /* of which were not cached: fetched and admitted */
} fl_cache_stats;

typedef struct fl_cache_table_stats {
  uint64_t lookups, hits, dram_hits, misses;
} fl_cache_table_stats;

/* Totals, and per table when per_table is non-NULL (n_tables entries).
 * Thread-safe; a snapshot while queries run. It does not wait for admission
 * rounds in flight (CUDA): admissions, index_entries, unified_entries and
 * pool_bytes_used count the rounds that are over (see fl_cache_sync). */
fl_status fl_cache_stats_get(const fl_cache *c, fl_cache_stats *out,
                             fl_cache_table_stats *per_table, uint32_t n_tables);
void fl_cache_stats_reset(fl_cache *c);

/* The index's health: how far a miss probes. An eviction leaves a tombstone
 * (a key with no vector) where a miss's probe must go on; the cache turns
 * tombstones back into never-used slots where no probe needs them (after
 * each eviction and erase), so this stays near a fresh index's at any
 * max_load. */
typedef struct fl_index_health {
  uint64_t slots;      /* index capacity, all parts */
  uint64_t live;       /* entries: cached vectors and unified-index pointers */
  uint64_t tombstones; /* keys with no vector: probes go past them */
  uint64_t never_used; /* slots where a probe stops */
  double miss_probe;   /* mean slots a miss reads: from a home slot, taken uniformly,
                          to the first never-used slot, at most 1024 */
} fl_index_health;

/* Scans every index slot, on CUDA from a copy in host memory: milliseconds
 * for millions of slots. Waits for admission rounds in flight (as
 * fl_cache_sync) and holds off index changes meanwhile; queries run on. */
fl_status fl_cache_index_health(fl_cache *c, fl_index_health *out);

#ifdef __cplusplus
}
#endif
#endif /* FLECHE_H */
