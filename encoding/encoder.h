/* encoder.h: the encoding module's interface inside the library (the cache
 * and the query path): the per-table codes for FL_HD encode, the builder for
 * any key width (tests walk small widths exhaustively) and the GPU batch
 * encode. The public calls are in include/fleche.h. */
#ifndef FL_ENCODING_ENCODER_H
#define FL_ENCODING_ENCODER_H

#include "encoding/flat_key.h"
#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fl_encoding_create without the 32/64 restriction: key_bits 1 .. 64. Fails
 * with FL_ERR_INVALID_ARGUMENT when n > 2^key_bits - 1 (the empty key takes
 * one value of the key space). */
fl_status fl_encoding_build(const fl_table_desc *tables, uint32_t n, uint32_t key_bits,
                            fl_encoding_scheme scheme, fl_encoding **out);

const fl_code *fl_encoding_codes(const fl_encoding *e); /* n_tables entries, by table */
uint32_t fl_encoding_num_tables(const fl_encoding *e);
uint32_t fl_encoding_key_bits(const fl_encoding *e);
/* Table indices in ascending order of prefix_shifted (their blocks are
 * disjoint, so a key's table is found by binary search). */
const uint32_t *fl_encoding_order(const fl_encoding *e);
/* The table's name for messages ("t<i>" when none was given). */
const char *fl_encoding_table_name(const fl_encoding *e, uint32_t table);

/* GPU batch encode (encoding/encode_kernel.cu). ids and keys are device
 * pointers of n entries; first_bad is a device word the launcher sets to
 * UINT64_MAX and the kernel lowers to the index of the first out-of-range id.
 * Asynchronous on `stream` (a cudaStream_t); returns the launch's cudaError_t. */
int fl_encode_launch(fl_code code, uint32_t key_bits, const uint64_t *ids, uint64_t n,
                     uint64_t *keys, unsigned long long *first_bad, void *stream);

/* fl_encoding_encode's use_gpu path on host buffers (encoding/encode_gpu.c). */
fl_status fl_encoding_encode_gpu(const fl_encoding *e, uint32_t table, const uint64_t *ids,
                                 size_t n, uint64_t *keys);

#ifdef __cplusplus
}
#endif
#endif
