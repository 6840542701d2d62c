/* fastdiv.h: division of 32-bit numbers by a divisor fixed at run time, as
 * one multiply (Lemire, Kaser and Kurz, "Faster remainder by direct
 * computation", 2019): a 64-bit division costs tens of cycles, which a
 * hashed row's address would pay on every read (dram_store/rows.h). Exact
 * for every 32-bit numerator and divisor from 2 up. */
#ifndef FL_COMMON_FASTDIV_H
#define FL_COMMON_FASTDIV_H

#include <stdint.h>

typedef struct fl_div32 {
  uint64_t m; /* ceil(2^64 / d) for the divisor d */
} fl_div32;

/* The divider for d >= 2 (d = 1 would need m = 2^64). */
static inline fl_div32 fl_div32_of(uint32_t d) {
  fl_div32 v = {UINT64_MAX / d + 1};
  return v;
}

/* n / d. */
static inline uint32_t fl_div32_q(fl_div32 v, uint32_t n) {
  return (uint32_t)(((unsigned __int128)v.m * n) >> 64);
}

#endif
