/* flat_key.h: one table's flat-key code and the FL_HD encode/decode logic that
 * the host backend and the query kernel share (one source of truth).
 *
 * A flat key of key_bits bits is the table's prefix followed by feature_bits
 * feature bits; the key space of one table is the aligned block
 * [prefix_shifted, prefix_shifted + feature_mask].
 *
 * The empty key FL_KEY_EMPTY(key_bits) (all ones) marks empty index slots, so
 * encode never yields it:
 * - the size-aware encoder reserves it as a one-key block no table gets, so no
 *   table's block holds it;
 * - the fixed-length baseline gives the all-ones prefix to the last table when
 *   the tables fill the prefix space; that table's block holds the empty key
 *   ("owns" it) and has 2^feature_bits - 1 usable feature values: a dense
 *   table there stays unfolded only when corpus <= 2^feature_bits - 1, and a
 *   folded feature is spread uniformly over [0, feature_mask) instead of
 *   masked. The encoder's collision report counts with those N - 1 values.
 */
#ifndef FL_ENCODING_FLAT_KEY_H
#define FL_ENCODING_FLAT_KEY_H

#include "common/hash.h"
#include "include/fleche.h"

typedef struct fl_code {
  uint64_t prefix_shifted; /* table code already shifted into place: prefix << feature_bits */
  uint64_t feature_mask;   /* (1 << feature_bits) - 1, all ones for 64 */
  uint64_t corpus;         /* dense tables: exclusive id bound; hashed: 0 */
  uint32_t feature_bits;
  uint32_t prefix_len;     /* key_bits - feature_bits */
  uint32_t id_kind;        /* FL_IDS_DENSE or FL_IDS_HASHED */
  uint32_t fold;           /* 1: feature = fl_mix64(id) & feature_mask (lossy or hashed;
                              spread over feature_mask values when the block owns the
                              empty key); 0: feature = id (dense ids that fit) */
} fl_code;

#define FL_KEY_EMPTY(key_bits) ((key_bits) >= 64 ? ~0ull : ((1ull << (key_bits)) - 1))

/* High 64 bits of a * b: maps a uniform 64-bit hash onto [0, b) uniformly. */
FL_HD uint64_t fl_mulhi64(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  __extension__ typedef unsigned __int128 fl_u128;
  return (uint64_t)(((fl_u128)a * b) >> 64);
#endif
}

/* 1 when the code's block holds the empty key (see the top of this file). */
FL_HD int fl_code_owns_empty(const fl_code *c, uint32_t key_bits) {
  return (c->prefix_shifted | c->feature_mask) == FL_KEY_EMPTY(key_bits);
}

/* Returns 0 and the key, or 1 when a dense id is >= corpus. Never yields
 * FL_KEY_EMPTY(key_bits): that value marks empty index slots. */
FL_HD int fl_code_encode(const fl_code *c, uint32_t key_bits, uint64_t id, uint64_t *key) {
  if (c->id_kind == FL_IDS_DENSE && id >= c->corpus) return 1;
  uint64_t feature = id;
  if (c->fold) {
    uint64_t h = fl_mix64(id);
    feature = fl_code_owns_empty(c, key_bits) ? fl_mulhi64(h, c->feature_mask)
                                               : (h & c->feature_mask);
  }
  *key = c->prefix_shifted | feature;
  return 0;
}

/* 1 when `key` lies in the code's block (keys of other tables never do: the
 * codes are prefix-free). */
FL_HD int fl_code_holds(const fl_code *c, uint64_t key) {
  return (key & ~c->feature_mask) == c->prefix_shifted;
}

/* The id of a key the code holds; meaningful only for unfolded codes
 * (fold == 0), whose encode is the identity on feature bits. */
FL_HD uint64_t fl_code_decode(const fl_code *c, uint64_t key) { return key & c->feature_mask; }

#endif
