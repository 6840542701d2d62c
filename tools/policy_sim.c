/* policy_sim.c: the policy simulator's command line (docs/POLICY_SIM.md):
 * replay's workload and trace options, the vectors to simulate and the
 * policies; loads the trace once, replays it through each policy, prints the
 * table and writes the JSON. Exit codes: 0 success, 1 runtime failure, 2
 * usage error. */
#include <stdlib.h>
#include <string.h>

#include "tools/opt_args.h"
#include "tools/policy_sim.h"

/* The simulated policies, in the table's default order; "fleche" follows. */
static const fl_sim_policy *const known[] = {&fl_sim_opt, &fl_sim_lru, &fl_sim_arc,
                                             &fl_sim_tinylfu, &fl_sim_lfu};
enum { N_KNOWN = sizeof known / sizeof *known, MAX_ROWS = 16 };

typedef struct sim_opts {
  uint64_t vectors;              /* 0: those of the replay cache of the budget options */
  uint64_t recovery_from;        /* --recovery-from; 0: the generator's --switch-at */
  const char *names[MAX_ROWS];   /* the rows to run, in order */
  const fl_sim_policy *run[MAX_ROWS]; /* their policies; NULL: the fleche row */
  int n;
} sim_opts;

static void usage(FILE *f) {
  fputs("usage: policy_sim [options] [TRACE]\n"
        "Replays TRACE (or the embedded Zipf workload) through cache policies with a\n"
        "batched cache's semantics (a key resident when a batch starts is a hit; the\n"
        "batch's other keys are misses however often it looks them up), at one number\n"
        "of resident vectors, and prints each policy's hit rate and its gap to Belady's\n"
        "OPT and to the best batched policy, in points.\n\n"
        "Simulation:\n"
        "  --vectors N         resident vectors [what the slab pool of a cache of\n"
        "                      --budget-pct (or --budget-bytes) holds]\n"
        "  --policies LIST     comma-separated, in the table's order [all]:\n",
        f);
  for (int i = 0; i < N_KNOWN; i++) fprintf(f, "                      %-8s %s\n", known[i]->name, known[i]->about);
  fprintf(f,
          "                      fleche   the library: a flat host cache whose pool holds\n"
          "                               the vectors, fl_query per batch\n"
          "  --recovery-from B   the batch where the trace's hot set moves: each row's\n"
          "                      recovery, the batches from B until its hit rate first\n"
          "                      comes within %.1f points of its mean over the last\n"
          "                      quarter of the batches from B [the generator's\n"
          "                      --switch-at]\n",
          FL_SIM_RECOVERY_PTS);
  fl_replay_print_options(f);
  fputs("  (policy_sim: --batch sets the batches of the simulation too; --json writes\n"
        "  the table; --admit, --admit-policy and --threads apply to the fleche row;\n"
        "  --compare, --unified, --layout, --backend, --store, --plot and --prepared\n"
        "  do not apply)\n"
        "  -h, --help          this text\n",
        f);
}

/* Appends the policy named name[0 .. len) of the list `v`. */
static int add_policy(sim_opts *s, const char *v, const char *name, size_t len) {
  if (s->n == MAX_ROWS) return fl_opt_bad("--policies", v, "at most 16 policies");
  for (int i = 0; i < N_KNOWN; i++)
    if (strlen(known[i]->name) == len && !strncmp(known[i]->name, name, len)) {
      s->run[s->n] = known[i];
      s->names[s->n++] = known[i]->name;
      return 1;
    }
  if (len == 6 && !strncmp(name, "fleche", 6)) {
    s->run[s->n] = NULL;
    s->names[s->n++] = "fleche";
    return 1;
  }
  return fl_opt_bad("--policies", v, "opt, lru, arc, tinylfu, lfu or fleche, comma-separated");
}

/* --vectors, --recovery-from or --policies at argv[*i]: 1 consumed, 0 not
 * one, -1 bad value. */
static int sim_option(void *ctx, int argc, char **argv, int *i) {
  sim_opts *s = ctx;
  const char *a = argv[*i];
  if (strcmp(a, "--vectors") && strcmp(a, "--recovery-from") && strcmp(a, "--policies")) return 0;
  if (*i + 1 >= argc) return fl_opt_bad(a, NULL, "a value");
  const char *v = argv[++*i];
  if (strcmp(a, "--policies")) {
    uint64_t *n = !strcmp(a, "--vectors") ? &s->vectors : &s->recovery_from;
    int r = fl_opt_u64(a, v, n);
    return r > 0 && *n == 0 ? fl_opt_bad(a, v, "at least 1") : r;
  }
  s->n = 0;
  for (const char *p = v;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (add_policy(s, v, p, len) < 0) return -1;
    if (!end) return 1;
    p = end + 1;
  }
}

static int parse(int argc, char **argv, fl_replay_opts *o, sim_opts *s) {
  if (fl_replay_parse_args(o, argc, argv, sim_option, s, usage) < 0) return -1;
  const char *bad = o->compare ? "--compare" : o->unified ? "--unified"
                    : o->layout != FL_LAYOUT_FLAT ? "--layout" : o->backend != FL_BACKEND_AUTO ? "--backend"
                    : o->store ? "--store" : o->plot ? "--plot" : o->prepared ? "--prepared" : NULL;
  if (bad) {
    fprintf(stderr, "error: %s does not apply to policy_sim (see --help)\n", bad);
    return -1;
  }
  o->backend = FL_BACKEND_HOST;
  return 0;
}

static int wants_fleche(const sim_opts *s) {
  for (int i = 0; i < s->n; i++)
    if (!s->run[i]) return 1;
  return 0;
}

/* The workload: with the store when the fleche row or the budget needs it. */
static fl_status open_workload(const fl_replay_opts *o, const sim_opts *s, fl_workload *w) {
  if (!s->vectors || wants_fleche(s)) return fl_workload_open(o, w);
  memset(w, 0, sizeof *w);
  w->batches = o->batches;
  return fl_replay_open_trace(o, 0, &w->trace);
}

/* The vectors to simulate and, in `how`, how they were chosen. */
static fl_status pick_vectors(const fl_workload *w, const fl_replay_opts *o, sim_opts *s, char *how,
                              size_t len) {
  if (s->vectors) {
    snprintf(how, len, "--vectors");
    return FL_OK;
  }
  uint64_t budget = fl_workload_budget(w, o);
  if (o->budget_bytes) snprintf(how, len, "the slab pool of a %llu-byte cache", (unsigned long long)budget);
  else snprintf(how, len, "the slab pool of a cache of %g%% of the model's bytes (1 MiB at least), %llu bytes",
                o->budget_pct, (unsigned long long)budget);
  fl_status st = fl_sim_vectors_of_budget(w->store, o, budget, &s->vectors);
  if (st == FL_OK && s->vectors == 0) st = FL_ERR_INVALID_ARGUMENT;
  if (st != FL_OK)
    fprintf(stderr, "error: sizing a cache of %llu bytes: %s: %s\n", (unsigned long long)budget,
            fl_status_name(st), fl_cache_last_error(NULL));
  return st;
}

static fl_status run_rows(const fl_workload *w, const fl_replay_opts *o, const sim_opts *s,
                          const fl_sim_trace *t, fl_sim_result *rows) {
  for (int i = 0; i < s->n; i++) {
    char err[256] = "";
    fl_status st = s->run[i] ? fl_sim_run(t, s->run[i], s->vectors, o->quiet, &rows[i], err, sizeof err)
                             : fl_sim_fleche(w, o, s->vectors, &rows[i]);
    if (st != FL_OK) {
      if (err[0]) fprintf(stderr, "error: %s\n", err);
      return st;
    }
    fprintf(stderr, "%s: %.2f%% hits in %.1f s\n", s->names[i],
            rows[i].lookups ? 100.0 * (double)rows[i].hits / (double)rows[i].lookups : 0,
            rows[i].seconds);
  }
  return FL_OK;
}

int main(int argc, char **argv) {
  fl_replay_opts o;
  fl_replay_opts_default(&o);
  sim_opts s = {0};
  for (int i = 0; i < N_KNOWN; i++) s.run[s.n] = known[i], s.names[s.n++] = known[i]->name;
  s.names[s.n++] = "fleche";
  if (parse(argc, argv, &o, &s) < 0) return 2;
  fl_workload w;
  fl_sim_trace t = {0};
  fl_sim_result rows[MAX_ROWS] = {{0}};
  char how[160];
  fl_status st = open_workload(&o, &s, &w);
  if (st == FL_OK) st = pick_vectors(&w, &o, &s, how, sizeof how);
  if (st == FL_OK) st = fl_sim_trace_read(w.trace, w.batches, &t);
  if (st == FL_OK) {
    fprintf(stderr, "simulating %llu vectors over %llu batches, %llu keys\n",
            (unsigned long long)s.vectors, (unsigned long long)t.n_batches,
            (unsigned long long)t.n_keys);
    st = run_rows(&w, &o, &s, &t, rows);
  }
  if (st == FL_OK) {
    /* The generator's switch; a file's moves where --recovery-from says. */
    uint64_t from = s.recovery_from ? s.recovery_from : o.trace ? 0 : o.switch_at;
    fl_sim_report r = {fl_trace_path(w.trace), o.batch, s.vectors, how, &t, rows, s.n, from};
    fl_sim_report_print(stdout, &r);
    if (o.json) st = fl_sim_report_json(o.json, &r);
  }
  for (int i = 0; i < s.n; i++) fl_sim_result_free(&rows[i]);
  fl_sim_trace_free(&t);
  fl_workload_close(&w);
  return st == FL_OK ? 0 : 1;
}
