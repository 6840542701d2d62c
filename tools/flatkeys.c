/* flatkeys.c: prints the flat-key encoding of a set of tables, size-aware
 * next to the fixed-length baseline, per table and in total, optionally as
 * JSON. Usage:
 *   flatkeys [--key-bits 32|64] (--criteo | --cardinalities N,N,...)
 *            [--hashed] [--json FILE]
 * --hashed treats every table's ids as raw hashed ids (FL_IDS_HASHED) instead
 * of dense ones; the cardinality is then the expected number of distinct ids. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/fleche.h"
#include "tools/criteo_tables.h"

enum { FL_MAX_TABLES = 1 << 16 };

typedef struct fl_summary {
  uint32_t lossless_tables;
  double colliding_ids; /* expected ids sharing a key, summed over tables */
} fl_summary;

static int usage(const char *msg) {
  fprintf(stderr,
          "flatkeys: %s\nusage: flatkeys [--key-bits 32|64] (--criteo | --cardinalities N,N,...) "
          "[--hashed] [--json FILE]\n",
          msg);
  return 2;
}

/* Parses "N,N,..." into out; returns the count, or 0 on a malformed list. */
static uint32_t parse_list(const char *s, uint64_t *out, uint32_t cap) {
  uint32_t n = 0;
  while (*s) {
    char *end;
    errno = 0;
    if (*s == '-' || n == cap) return 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || (*end && *end != ',')) return 0;
    out[n++] = v;
    s = *end ? end + 1 : end;
  }
  return n;
}

static fl_status build(const uint64_t *corpus, uint32_t n, uint32_t key_bits, fl_id_kind kind,
                       fl_encoding_scheme scheme, fl_encoding **e, fl_table_code_report *rep,
                       fl_summary *sum) {
  fl_table_desc *t = calloc(n, sizeof *t);
  if (!t) return FL_ERR_OUT_OF_MEMORY;
  for (uint32_t i = 0; i < n; i++)
    t[i] = (fl_table_desc){NULL, corpus[i], 1, FL_FP32, kind};
  fl_status st = fl_encoding_create(t, n, key_bits, scheme, e);
  free(t);
  if (st != FL_OK) return st;
  *sum = (fl_summary){0, 0.0};
  for (uint32_t i = 0; i < n; i++) {
    fl_encoding_report(*e, i, &rep[i]);
    sum->lossless_tables += (uint32_t)rep[i].lossless;
    sum->colliding_ids += rep[i].collision_rate * (double)corpus[i];
  }
  return FL_OK;
}

static void print_text(const uint64_t *corpus, uint32_t n, uint32_t key_bits, int hashed,
                       const fl_table_code_report *sa, const fl_table_code_report *fx,
                       fl_summary ssa, fl_summary sfx, int lossless_sa, int lossless_fx) {
  printf("%u tables, %u-bit keys, %s ids\n\n", n, key_bits, hashed ? "hashed" : "dense");
  printf("%-5s %10s | %-18s %4s %4s %8s %10s | %4s %4s %8s %10s\n", "table", "corpus",
         "size-aware prefix", "len", "feat", "lossless", "collide", "len", "feat", "lossless",
         "collide");
  for (uint32_t i = 0; i < n; i++)
    printf("t%-4u %10" PRIu64 " | 0x%-16" PRIx64 " %4u %4u %8s %10.3g | %4u %4u %8s %10.3g\n", i,
           corpus[i], sa[i].prefix, sa[i].prefix_len, sa[i].feature_bits,
           sa[i].lossless ? "yes" : "no", sa[i].collision_rate, fx[i].prefix_len,
           fx[i].feature_bits, fx[i].lossless ? "yes" : "no", fx[i].collision_rate);
  printf("\n%-13s %16s %24s %10s\n", "scheme", "lossless tables", "expected colliding ids",
         "lossless");
  printf("%-13s %13u/%-2u %24.6g %10s\n", "size-aware", ssa.lossless_tables, n,
         ssa.colliding_ids, lossless_sa ? "yes" : "no");
  printf("%-13s %13u/%-2u %24.6g %10s\n", "fixed-length", sfx.lossless_tables, n,
         sfx.colliding_ids, lossless_fx ? "yes" : "no");
}

static void json_scheme(FILE *f, const char *name, const uint64_t *corpus, uint32_t n,
                        const fl_table_code_report *r, fl_summary s, int lossless, int last) {
  fprintf(f, "  \"%s\": {\"lossless\": %s, \"lossless_tables\": %u, "
             "\"expected_colliding_ids\": %.17g, \"tables\": [\n",
          name, lossless ? "true" : "false", s.lossless_tables, s.colliding_ids);
  for (uint32_t i = 0; i < n; i++)
    fprintf(f, "    {\"table\": %u, \"corpus\": %" PRIu64 ", \"prefix\": %" PRIu64
               ", \"prefix_len\": %u, \"feature_bits\": %u, \"lossless\": %s, "
               "\"collision_rate\": %.17g}%s\n",
            i, corpus[i], r[i].prefix, r[i].prefix_len, r[i].feature_bits,
            r[i].lossless ? "true" : "false", r[i].collision_rate, i + 1 < n ? "," : "");
  fprintf(f, "  ]}%s\n", last ? "" : ",");
}

int main(int argc, char **argv) {
  uint32_t key_bits = 64, n = 0;
  int hashed = 0;
  const char *json = NULL;
  static uint64_t corpus[FL_MAX_TABLES];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (!strcmp(a, "--key-bits") && has_value) {
      key_bits = (uint32_t)strtoul(argv[++i], NULL, 10);
    } else if (!strcmp(a, "--cardinalities") && has_value) {
      n = parse_list(argv[++i], corpus, FL_MAX_TABLES);
      if (n == 0) return usage("--cardinalities wants N,N,... of unsigned integers");
    } else if (!strcmp(a, "--criteo")) {
      memcpy(corpus, fl_criteo_rows, sizeof fl_criteo_rows);
      n = FL_CRITEO_TABLES;
    } else if (!strcmp(a, "--hashed")) {
      hashed = 1;
    } else if (!strcmp(a, "--json") && has_value) {
      json = argv[++i];
    } else {
      return usage("unknown or incomplete argument");
    }
  }
  if (key_bits != 32 && key_bits != 64) return usage("--key-bits must be 32 or 64");
  if (n == 0) return usage("give --criteo or --cardinalities");

  fl_table_code_report *sa = calloc(n, sizeof *sa), *fx = calloc(n, sizeof *fx);
  fl_encoding *esa = NULL, *efx = NULL;
  fl_summary ssa, sfx;
  fl_id_kind kind = hashed ? FL_IDS_HASHED : FL_IDS_DENSE;
  if (!sa || !fx) return usage("out of memory");
  fl_status st = build(corpus, n, key_bits, kind, FL_ENCODING_SIZE_AWARE, &esa, sa, &ssa);
  if (st == FL_OK) st = build(corpus, n, key_bits, kind, FL_ENCODING_FIXED, &efx, fx, &sfx);
  if (st != FL_OK) {
    fprintf(stderr, "flatkeys: %s: %s\n", fl_status_name(st), fl_encoding_last_error(NULL));
    return 1;
  }
  print_text(corpus, n, key_bits, hashed, sa, fx, ssa, sfx, fl_encoding_lossless(esa),
             fl_encoding_lossless(efx));
  int rc = 0;
  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) {
      fprintf(stderr, "flatkeys: cannot write %s: %s\n", json, strerror(errno));
      rc = 1;
    } else {
      fprintf(f, "{\n  \"key_bits\": %u,\n  \"ids\": \"%s\",\n", key_bits,
              hashed ? "hashed" : "dense");
      json_scheme(f, "size_aware", corpus, n, sa, ssa, fl_encoding_lossless(esa), 0);
      json_scheme(f, "fixed", corpus, n, fx, sfx, fl_encoding_lossless(efx), 1);
      fprintf(f, "}\n");
      if (fclose(f) != 0) {
        fprintf(stderr, "flatkeys: writing %s failed\n", json);
        rc = 1;
      }
    }
  }
  fl_encoding_destroy(esa);
  fl_encoding_destroy(efx);
  free(sa);
  free(fx);
  return rc;
}
