/* admit_sketch_device.h: for admit_sketch_test only: runs the sketch's
 * FL_HD additions and aging (cache/admit_sketch.h) on the device, so the
 * test can compare the device's counters with the host's. */
#ifndef FL_TESTS_ADMIT_SKETCH_DEVICE_H
#define FL_TESTS_ADMIT_SKETCH_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Adds times[i] uses of keys[i] for every i, one device thread each (all
 * at once: concurrent compare-and-swaps on shared words), then halves
 * every counter `halvings` times; words (n_words, a power of two) in and
 * out in host memory. A cudaError_t. */
int fl_test_sketch_on_device(const uint64_t *keys, const uint32_t *times, size_t n,
                             uint32_t halvings, uint32_t *words, uint64_t n_words);

#ifdef __cplusplus
}
#endif
#endif
