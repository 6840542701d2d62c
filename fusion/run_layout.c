/* run_layout.c: a part batch's scratch on the CUDA engine (run_layout.h):
 * its layout, its typed views, and the header built once per scratch and
 * refreshed per run. */
#include "fusion/run_layout.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "common/carve.h"
#include "common/clock.h"
#include "common/error.h"
#include "fusion/device_view.h"

void fl_run_layout_plan(const fl_part_batch *b, uint64_t host_ids, uint64_t out_bytes,
                        fl_run_layout *l) {
  uint64_t n = b->n_keys, na = b->n_args, sets = fl_miss_set_slots(n, b->n_args);
  fl_carve d = {0};
  l->args = fl_carve_add(&d, na * sizeof(fl_batch_arg), 256);
  l->scan_index = fl_carve_add(&d, (na + 1) * 8, 256);
  l->scan_copy = fl_carve_add(&d, (na + 1) * 8, 256);
  l->offsets = fl_carve_add(&d, na * 8, 256);
  l->codes = fl_carve_add(&d, b->f->n_tables * sizeof(fl_code), 256);
  l->table_cls = fl_carve_add(&d, b->f->n_tables * 4, 256);
  l->zc = fl_carve_add(&d, b->f->n_tables * sizeof(fl_zc_table), 256);
  l->counter_bytes = 16 + FL_MISS_COUNTERS * 4 * na;
  l->counters = fl_carve_add(&d, l->counter_bytes, 256); /* start values come with the header */
  /* the batch counter, the index kernel's finished blocks, the gate's ticket */
  l->run = fl_carve_add(&d, 12, 256);
  l->ids = fl_carve_add(&d, host_ids * 8, 256);
  l->header_end = fl_carve_size(&d, 256);
  l->head = fl_align_up(na * 8, 256);
  uint64_t upload = l->head + n * fl_align_up(b->max_row, 16) + 16 * na;
  l->locs = fl_carve_add(&d, n * 8, 256);
  l->miss_pos = fl_carve_add(&d, n * 4, 256);
  l->miss_slot = fl_carve_add(&d, n * 4, 256);
  l->set_ids = fl_carve_add(&d, sets * 8, 256);
  l->set_count = fl_carve_add(&d, sets * 4, 256);
  l->set_uid = fl_carve_add(&d, sets * 4, 256);
  l->uniq_slot = fl_carve_add(&d, n * 4, 256);
  l->claim = fl_carve_add(&d, n * 4, 256);
  l->choice = fl_carve_add(&d, n * 4, 256);
  l->gate = fl_carve_add(&d, 4, 256); /* the gate's verdict (fl_gate.open) */
  l->upload = fl_carve_add(&d, upload, 256);
  l->out = fl_carve_add(&d, out_bytes, 256);
  l->total = fl_carve_size(&d, 256);
  fl_carve h = {l->header_end};
  l->h_counters = fl_carve_add(&h, l->counter_bytes, 256);
  l->h_flag = fl_carve_add(&h, 4, 256);
  l->h_gate = fl_carve_add(&h, sizeof(fl_gate_bad), 256); /* raised word, out-of-range id */
  l->h_uniq_ids = fl_carve_add(&h, n * 8, 256);
  l->h_uniq_refs = fl_carve_add(&h, n * 8, 256);
  l->h_upload = fl_carve_add(&h, upload, 256);
  l->host_total = fl_carve_size(&h, 256);
}

static fl_run_header header_at(const fl_run_layout *l, uint8_t *base) {
  return (fl_run_header){(fl_batch_arg *)(base + l->args),
                         (uint64_t *)(base + l->scan_index),
                         (uint64_t *)(base + l->scan_copy),
                         (uint64_t *)(base + l->offsets),
                         (fl_code *)(base + l->codes),
                         (uint32_t *)(base + l->table_cls),
                         (fl_zc_table *)(base + l->zc),
                         (unsigned long long *)(base + l->counters),
                         (uint32_t *)(base + l->run),
                         (uint64_t *)(base + l->ids)};
}

void fl_run_views_of(const fl_run_layout *l, const fl_scratch *x, fl_run_views *v) {
  uint8_t *D = x->dev, *H = x->host;
  v->d = header_at(l, D);
  v->h = header_at(l, H);
  v->locs = (uint64_t *)(D + l->locs);
  v->choice = (uint32_t *)(D + l->choice);
  v->gate = (uint32_t *)(D + l->gate);
  v->stage_base = (uint64_t *)(D + l->upload);
  v->staging = D + l->upload + l->head;
  v->head = l->head;
  v->out = D + l->out;
  v->m = (fl_miss_out){{(uint64_t *)(D + l->set_ids), (uint32_t *)(D + l->set_uid),
                        (uint32_t *)(D + l->set_count)},
                       (uint32_t *)(v->d.counters + 2),
                       (uint32_t *)(D + l->miss_pos),
                       (uint32_t *)(D + l->miss_slot),
                       (uint32_t *)(D + l->uniq_slot),
                       (uint64_t *)(H + l->h_uniq_ids),
                       (uint64_t *)(H + l->h_uniq_refs),
                       (uint32_t *)(D + l->claim),
                       v->d.counters};
  v->h_counters = (const unsigned long long *)(H + l->h_counters);
  v->h_per_arg = (const uint32_t *)(v->h_counters + 2);
  v->h_flag = (uint32_t *)(H + l->h_flag);
  v->h_gate = (fl_gate_bad *)(H + l->h_gate);
  v->h_stage_base = (uint64_t *)(H + l->h_upload);
  v->h_staging = H + l->h_upload + l->head;
}

/* Pinned host memory is device-mapped at the same address (UVA). */
fl_publish fl_run_publish(const fl_run_layout *l, const fl_run_views *v) {
  return (fl_publish){v->d.run + 1, (uint32_t *)v->h_counters, v->h_flag,
                      (uint32_t)(l->counter_bytes / 4)};
}

fl_gate fl_run_gate(const fl_run_views *v) {
  return (fl_gate){&v->h_gate->raised, v->h_gate,        v->d.run + 2,
                   v->gate,            v->h_stage_base, v->h_staging};
}

/* The device-usable ids and outputs of each arg (NULL: in host memory),
 * the ids in host memory and the device bytes their outputs need. */
static void resolve_args(const fl_part_batch *b, fl_batch_arg *dargs, uint64_t *host_ids,
                         uint64_t *out_bytes) {
  fl_carve outs = {0}; /* the device buffers of outputs in unregistered memory */
  fl_view_ranges r = {0};
  *host_ids = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_query_view *v = b->views ? &b->views[b->query_of[a]] : NULL;
    dargs[a] = b->args[a];
    dargs[a].ids = v ? v->ids : fl_device_view(&r, b->args[a].ids);
    if (!dargs[a].ids) *host_ids += b->args[a].n;
    /* A prefetch's outputs (NULL) are the scratch's, never downloaded. */
    dargs[a].out = v                 ? v->out
                   : b->args[a].out ? (uint8_t *)fl_device_view(&r, b->args[a].out)
                                    : NULL;
    if (!dargs[a].out) fl_carve_add(&outs, (uint64_t)b->args[a].n * b->args[a].vec_bytes, 256);
  }
  *out_bytes = fl_carve_size(&outs, 256);
}

/* Fills the header's args, scans, offsets, codes and classes, placing ids
 * and outputs in host memory in the scratch (as resolve_args sized them). */
static void fill_header(const fl_part_batch *b, fl_run_setup *s, const fl_run_views *v) {
  uint64_t ids_at = 0;
  fl_carve out_at = {0}; /* placed as resolve_args sized them */
  v->h.scan_index[0] = v->h.scan_copy[0] = 0;
  for (uint32_t a = 0; a < b->n_args; a++) {
    fl_batch_arg *d = &s->dargs[a];
    if (!d->ids) {
      d->ids = v->d.ids + ids_at;
      ids_at += d->n;
    }
    if (!d->out) {
      s->host_out[a] = b->args[a].out;
      d->out = v->out + fl_carve_add(&out_at, (uint64_t)d->n * d->vec_bytes, 256);
    }
    d->width = fl_batch_width(d->vec_bytes, (uint64_t)(uintptr_t)d->out);
    d->lanes = d->vec_bytes / d->width;
    v->h.offsets[a] = d->key_offset;
    v->h.scan_index[a + 1] = v->h.scan_index[a] + fl_align_up(d->n, 32);
    v->h.scan_copy[a + 1] = v->h.scan_copy[a] + fl_align_up((uint64_t)d->n * d->lanes, 32);
  }
  memcpy(v->h.args, s->dargs, b->n_args * sizeof *s->dargs);
  const fl_cache_fixed *f = b->f;
  for (uint32_t t = 0; t < f->n_tables; t++) {
    v->h.codes[t] = f->tables[t].code;
    v->h.table_cls[t] = f->tables[t].cls;
    v->h.zc[t].rows = f->cuda->zc_rows ? f->cuda->zc_rows[t] : NULL;
    v->h.zc[t].slots = f->cuda->zc_slots ? f->cuda->zc_slots[t] : (fl_slot_layout){0, 0};
  }
  s->index_threads = v->h.scan_index[b->n_args];
  s->copy_threads = v->h.scan_copy[b->n_args];
}

fl_status fl_run_setup_new(fl_part_batch *b, fl_run_setup *s) {
  fl_cache *c = b->c;
  *s = (fl_run_setup){0};
  s->dargs = malloc(b->n_args * sizeof *s->dargs);
  s->host_out = calloc(b->n_args, sizeof *s->host_out);
  if (!s->dargs || !s->host_out) {
    fl_run_setup_free(c, s);
    return fl_fail(c, FL_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint64_t host_ids, out_bytes, t0 = fl_now_ns();
  resolve_args(b, s->dargs, &host_ids, &out_bytes);
  fl_query_timing *tm = fl_query_timing_here();
  if (!b->views) tm->setup_find_ns += fl_now_ns() - t0;
  fl_run_layout_plan(b, host_ids, out_bytes, &s->l);
  fl_status st = fl_scratch_acquire(c, s->l.total, s->l.host_total, b->part, &s->x,
                                    &tm->setup_wait_ns, &tm->setup_grow_ns);
  if (st != FL_OK) {
    fl_run_setup_free(c, s);
    return st;
  }
  fl_run_views v;
  fl_run_views_of(&s->l, s->x, &v);
  fill_header(b, s, &v);
  return FL_OK;
}

void fl_run_setup_free(fl_cache *c, fl_run_setup *s) {
  if (s->x) fl_scratch_release(c, s->x);
  free(s->dargs);
  free(s->host_out);
  *s = (fl_run_setup){0};
}

void fl_run_header_refresh(const fl_part_batch *b, const fl_run_setup *s, const fl_run_views *v,
                           uint32_t ticket) {
  const uint64_t *in_header = v->d.ids;
  for (uint32_t a = 0; a < b->n_args; a++) {
    const fl_batch_arg *d = &s->dargs[a];
    if (d->ids >= in_header && d->ids < in_header + (s->l.header_end - s->l.ids) / 8)
      memcpy(v->h.ids + (d->ids - in_header), b->args[a].ids, (size_t)d->n * 8);
  }
  memset(v->h.counters, 0, s->l.counter_bytes);
  v->h.counters[1] = ~0ull;
  v->h.run[0] = b->now;
  v->h.run[1] = 0;
  v->h.run[2] = ticket;
  __atomic_store_n(v->h_flag, 0u, __ATOMIC_RELAXED);
}
