/* opt_args.h: parsing of the tools' option values (replay, tune, serve_bench):
 * each returns 1 with *out set, or prints "error: OPT 'V': expected ..." and
 * returns -1. v NULL means the value is missing. */
#ifndef FL_TOOLS_OPT_ARGS_H
#define FL_TOOLS_OPT_ARGS_H

#include <stdint.h>

/* Prints the error for option opt's value v and returns -1. */
int fl_opt_bad(const char *opt, const char *v, const char *want);
int fl_opt_u64(const char *opt, const char *v, uint64_t *out);
int fl_opt_u32(const char *opt, const char *v, uint32_t *out);
/* A number >= lo. */
int fl_opt_double(const char *opt, const char *v, double lo, double *out);

#endif
