/* stress_opts.c: the stress run's command line: --help, the options and
 * their ranges (a usage error exits 2), and which way each reader asks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stress.h"

const char *const ask_key[N_ASKS] = {"fl_query", "prepared_run", "prepared_launch"};

static void usage(FILE *f) {
  fputs("usage: stress [options]\n"
        "Readers query a small cache (evictions, admission 0.5, the unified index\n"
        "switched on and off) while writers upsert, remove and re-add rows and clear\n"
        "the cache; every returned row is checked: never torn, another id's or older\n"
        "than the version complete before the query (rule in tools/stress.c).\n\n"
        "  --backend B     auto|host|cuda [auto; env FL_BACKEND]\n"
        "  --layout L      flat|per-table [flat]\n"
        "  --seconds S     run time [10]\n"
        "  --readers N     query threads, each on its own CUDA stream, 1..64 [4]\n"
        "  --ask LIST      how readers ask, in turn (the final pass asks every way):\n"
        "                  fl_query,prepared_run,prepared_launch [all three]\n"
        "  --writers W     store writer threads; writer 0 also clears, resizes and\n"
        "                  syncs the cache every 50 ms [1]\n"
        "  --tables T      tables: dense fp32, dense fp16, hashed fp32, repeated [3]\n"
        "  --budget-kb K   cache budget in KiB [768]\n"
        "  --seed N        ids, writes and admission coin [1]\n"
        "  --zero-copy-rows N  CUDA: batches with at most N distinct dense misses\n"
        "                  read them in place, under the writers [256]\n"
        "  --unified N     unified-index entries when writer 0 switches them on;\n"
        "                  0: a cache created without them (the default config's\n"
        "                  index of 32-bit locations), never switched [2048]\n"
        "  --json FILE     the summary as JSON\n"
        "  -h, --help      this text\n"
        "Exit codes: 0 no violation, 1 violations or a failed setup, 2 usage error.\n",
        f);
}

static int bad(const char *opt, const char *v, const char *want) {
  fprintf(stderr, "error: %s '%s': expected %s (see --help)\n", opt, v ? v : "", want);
  return -1;
}

/* An integer in [lo, hi]. */
static int u64_arg(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = v ? strtoull(v, &end, 0) : 0;
  if (!v || *v == '-' || errno || *end || x < lo || x > hi)
    return bad(opt, v, "an integer in range");
  *out = x;
  return 0;
}

static int u32_arg(const char *opt, const char *v, uint32_t lo, uint32_t hi, uint32_t *out) {
  uint64_t x;
  if (u64_arg(opt, v, lo, hi, &x) < 0) return -1;
  *out = (uint32_t)x;
  return 0;
}

/* A comma-separated list of ask_key names, as a bit set. */
static int ask_arg(const char *opt, const char *v, unsigned *out) {
  *out = 0;
  for (const char *p = v; p && *p;) {
    size_t n = strcspn(p, ",");
    int k = 0;
    while (k < N_ASKS && !(strlen(ask_key[k]) == n && !strncmp(p, ask_key[k], n))) k++;
    if (k == N_ASKS) return bad(opt, v, "fl_query, prepared_run, prepared_launch, comma-separated");
    *out |= 1u << k;
    p += n + (p[n] == ',');
  }
  return *out ? 0 : bad(opt, v, "at least one way to ask");
}

static int option(opts *o, const char *a, const char *v) {
  if (!strcmp(a, "--backend")) {
    if (v && !strcmp(v, "auto")) o->backend = FL_BACKEND_AUTO;
    else if (v && !strcmp(v, "host")) o->backend = FL_BACKEND_HOST;
    else if (v && !strcmp(v, "cuda")) o->backend = FL_BACKEND_CUDA;
    else return bad(a, v, "auto, host or cuda");
    return 0;
  }
  if (!strcmp(a, "--layout")) {
    if (v && !strcmp(v, "flat")) o->layout = FL_LAYOUT_FLAT;
    else if (v && !strcmp(v, "per-table")) o->layout = FL_LAYOUT_PER_TABLE;
    else return bad(a, v, "flat or per-table");
    return 0;
  }
  if (!strcmp(a, "--seconds")) {
    char *end;
    o->seconds = v ? strtod(v, &end) : 0;
    return v && !*end && o->seconds > 0 && o->seconds < 1e6 ? 0 : bad(a, v, "seconds > 0");
  }
  /* At most 64: a CUDA cache refuses more queries in flight (docs/API.md). */
  if (!strcmp(a, "--readers")) return u32_arg(a, v, 1, 64, &o->readers);
  if (!strcmp(a, "--writers")) return u32_arg(a, v, 0, 64, &o->writers);
  if (!strcmp(a, "--tables")) return u32_arg(a, v, 1, 64, &o->tables);
  if (!strcmp(a, "--budget-kb")) return u64_arg(a, v, 1, 1ull << 32, &o->budget_kb);
  if (!strcmp(a, "--seed")) return u64_arg(a, v, 0, UINT64_MAX, &o->seed);
  if (!strcmp(a, "--zero-copy-rows")) return u64_arg(a, v, 0, UINT64_MAX, &o->zero_copy_rows);
  if (!strcmp(a, "--unified")) return u64_arg(a, v, 0, UINT64_MAX, &o->unified);
  if (!strcmp(a, "--ask")) return ask_arg(a, v, &o->asks);
  if (!strcmp(a, "--json")) return v ? (o->json = v, 0) : bad(a, v, "a file name");
  fprintf(stderr, "error: unknown argument '%s' (see --help)\n", a);
  return -1;
}

/* 0 to run, 1 after --help, -1 on a usage error. */
int parse(int argc, char **argv, opts *o) {
  *o = (opts){FL_BACKEND_AUTO, FL_LAYOUT_FLAT, 10, 4, 1, 3, 768, 1, 256, UNIFIED_ON,
              (1u << N_ASKS) - 1, NULL};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 1;
    }
    const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
    if (option(o, a, v) < 0) return -1;
  }
  return 0;
}

/* Reader `index`'s way to ask: the asks chosen, in turn. */
ask ask_of(unsigned asks, uint32_t index) {
  unsigned n = (unsigned)__builtin_popcount(asks), k = index % n;
  for (int a = 0;; a++)
    if (asks >> a & 1u && k-- == 0) return (ask)a;
}
