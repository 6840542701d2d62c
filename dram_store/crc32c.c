/* crc32c.c: table-driven CRC-32C (see crc32c.h). */
#include "dram_store/crc32c.h"

#include <pthread.h>
#include <string.h>

/* fl_crc_table[k][b]: CRC of byte b followed by k zero bytes. */
static uint32_t fl_crc_table[8][256];
static pthread_once_t fl_crc_once = PTHREAD_ONCE_INIT;

static void fl_crc_init(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    fl_crc_table[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; b++)
    for (int k = 1; k < 8; k++)
      fl_crc_table[k][b] = (fl_crc_table[k - 1][b] >> 8) ^ fl_crc_table[0][fl_crc_table[k - 1][b] & 0xffu];
}

uint32_t fl_crc32c(uint32_t crc, const void *data, size_t n) {
  pthread_once(&fl_crc_once, fl_crc_init);
  const unsigned char *p = data;
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8); /* little-endian hosts only (checked in file_io.h) */
    w ^= c;
    c = fl_crc_table[7][w & 0xff] ^ fl_crc_table[6][(w >> 8) & 0xff] ^
        fl_crc_table[5][(w >> 16) & 0xff] ^ fl_crc_table[4][(w >> 24) & 0xff] ^
        fl_crc_table[3][(w >> 32) & 0xff] ^ fl_crc_table[2][(w >> 40) & 0xff] ^
        fl_crc_table[1][(w >> 48) & 0xff] ^ fl_crc_table[0][w >> 56];
  }
  while (n--) c = (c >> 8) ^ fl_crc_table[0][(c ^ *p++) & 0xffu];
  return ~c;
}
