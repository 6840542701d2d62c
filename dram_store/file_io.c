/* file_io.c: model file reading and atomic writing (see file_io.h). */
#include "dram_store/file_io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

fl_status fl_rfile_open(fl_rfile *r, const void *h, const char *path) {
  memset(r, 0, sizeof *r);
  r->path = path;
  r->h = h;
  r->f = fopen(path, "rb");
  struct stat st;
  if (!r->f || fstat(fileno(r->f), &st) != 0) {
    fl_status e = fl_fail(h, FL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    fl_rfile_close(r);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    fl_rfile_close(r);
    return fl_fail(h, FL_ERR_IO, "%s: not a regular file", path);
  }
  r->size = (uint64_t)st.st_size;
  return FL_OK;
}

void fl_rfile_close(fl_rfile *r) {
  if (r->f) fclose(r->f);
  r->f = NULL;
}

fl_status fl_rfile_read(fl_rfile *r, void *buf, size_t n, const char *what) {
  if (r->off + n > r->size)
    return fl_fail(r->h, FL_ERR_FORMAT, "%s: offset %llu: file ends inside %s (expected %zu bytes)",
                   r->path, (unsigned long long)r->off, what, n);
  if (fseeko(r->f, (off_t)r->off, SEEK_SET) != 0 || fread(buf, 1, n, r->f) != n)
    return fl_fail(r->h, FL_ERR_IO, "%s: offset %llu: read of %zu bytes failed: %s", r->path,
                   (unsigned long long)r->off, n, strerror(errno));
  r->off += n;
  return FL_OK;
}

fl_status fl_rfile_check_items(fl_rfile *r, uint64_t off, uint64_t count, uint64_t item_bytes,
                               const char *item, uint64_t total) {
  if (off <= r->size && count <= (r->size - off) / (item_bytes ? item_bytes : 1)) return FL_OK;
  uint64_t k = off <= r->size ? (r->size - off) / item_bytes : 0;
  return fl_fail(r->h, FL_ERR_FORMAT, "%s: offset %llu: file ends inside %s %llu (expected %llu bytes)",
                 r->path, (unsigned long long)(off + k * item_bytes), item, (unsigned long long)k,
                 (unsigned long long)total);
}

fl_status fl_wfile_open(fl_wfile *w, const void *h, const char *path) {
  memset(w, 0, sizeof *w);
  w->path = path;
  w->h = h;
  size_t len = strlen(path);
  w->tmp = malloc(len + 16);
  if (!w->tmp) return fl_fail(h, FL_ERR_OUT_OF_MEMORY, "%s: no memory", path);
  memcpy(w->tmp, path, len);
  memcpy(w->tmp + len, ".tmp.XXXXXX", 12);
  int fd = mkstemp(w->tmp);
  if (fd >= 0) w->f = fdopen(fd, "wb");
  if (!w->f) {
    fl_status e = fl_fail(h, FL_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    fl_wfile_abort(w);
    return e;
  }
  return FL_OK;
}

fl_status fl_wfile_write(fl_wfile *w, const void *buf, size_t n) {
  if (n && fwrite(buf, 1, n, w->f) != n)
    return fl_fail(w->h, FL_ERR_IO, "%s: offset %llu: write failed: %s", w->path,
                   (unsigned long long)w->off, strerror(errno));
  w->off += n;
  return FL_OK;
}

fl_status fl_wfile_rewrite(fl_wfile *w, uint64_t off, const void *buf, size_t n) {
  if (fseeko(w->f, (off_t)off, SEEK_SET) != 0 || fwrite(buf, 1, n, w->f) != n ||
      fseeko(w->f, 0, SEEK_END) != 0)
    return fl_fail(w->h, FL_ERR_IO, "%s: offset %llu: write failed: %s", w->path,
                   (unsigned long long)off, strerror(errno));
  return FL_OK;
}

fl_status fl_wfile_commit(fl_wfile *w) {
  int bad = fflush(w->f) != 0 || fsync(fileno(w->f)) != 0;
  bad |= fclose(w->f) != 0;
  w->f = NULL;
  if (bad || rename(w->tmp, w->path) != 0) {
    fl_status e = fl_fail(w->h, FL_ERR_IO, "%s: cannot finish writing: %s", w->path, strerror(errno));
    fl_wfile_abort(w);
    return e;
  }
  free(w->tmp);
  w->tmp = NULL;
  return FL_OK;
}

void fl_wfile_abort(fl_wfile *w) {
  if (w->f) fclose(w->f);
  w->f = NULL;
  if (w->tmp) unlink(w->tmp);
  free(w->tmp);
  w->tmp = NULL;
}
