/* device_view.h: where a caller's buffer can be used from the device (its
 * device address, or NULL for unregistered host memory), asked of the driver
 * once per allocation within one call. */
#ifndef FL_FUSION_DEVICE_VIEW_H
#define FL_FUSION_DEVICE_VIEW_H

#include <stdint.h>

/* Allocations already asked about in this call: [lo, hi) each, all of them
 * memory the device reads at the caller's own address (UVA). Kept for one
 * call only: memory freed between calls may come back as another kind. */
enum { FL_VIEW_RANGES = 8 };
typedef struct fl_view_ranges {
  uintptr_t lo[FL_VIEW_RANGES], hi[FL_VIEW_RANGES];
  uint32_t n, next;
} fl_view_ranges;

/* p's device address, or NULL when p is unregistered host memory. r starts
 * zeroed; a pointer inside an allocation r holds costs no driver call. */
const void *fl_device_view(fl_view_ranges *r, const void *p);

#endif
