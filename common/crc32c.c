/* crc32c.c: CRC-32C with the SSE4.2 crc32 instruction when the CPU has it (a
 * trace of 100s of MB is checked in well under a second), else a byte table. */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define FL_CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[256];

static void table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ FL_CRC32C_POLY : c >> 1;
    table[i] = c;
  }
}

static uint32_t crc_soft(uint32_t c, const unsigned char *p, size_t n) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, table_init);
  while (n--) c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                          size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = __builtin_ia32_crc32di(c64, w);
  }
  c = (uint32_t)c64;
  while (n--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}
#endif

uint32_t fl_crc32c(uint32_t crc, const void *data, size_t n) {
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return ~crc_hw(c, data, n);
#endif
  return ~crc_soft(c, data, n);
}
