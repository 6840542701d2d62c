/* crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of our FLST files; software, slicing by 8 bytes. */
#ifndef FL_DRAM_STORE_CRC32C_H
#define FL_DRAM_STORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC of `n` bytes continuing `crc` (start with 0): crc32c(crc32c(0, a), b)
 * equals the CRC of a followed by b. crc32c(0, "123456789", 9) = 0xE3069283. */
uint32_t fl_crc32c(uint32_t crc, const void *data, size_t n);

#endif
