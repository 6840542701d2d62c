/* layout.c: choosing every table's feature bits and block (see layout.h).
 *
 * Size-aware rule (docs/ENCODING.md walks through it):
 * 1. The budget is 2^key_bits - 1 keys: the all-ones key is reserved as the
 *    empty-slot marker, a one-key block of its own placed last.
 * 2. Tables are taken in ascending corpus size (ties: table index). A dense
 *    table wants ceil(log2(corpus)) feature bits (all its ids fit); a hashed
 *    table wants as many as it can get. Each table gets the largest power of
 *    two of keys that is at most its want and at most its share of the space
 *    still free, the share being proportional to its corpus among the tables
 *    not yet placed (after keeping one key for each of them). While space is
 *    plentiful this is "the longest prefix that leaves enough feature bits";
 *    once it runs out, the remaining tables split it in proportion to corpus
 *    size, which for hashing minimises the expected number of colliding ids
 *    (sum m_i^2 / N_i under sum N_i fixed is least at N_i ~ m_i).
 * 3. Rounding down to powers of two leaves space free; it is handed out by
 *    doubling, one block at a time, the block that removes the most expected
 *    colliding ids per key spent, until no doubling fits or helps.
 * 4. Blocks are placed largest first from key 0, so each is aligned to its own
 *    size and the prefixes form a prefix-free (canonical) code.
 */
#include "encoding/layout.h"

#include <math.h>
#include <stdlib.h>

__extension__ typedef unsigned __int128 fl_u128;

double fl_collision_rate(uint64_t m, double values) {
  if (m <= 1) return 0.0;
  if (values <= 1.0) return 1.0;
  /* (1 - 1/N)^(m-1) = exp((m-1) * log1p(-1/N)), exact for huge N and m. */
  return -expm1((double)(m - 1) * log1p(-1.0 / values));
}

static uint32_t ceil_log2(uint64_t x) { return x <= 1 ? 0 : 64 - (uint32_t)__builtin_clzll(x - 1); }

static uint32_t floor_log2(uint64_t x) { return 63 - (uint32_t)__builtin_clzll(x); }

/* Expected ids of table t that share a key, with 2^f keys and no empty key in
 * its block (size-aware blocks never hold it). */
static double colliding_ids(const fl_table_desc *t, uint32_t f) {
  if (t->id_kind == FL_IDS_DENSE && f >= ceil_log2(t->corpus_size)) return 0.0;
  return (double)t->corpus_size * fl_collision_rate(t->corpus_size, ldexp(1.0, (int)f));
}

typedef struct fl_sort_item {
  uint64_t key; /* sort key, ascending */
  uint32_t table;
} fl_sort_item;

static int sort_item_cmp(const void *a, const void *b) {
  const fl_sort_item *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->table < y->table ? -1 : x->table > y->table;
}

/* Places blocks largest first from key 0 (step 4). */
static void place_blocks(fl_sort_item *items, uint32_t n, const uint32_t *fbits,
                         uint64_t *start) {
  for (uint32_t i = 0; i < n; i++) items[i] = (fl_sort_item){64 - fbits[i], i};
  qsort(items, n, sizeof *items, sort_item_cmp);
  uint64_t pos = 0;
  for (uint32_t i = 0; i < n; i++) {
    start[items[i].table] = pos;
    pos += 1ull << fbits[items[i].table]; /* ends <= 2^key_bits - 1: no overflow */
  }
}

int fl_layout_size_aware(const fl_table_desc *t, uint32_t n, uint32_t key_bits,
                         uint32_t *fbits, uint64_t *start) {
  fl_sort_item *items = malloc(n * sizeof *items);
  if (!items) return -1;
  for (uint32_t i = 0; i < n; i++) items[i] = (fl_sort_item){t[i].corpus_size, i};
  qsort(items, n, sizeof *items, sort_item_cmp);

  uint64_t free_keys = key_bits >= 64 ? ~0ull : (1ull << key_bits) - 1; /* step 1 */
  fl_u128 corpus_left = 0;
  for (uint32_t i = 0; i < n; i++) corpus_left += t[i].corpus_size;
  for (uint32_t k = 0; k < n; k++) { /* step 2 */
    uint32_t i = items[k].table;
    uint64_t avail = free_keys - (n - 1 - k); /* one key kept per later table */
    uint64_t share = (uint64_t)((fl_u128)avail * t[i].corpus_size / corpus_left);
    uint32_t want = t[i].id_kind == FL_IDS_DENSE ? ceil_log2(t[i].corpus_size) : key_bits;
    uint32_t f = share <= 1 ? 0 : floor_log2(share);
    if (f > want) f = want;
    fbits[i] = f;
    free_keys -= 1ull << f;
    corpus_left -= t[i].corpus_size;
  }
  for (;;) { /* step 3 */
    double best_gain = 0.0;
    uint32_t best = n;
    for (uint32_t k = 0; k < n; k++) {
      uint32_t i = items[k].table;
      if ((1ull << fbits[i]) > free_keys) continue;
      double gain = (colliding_ids(&t[i], fbits[i]) - colliding_ids(&t[i], fbits[i] + 1)) /
                    ldexp(1.0, (int)fbits[i]);
      if (gain > best_gain) best_gain = gain, best = i;
    }
    if (best == n) break;
    free_keys -= 1ull << fbits[best];
    fbits[best]++;
  }
  place_blocks(items, n, fbits, start);
  free(items);
  return 0;
}

int fl_layout_fixed(uint32_t n, uint32_t key_bits, uint32_t *fbits, uint64_t *start) {
  uint32_t f = key_bits - ceil_log2(n);
  for (uint32_t i = 0; i < n; i++) {
    fbits[i] = f;
    start[i] = f >= 64 ? 0 : (uint64_t)i << f;
  }
  return 0;
}
