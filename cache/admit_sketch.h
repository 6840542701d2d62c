/* admit_sketch.h: the frequency sketch of TinyLFU admission, shared by both
 * backends (FL_HD: the host's admission and the CUDA round kernels run this
 * code; the sketch's memory is the part's, in host or device memory).
 *
 * A count-min sketch of 4-bit counters, eight to a 32-bit word. A key has
 * FL_SKETCH_HASHES counters, each in a word of its own hash; its estimate is
 * the least of them, so it is never below the key's true count since the
 * last halving (collisions only raise counters), and at most 15. Admission
 * adds every missed row's count in its batch (a batch's lookups of one key
 * are that many uses). Aging: once the additions since the last halving
 * reach the sample (FL_SKETCH_SAMPLE per sized key, TinyLFU's reset), every
 * counter is halved, so popularity that stopped fades and a moving hot set
 * is followed.
 *
 * A batch is one moment: all its additions come first, then the halvings
 * they call for (fl_sketch_halvings), then the estimates. Saturating
 * additions commute, so the sketch after a batch does not depend on the
 * order of its additions: the CUDA round's threads and the host's loop
 * leave the same counters. Hits are not counted: they are the query's, and
 * the query path stays free of sketch writes; a cached key's estimate is
 * what it was missed before its admission, fading. */
#ifndef FL_CACHE_ADMIT_SKETCH_H
#define FL_CACHE_ADMIT_SKETCH_H

#include "common/hash.h"
#include "common/mutant.h"

#define FL_SKETCH_HASHES 4u
#define FL_SKETCH_MAX 15u    /* a 4-bit counter's ceiling */
#define FL_SKETCH_SAMPLE 10u /* additions per sized key between halvings */

/* The sketch as kernels and host loops see it (a non-owning view). */
typedef struct fl_sketch_view {
  uint32_t *word; /* 8 counters each; counter j of a word at bits 4j..4j+3 */
  uint64_t mask;  /* words - 1, words a power of two */
} fl_sketch_view;

/* Words for `keys` sized keys: two per key (sixteen counters: collisions
 * stay rare at four counters a key; one word per key cost 0.1 to 0.6
 * points of hit rate on the Criteo head), a power of two, at least 64. */
FL_HD uint64_t fl_sketch_words(uint64_t keys) {
  uint64_t w = 64;
  while (w < 2 * keys) w *= 2;
  return w;
}

/* Counter i of key: its word and the counter's bit offset in that word
 * (double hashing from one 64-bit hash, Kirsch and Mitzenmacher). */
FL_HD void fl_sketch_counter(const fl_sketch_view *s, uint64_t key, uint32_t i, uint64_t *word,
                             uint32_t *shift) {
  uint64_t h = fl_hash2(0x5ce7c4ull, key);
  uint64_t g = fl_mix64(h) | 1u;
  uint64_t x = h + i * g;
  *word = x & s->mask;
  *shift = (uint32_t)(x >> 61) * 4u;
}

/* A word with its counter at `shift` raised by `times`, saturating. */
FL_HD uint32_t fl_sketch_word_add(uint32_t word, uint32_t shift, uint32_t times) {
  uint32_t c = (word >> shift) & FL_SKETCH_MAX;
  uint32_t room = FL_SKETCH_MAX - c;
  return word + ((times < room ? times : room) << shift);
}

/* Adds `times` uses of key. Device threads may add concurrently (a
 * compare-and-swap per word); the host adds under the cache lock. */
FL_HD void fl_sketch_add(const fl_sketch_view *s, uint64_t key, uint32_t times) {
  for (uint32_t i = 0; i < FL_SKETCH_HASHES; i++) {
    uint64_t w;
    uint32_t shift;
    fl_sketch_counter(s, key, i, &w, &shift);
#ifdef __CUDA_ARCH__
    uint32_t old = s->word[w], seen;
    while ((seen = atomicCAS(&s->word[w], old, fl_sketch_word_add(old, shift, times))) != old)
      old = seen;
#else
    s->word[w] = fl_sketch_word_add(s->word[w], shift, times);
#endif
  }
}

/* The key's estimated uses since the last halving, 0..15. */
FL_HD uint32_t fl_sketch_estimate(const fl_sketch_view *s, uint64_t key) {
  uint32_t f = FL_SKETCH_MAX;
  for (uint32_t i = 0; i < FL_SKETCH_HASHES; i++) {
    uint64_t w;
    uint32_t shift;
    fl_sketch_counter(s, key, i, &w, &shift);
    uint32_t c = (s->word[w] >> shift) & FL_SKETCH_MAX;
    if (c < f) f = c;
  }
  return f;
}

/* What one batch's additions count toward the sample: its uses, capped as
 * a counter is. */
FL_HD uint32_t fl_sketch_uses(uint32_t times) {
  return times < FL_SKETCH_MAX ? times : FL_SKETCH_MAX;
}

/* The halvings due once `additions` were made since the last one, with a
 * sample of `sample`; *left: the additions counted after them. */
FL_HD uint32_t fl_sketch_halvings(uint64_t additions, uint64_t sample, uint64_t *left) {
  uint32_t k = 0;
  while (sample && additions >= sample && !FL_MUTANT_ON(18)) additions /= 2, k++;
  *left = additions;
  return k;
}

/* A word with each of its counters halved k times (floor). */
FL_HD uint32_t fl_sketch_age_word(uint32_t word, uint32_t k) {
  if (k >= 4) return 0;
  const uint32_t keep[4] = {0xffffffffu, 0x77777777u, 0x33333333u, 0x11111111u};
  return (word >> k) & keep[k];
}

#endif
