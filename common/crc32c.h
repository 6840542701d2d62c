/* crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of our model files (FLST) and trace records (.fltr). */
#ifndef FL_COMMON_CRC32C_H
#define FL_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Extends crc (0 to start) over n bytes: crc32c(a + b) ==
 * fl_crc32c(fl_crc32c(0, a), b). fl_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t fl_crc32c(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
