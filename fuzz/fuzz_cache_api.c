/* fuzz_cache_api.c: the cache's public API on the host backend, driven by the
 * input as a sequence of calls (fl_query, fl_store_upsert, fl_store_remove,
 * fl_cache_clear, fl_cache_set_unified_entries, fl_cache_reserve,
 * fl_cache_stats_get) over a small store: a dense fp32 table, a dense fp16
 * one and a hashed one, under a budget small enough that admissions evict. The store is the oracle: every
 * successful query must answer exactly what fl_store_gather gives for the
 * same ids (stale rows after upserts and removes, lost or torn rows after
 * evictions and clears all show up here), and each status must be the one
 * the store's answer implies (out-of-range dense ids, missing hashed ids
 * under FL_MISSING_ERROR). */
#include "fuzz/fuzz_util.h"
#include "include/fleche.h"

enum {
  N_TABLES = 3,
  HASHED = 2,           /* the hashed table */
  HASHED_IDS = 40,      /* hashed ids drawn from [0, 40): about half are held */
  MAX_QUERIES = 3,      /* per fl_query */
  MAX_IDS = 24,         /* per query */
  MAX_ROW = 64,         /* bytes of the widest row (dim 16 fp32) */
  MAX_OPS = 48          /* per input: keeps one run short */
};

static const fl_table_desc kTables[N_TABLES] = {
    {"dense32", 64, 8, FL_FP32, FL_IDS_DENSE},
    {"dense16", 48, 4, FL_FP16, FL_IDS_DENSE},
    {"hashed", 32, 16, FL_FP32, FL_IDS_HASHED},
};

static size_t row_bytes(uint32_t t) {
  return kTables[t].dim * (kTables[t].dtype == FL_FP16 ? 2u : 4u);
}

/* An id for table t: dense ids run a little past the corpus (1 in 9 out of
 * range when oor), hashed ids over a range the store half holds. Small ranges
 * give duplicates within a query. */
static uint64_t draw_id(fuzz_bytes *b, uint32_t t, int oor) {
  uint64_t v = fuzz_take(b, 1);
  if (t == HASHED) return v % HASHED_IDS;
  uint64_t corpus = kTables[t].corpus_size;
  return oor ? v % (corpus + corpus / 8) : v % corpus;
}

/* Row values from the input: any bit pattern for fp16, small floats for
 * fp32; compared bit for bit. */
static void draw_rows(fuzz_bytes *b, uint32_t t, size_t n, uint8_t *out) {
  for (size_t i = 0; i < n * kTables[t].dim; i++) {
    uint8_t v = (uint8_t)fuzz_take(b, 1);
    if (kTables[t].dtype == FL_FP16) {
      uint16_t h = (uint16_t)(v * 257u);
      memcpy(out + 2 * i, &h, 2);
    } else {
      float f = (float)(int8_t)v * 0.25f;
      memcpy(out + 4 * i, &f, 4);
    }
  }
}

typedef struct state {
  fl_store *s;
  fl_cache *c;
  fl_config cfg;
  uint64_t unified; /* the last unified-entries limit set */
} state;

/* One fl_query of 0..3 queries, checked against the store. */
static void op_query(state *x, fuzz_bytes *b) {
  static uint64_t ids[MAX_QUERIES][MAX_IDS];
  static uint8_t out[MAX_QUERIES][MAX_IDS * MAX_ROW], want[MAX_QUERIES][MAX_IDS * MAX_ROW];
  fl_table_query q[MAX_QUERIES], g[MAX_QUERIES];
  uint32_t nq = fuzz_below(b, MAX_QUERIES + 1);
  int oor = fuzz_below(b, 4) == 0, any_oor = 0;
  for (uint32_t i = 0; i < nq; i++) {
    uint32_t t = fuzz_below(b, N_TABLES);
    size_t n = fuzz_below(b, MAX_IDS + 1);
    for (size_t k = 0; k < n; k++) {
      ids[i][k] = draw_id(b, t, oor);
      any_oor |= t != HASHED && ids[i][k] >= kTables[t].corpus_size;
    }
    memset(out[i], 0xA5, sizeof out[i]);
    q[i] = (fl_table_query){t, ids[i], n, out[i]};
    g[i] = (fl_table_query){t, ids[i], n, want[i]};
  }
  /* The truth first: the store's answer and what it implies for the status. */
  uint64_t missing[MAX_QUERIES] = {0}, absent = 0;
  fl_status truth = fl_store_gather(x->s, g, nq, FL_MISSING_ZERO, missing);
  FUZZ_CHECK(truth == (any_oor ? FL_ERR_OUT_OF_RANGE : FL_OK), "fl_store_gather gave %s: %s",
             fl_status_name(truth), fl_store_last_error(x->s));
  for (uint32_t i = 0; i < nq; i++) absent += missing[i];
  fl_status expect = truth;
  if (truth == FL_OK && absent && x->cfg.missing == FL_MISSING_ERROR) expect = FL_ERR_NOT_FOUND;
  fl_status st = fl_query(x->c, q, nq, NULL);
  FUZZ_CHECK(st == expect, "fl_query gave %s, the store implies %s (store: %s; cache: %s)",
             fl_status_name(st), fl_status_name(expect), fl_store_last_error(x->s),
             fl_cache_last_error(x->c));
  if (st != FL_OK) return;
  for (uint32_t i = 0; i < nq; i++) {
    size_t rb = row_bytes(q[i].table);
    for (size_t k = 0; k < q[i].n; k++)
      FUZZ_CHECK(memcmp(out[i] + k * rb, want[i] + k * rb, rb) == 0,
                 "query %u table %u id %llu (position %zu): the cache's row differs from the "
                 "store's", i, q[i].table, (unsigned long long)ids[i][k], k);
  }
}

static void op_upsert(state *x, fuzz_bytes *b) {
  uint64_t ids[8];
  uint8_t rows[8 * MAX_ROW];
  uint32_t t = fuzz_below(b, N_TABLES);
  size_t n = 1 + fuzz_below(b, 8);
  int oor = 0;
  for (size_t k = 0; k < n; k++) {
    ids[k] = draw_id(b, t, 1);
    oor |= t != HASHED && ids[k] >= kTables[t].corpus_size;
  }
  draw_rows(b, t, n, rows);
  fl_status st = fl_store_upsert(x->s, t, ids, n, rows);
  fuzz_status("fl_store_upsert", st, FUZZ_ST(oor ? FL_ERR_OUT_OF_RANGE : FL_OK),
              fl_store_last_error(x->s));
}

static void op_remove(state *x, fuzz_bytes *b) {
  uint64_t ids[8];
  /* Mostly the hashed table; a dense one must refuse. */
  uint32_t t = fuzz_below(b, 4) == 0 ? 0 : HASHED;
  size_t n = 1 + fuzz_below(b, 8);
  for (size_t k = 0; k < n; k++) ids[k] = draw_id(b, t, 0);
  fl_status st = fl_store_remove(x->s, t, ids, n);
  fuzz_status("fl_store_remove", st, FUZZ_ST(t == HASHED ? FL_OK : FL_ERR_INVALID_ARGUMENT),
              fl_store_last_error(x->s));
}

static void op_stats(state *x) {
  fl_cache_stats st;
  fl_cache_table_stats per[N_TABLES];
  fuzz_status("fl_cache_stats_get", fl_cache_stats_get(x->c, &st, per, N_TABLES), FUZZ_ST(FL_OK),
              fl_cache_last_error(x->c));
  for (uint32_t t = 0; t < N_TABLES; t++)
    FUZZ_CHECK(per[t].hits + per[t].dram_hits + per[t].misses == per[t].lookups,
               "table %u: %llu hits + %llu dram hits + %llu misses != %llu lookups", t,
               (unsigned long long)per[t].hits, (unsigned long long)per[t].dram_hits,
               (unsigned long long)per[t].misses, (unsigned long long)per[t].lookups);
  FUZZ_CHECK(st.pool_bytes_used <= st.pool_bytes, "pool use %llu of %llu",
             (unsigned long long)st.pool_bytes_used, (unsigned long long)st.pool_bytes);
  FUZZ_CHECK(st.index_entries <= st.index_slots, "%llu entries in %llu slots",
             (unsigned long long)st.index_entries, (unsigned long long)st.index_slots);
  FUZZ_CHECK(st.unified_entries <= st.index_entries && st.unified_entries <= x->unified,
             "%llu unified entries (limit %llu, %llu entries)",
             (unsigned long long)st.unified_entries, (unsigned long long)x->unified,
             (unsigned long long)st.index_entries);
}

/* The cache's configuration from the first input byte. */
static void draw_config(fuzz_bytes *b, fl_config *cfg) {
  static const uint64_t budgets[4] = {4096, 12288, 100000, 400000};
  static const double admit[3] = {1.0, 0.5, 0.0};
  uint32_t k = (uint32_t)fuzz_take(b, 1), a = (k >> 2) & 3;
  fl_config_default(cfg);
  cfg->backend = FL_BACKEND_HOST;
  cfg->host_threads = 1;
  cfg->key_bits = k & 1 ? 32 : 64;
  cfg->layout = k & 2 ? FL_LAYOUT_PER_TABLE : FL_LAYOUT_FLAT;
  /* The coin at three probabilities, or TinyLFU (cache/admit_rule.h). */
  cfg->admit_policy = a < 3 ? FL_ADMIT_COIN : FL_ADMIT_TINYLFU;
  if (a < 3) cfg->admit_probability = admit[a];
  cfg->missing = k & 16 ? FL_MISSING_ERROR : FL_MISSING_ZERO;
  cfg->budget_bytes = budgets[(k >> 5) & 3];
  cfg->encoding = k & 128 ? FL_ENCODING_FIXED : FL_ENCODING_SIZE_AWARE;
  /* The second byte: pointers into the store allowed from the start (the
   * index's 64-bit locations), and the key width left to the cache. */
  uint32_t u = (uint32_t)fuzz_take(b, 1);
  cfg->unified_entries = u & 1;
  if (u & 2) cfg->key_bits = FL_KEY_BITS_AUTO;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  fuzz_bytes b = {d, n};
  state x = {0};
  draw_config(&b, &x.cfg);
  x.unified = x.cfg.unified_entries;
  FUZZ_CHECK(fl_store_create(kTables, N_TABLES, 1, &x.s) == FL_OK, "%s",
             fl_store_last_error(NULL));
  FUZZ_CHECK(fl_store_fill_synthetic(x.s, 0, 7) == FL_OK && fl_store_fill_synthetic(x.s, 1, 7) ==
                 FL_OK, "%s", fl_store_last_error(x.s));
  /* The hashed table holds the even ids below HASHED_IDS. */
  uint64_t ids[HASHED_IDS / 2];
  static float rows[HASHED_IDS / 2 * 16];
  for (uint64_t i = 0; i < HASHED_IDS / 2; i++) ids[i] = 2 * i;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) rows[i] = (float)i;
  FUZZ_CHECK(fl_store_upsert(x.s, HASHED, ids, HASHED_IDS / 2, rows) == FL_OK, "%s",
             fl_store_last_error(x.s));
  fl_status st = fl_cache_create(x.s, &x.cfg, &x.c);
  if (st != FL_OK) {
    /* Only a budget too small for the per-table layout may be refused, as an
     * invalid argument (docs/API.md). */
    fuzz_status("fl_cache_create", st, FUZZ_ST(FL_ERR_INVALID_ARGUMENT),
                fl_cache_last_error(NULL));
    FUZZ_CHECK(x.cfg.layout == FL_LAYOUT_PER_TABLE, "%s", fl_cache_last_error(NULL));
    fl_store_destroy(x.s);
    return 0;
  }
  for (int op = 0; op < MAX_OPS && b.n > 0; op++) {
    switch (fuzz_below(&b, 10)) {
      case 0: case 1: case 2: case 3: op_query(&x, &b); break;
      case 4: case 5: op_upsert(&x, &b); break;
      case 6: op_remove(&x, &b); break;
      case 7:
        fuzz_status("fl_cache_clear", fl_cache_clear(x.c), FUZZ_ST(FL_OK), fl_cache_last_error(x.c));
        break;
      case 8:
      {
        /* A cache created without pointers has no room for them. */
        uint64_t want = fuzz_below(&b, 64);
        int refused = want > 0 && x.cfg.unified_entries == 0;
        fuzz_status("fl_cache_set_unified_entries", fl_cache_set_unified_entries(x.c, want),
                    refused ? FUZZ_ST(FL_ERR_UNSUPPORTED) : FUZZ_ST(FL_OK), fl_cache_last_error(x.c));
        if (!refused) x.unified = want;
        break;
      }
      default:
      {
        /* Half the time a reserve (callers 0 and past 62 refused; nothing
         * to allocate on the host), else the statistics. */
        uint32_t r = (uint32_t)fuzz_take(&b, 1);
        if (!(r & 1)) {
          op_stats(&x);
          break;
        }
        uint32_t callers = (r >> 1) % 70;
        int ok = callers >= 1 && callers <= FL_RESERVE_MAX_CALLERS;
        fuzz_status("fl_cache_reserve",
                    fl_cache_reserve(x.c, fuzz_below(&b, 4096), MAX_QUERIES, callers),
                    ok ? FUZZ_ST(FL_OK) : FUZZ_ST(FL_ERR_INVALID_ARGUMENT), fl_cache_last_error(x.c));
        break;
      }
    }
  }
  op_stats(&x);
  fl_cache_destroy(x.c);
  fl_store_destroy(x.s);
  return 0;
}
