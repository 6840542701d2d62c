// query_kernels.cu: the fused query kernels. One launch of fused_index covers
// every table of a query (self-identification through the scan) and
// deduplicates the misses (miss_set.h), one launch of copy_hits moves every
// hit vector with several threads per vector and reads the misses of a batch
// that takes the device path in place (zero_copy.h), and scatter expands the
// unique rows fetched from the store into every missed position. Slabs are
// read without locks: batch-based reclamation keeps them unreused until the
// query ends.
#include "fusion/query_kernels.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
// Blocks of the hit copy that read a batch's misses in place (the first
// ones): 2,112 warps, a row each at once, for a batch with at most
// cfg.zero_copy_rows of them; the grid of a large batch has thousands of
// blocks, and each that looked at the counters would add a few us.
constexpr unsigned kInPlaceBlocks = 264;

// Loads the scan into shared memory; returns the block's copy.
__device__ const uint64_t *load_scan(uint64_t *smem, const uint64_t *scan, uint32_t n) {
  for (uint32_t i = threadIdx.x; i <= n; i += blockDim.x) smem[i] = scan[i];
  __syncthreads();
  return smem;
}

// The grid's last block copies the counters into pinned host memory and
// raises the flag the host polls. Threads that wrote host memory (unique ids
// and references) fence at system scope first, so that the host sees their
// writes once it sees the flag.
__device__ void publish(const fl_publish &p, const unsigned long long *counters, bool wrote_host) {
  __shared__ bool last;
  if (wrote_host) __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(p.blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every block's counter updates
  const volatile uint32_t *src = (const volatile uint32_t *)counters;
  for (uint32_t i = threadIdx.x; i < p.words; i += blockDim.x) p.dst[i] = src[i];
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) *(volatile uint32_t *)p.flag = 1u;
}

__global__ void fused_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                            const uint64_t *scan_g, uint32_t n_args, uint64_t threads,
                            const uint32_t *now_p, uint64_t *locs, fl_miss_out m,
                            fl_publish pub) {
  extern __shared__ uint64_t scan_s[];
  const uint64_t *scan = load_scan(scan_s, scan_g, n_args);
  const uint32_t now = *now_p;
  bool wrote_host = false;
  for (uint64_t base = blockIdx.x * (uint64_t)blockDim.x; base < threads;
       base += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t tid = base + threadIdx.x;
    bool miss = false, pointer = false;
    int fresh = 0;
    uint32_t q = 0;
    uint64_t pos = 0, id = 0, dram = 0, slot = 0;
    if (tid < threads) {
      q = fl_batch_find(scan, n_args + 1, tid);
      const fl_batch_arg a = args[q];
      uint64_t i = tid - scan[q];
      if (i < a.n) {
        pos = a.key_offset + i;
        id = a.ids[i];
        uint64_t key, loc = FL_LOC_NONE;
        fl_code code = codes[a.table];
        if (fl_code_encode(&code, v.key_bits, id, &key) != 0) {
          atomicMin(&m.counters[1], (unsigned long long)pos);
        } else {
          int64_t s = fl_index_find(&v, key, &loc);
          if (s >= 0) fl_index_touch(&v, s, now);
          if (s < 0 || (loc & FL_LOC_DRAM_BIT)) {
            /* A unified-index pointer goes to the host with the misses, but
             * with its row address: the store lookup is skipped. */
            dram = s >= 0 ? loc : 0;
            pointer = dram != 0;
            loc = FL_LOC_NONE;
            miss = true;
            slot = fl_miss_set_insert(&m.set, fl_miss_set_base(a.key_offset, q), a.n, id, &fresh);
            fl_add32(&m.set.count[slot], 1);
          }
        }
        locs[pos] = loc;
      }
    }
    // Warp-aggregated appends, one atomic per warp and list: a warp serves
    // one arg (the scan rounds each arg to whole warps).
    const unsigned lane = threadIdx.x & 31u, below = (1u << lane) - 1u;
    unsigned mask = __ballot_sync(0xffffffffu, miss);
    if (!mask) continue;
    unsigned leader = __ffs(mask) - 1;
    unsigned long long first = 0;
    if (lane == leader) first = atomicAdd(&m.counters[0], (unsigned long long)__popc(mask));
    first = __shfl_sync(0xffffffffu, first, leader);
    if (miss) {
      m.pos[first + __popc(mask & below)] = (uint32_t)pos;
      m.slot[first + __popc(mask & below)] = (uint32_t)slot;
    }
    uint32_t *per_arg = m.per_arg + FL_MISS_COUNTERS * q;
    unsigned ptr_mask = __ballot_sync(0xffffffffu, pointer);
    for (int kind = 0; kind < 2; kind++) {
      unsigned want = kind ? ptr_mask : mask & ~ptr_mask;
      unsigned uniq = __ballot_sync(0xffffffffu, fresh && pointer == (kind == 1));
      uint32_t o = 0;
      if (lane == leader) {
        if (uniq) o = fl_add32(&per_arg[kind], __popc(uniq));
        if (want) fl_add32(&per_arg[2 + kind], __popc(want));
      }
      o = __shfl_sync(0xffffffffu, o, leader);
      if (fresh && pointer == (kind == 1)) {
        const fl_batch_arg &a = args[q];
        uint64_t uid = fl_miss_uid(a.key_offset, a.n, kind, o + __popc(uniq & below));
        m.set.uid[slot] = (uint32_t)uid;
        m.uniq_slot[uid] = (uint32_t)slot;
        m.claim[uid] = 0u;
        m.uniq_ids[uid] = id;
        if (kind) m.uniq_refs[uid] = dram;
        wrote_host = true;
      }
    }
  }
  publish(pub, m.counters, wrote_host);
}

// kFresh: the source is host memory another processor writes (zero-copy
// reads under a seqlock), loaded past every cache (ld.cv) so that a re-read
// sees the row as it is now.
template <typename T, bool kFresh>
__device__ void copy_units(uint8_t *dst, const uint8_t *src, uint32_t unit) {
  const T *s = (const T *)(src + unit * sizeof(T));
  *(T *)(dst + unit * sizeof(T)) = kFresh ? __ldcv(s) : *s;
}

template <bool kFresh = false>
__device__ void copy_unit(uint8_t *dst, const uint8_t *src, uint32_t width, uint32_t unit) {
  if (width == 16) copy_units<uint4, kFresh>(dst, src, unit);
  else if (width == 4) copy_units<unsigned int, kFresh>(dst, src, unit);
  else copy_units<unsigned short, kFresh>(dst, src, unit);
}

// One warp per missed position: copies its unique row from the staging,
// arg a's rows at rows_of(a, pointer) (its staging, in device or host
// memory; pointer: the row is one of its unified-index pointer rows).
// kFresh: the rows may be host memory the host rewrote since the GPU last
// read it (copy_unit).
template <bool kFresh = false, typename RowsOf>
__device__ void scatter_rows(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                             const fl_miss_out &m, RowsOf rows_of, uint64_t n) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t r = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; r < n; r += warps) {
    uint32_t pos = m.pos[r];
    const fl_batch_arg &a = args[fl_batch_find(key_offsets, n_args, pos)];
    uint32_t ua = 0;
    uint64_t row = 0;
    int pointer;
    fl_miss_resolve(key_offsets, args, n_args, m.per_arg, m.set.uid[m.slot[r]], &ua, &row, &pointer);
    uint8_t *dst = a.out + (pos - a.key_offset) * a.vec_bytes;
    const uint8_t *s = rows_of(ua, pointer) + row * a.vec_bytes;
    // Staged rows start 16-byte aligned per arg but pack at vec_bytes, so
    // the unit must divide the source address too.
    uint32_t width = fl_batch_width(a.vec_bytes, (uint64_t)dst | (uint64_t)s);
    for (uint32_t u = lane; u < a.vec_bytes / width; u += 32) copy_unit<kFresh>(dst, s, width, u);
  }
}

__global__ void scatter(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                        fl_miss_out m, const uint64_t *stage_base, const uint8_t *staging,
                        uint64_t n) {
  scatter_rows(args, key_offsets, n_args, m,
               [=](uint32_t a, int) { return staging + stage_base[a]; }, n);
}

// Sum of v over the block (every thread gets it).
__device__ uint64_t block_sum(uint64_t v) {
  __shared__ uint64_t part[32];
  for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();  // part is free: an earlier call's readers are done
  if ((threadIdx.x & 31u) == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  uint64_t s = 0;
  for (unsigned w = 0; w < (blockDim.x + 31) / 32; w++) s += part[w];
  return s;
}

// One warp copies a row of host memory that host threads may be rewriting,
// torn-free, with the store's seqlock protocol (dram_store/seqlock.h): lane 0
// waits for the stripe to be even, the warp copies, and the copy is redone
// when the stripe moved meanwhile. The fences order the stripe's loads around
// the row's, as the host reader's acquire fences do. head (a hashed slot's
// header, or null): the copy is id's row only when, read with it, the slot
// was live and owned by id (dram_store/rows.h); returns whether it is.
__device__ bool seq_copy(uint8_t *dst, const uint8_t *src, uint32_t bytes, const uint32_t *stripe,
                         unsigned lane, const uint64_t *head = nullptr, uint64_t id = 0) {
  uint32_t width = fl_batch_width(bytes, (uint64_t)dst | (uint64_t)src);
  for (;;) {
    uint32_t v = 0;
    int ok = 1;
    if (lane == 0) {
      while ((v = __ldcv(stripe)) & 1u) __nanosleep(100);
      __threadfence_system();
      if (head)
        ok = (__ldcv((const unsigned long long *)head + 1) & FL_SLOT_HEAD_LIVE) &&
             (__ldcv((const unsigned long long *)head) == id || FL_MUTANT_ON(30));
    }
    __syncwarp();
    v = __shfl_sync(0xffffffffu, v, 0);
    for (uint32_t u = lane; u < bytes / width; u += 32) copy_unit<true>(dst, src, width, u);
    __threadfence_system();
    __syncwarp();
    int moved = 0;
    if (lane == 0) moved = __ldcv(stripe) != v;
    if (!__shfl_sync(0xffffffffu, moved, 0)) return __shfl_sync(0xffffffffu, ok, 0);
  }
}

// The batch's unique rows, those that qualify for reads in place among
// them, to every thread of the block: the host's count (zero_copy.h), taken
// on the device.
__device__ fl_zc_count zc_totals(const fl_batch_arg *args, uint32_t n_args, const uint32_t *per_arg,
                                 const fl_zc_table *zc, int pointers) {
  fl_zc_count k = {0, 0, 0};
  for (uint32_t i = threadIdx.x; i < n_args; i += blockDim.x)
    fl_zc_count_arg(&k, per_arg, i, &zc[args[i].table], pointers);
  return {block_sum(k.misses), block_sum(k.pointers), block_sum(k.all)};
}

// The staging offset of arg a (as fl_misses_layout and stage_base have
// it), to every lane of the warp.
__device__ uint64_t warp_stage_base(const fl_batch_arg *args, const uint32_t *per_arg, uint32_t a,
                                    unsigned lane) {
  uint64_t s = 0;
  for (uint32_t i = lane; i < a; i += 32)
    s += fl_miss_stage_bytes(per_arg[FL_MISS_COUNTERS * i] + per_arg[FL_MISS_COUNTERS * i + 1],
                             args[i].vec_bytes);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// A batch whose unique rows all qualify: one warp per missed position. The
// first warp to reach a unique row claims it (m.claim: 0 -> 1), reads it in
// place into the staging and marks it there (2; 3 when a hashed slot no
// longer held the id); the others wait for the mark (its claimer is
// running: no wait can close a cycle). Each then copies the staged row to
// its position, so that every position of an id gets the one copy, as the
// host's scatter gives it; a row marked 3 is the host's to fetch and
// scatter (its m.uniq_refs entry says so: query_kernels.h).
__device__ void place_positions(const fl_batch_arg *args, uint32_t n_args, const fl_miss_out &m,
                                const fl_in_place &ip, unsigned blocks) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = (uint64_t)blocks * (blockDim.x / 32), n = m.counters[0];
  for (uint64_t r = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; r < n; r += warps) {
    const uint32_t pos = m.pos[r], uid = m.set.uid[m.slot[r]];
    uint32_t a = 0;
    uint64_t row = 0;
    int pointer;
    fl_miss_resolve(ip.key_offsets, args, n_args, m.per_arg, uid, &a, &row, &pointer);
    const fl_batch_arg &g = args[a];
    const fl_zc_table &t = ip.zc[g.table];
    uint8_t *stage = ip.staging + warp_stage_base(args, m.per_arg, a, lane) + row * g.vec_bytes;
    int mine = 0;
    uint32_t mark = 2u;
    if (lane == 0) mine = atomicCAS(&m.claim[uid], 0u, 1u) == 0u || FL_MUTANT_ON(29);
    if (__shfl_sync(0xffffffffu, mine, 0)) {
      const uint64_t id = g.ids[pos - g.key_offset];
      if (t.rows) {
        // A dense row, missed or pointed at: at its id.
        seq_copy(stage, t.rows + id * g.vec_bytes, g.vec_bytes, ip.seq + fl_seq_stripe(g.table, id),
                 lane);
      } else {
        // A hashed pointer row: at its reference, if the slot still holds id.
        volatile uint64_t *ref = (volatile uint64_t *)&m.uniq_refs[uid];
        const uint64_t vec = *ref & ~FL_LOC_DRAM_BIT, head = fl_slot_head(vec, t.slots);
        const bool ok = seq_copy(stage, (const uint8_t *)vec, g.vec_bytes,
                                 ip.seq + fl_slot_stripe(g.table, head), lane,
                                 (const uint64_t *)head, id);
        mark = ok ? 2u : 3u;
        if (lane == 0) {
          *ref = ok ? vec : 0ull;
          __threadfence_system();
        }
      }
      __syncwarp();
      if (lane == 0) {
        __threadfence();  // the row before its mark
        atomicExch(&m.claim[uid], mark);
      }
    } else if (lane == 0) {
      while ((mark = *(volatile uint32_t *)&m.claim[uid]) < 2u) __nanosleep(32);
      __threadfence();
    }
    mark = __shfl_sync(0xffffffffu, mark, 0);
    if (mark == 3u) continue;
    uint8_t *dst = g.out + (uint64_t)(pos - g.key_offset) * g.vec_bytes;
    const uint32_t width = fl_batch_width(g.vec_bytes, (uint64_t)dst | (uint64_t)stage);
    // Fresh: another SM may have staged the row since this one last read there.
    for (uint32_t u = lane; u < g.vec_bytes / width; u += 32) copy_unit<true>(dst, stage, width, u);
  }
}

// A batch with rows for the host too: the grid's warps read the unique
// misses of the args read in place into the staging, row by row across all
// such args, for the scatter that follows the host's rows (the host's, or
// a graph's gated one) and for admission.
__device__ void stage_rows(const fl_batch_arg *args, uint32_t n_args, const fl_miss_out &m,
                           const fl_in_place &ip, unsigned blocks) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = (uint64_t)blocks * (blockDim.x / 32),
                 warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
  uint64_t before = 0, base = 0;  // rows read in place before arg a; staging bytes before it
  for (uint32_t a = 0; a < n_args; a++) {
    const fl_batch_arg &g = args[a];
    const uint32_t miss = m.per_arg[FL_MISS_COUNTERS * a], ptr = m.per_arg[FL_MISS_COUNTERS * a + 1];
    const uint8_t *src = ip.zc[g.table].rows;
    if (src) {
      const uint64_t set_base = fl_miss_set_base(g.key_offset, a);
      for (uint64_t r = (warp + warps - before % warps) % warps; r < miss; r += warps) {
        const uint64_t id = fl_miss_set_id(&m.set, set_base, g.n, m.uniq_slot[g.key_offset + r]);
        seq_copy(ip.staging + base + r * g.vec_bytes, src + id * g.vec_bytes, g.vec_bytes,
                 ip.seq + fl_seq_stripe(g.table, id), lane);
      }
      before += miss;
    }
    base += fl_miss_stage_bytes(miss + ptr, g.vec_bytes);
  }
}

// Moves every hit vector: thread tid is lane tid % lanes of key tid /
// lanes of its arg (scan). Then, when the batch takes the device path
// (decided from the counters, as the host decides it: fl_zc_mode), reads
// its qualifying rows in place: every missed position when all its unique
// rows qualify (place_positions: nothing is left for a scatter), else the
// dense misses into the staging (stage_rows), and the args' staging
// offsets (block 0) either way: in its first kInPlaceBlocks blocks only,
// the others done with their hits.
__global__ void copy_hits(const fl_batch_arg *args, const uint64_t *scan_g, uint32_t n_args,
                          uint64_t threads, const uint64_t *locs, fl_miss_out m, fl_in_place ip) {
  fl_await_prior();
  extern __shared__ uint64_t scan_s[];
  const uint64_t *scan = load_scan(scan_s, scan_g, n_args);
  for (uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; tid < threads;
       tid += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t q = fl_batch_find(scan, n_args + 1, tid);
    const fl_batch_arg &a = args[q];
    uint64_t j = tid - scan[q];
    uint64_t k = j / a.lanes;
    if (k >= a.n) continue;
    uint64_t loc = locs[a.key_offset + k];
    if (loc == FL_LOC_NONE) continue;
    // Slab rows are 16-byte aligned, so the width chosen for `out` fits them.
    copy_unit(a.out + k * a.vec_bytes, (const uint8_t *)loc, a.width, (uint32_t)(j % a.lanes));
  }
  const unsigned blocks = gridDim.x < kInPlaceBlocks ? gridDim.x : kInPlaceBlocks;
  if (!ip.limit || blockIdx.x >= blocks || m.counters[0] == 0) return;
  const int mode = fl_zc_mode(zc_totals(args, n_args, m.per_arg, ip.zc, ip.pointers), ip.limit);
  if (mode == FL_ZC_NONE) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t base = 0;
    for (uint32_t a = 0; a < n_args; a++) {
      ip.stage_base[a] = base;
      base += fl_miss_stage_bytes(m.per_arg[FL_MISS_COUNTERS * a] + m.per_arg[FL_MISS_COUNTERS * a + 1],
                                  args[a].vec_bytes);
    }
  }
  if (mode == FL_ZC_ALL) place_positions(args, n_args, m, ip, blocks);
  else stage_rows(args, n_args, m, ip, blocks);
}

// The calibration's reads in place (zc_calibrate.c): rows of one table
// into dst, a warp a row under the seqlocks, as copy_hits reads a batch's
// misses: dense rows `ids` (rows: the table's rows as the device sees
// them), or, rows null, hashed rows at the references `ids` with their
// slots' headers (slots: the table's layout), as pointer rows are read.
__global__ void zc_probe(const uint8_t *rows, fl_slot_layout slots, uint32_t table,
                         uint32_t vec_bytes, const uint64_t *ids, uint32_t n, const uint32_t *seq,
                         uint8_t *dst) {
  const uint64_t r = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
  if (r >= n) return;
  if (rows) {
    seq_copy(dst + r * vec_bytes, rows + ids[r] * vec_bytes, vec_bytes,
             seq + fl_seq_stripe(table, ids[r]), threadIdx.x & 31u);
    return;
  }
  // No owner to ask for: the header is read all the same (its owner word
  // when live), and the copy kept whatever the answer.
  const uint64_t head = fl_slot_head(ids[r], slots);
  seq_copy(dst + r * vec_bytes, (const uint8_t *)ids[r], vec_bytes,
           seq + fl_slot_stripe(table, head), threadIdx.x & 31u, (const uint64_t *)head, 0);
}

// The gate of a prepared query's graph (fl_gate), one warp: first hands the
// host a run's out-of-range id (the host makes no copy while gates may be
// shut); then, for a batch with rows for the host, waits until the host raises the gate for this run (one
// thread polling host memory: a poller per block would queue every block's
// reads behind the others' over PCIe), then gives its verdict to the
// scatter in device memory and copies the host's staging offsets.
__global__ void gate_wait(const fl_batch_arg *args, const uint64_t *key_offsets, uint32_t n_args,
                          fl_miss_out m, const fl_zc_table *zc, uint64_t limit, fl_gate g,
                          uint64_t *stage_base) {
  fl_await_prior();
  const uint32_t want = *g.ticket;
  const uint64_t bad = m.counters[1];
  if (threadIdx.x == 0 && bad != ~0ull) {
    const fl_batch_arg &a = args[fl_batch_find(key_offsets, n_args, bad)];
    g.bad->id = a.ids[bad - a.key_offset];
    __threadfence_system();
    *(volatile uint32_t *)&g.bad->ticket = want;
  }
  // A graph reads no pointer row in place (zero_copy.h).
  if (!fl_zc_host_rows(zc_totals(args, n_args, m.per_arg, zc, 0), limit)) return;
  uint32_t v = 0;
  if (threadIdx.x == 0) {
    while (((v = __ldcv(g.raised)) & ~FL_GATE_FAILED) != want) __nanosleep(1000);
    __threadfence_system();  // the host wrote its staging before the gate
  }
  v = __shfl_sync(0xffffffffu, v, 0);
  if (v & FL_GATE_FAILED) return;
  for (uint32_t i = threadIdx.x; i < n_args; i += blockDim.x) stage_base[i] = __ldcv(g.host_stage_base + i);
  __syncwarp();
  if (threadIdx.x == 0) *g.open = want;
}

// After gate_wait, for a batch with rows for the host and a gate raised as
// open: copies the host's rows (args not read in place, and the pointer
// rows of those read in place, which the host fetches by reference) into
// the device staging, for the admission round, and scatters every missed
// position, host rows straight from the host's staging.
__global__ void gated_scatter(const fl_batch_arg *args, const uint64_t *key_offsets,
                              uint32_t n_args, fl_miss_out m, const fl_zc_table *zc, uint64_t limit,
                              fl_gate g, const uint64_t *stage_base, uint8_t *staging) {
  fl_await_prior();
  const fl_zc_count k = zc_totals(args, n_args, m.per_arg, zc, 0);
  if (!fl_zc_host_rows(k, limit) || *g.open != *g.ticket) return;
  const bool take = fl_zc_mode(k, limit) != FL_ZC_NONE;
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
  for (uint32_t a = 0; a < n_args; a++) {
    const uint32_t miss = m.per_arg[FL_MISS_COUNTERS * a], ptr = m.per_arg[FL_MISS_COUNTERS * a + 1];
    if (take && zc[args[a].table].rows) {
      // Its pointer rows only, in units that stay clear of the rows read
      // in place before them (rows pack at vec_bytes, a multiple of 2).
      const uint64_t lo = stage_base[a] + (uint64_t)miss * args[a].vec_bytes,
                     bytes = (uint64_t)ptr * args[a].vec_bytes;
      const uint32_t width = fl_batch_width((uint32_t)bytes, (uint64_t)(staging + lo) |
                                                                 (uint64_t)(g.host_staging + lo));
      for (uint64_t u = first; u < bytes / width; u += step)
        copy_unit<true>(staging + lo, g.host_staging + lo, width, (uint32_t)u);
      continue;
    }
    const uint64_t units = fl_miss_stage_bytes(miss + ptr, args[a].vec_bytes) / 16;
    for (uint64_t u = first; u < units; u += step)
      copy_unit<true>(staging + stage_base[a], g.host_staging + stage_base[a], 16, (uint32_t)u);
  }
  // Rows read in place are in the device staging; the rest, pointer rows
  // included, in the host's.
  scatter_rows<true>(args, key_offsets, n_args, m,
                     [=](uint32_t a, int pointer) {
                       return (take && zc[args[a].table].rows && !pointer ? staging
                                                                          : g.host_staging) +
                              stage_base[a];
                     },
                     m.counters[0]);
}

unsigned grid_for(uint64_t threads) {
  uint64_t g = (threads + kThreads - 1) / kThreads;
  if (g > 132ull * 64) g = 132ull * 64;  // grid-stride beyond ~64 blocks per SM
  return (unsigned)(g ? g : 1);
}

}  // namespace

extern "C" int fl_launch_index(fl_index_view v, const fl_code *codes, const fl_batch_arg *args,
                               const uint64_t *scan, uint32_t n_args, uint64_t threads,
                               uint64_t n_keys, const uint32_t *now, uint64_t *locs, fl_miss_out m,
                               fl_publish pub, int clear_set, fl_launch_to to) {
  uint64_t slots = fl_miss_set_slots(n_keys, n_args);
  cudaError_t e = cudaSuccess;
  if (clear_set && to.graph) return (int)cudaErrorInvalidValue;  // graphs replay a clean set
  cudaStream_t s = (cudaStream_t)to.stream;
  if (clear_set) e = cudaMemsetAsync(m.set.ids, 0xff, slots * sizeof *m.set.ids, s);
  if (e == cudaSuccess && clear_set)
    e = cudaMemsetAsync(m.set.count, 0, slots * sizeof *m.set.count, s);
  if (e != cudaSuccess) return (int)e;
  size_t smem = (n_args + 1) * sizeof(uint64_t);
  void *params[] = {&v, &codes, &args, &scan, &n_args, &threads, &now, &locs, &m, &pub};
  return (int)fl_launch_kernel(to, (const void *)fused_index, grid_for(threads), kThreads, smem,
                               params);
}

extern "C" int fl_launch_copy_hits(const fl_batch_arg *args, const uint64_t *scan,
                                   uint32_t n_args, uint64_t threads, const uint64_t *locs,
                                   fl_miss_out m, fl_in_place ip, fl_launch_to to) {
  if (threads == 0) return 0;
  size_t smem = (n_args + 1) * sizeof(uint64_t);
  void *params[] = {&args, &scan, &n_args, &threads, &locs, &m, &ip};
  return (int)fl_launch_kernel(to, (const void *)copy_hits, grid_for(threads), kThreads, smem,
                               params);
}

extern "C" int fl_launch_scatter(const fl_batch_arg *args, const uint64_t *key_offsets,
                                 uint32_t n_args, fl_miss_out m, const uint64_t *stage_base,
                                 const uint8_t *staging, uint64_t n, void *stream) {
  if (n == 0) return 0;
  void *params[] = {&args, &key_offsets, &n_args, &m, &stage_base, &staging, &n};
  return (int)fl_launch_kernel(fl_launch_on(stream), (const void *)scatter,
                               grid_for(n * 32), kThreads, 0, params);
}

extern "C" int fl_launch_gated_scatter(const fl_batch_arg *args, const uint64_t *key_offsets,
                                       uint32_t n_args, fl_miss_out m, const fl_zc_table *zc,
                                       uint64_t limit, fl_gate g, uint64_t *stage_base,
                                       uint8_t *staging, fl_launch_to to) {
  if (n_args == 0) return 0;
  void *wait[] = {&args, &key_offsets, &n_args, &m, &zc, &limit, &g, &stage_base};
  cudaError_t e = fl_launch_kernel(to, (const void *)gate_wait, 1, 32, 0, wait);
  if (e != cudaSuccess) return (int)e;
  // One block per SM: small batches are what the gate serves; a large
  // one's copies and scatter stride.
  void *scatter[] = {&args, &key_offsets, &n_args, &m, &zc, &limit, &g, &stage_base, &staging};
  return (int)fl_launch_kernel(to, (const void *)gated_scatter, 132, kThreads, 0, scatter);
}

extern "C" int fl_launch_zc_probe(const uint8_t *rows, fl_slot_layout slots, uint32_t table,
                                  uint32_t vec_bytes, const uint64_t *ids, uint32_t n,
                                  const uint32_t *seq, uint8_t *dst, void *stream) {
  if (n == 0) return 0;
  void *params[] = {&rows, &slots, &table, &vec_bytes, &ids, &n, &seq, &dst};
  return (int)fl_launch_kernel(fl_launch_on(stream), (const void *)zc_probe,
                               grid_for(32ull * n), kThreads, 0, params);
}

extern "C" int fl_query_kernels_load(void) {
  const void *kernels[] = {(const void *)fused_index, (const void *)copy_hits,
                           (const void *)scatter,     (const void *)zc_probe,
                           (const void *)gate_wait,   (const void *)gated_scatter};
  return fl_load_kernels(kernels, (int)(sizeof kernels / sizeof *kernels));
}
