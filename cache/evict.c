/* evict.c: watermark eviction and the collection of reclaimable slabs. When a
 * part's pool use passes the high watermark, one scan builds a histogram of
 * entry ages, picks the age threshold that frees enough (evict_pick.h), and
 * tombstones the coldest entries until use will fall under the low
 * watermark. Their slabs return to the pool through batch-based reclamation
 * (reclaim.h). The host backend scans here; a CUDA admission round runs the
 * same steps in its graph and keeps its evicted slabs in its limbo ring
 * until they can be reused (cache/admit_round.h). */
#include <stdlib.h>

#include "cache/admit_round.h"
#include "cache/cache.h"
#include "common/error.h"
#include "cache/cuda_state.h"
#include "cache/evict_pick.h"
#include "common/mutant.h"

static void free_slab(void *ctx, uint32_t part, uint64_t loc) {
  fl_cache *c = ctx;
  fl_pool_free(&c->parts[part].pool, loc);
}

void fl_cache_collect(fl_cache *c) {
  fl_reclaim_hooks h = {free_slab, fl_event_done, fl_event_release, c};
  if (fl_reclaim_collect(&c->reclaim, &h))
    for (uint32_t p = 0; p < c->fixed.n_parts; p++) fl_pool_compact(&c->parts[p].pool);
}

uint64_t fl_cache_horizon(fl_cache *c) {
  fl_reclaim_hooks h = {free_slab, fl_event_done, fl_event_release, c};
  return fl_reclaim_horizon(&c->reclaim, &h);
}

fl_status fl_cache_retire_removed(fl_cache *c, uint32_t part, fl_entry_kind kind, uint64_t *locs,
                                  uint64_t n, int evicted) {
  fl_part *p = &c->parts[part];
  uint64_t k = 0;
  for (uint64_t i = 0; i < n; i++)
    if (locs[i] != FL_LOC_NONE) locs[k++] = locs[i];
  if (k == 0) return FL_OK;
  if (kind == FL_ENTRY_DRAM) {
    /* DRAM pointers need no reclamation: the store owns their rows. */
    p->dram_entries -= k < p->dram_entries ? k : p->dram_entries;
    return FL_OK;
  }
  p->entries -= k < p->entries ? k : p->entries;
  if (evicted) fl_cache_add(c, FL_STAT_EVICTIONS, k), fl_shift_evicted(&p->shift);
  if (fl_reclaim_retire(&c->reclaim, locs, k, part) != 0)
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory retiring %llu slabs",
                   (unsigned long long)k);
  return FL_OK;
}

/* Removes the `want` coldest entries of `kind` from part `part` now. */
static fl_status evict_coldest(fl_cache *c, uint32_t part, fl_entry_kind kind, uint64_t want) {
  fl_part *p = &c->parts[part];
  uint64_t *hist = calloc(FL_AGE_BUCKETS, sizeof *hist);
  uint64_t *locs = malloc(p->slots * sizeof *locs);
  if (!hist || !locs) {
    free(hist);
    free(locs);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory for an eviction scan");
  }
  uint32_t now = (uint32_t)__atomic_load_n(&c->batch, __ATOMIC_RELAXED);
  fl_status st = fl_maint_age_histogram(c, p, kind, now, hist);
  if (st == FL_OK) {
    uint32_t b;
    uint64_t quota, n = 0;
    fl_evict_pick(hist, want, &b, &quota);
    st = fl_maint_evict(c, p, kind, now, b, quota, locs, &n);
    if (st == FL_OK) st = fl_cache_retire_removed(c, part, kind, locs, n, 1);
  }
  free(hist);
  free(locs);
  return st;
}

uint64_t fl_cache_unified_limit(const fl_cache *c, uint32_t part) {
  uint64_t total = 0;
  for (uint32_t p = 0; p < c->fixed.n_parts; p++) total += c->parts[p].slots;
  /* Per-table layout: each part's share in proportion to its index. */
  uint64_t limit = __atomic_load_n(&c->fixed.cfg.unified_entries, __ATOMIC_RELAXED);
  uint64_t share = (uint64_t)((double)limit * (double)c->parts[part].slots / (double)total);
  /* At most what the index holds at max_load: its slots are sized for the
   * pool's vectors (size_part), and pointers past that would fill it until
   * inserts fail at FL_PROBE_LIMIT, every miss probing that far (on the
   * H200, 0.26 ms of index work a 1,024-lookup batch with 300,000 entries
   * asked of 166,000 slots). */
  uint64_t most = (uint64_t)(c->fixed.cfg.max_load * (double)c->parts[part].slots);
  return share < most || FL_MUTANT_ON(31) ? share : most;
}

uint64_t fl_cache_slot_bytes(const fl_cache *c) {
  return FL_INDEX_SLOT_BYTES(c->fixed.cfg.key_bits, c->fixed.loc_bits);
}

/* Pool bytes set aside for the part's unified entries: each DRAM pointer
 * occupies index slots that would otherwise serve cached vectors, so the
 * vectors' share of the budget shrinks by the index bytes it takes. */
static double unified_reserve(const fl_cache *c, uint32_t part) {
  double r = (double)fl_cache_unified_limit(c, part) * (double)fl_cache_slot_bytes(c) /
             c->fixed.cfg.max_load;
  double cap = (double)c->parts[part].pool.bytes;
  return r < cap ? r : cap;
}

fl_status fl_cache_trim_unified(fl_cache *c, uint32_t part) {
  fl_part *p = &c->parts[part];
  uint64_t limit = fl_cache_unified_limit(c, part);
  if (p->dram_entries <= limit) return FL_OK;
  return evict_coldest(c, part, FL_ENTRY_DRAM, p->dram_entries - limit);
}

/* The least share of a part's use that a starved round evicts. */
#define FL_STARVED_SHARE 0.2

/* Entries to evict for the index's sake: a hot set of vectors smaller than
 * the part's mean (by which size_part sized the index) fills the index at
 * max_load before the pool reaches its watermark, and inserts would fail
 * with nothing ever evicted. The index takes the pool's watermarks, over
 * the slots at max_load less those unified entries may take. */
static double index_cap(const fl_cache *c, uint32_t part) {
  double cap = c->fixed.cfg.max_load * (double)c->parts[part].slots -
               (double)fl_cache_unified_limit(c, part);
  return cap < 1.0 ? 1.0 : cap;
}

static uint64_t index_excess(const fl_cache *c, uint32_t part) {
  const fl_part *p = &c->parts[part];
  double cap = index_cap(c, part);
  if (FL_MUTANT_ON(13) || (double)p->entries <= c->fixed.cfg.high_watermark * cap) return 0;
  return p->entries - (uint64_t)(c->fixed.cfg.low_watermark * cap);
}

uint64_t fl_cache_index_room(const fl_cache *c, uint32_t part) {
  uint64_t cap = (uint64_t)index_cap(c, part);
  return cap > c->parts[part].entries ? cap - c->parts[part].entries : 0;
}

uint64_t fl_cache_evict_want(const fl_cache *c, uint32_t part, int starved) {
  const fl_part *p = &c->parts[part];
  /* The vectors' capacity: the pool less what unified entries take. */
  double cap = (double)p->pool.bytes - unified_reserve(c, part);
  double high = c->fixed.cfg.high_watermark * cap;
  /* Use: vectors live or awaiting reclamation; free slots on the CUDA
   * reservoirs are not, nor slabs a round evicted that wait in limbo to be
   * reused (counted at the part's average slot): they are freed already,
   * and counting them would ask the next rounds to evict again (in the
   * default replay, a second burst of 190,000 entries). */
  double used = (double)(p->pool.used_bytes - p->reserved_bytes);
  uint64_t limbo = p->round ? fl_round_in_limbo(p->round) : 0;
  used -= used * (double)limbo / (double)(p->entries + limbo ? p->entries + limbo : 1);
  uint64_t by_index = index_excess(c, part);
  if (p->entries == 0) return 0;
  if (!starved && used <= high) return by_index < p->entries ? by_index : p->entries;
  /* Entries to evict: bring use to the low watermark, counting the average
   * slot of this part, and at least the share of use above it. A starved
   * class (no slot, no free page) below the watermark in a pool of several
   * classes frees at least FL_STARVED_SHARE of use, so that whole pages
   * empty and other classes' pages come free; one class takes the slots
   * freed, and the share of the watermarks serves it. */
  double low = c->fixed.cfg.low_watermark * cap;
  double avg = used / (double)p->entries;
  double excess = used - low;
  double share = 1.0 - c->fixed.cfg.low_watermark;
  if (starved && p->pool.n_classes > 1 && share < FL_STARVED_SHARE) share = FL_STARVED_SHARE;
  double floor = share * used;
  if (excess < floor) excess = floor;
  uint64_t want = (uint64_t)(excess / avg) + 1;
  if (want < by_index) want = by_index;
  return want < p->entries ? want : p->entries;
}

uint64_t fl_cache_evict_burst(const fl_cache *c, uint32_t part) {
  const fl_part *p = &c->parts[part];
  uint32_t slot = 0;
  for (uint32_t k = 0; k < p->pool.n_classes; k++)
    if (!slot || p->pool.classes[k].slot_bytes < slot) slot = p->pool.classes[k].slot_bytes;
  if (!slot) return 0;
  double share = 1.0 - c->fixed.cfg.low_watermark;
  if (p->pool.n_classes > 1 && share < FL_STARVED_SHARE) share = FL_STARVED_SHARE;
  double cap = (double)p->pool.bytes - unified_reserve(c, part);
  return (uint64_t)(share * cap / slot) + 1;
}

fl_status fl_cache_make_room(fl_cache *c, uint32_t part, int starved) {
  fl_cache_collect(c);
  fl_status st = fl_cache_trim_unified(c, part);
  if (st != FL_OK) return st;
  uint64_t want = fl_cache_evict_want(c, part, starved);
  return want ? evict_coldest(c, part, FL_ENTRY_CACHED, want) : FL_OK;
}
