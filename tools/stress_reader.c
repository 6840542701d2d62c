/* stress_reader.c: the stress run's reader threads: each draws skewed ids,
 * poisons every buffer the answer passes through, asks its way (fl_query,
 * a prepared run or a prepared launch), and judges every row it gets back
 * under its hold (stress.c's opening comment). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stress.h"

/* Per table 0..MAX_IDS skewed ids (a prepared query: as many as it was
 * prepared for), one in eight a repeat of the one before. */
static void draw(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    const table *tb = &r->s->tables[t];
    if (!r->prepared) l->n = next(&r->rng) % (MAX_IDS + 1);
    for (size_t i = 0; i < l->n; i++) {
      int repeat = i && next(&r->rng) % 8 == 0;
      l->rows[i] = repeat ? l->rows[i - 1] : skewed(&r->rng, tb->shape->corpus);
      l->ids[i] = row_id(tb, l->rows[i]);
    }
  }
}

static void snapshot(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    for (size_t i = 0; i < l->n; i++)
      l->before[i] = atomic_load(&r->s->tables[t].state[l->rows[i]].done);
  }
}

/* POISON into every buffer the answer passes through: the lanes' host
 * buffers (the answer, or on CUDA its download) and, when the query writes
 * device memory, the device block, on the reader's stream ahead of the
 * query's own work. */
static int poison(reader *r, int device) {
  for (uint32_t t = 0; t < r->s->n_tables; t++)
    memset(r->lanes[t].out, POISON, r->lanes[t].n * r->s->tables[t].row_bytes);
  return !device || cuda_ok(r->s, "cudaMemsetAsync of poison",
                            cudaMemsetAsync(r->out_dev, POISON, r->out_dev_bytes,
                                            (cudaStream_t)r->stream));
}

/* The drawn ids into the device buffers, on the reader's stream (CUDA). */
static int upload_ids(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    if (l->n && !cuda_ok(r->s, "cudaMemcpyAsync of ids",
                         cudaMemcpyAsync(l->ids_dev, l->ids, l->n * sizeof *l->ids,
                                         cudaMemcpyHostToDevice, (cudaStream_t)r->stream)))
      return 0;
  }
  return 1;
}

static int from_device(reader *r) {
  for (uint32_t t = 0; t < r->s->n_tables; t++) {
    lane *l = &r->lanes[t];
    if (l->n && !cuda_ok(r->s, "cudaMemcpyAsync of answers",
                         cudaMemcpyAsync(l->out, l->out_dev, l->n * r->s->tables[t].row_bytes,
                                         cudaMemcpyDeviceToHost, (cudaStream_t)r->stream)))
      return 0;
  }
  return 1;
}

/* Asks for the drawn ids the reader's way; the answers end up in the
 * lanes' host buffers, complete. CUDA: fl_query's odd iterations pass device
 * ids and outputs, its even ones host memory (pageable, staged by the
 * library); a prepared query was prepared over the device buffers. */
static int query(reader *r, uint64_t iter) {
  stress *s = r->s;
  cudaStream_t stream = (cudaStream_t)r->stream;
  int device = s->cuda && (r->prepared || (iter & 1));
  for (uint32_t t = 0; !r->prepared && t < s->n_tables; t++) {
    lane *l = &r->lanes[t];
    r->q[t] = device ? (fl_table_query){t, l->ids_dev, l->n, l->out_dev}
                     : (fl_table_query){t, l->ids, l->n, l->out};
  }
  if (!poison(r, device) || (device && !upload_ids(r))) return 0;
  snapshot(r);
  int ok;
  if (r->how == ASK_QUERY) {
    ok = cache_ok(s, "fl_query", fl_query(s->cache, r->q, s->n_tables, stream));
  } else if (r->how == ASK_PREPARED_LAUNCH) {
    ok = cache_ok(s, "fl_prepared_launch", fl_prepared_launch(r->prepared, stream)) &&
         cache_ok(s, "fl_prepared_wait", fl_prepared_wait(r->prepared));
  } else {
    ok = cache_ok(s, "fl_prepared_run", fl_prepared_run(r->prepared, stream));
  }
  if (ok && device) ok = from_device(r);
  if (s->cuda) ok &= cuda_ok(s, "cudaStreamSynchronize", cudaStreamSynchronize(stream));
  return ok;
}

static void check(reader *r, uint64_t end) {
  stress *s = r->s;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    const lane *l = &r->lanes[t];
    const table *tb = &s->tables[t];
    for (size_t i = 0; i < l->n; i++) {
      uint64_t got;
      verdict v = judge(tb, l->ids[i], l->out + i * tb->row_bytes, &tb->state[l->rows[i]],
                        l->before[i], end, r->scratch, &got);
      r->tally[t].n[v]++;
      if (v >= FIRST_VIOLATION) describe(s, tb, l->ids[i], v, got, l->before[i], end);
    }
  }
}

/* One query of the lanes' ids, and its check under the reader's hold (the
 * hold taken before end is loaded: stress.c's opening comment). */
void ask_and_check(reader *r, uint64_t iter) {
  if (!query(r, iter)) return;
  atomic_store(r->hold, HOLD_PENDING);
  uint64_t end = atomic_load(&r->s->clock);
  atomic_store(r->hold, end);
  check(r, end);
  atomic_store(r->hold, HOLD_NONE);
}

void *reader_main(void *arg) {
  reader *r = arg;
  for (uint64_t iter = 0; !atomic_load(&r->s->stop); iter++) {
    draw(r);
    ask_and_check(r, iter);
    r->queries++;
  }
  return NULL;
}

void reader_free(reader *r) {
  fl_prepared_destroy(r->prepared);
  for (uint32_t t = 0; r->lanes && t < r->s->n_tables; t++) {
    free(r->lanes[t].out);
    if (r->s->cuda) cudaFree(r->lanes[t].ids_dev);
  }
  if (r->s->cuda) cudaFree(r->out_dev);
  if (r->stream) cudaStreamDestroy((cudaStream_t)r->stream);
  free(r->lanes);
  free(r->q);
  free(r->scratch);
  free(r->tally);
}

/* A prepared query over the lanes' buffers (CUDA: the device ones), each
 * table's size MAX_IDS when `full`, else drawn once. */
static int reader_prepare(reader *r, int full) {
  stress *s = r->s;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    lane *l = &r->lanes[t];
    l->n = full ? MAX_IDS : next(&r->rng) % (MAX_IDS + 1);
    r->q[t] = (fl_table_query){t, s->cuda ? l->ids_dev : l->ids, l->n,
                               s->cuda ? l->out_dev : (void *)l->out};
  }
  return cache_ok(s, "fl_query_prepare",
                  fl_query_prepare(s->cache, r->q, s->n_tables, &r->prepared));
}

/* Reader `index` (its hold: s->holds[index]), asking the way `how`; a
 * prepared one of MAX_IDS ids per table when `full`. */
int reader_init(stress *s, reader *r, uint32_t index, ask how, int full) {
  *r = (reader){.s = s, .how = how, .rng = fl_hash2(s->o.seed, index), .hold = &s->holds[index]};
  r->lanes = calloc(s->n_tables, sizeof *r->lanes);
  r->q = calloc(s->n_tables, sizeof *r->q);
  r->scratch = malloc(s->widest);
  r->tally = calloc(s->n_tables, sizeof *r->tally);
  int ok = r->lanes && r->q && r->scratch && r->tally;
  for (uint32_t t = 0; ok && t < s->n_tables; t++) {
    ok = (r->lanes[t].out = malloc(MAX_IDS * s->tables[t].row_bytes)) != NULL;
    r->out_dev_bytes += MAX_IDS * s->tables[t].row_bytes;
  }
  if (!ok) {
    fprintf(stderr, "error: out of host memory for reader %u\n", index);
    return 0;
  }
  if (s->cuda) {
    cudaStream_t stream;
    if (!cuda_ok(s, "cudaStreamCreate", cudaStreamCreate(&stream))) return 0;
    r->stream = stream;
    if (!cuda_ok(s, "cudaMalloc", cudaMalloc(&r->out_dev, r->out_dev_bytes))) return 0;
  }
  size_t at = 0;
  for (uint32_t t = 0; ok && s->cuda && t < s->n_tables; t++) {
    lane *l = &r->lanes[t];
    l->out_dev = (unsigned char *)r->out_dev + at;
    at += MAX_IDS * s->tables[t].row_bytes;
    ok = cuda_ok(s, "cudaMalloc", cudaMalloc((void **)&l->ids_dev, MAX_IDS * sizeof *l->ids_dev));
  }
  return ok && (r->how == ASK_QUERY || reader_prepare(r, full));
}
