/* crc32c.h: CRC-32C (Castagnoli), the checksum of .fltr trace records. */
#ifndef FL_TOOLS_TRACE_CRC32C_H
#define FL_TOOLS_TRACE_CRC32C_H

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
