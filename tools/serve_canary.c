/* serve_canary.c: the canary (--canary), a thread that does nothing but
 * read the clock while a level runs, and every FL_SERVE_CALL_EVERY_US make
 * a system call that does nothing; and what its gaps overlap. A gap is a
 * stretch of over FL_SERVE_GAP_US between two of its reads (it did not
 * run), or inside one such call (the kernel, or a sandbox's, held it). Its
 * own run-queue delay over a clock gap says whether the guest's scheduler
 * kept it off a CPU (another thread ran); a gap that delay does not cover
 * is time nobody in the guest accounts: the whole machine, or the sandbox
 * it runs in, stood still. Frozen stretches (serve_frozen.c) and slow
 * requests that overlap a gap stalled with the canary, not for a lock or a
 * device of the process's own. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "tools/serve.h"

static void add_gap(fl_serve_canary *k, uint64_t from, uint64_t to, int syscall,
                    const fl_serve_probe *probe, fl_serve_sched *at) {
  /* Its run-queue delay since the last gap: it only ever waits for a CPU
   * (it never blocks), so the delay lies in its gaps. */
  fl_serve_sched s;
  fl_serve_probe_read(probe, &s);
  fl_serve_sched d = fl_serve_sched_diff(at, &s);
  *at = s;
  if (k->n == k->cap) {
    uint64_t cap = k->cap ? 2 * k->cap : 256;
    fl_serve_gap *g = realloc(k->gaps, cap * sizeof *g);
    if (!g) {
      k->lost++;
      return;
    }
    k->gaps = g, k->cap = cap;
  }
  k->gaps[k->n++] =
      (fl_serve_gap){(int64_t)(from - k->t0), (int64_t)(to - from), d.run_delay_ns, syscall};
}

void *fl_serve_canary_main(void *arg) {
  fl_serve_canary *k = arg;
  fl_serve_probe probe;
  fl_serve_probe_open(&probe);
  fl_serve_sched at;
  fl_serve_probe_read(&probe, &at);
  const uint64_t gap_ns = (uint64_t)(FL_SERVE_GAP_US * 1e3);
  const uint64_t every_ns = (uint64_t)(FL_SERVE_CALL_EVERY_US * 1e3);
  uint64_t last = fl_now_ns(), call_at = last + every_ns;
  while (__atomic_load_n(&k->on, __ATOMIC_ACQUIRE)) {
    uint64_t now = fl_now_ns();
    if (now - last > gap_ns) {
      add_gap(k, last, now, 0, &probe, &at);
      now = fl_now_ns(); /* the probe's own time is not the next gap's */
    }
    if (now >= call_at) {
      (void)syscall(SYS_getppid);
      uint64_t back = fl_now_ns();
      if (back - now > gap_ns) {
        add_gap(k, now, back, 1, &probe, &at);
        back = fl_now_ns();
      }
      now = back;
      call_at = now + every_ns;
    }
    last = now;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  fl_serve_probe_close(&probe);
  return NULL;
}

fl_status fl_serve_canary_of(const fl_serve_level *l, uint32_t workers, fl_serve_canary_sum *out) {
  *out = (fl_serve_canary_sum){0};
  for (uint64_t i = 0; i < l->n_gaps; i++) {
    const fl_serve_gap *g = &l->gaps[i];
    fl_serve_gap_sum *s = g->syscall ? &out->syscall : &out->clock;
    s->gaps++;
    s->total_ms += g->len_ns / 1e6;
    if (g->len_ns / 1e3 > s->longest_us) s->longest_us = g->len_ns / 1e3;
    if (g->run_delay_ns < 0) {
      s->unknown++;
    } else if (2 * g->run_delay_ns < g->len_ns) {
      s->unaccounted++;
      s->unaccounted_ms += (g->len_ns - g->run_delay_ns) / 1e6;
    }
  }
  fl_serve_frozen z;
  fl_status st = fl_serve_frozen_of(l, workers, &z, NULL);
  if (st != FL_OK) return st;
  out->frozen = z.count;
  out->clock.frozen_gapped = z.gapped[0];
  out->syscall.frozen_gapped = z.gapped[1];
  /* Slow: served for longer than the frozen stretches' threshold. */
  for (uint64_t i = 0; i < l->n; i++) {
    const fl_serve_record *r = &l->rec[i];
    if (l->service_us[i] <= z.threshold_us) continue;
    out->slow++;
    out->clock.slow_gapped += fl_serve_gapped(l, r->start_ns, r->end_ns, 0);
    out->syscall.slow_gapped += fl_serve_gapped(l, r->start_ns, r->end_ns, 1);
  }
  return FL_OK;
}
