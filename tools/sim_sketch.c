/* sim_sketch.c: TinyLFU's frequency sketch (sim_policy.h), after Caffeine's
 * FrequencySketch: a count-min sketch whose 4-bit counters sit 16 to a 64-bit
 * word; a key has four counters, each in a word its own hash picks, and its
 * estimate is the least of them. After 10 additions per key it is sized for,
 * every counter is halved (TinyLFU's reset), so the sketch follows a moving
 * popularity. A batch's lookups count as one moment: the halvings they bring
 * on come after all of them (halving while adding would wipe the counts of
 * the keys added first, whichever those are). */
#include <string.h>

#include "common/hash.h"
#include "tools/sim_policy.h"

/* Words: the keys to count (Caffeine: the capacity) rounded up to a power of
 * two, with a floor so that a tiny test cache is not all collisions. */
enum { MIN_WORDS = 64, HASHES = 4 };

int fl_sim_sketch_init(fl_sim_sketch *s, uint64_t keys) {
  uint64_t words = MIN_WORDS;
  while (words < keys) words *= 2;
  s->word = calloc(words, sizeof *s->word);
  s->mask = words - 1;
  s->additions = 0;
  s->sample = 10 * keys;
  return s->word ? 0 : -1;
}

void fl_sim_sketch_free(fl_sim_sketch *s) {
  free(s->word);
  memset(s, 0, sizeof *s);
}

/* Counter i of key: its word and the counter's bit offset in it. */
static void counter(const fl_sim_sketch *s, uint32_t key, int i, uint64_t *w, uint32_t *shift) {
  uint64_t h = fl_hash2((uint64_t)i + 1, key);
  *w = h & s->mask;
  *shift = (uint32_t)(h >> 60) * 4;
}

uint32_t fl_sim_sketch_freq(const fl_sim_sketch *s, uint32_t key) {
  uint32_t f = 15;
  for (int i = 0; i < HASHES; i++) {
    uint64_t w;
    uint32_t shift;
    counter(s, key, i, &w, &shift);
    uint32_t c = (uint32_t)(s->word[w] >> shift) & 15;
    if (c < f) f = c;
  }
  return f;
}

void fl_sim_sketch_add(fl_sim_sketch *s, uint32_t key, uint32_t times) {
  for (uint32_t t = 0; t < times; t++) {
    int raised = 0;
    for (int i = 0; i < HASHES; i++) {
      uint64_t w;
      uint32_t shift;
      counter(s, key, i, &w, &shift);
      if (((s->word[w] >> shift) & 15) < 15) {
        s->word[w] += 1ull << shift;
        raised = 1;
      }
    }
    /* Saturated counters stay so: the rest of the uses would change nothing. */
    if (!raised) break;
    s->additions++;
  }
}

void fl_sim_sketch_age(fl_sim_sketch *s) {
  while (s->additions >= s->sample) {
    for (uint64_t w = 0; w <= s->mask; w++) s->word[w] = (s->word[w] >> 1) & 0x7777777777777777ull;
    s->additions /= 2;
  }
}
