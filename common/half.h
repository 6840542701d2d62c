/* half.h: IEEE binary16 <-> float conversion on both host and device, so fp16
 * tables need no CUDA header in host code. Round to nearest even. */
#ifndef FL_COMMON_HALF_H
#define FL_COMMON_HALF_H

#include <string.h>
#include "common/hd.h"

FL_HD uint32_t fl_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

FL_HD float fl_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

FL_HD uint16_t fl_f32_to_f16(float f) {
  uint32_t x = fl_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

FL_HD float fl_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return fl_bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return fl_bits_f32(sign);
    exp = 1;
    while (!(man & 0x400u)) { man <<= 1; exp--; }
    man &= 0x3ffu;
    return fl_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
  }
  return fl_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

#endif
