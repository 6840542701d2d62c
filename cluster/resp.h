/* resp.h: encoding of Redis requests (RESP arrays of bulk strings) into a
 * caller's buffer, for pipelines written with one redisAppendFormattedCommand
 * per node: hiredis 0.14's redisAppendCommandArgv builds each command with
 * sds printf-style appends, which cost more than the rest of a row fetch. */
#ifndef FL_CLUSTER_RESP_H
#define FL_CLUSTER_RESP_H

#include <stddef.h>

/* Bytes the encoding of a command of argc arguments takes (an upper bound:
 * the lengths' digits counted as 20). */
size_t fl_resp_bound(int argc, const size_t *argvlen);
/* Writes the command into out (fl_resp_bound bytes); the bytes written. */
size_t fl_resp_put(char *out, int argc, const char **argv, const size_t *argvlen);
/* Writes v in decimal into out (20 bytes); the digits written. */
size_t fl_resp_u64(char *out, unsigned long long v);

#endif
