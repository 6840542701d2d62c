/* file_io.h: reading and writing model files with error messages that name
 * the file and byte offset. Writes go to a temporary file in the same folder
 * that is renamed over the target only when complete, so a failed save never
 * leaves a half-written model under the real name. Files are little-endian,
 * like the hosts we build for. */
#ifndef FL_DRAM_STORE_FILE_IO_H
#define FL_DRAM_STORE_FILE_IO_H

#include <stdint.h>
#include <stdio.h>

#include "include/fleche.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "model files are little-endian");

typedef struct fl_rfile {
  FILE *f;          /* the open file */
  const char *path; /* as given, for messages */
  uint64_t size;    /* file length in bytes */
  uint64_t off;     /* offset of the next read */
  const void *h;    /* handle failures are recorded on */
} fl_rfile;

fl_status fl_rfile_open(fl_rfile *r, const void *h, const char *path);
void fl_rfile_close(fl_rfile *r);
/* Reads n bytes at r->off. Past the end: FL_ERR_FORMAT
 * "PATH: offset OFF: file ends inside WHAT (expected N bytes)". */
fl_status fl_rfile_read(fl_rfile *r, void *buf, size_t n, const char *what);
/* Checks that `count` items of `item_bytes` starting at `off` lie inside the
 * file; if not, FL_ERR_FORMAT naming the first incomplete one:
 * "PATH: offset O: file ends inside ITEM K (expected TOTAL bytes)", where
 * TOTAL is the file length the caller expected. */
fl_status fl_rfile_check_items(fl_rfile *r, uint64_t off, uint64_t count, uint64_t item_bytes,
                               const char *item, uint64_t total);

typedef struct fl_wfile {
  FILE *f;          /* the temporary file */
  const char *path; /* the target, as given */
  char *tmp;        /* the temporary file's path */
  uint64_t off;     /* bytes written so far */
  const void *h;    /* handle failures are recorded on */
} fl_wfile;

fl_status fl_wfile_open(fl_wfile *w, const void *h, const char *path);
fl_status fl_wfile_write(fl_wfile *w, const void *buf, size_t n);
/* Overwrites n bytes at `off` (< w->off), e.g. a header whose checksums are
 * known only at the end; later writes continue at the end. */
fl_status fl_wfile_rewrite(fl_wfile *w, uint64_t off, const void *buf, size_t n);
/* Flushes, syncs and renames the file into place (aborts it on failure). */
fl_status fl_wfile_commit(fl_wfile *w);
/* Drops the temporary file. */
void fl_wfile_abort(fl_wfile *w);

#endif
