/* serve_opts.c: serve_bench's command line (its own options, then replay's
 * workload, model and cache options) and the request size distribution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/opt_args.h"
#include "tools/serve.h"
#include "tools/trace/zipf.h"

/* The default mix: from a small request (a few candidates) to a large one,
 * each equally likely; mean 848 samples. */
static const uint32_t default_sizes[] = {64, 256, 1024, 2048};
static const double default_loads[] = {0.3, 0.5, 0.7, 0.9};

static void defaults(fl_serve_opts *o) {
  memset(o, 0, sizeof *o);
  fl_replay_opts_default(&o->w);
  o->threads = 4;
  o->seconds = 2;
  o->n_loads = sizeof default_loads / sizeof *default_loads;
  memcpy(o->loads, default_loads, sizeof default_loads);
  o->sizes.n = sizeof default_sizes / sizeof *default_sizes;
  memcpy(o->sizes.list, default_sizes, sizeof default_sizes);
  o->stalls = 10;
  o->sample_ms = 5;
  o->warm_seconds = 10;
  o->trace_window_ms = 3;
}

/* --quick: a run of a few seconds (the test): a small pool, short levels. */
static void quick(fl_serve_opts *o) {
  o->seconds = 0.3;
  o->n_loads = 2;
  o->loads[0] = 0.5, o->loads[1] = 0.9;
  o->warm_seconds = 1;
  o->stalls = 3;
  if (!o->w.batches) o->w.batches = 2;
}

static void usage(FILE *f) {
  fputs("usage: serve_bench [options]\n"
        "Serves requests through the cache with K worker threads, each on its own CUDA\n"
        "stream: first closed loop (saturation), then open loop with Poisson arrivals\n"
        "into one shared queue at fractions of that rate. Prints per level the offered\n"
        "and achieved rates, latency percentiles from the scheduled arrival, the hit\n"
        "rate, and the slowest requests.\n\n"
        "  --threads K         worker threads [4]\n"
        "  --seconds S         seconds per measured level [2]\n"
        "  --loads L           open-loop rates, fractions of the closed loop's\n"
        "                      [0.3,0.5,0.7,0.9]\n"
        "  --sizes SPEC        samples per request: a list (uniform over it) or\n"
        "                      log:LO-HI (log-uniform) [64,256,1024,2048]\n"
        "  --device-ids        CUDA: copy ids to device memory first (default: fl_query\n"
        "                      reads them from pinned host memory)\n"
        "  --no-reserve        skip fl_cache_reserve for the K workers' largest request\n"
        "                      (default: reserved before the warm-up, as a server does,\n"
        "                      for at most 62 workers)\n"
        "  --stalls N          slowest requests reported per level [10]\n"
        "  --canary            a thread spins on the clock during each level, with a\n"
        "                      system call that does nothing every 20 us, and keeps its\n"
        "                      gaps over 100 us: time it did not run (the scheduler's,\n"
        "                      or the whole machine's) or spent in a call (the kernel's);\n"
        "                      the report counts the frozen stretches and slow requests\n"
        "                      they overlap\n"
        "  --warm-seconds S    longest warm-up [10]\n"
        "  --sample-ms N       read the cache's counters every N ms, for the stall\n"
        "                      report (it takes the cache's lock); 0: never [5]\n"
        "  --host-threads N    the library's host threads [store: half the cores]\n"
        "  --json FILE         the results as JSON\n"
        "  --svg FILE          latency percentiles against offered load\n"
        "  --trace FILE        the levels' requests, their phases and the cache's counters\n"
        "                      as a trace (Trace Event Format: ui.perfetto.dev opens it)\n"
        "  --trace-window MS   trace each level within MS of its --stalls slowest\n"
        "                      requests, by service and by total; 0: whole levels\n"
        "                      (hundreds of MB) [3]\n"
        "  --quick             a short run (0.3 s levels at 0.5 and 0.9, 2 batches)\n"
        "Workload, model and cache, as replay's (replay --help): --batch N, --batches N\n"
        "  (the request pool: N generator batches of N samples [replay's: 128, host 16]),\n"
        "  --tables, --scale, --exponent, --hashed, --seed, --dim, --fp16, --model,\n"
        "  --model-npy, --model-hugectr, --store, --store-ns, --dram-budget-pct,\n"
        "  --budget-pct [5], --budget-bytes, --unified, --admit, --admit-policy,\n"
        "  --max-load, --zero-copy-rows, --watermarks, --layout, --backend,\n"
        "  --quiet\n",
        f);
}

/* "0.3,0.5": each in (0, 4]. */
static int parse_loads(fl_serve_opts *o, const char *v) {
  o->n_loads = 0;
  for (const char *p = v; *p;) {
    char *end;
    double x = strtod(p, &end);
    if (end == p || !(x > 0 && x <= 4) || (*end && *end != ',') || o->n_loads == FL_SERVE_MAX_LOADS)
      return fl_opt_bad("--loads", v, "fractions in (0, 4], comma-separated");
    o->loads[o->n_loads++] = x;
    p = *end ? end + 1 : end;
  }
  return o->n_loads ? 1 : fl_opt_bad("--loads", v, "at least one fraction");
}

/* "64,256" or "log:1-2048"; sizes 1 .. 1 << 20. */
static int parse_sizes(fl_serve_sizes *s, const char *v) {
  const uint32_t most = 1u << 20;
  memset(s, 0, sizeof *s);
  if (!strncmp(v, "log:", 4)) {
    char *mid, *end;
    unsigned long lo = strtoul(v + 4, &mid, 10), hi = *mid == '-' ? strtoul(mid + 1, &end, 10) : 0;
    if (*mid != '-' || *end || lo < 1 || hi < lo || hi > most)
      return fl_opt_bad("--sizes", v, "log:LO-HI with 1 <= LO <= HI <= 1048576");
    s->log_uniform = 1, s->lo = (uint32_t)lo, s->hi = (uint32_t)hi;
    return 1;
  }
  for (const char *p = v; *p;) {
    char *end;
    unsigned long x = strtoul(p, &end, 10);
    if (end == p || x < 1 || x > most || (*end && *end != ',') || s->n == FL_SERVE_MAX_SIZES)
      return fl_opt_bad("--sizes", v, "sizes 1..1048576, comma-separated, or log:LO-HI");
    s->list[s->n++] = (uint32_t)x;
    p = *end ? end + 1 : end;
  }
  return s->n ? 1 : fl_opt_bad("--sizes", v, "at least one size");
}

/* Replay's options that make no sense here (its --threads is --host-threads:
 * ours come first). */
static int refused(const char *a) {
  static const char *const no[] = {"--format", "--switch-at", "--switch-exponent", "--compare",
                                   "--verify", "--prepared", "--plot"};
  for (size_t k = 0; k < sizeof no / sizeof *no; k++)
    if (!strcmp(a, no[k])) return 1;
  return 0;
}

/* One of serve_bench's own options: 1 consumed, 0 not ours, -1 bad value. */
static int own_option(fl_serve_opts *o, int argc, char **argv, int *i) {
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!strcmp(a, "--device-ids")) return o->device_ids = 1;
  if (!strcmp(a, "--no-reserve")) return o->no_reserve = 1, 1;
  if (!strcmp(a, "--canary")) return o->canary = 1, 1;
  static const char *const with_value[] = {"--threads",   "--seconds",      "--loads",
                                           "--sizes",     "--stalls",       "--warm-seconds",
                                           "--sample-ms", "--host-threads", "--trace",
                                           "--trace-window", "--svg"};
  int known = 0;
  for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
    known |= !strcmp(a, with_value[k]);
  if (!known) return 0;
  ++*i;
  if (!strcmp(a, "--threads")) {
    int r = fl_opt_u32(a, v, &o->threads);
    return r > 0 && (o->threads == 0 || o->threads > 1024) ? fl_opt_bad(a, v, "1..1024") : r;
  }
  if (!strcmp(a, "--seconds")) return fl_opt_double(a, v, 0.01, &o->seconds);
  if (!strcmp(a, "--warm-seconds")) return fl_opt_double(a, v, 0, &o->warm_seconds);
  if (!strcmp(a, "--loads")) return v ? parse_loads(o, v) : fl_opt_bad(a, v, "a value");
  if (!strcmp(a, "--sizes")) return v ? parse_sizes(&o->sizes, v) : fl_opt_bad(a, v, "a value");
  if (!strcmp(a, "--stalls")) return fl_opt_u32(a, v, &o->stalls);
  if (!strcmp(a, "--sample-ms")) return fl_opt_u32(a, v, &o->sample_ms);
  if (!strcmp(a, "--host-threads")) return fl_opt_u32(a, v, &o->w.threads);
  if (!strcmp(a, "--trace-window")) return fl_opt_double(a, v, 0, &o->trace_window_ms);
  if (!strcmp(a, "--trace")) return v ? (o->trace = v, 1) : fl_opt_bad(a, v, "a value");
  return v ? (o->svg = v, 1) : fl_opt_bad(a, v, "a value"); /* --svg, the last one listed */
}

int fl_serve_parse(fl_serve_opts *o, int argc, char **argv) {
  defaults(o);
  /* --quick first, so that options given with it override its values. */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--quick")) quick(o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 1;
    if (!strcmp(a, "--quick")) continue;
    int r = 0;
    if (!refused(a)) {
      r = own_option(o, argc, argv, &i);
      if (r == 0) r = fl_replay_parse_option(&o->w, argc, argv, &i);
    }
    if (r < 0) return -1;
    if (r == 0) {
      fprintf(stderr, "error: unexpected argument '%s' (see --help)\n", a);
      return -1;
    }
  }
  return 0;
}

uint32_t fl_serve_draw_size(const fl_serve_sizes *s, uint64_t *rng) {
  double u = (double)(fl_rng_next(rng) >> 11) * 0x1p-53; /* [0, 1) */
  if (!s->log_uniform) return s->list[(uint32_t)(u * s->n)];
  /* exp of a uniform log in [lo, hi + 1): each integer k gets the share
   * log((k + 1) / k) of the range. */
  double x = exp(log(s->lo) + u * (log(s->hi + 1.0) - log(s->lo)));
  uint32_t k = (uint32_t)x;
  return k < s->lo ? s->lo : k > s->hi ? s->hi : k;
}

void fl_serve_sizes_desc(const fl_serve_sizes *s, char *buf, size_t cap) {
  if (s->log_uniform) {
    snprintf(buf, cap, "log:%u-%u", s->lo, s->hi);
    return;
  }
  size_t at = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < s->n && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%u", i ? "," : "", s->list[i]);
}
