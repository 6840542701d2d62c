/* replay_opts.c: defaults, parsing and help of the options shared by replay
 * and the tools over its workload (tune, policy_sim, serve_bench, load_redis). */
#include <stdlib.h>
#include <string.h>

#include "tools/opt_args.h"
#include "tools/replay.h"

void fl_replay_opts_default(fl_replay_opts *o) {
  memset(o, 0, sizeof *o);
  o->format = FL_TRACE_AUTO;
  o->batch = 16384;
  o->tables = "criteo";
  o->exponent = 1.05;
  o->switch_exponent = 1.2;
  o->seed = 1;
  o->dim = 32;
  o->dtype = FL_FP32;
  o->budget_pct = 5;
  o->admit = -1;
  o->admit_policy = -1;
  o->zero_copy_rows = FL_ZERO_COPY_AUTO;
  o->layout = FL_LAYOUT_FLAT;
  o->backend = FL_BACKEND_AUTO;
  o->dram_budget_pct = 20;
}

int fl_replay_uses_gpu(const fl_replay_opts *o) {
  if (o->backend == FL_BACKEND_HOST) return 0;
  const char *env = getenv("FL_BACKEND");
  if (o->backend == FL_BACKEND_AUTO && env && !strcmp(env, "host")) return 0;
  return fl_cuda_device_count() > 0;
}

int fl_replay_parse_option(fl_replay_opts *o, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  /* Flags without a value. */
  if (!strcmp(a, "--compare")) return o->compare = 1;
  if (!strcmp(a, "--verify")) return o->verify = 1;
  if (!strcmp(a, "--prepared")) return o->prepared = 1;
  if (!strcmp(a, "--quiet")) return o->quiet = 1;
  if (!strcmp(a, "--fp16")) return o->dtype = FL_FP16, 1;
  if (!strcmp(a, "--hashed")) return o->hashed = 1;
  if (!strcmp(a, "--lookahead")) return o->lookahead = 1;
  static const char *const with_value[] = {
      "--format", "--batch", "--batches", "--tables", "--scale", "--exponent", "--switch-at",
      "--switch-exponent", "--seed", "--dim", "--budget-pct", "--budget-bytes", "--unified",
      "--admit", "--admit-policy", "--max-load", "--key-bits", "--zero-copy-rows", "--watermarks",
      "--layout", "--backend",
      "--threads", "--model", "--model-npy", "--model-hugectr", "--store", "--store-ns",
      "--dram-budget-pct", "--json", "--plot", "--model-us"};
  int known = 0;
  for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) known |= !strcmp(a, with_value[k]);
  if (!known) return 0;
  if (*i + 1 >= argc) return fl_opt_bad(a, NULL, "a value");
  const char *v = argv[++*i];
  if (!strcmp(a, "--format")) {
    if (!strcmp(v, "auto")) o->format = FL_TRACE_AUTO;
    else if (!strcmp(v, "criteo")) o->format = FL_TRACE_CRITEO;
    else if (!strcmp(v, "text")) o->format = FL_TRACE_TEXT;
    else if (!strcmp(v, "fltr")) o->format = FL_TRACE_FLTR;
    else return fl_opt_bad(a, v, "auto, criteo, text or fltr");
    return 1;
  }
  if (!strcmp(a, "--layout")) {
    if (!strcmp(v, "flat")) o->layout = FL_LAYOUT_FLAT;
    else if (!strcmp(v, "per-table")) o->layout = FL_LAYOUT_PER_TABLE;
    else return fl_opt_bad(a, v, "flat or per-table");
    return 1;
  }
  if (!strcmp(a, "--backend")) {
    if (!strcmp(v, "auto")) o->backend = FL_BACKEND_AUTO;
    else if (!strcmp(v, "host")) o->backend = FL_BACKEND_HOST;
    else if (!strcmp(v, "cuda")) o->backend = FL_BACKEND_CUDA;
    else return fl_opt_bad(a, v, "auto, host or cuda");
    return 1;
  }
  if (!strcmp(a, "--batch")) {
    int r = fl_opt_u32(a, v, &o->batch);
    return r > 0 && o->batch == 0 ? fl_opt_bad(a, v, "at least 1") : r;
  }
  if (!strcmp(a, "--dim")) {
    int r = fl_opt_u32(a, v, &o->dim);
    return r > 0 && (o->dim == 0 || o->dim > 4096) ? fl_opt_bad(a, v, "1..4096") : r;
  }
  if (!strcmp(a, "--batches")) return fl_opt_u64(a, v, &o->batches);
  if (!strcmp(a, "--model-us")) return fl_opt_u64(a, v, &o->model_us);
  if (!strcmp(a, "--switch-at")) return fl_opt_u64(a, v, &o->switch_at);
  if (!strcmp(a, "--seed")) return fl_opt_u64(a, v, &o->seed);
  if (!strcmp(a, "--budget-bytes")) return fl_opt_u64(a, v, &o->budget_bytes);
  if (!strcmp(a, "--unified")) return fl_opt_u64(a, v, &o->unified);
  if (!strcmp(a, "--threads")) return fl_opt_u32(a, v, &o->threads);
  if (!strcmp(a, "--scale")) return fl_opt_double(a, v, 1, &o->scale);
  if (!strcmp(a, "--exponent")) return fl_opt_double(a, v, 1e-6, &o->exponent);
  if (!strcmp(a, "--switch-exponent")) return fl_opt_double(a, v, 1e-6, &o->switch_exponent);
  if (!strcmp(a, "--budget-pct")) return fl_opt_double(a, v, 1e-9, &o->budget_pct);
  if (!strcmp(a, "--dram-budget-pct")) {
    int r = fl_opt_double(a, v, 0, &o->dram_budget_pct);
    return r > 0 && o->dram_budget_pct > 100 ? fl_opt_bad(a, v, "a percentage in [0, 100]") : r;
  }
  if (!strcmp(a, "--store")) return o->store = v, 1;
  if (!strcmp(a, "--store-ns")) return o->store_ns = v, 1;
  if (!strcmp(a, "--admit")) {
    int r = fl_opt_double(a, v, 0, &o->admit);
    return r > 0 && o->admit > 1 ? fl_opt_bad(a, v, "a probability in [0, 1]") : r;
  }
  if (!strcmp(a, "--max-load")) return fl_opt_double(a, v, 1e-9, &o->max_load);
  if (!strcmp(a, "--key-bits")) return fl_opt_u32(a, v, &o->key_bits); /* the library checks it */
  if (!strcmp(a, "--zero-copy-rows"))
    return strcmp(v, "auto") ? fl_opt_u64(a, v, &o->zero_copy_rows)
                             : (o->zero_copy_rows = FL_ZERO_COPY_AUTO, 1);
  if (!strcmp(a, "--watermarks")) {
    char *end;
    o->low_watermark = strtod(v, &end);
    if (*end == ',') o->high_watermark = strtod(end + 1, &end);
    /* The library checks their range and order, and says which is wrong. */
    return *end || !(o->low_watermark > 0) || !(o->high_watermark > 0)
               ? fl_opt_bad(a, v, "LOW,HIGH: two fractions")
               : 1;
  }
  if (!strcmp(a, "--admit-policy")) {
    if (!strcmp(v, "coin")) return o->admit_policy = FL_ADMIT_COIN, 1;
    if (!strcmp(v, "tinylfu")) return o->admit_policy = FL_ADMIT_TINYLFU, 1;
    return fl_opt_bad(a, v, "coin or tinylfu");
  }
  if (!strcmp(a, "--tables")) return o->tables = v, 1;
  if (!strcmp(a, "--model")) return o->model = v, 1;
  if (!strcmp(a, "--model-npy")) return o->model_npy = v, 1;
  if (!strcmp(a, "--model-hugectr")) return o->model_hugectr = v, 1;
  if (!strcmp(a, "--json")) return o->json = v, 1;
  return o->plot = v, 1; /* --plot, the last one listed */
}

int fl_replay_parse_args(fl_replay_opts *o, int argc, char **argv, fl_tool_option_fn own, void *ctx,
                         void (*usage)(FILE *f)) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      exit(0);
    }
    int r = own ? own(ctx, argc, argv, &i) : 0;
    if (r == 0) r = fl_replay_parse_option(o, argc, argv, &i);
    if (r < 0) return -1;
    if (r > 0) continue;
    if (argv[i][0] == '-' || o->trace) {
      fprintf(stderr, "error: unexpected argument '%s' (see --help)\n", argv[i]);
      return -1;
    }
    o->trace = argv[i];
  }
  return 0;
}

void fl_replay_print_options(FILE *f) {
  fputs(
      "Workload (without TRACE: the embedded Zipf workload):\n"
      "  --format F          auto|criteo|text|fltr (auto: by content)\n"
      "  --batch N           samples per batch (Criteo rows, generator); lookups per\n"
      "                      batch for text traces [16384]\n"
      "  --batches N         replay at most N batches [all; generator: 128, host 16]\n"
      "  --tables LIST       generator cardinalities: criteo or n1,n2,... [criteo]\n"
      "  --scale F           divide generator cardinalities by F [1; host backend 100]\n"
      "  --exponent S        generator Zipf exponent [1.05]\n"
      "  --switch-at B       generator: change distribution at batch B [never]\n"
      "  --switch-exponent S exponent after the switch [1.2]\n"
      "  --hashed            generator: raw 64-bit ids in hashed tables (the store\n"
      "                      then looks ids up by hashing, as for Criteo's hex ids)\n"
      "  --seed N            generator ids and synthetic vectors [1]\n"
      "Model (default: synthetic deterministic vectors):\n"
      "  --dim N             elements per vector [32]\n"
      "  --fp16              fp16 vectors [fp32]\n"
      "  --model FILE        a .flst model (fl_store_load)\n"
      "  --model-npy DIR     per table DIR/<table>.ids.npy + DIR/<table>.vectors.npy\n"
      "  --model-hugectr DIR per table DIR/<table>/{key,emb_vector}\n"
      "  --store URL         the model in a Redis Cluster (redis://host:port, loaded\n"
      "                      by load_redis; docs/TIERS.md): tables from the cluster\n"
      "  --store-ns NS       with --store: the model's key namespace [fl]\n"
      "  --dram-budget-pct P with --store: the local DRAM tier holds P % of the\n"
      "                      model's bytes [20]\n"
      "Cache:\n"
      "  --budget-pct P      cache memory as % of the model's bytes, at least 1 MiB [5]\n"
      "  --budget-bytes N    cache memory in bytes (overrides --budget-pct)\n"
      "  --unified N         unified index entries [0]\n"
      "  --admit P           the coin's admission probability [library default]\n"
      "  --admit-policy A    coin|tinylfu (fl_config.admit_policy) [library default]\n"
      "  --max-load F        index load limit (fl_config.max_load) [library default]\n"
      "  --key-bits N        flat key width, 32 or 64 (fl_config.key_bits) [the cache picks]\n"
      "  --zero-copy-rows N  CUDA: batches with at most N distinct dense misses read them\n"
      "                      in place (fl_config.zero_copy_rows); auto: the cache\n"
      "                      calibrates it [auto]\n"
      "  --watermarks L,H    pool use fractions where eviction stops and starts\n"
      "                      (fl_config.low_watermark, high_watermark) [library default]\n"
      "  --layout L          flat|per-table [flat]\n"
      "  --compare           run flat and per-table, print the ratios\n"
      "  --backend B         auto|host|cuda [auto; env FL_BACKEND]\n"
      "  --threads N         host threads [store: half the cores; host backend: all]\n"
      "  --prepared          query through prepared queries (fl_query_prepare), as a\n"
      "                      server with fixed buffers does; prepared again, untimed,\n"
      "                      when a batch's shape changes\n"
      "  --model-us US       CUDA: US microseconds of GPU work after each batch's lookup\n"
      "                      on its stream, standing in for the model [0]\n"
      "  --lookahead         CUDA: name the next batch to the cache (fl_prefetch, on a\n"
      "                      second stream) once a batch's lookup and model are\n"
      "                      enqueued, so that its misses are fetched while they run\n"
      "Output:\n"
      "  --verify            check sampled rows of every batch against the store\n"
      "  --json FILE         the summary as JSON\n"
      "  --plot FILE.svg     hit rate and latency over the run\n"
      "  --quiet             no progress bar\n",
      f);
}
