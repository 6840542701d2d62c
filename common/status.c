/* status.c: status names and the library version. */
#include "include/fleche.h"

const char *fl_status_name(fl_status s) {
  switch (s) {
    case FL_OK: return "FL_OK";
    case FL_ERR_INVALID_ARGUMENT: return "FL_ERR_INVALID_ARGUMENT";
    case FL_ERR_OUT_OF_RANGE: return "FL_ERR_OUT_OF_RANGE";
    case FL_ERR_NOT_FOUND: return "FL_ERR_NOT_FOUND";
    case FL_ERR_OUT_OF_MEMORY: return "FL_ERR_OUT_OF_MEMORY";
    case FL_ERR_CUDA: return "FL_ERR_CUDA";
    case FL_ERR_NO_DEVICE: return "FL_ERR_NO_DEVICE";
    case FL_ERR_IO: return "FL_ERR_IO";
    case FL_ERR_FORMAT: return "FL_ERR_FORMAT";
    case FL_ERR_UNSUPPORTED: return "FL_ERR_UNSUPPORTED";
    case FL_ERR_UNAVAILABLE: return "FL_ERR_UNAVAILABLE";
  }
  return "FL_ERR_UNKNOWN";
}

const char *fl_version(void) { return "0.1.0"; }
