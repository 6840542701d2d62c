/* zipf.c: Zipf rank sampling by rejection-inversion and the Feistel bijection
 * that scatters ranks (see zipf.h). */
#include "tools/trace/zipf.h"

#include <math.h>

#include "common/hash.h"

uint64_t fl_rng_next(uint64_t *rng) {
  *rng += 0x9e3779b97f4a7c15ull;
  return fl_mix64(*rng);
}

/* log1p(x)/x and expm1(x)/x, with their series near 0 where the quotient
 * loses precision. */
static double log1p_over(double x) {
  return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
static double expm1_over(double x) {
  return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

/* h(x) = x^-e; H is its integral (up to a constant) and H_inv its inverse,
 * written so that e = 1 needs no special case. */
static double h(double e, double x) { return exp(-e * log(x)); }
static double big_h(double e, double x) {
  double lx = log(x);
  return expm1_over((1 - e) * lx) * lx;
}
static double big_h_inv(double e, double x) {
  double t = x * (1 - e);
  if (t < -1) t = -1;
  return exp(log1p_over(t) * x);
}

void fl_zipf_init(fl_zipf *z, uint64_t n, double exponent) {
  z->n = n ? n : 1;
  z->exponent = exponent;
  z->h_x1 = big_h(exponent, 1.5) - 1;
  z->h_n = big_h(exponent, (double)z->n + 0.5);
  z->s = 2 - big_h_inv(exponent, big_h(exponent, 2.5) - h(exponent, 2));
}

uint64_t fl_zipf_sample(const fl_zipf *z, uint64_t *rng) {
  const double e = z->exponent, nd = (double)z->n;
  for (;;) {
    double u01 = (double)(fl_rng_next(rng) >> 11) * 0x1p-53;
    double u = z->h_n + u01 * (z->h_x1 - z->h_n); /* uniform in (h_x1, h_n] */
    double x = big_h_inv(e, u);
    double kd = floor(x + 0.5);
    if (kd < 1) kd = 1;
    if (kd > nd) kd = nd;
    if (kd - x <= z->s || u >= big_h(e, kd + 0.5) - h(e, kd)) return (uint64_t)kd - 1;
  }
}

void fl_perm_init(fl_perm *p, uint64_t n, uint64_t key) {
  uint32_t bits = 2;
  while (bits < 64 && (n - 1) >> bits) bits++;
  p->n = n;
  p->half_bits = (bits + 1) / 2;
  p->key = key;
}

static uint64_t feistel(const fl_perm *p, uint64_t x) {
  const uint32_t hb = p->half_bits;
  const uint64_t mask = (1ull << hb) - 1;
  uint64_t l = x >> hb, r = x & mask;
  for (uint64_t round = 0; round < 4; round++) {
    uint64_t f = fl_mix64(r ^ (p->key + round * 0x9e3779b97f4a7c15ull)) & mask;
    uint64_t nl = r;
    r = l ^ f;
    l = nl;
  }
  return (l << hb) | r;
}

uint64_t fl_perm_apply(const fl_perm *p, uint64_t x) {
  if (p->n <= 1) return 0;
  /* Cycle-walking: the network permutes [0, 4^half_bits) and every cycle
   * through x < n returns to [0, n), so walking until then is a bijection. */
  do x = feistel(p, x); while (x >= p->n);
  return x;
}
