/* zc_calibrate.h: the zero-copy limit a CUDA cache picks for itself at
 * create (cfg.zero_copy_rows FL_ZERO_COPY_AUTO; zero_copy.h, zc_calibrate.c). */
#ifndef FL_FUSION_ZC_CALIBRATE_H
#define FL_FUSION_ZC_CALIBRATE_H

#include "cache/query_side.h"

/* Times both miss paths on the cache's store and device and sets the
 * cache's limit where they cross. Nothing to do (FL_OK) unless the config
 * asks for it and the store's dense rows are mapped for the device. */
fl_status fl_zc_calibrate(fl_cache *c);

#endif
