/* fuzz_util.h: what the libFuzzer targets share (header-only, so each target
 * stays one C file): a cursor that draws numbers from the input, temporary
 * files holding input bytes for the loaders that only take paths, the input
 * split into two files, and the checks on what a failing call returns: its
 * status among those documented, its message naming the file and place.
 * Built and run by tools/fuzz.sh. */
#ifndef FL_FUZZ_FUZZ_UTIL_H
#define FL_FUZZ_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/fleche.h"

/* Input bytes consumed front to back. Past the end every draw is 0, so any
 * input, however short, maps to some well-defined work. */
typedef struct fuzz_bytes {
  const uint8_t *p;
  size_t n;
} fuzz_bytes;

static inline uint64_t fuzz_take(fuzz_bytes *b, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes && b->n; i++, b->p++, b->n--) v |= (uint64_t)*b->p << (8 * i);
  return v;
}

/* A value in [0, bound) (bound > 0) from one or two bytes: biased, which is
 * fine for fuzzing and keeps the mapping cheap. */
static inline uint32_t fuzz_below(fuzz_bytes *b, uint32_t bound) {
  return (uint32_t)(fuzz_take(b, bound > 256 ? 2 : 1) % bound);
}

/* The folder temporary files go to: $TMPDIR, else /tmp. */
static inline const char *fuzz_tmpdir(void) {
  const char *d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

/* Writes n bytes to a fresh file named from `tmpl` (its XXXXXX replaced; a
 * buffer of at least 4096 bytes). 0 on success; the caller unlinks it. */
static inline int fuzz_write_temp(char *tmpl, const void *data, size_t n) {
  int fd = mkstemp(tmpl);
  if (fd < 0) return -1;
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) {
      close(fd);
      unlink(tmpl);
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  close(fd);
  return 0;
}

/* "$TMPDIR/fleche-fuzz-<what>-XXXXXX" into buf (4096 bytes). */
static inline void fuzz_temp_name(char *buf, const char *what) {
  snprintf(buf, 4096, "%s/fleche-fuzz-%s-XXXXXX", fuzz_tmpdir(), what);
}

/* Writes the whole input to a temporary file; 0 on success (path in buf). */
static inline int fuzz_input_file(char *buf, const char *what, const uint8_t *d, size_t n) {
  fuzz_temp_name(buf, what);
  if (fuzz_write_temp(buf, d, n) == 0) return 0;
  /* Without a writable temp folder nothing can be fuzzed: say so loudly. */
  perror("fuzz: cannot write a temporary file");
  abort();
}

/* Splits an input into two parts: its first 2 bytes (little-endian) give the
 * first part's length, capped at what is left; the second part is the rest.
 * Returns 0 when the input is too short to hold the length. */
static inline int fuzz_split(const uint8_t *d, size_t n, const uint8_t **a, size_t *na,
                             const uint8_t **b, size_t *nb) {
  if (n < 2) return 0;
  size_t len = (size_t)d[0] | (size_t)d[1] << 8;
  d += 2;
  n -= 2;
  if (len > n) len = n;
  *a = d;
  *na = len;
  *b = d + len;
  *nb = n - len;
  return 1;
}

/* Stops the run with a message: the fuzzer reports the input as a crash. */
#define FUZZ_CHECK(cond, ...)                                         \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "fuzz check failed: %s: ", #cond);              \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      abort();                                                        \
    }                                                                 \
  } while (0)

/* A set of statuses for fuzz_status: FUZZ_ST(FL_OK) | FUZZ_ST(FL_ERR_FORMAT). */
#define FUZZ_ST(s) (1u << (unsigned)(s))

/* Stops the run unless `st`, what `call` returned, is in `allowed`: the
 * statuses docs/API.md (or the reader's header) gives for the input the
 * target passed. `msg` is the call's last-error message. */
static inline void fuzz_status(const char *call, fl_status st, unsigned allowed, const char *msg) {
  FUZZ_CHECK((unsigned)st < 32 && (allowed & FUZZ_ST(st)), "%s returned %s (%d): %s", call,
             fl_status_name(st), (int)st, msg ? msg : "(no message)");
}

/* Stops the run unless `msg` starts with one of the n `paths`, then
 * ": <unit> <decimal>: ": a file parser's message naming the file and the
 * byte offset (unit "offset") or the line ("line") of the problem. */
static inline void fuzz_names_place(const char *msg, const char *unit, const char *const *paths,
                                    int n) {
  int names_file_and_place = 0;
  for (int i = 0; msg && i < n && !names_file_and_place; i++) {
    size_t len = strlen(paths[i]), ulen = strlen(unit);
    const char *p = msg + len;
    if (strncmp(msg, paths[i], len) != 0 || strncmp(p, ": ", 2) != 0 ||
        strncmp(p + 2, unit, ulen) != 0 || p[2 + ulen] != ' ')
      continue;
    p += 3 + ulen;
    if (*p < '0' || *p > '9') continue;
    while (*p >= '0' && *p <= '9') p++;
    names_file_and_place = strncmp(p, ": ", 2) == 0;
  }
  FUZZ_CHECK(names_file_and_place, "the message does not start \"%s: %s N: \": %s", paths[0],
             unit, msg ? msg : "(no message)");
}

/* Little-endian fields of the files the re-checksumming targets repair. */
static inline uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static inline void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v) {
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}

#endif
