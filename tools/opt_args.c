/* opt_args.c: the tools' option value parsers (opt_args.h). */
#include "tools/opt_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int fl_opt_bad(const char *opt, const char *v, const char *want) {
  fprintf(stderr, "error: %s '%s': expected %s\n", opt, v ? v : "", want);
  return -1;
}

int fl_opt_u64(const char *opt, const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = v ? strtoull(v, &end, 0) : 0;
  if (!v || *v == '-' || errno || *end) return fl_opt_bad(opt, v, "a non-negative integer");
  *out = x;
  return 1;
}

int fl_opt_u32(const char *opt, const char *v, uint32_t *out) {
  uint64_t x;
  if (fl_opt_u64(opt, v, &x) < 0) return -1;
  if (x > UINT32_MAX) return fl_opt_bad(opt, v, "a 32-bit integer");
  *out = (uint32_t)x;
  return 1;
}

int fl_opt_double(const char *opt, const char *v, double lo, double *out) {
  char *end;
  double x = v ? strtod(v, &end) : 0;
  if (!v || *end || !(x >= lo)) return fl_opt_bad(opt, v, "a number in range");
  *out = x;
  return 1;
}
