/* resp.c: Redis request encoding (see resp.h): "*argc\r\n", then per
 * argument "$len\r\n", its bytes and "\r\n", as redisFormatCommandArgv
 * writes it. */
#include "cluster/resp.h"

#include <string.h>

/* "*" or "$", the length's digits, "\r\n". */
#define FL_RESP_HEADER_MAX 23

size_t fl_resp_u64(char *out, unsigned long long v) {
  char tmp[20];
  size_t n = 0;
  do tmp[n++] = (char)('0' + v % 10), v /= 10;
  while (v);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

size_t fl_resp_bound(int argc, const size_t *argvlen) {
  size_t n = FL_RESP_HEADER_MAX;
  for (int i = 0; i < argc; i++) n += FL_RESP_HEADER_MAX + argvlen[i] + 2;
  return n;
}

static size_t header(char *out, char kind, unsigned long long n) {
  out[0] = kind;
  size_t at = 1 + fl_resp_u64(out + 1, n);
  out[at] = '\r', out[at + 1] = '\n';
  return at + 2;
}

size_t fl_resp_put(char *out, int argc, const char **argv, const size_t *argvlen) {
  size_t at = header(out, '*', (unsigned long long)argc);
  for (int i = 0; i < argc; i++) {
    at += header(out + at, '$', argvlen[i]);
    memcpy(out + at, argv[i], argvlen[i]);
    at += argvlen[i];
    out[at] = '\r', out[at + 1] = '\n';
    at += 2;
  }
  return at;
}
