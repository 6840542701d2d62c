/* zipf.h: the two pieces of the synthetic id generator: a Zipf rank sampler
 * and a keyed bijection on [0, n) that scatters ranks over the id space. */
#ifndef FL_TOOLS_TRACE_ZIPF_H
#define FL_TOOLS_TRACE_ZIPF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rejection-inversion sampling (Hörmann & Derflinger, 1996): P(rank r) is
 * proportional to (r + 1)^-exponent over [0, n). Any exponent > 0 and any n
 * >= 1, O(1) per sample (fewer than 1.1 tries on average), no tables. */
typedef struct fl_zipf {
  uint64_t n;
  double exponent;
  double h_x1; /* H(1.5) - 1: the lower end of the inverted integral */
  double h_n;  /* H(n + 0.5) */
  double s;    /* squeeze: accept at once when k - x <= s */
} fl_zipf;

void fl_zipf_init(fl_zipf *z, uint64_t n, double exponent);
/* A rank in [0, n) from a uniform u in [0, 1) and, on rejection, the next
 * uniforms drawn from *rng (a splitmix64 state). */
uint64_t fl_zipf_sample(const fl_zipf *z, uint64_t *rng);

/* splitmix64 step: the next 64 random bits of state *rng. */
uint64_t fl_rng_next(uint64_t *rng);

/* A bijection on [0, n): a 4-round Feistel network on the smallest even bit
 * width covering n, with cycle-walking back into [0, n) (fewer than 4 rounds of
 * the network per call on average). Deterministic from key. */
typedef struct fl_perm {
  uint64_t n;
  uint32_t half_bits; /* each Feistel half is half_bits wide */
  uint64_t key;
} fl_perm;

void fl_perm_init(fl_perm *p, uint64_t n, uint64_t key);
uint64_t fl_perm_apply(const fl_perm *p, uint64_t x);

#ifdef __cplusplus
}
#endif
#endif
