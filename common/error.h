/* error.h: per-handle error messages. A failed call records its message in a
 * thread-local slot keyed by the handle it concerns, so concurrent callers of
 * one handle never see each other's messages and no lock is needed. */
#ifndef FL_COMMON_ERROR_H
#define FL_COMMON_ERROR_H

#include "include/fleche.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a printf-style message for `handle` (NULL for create/load calls) on
 * the calling thread and returns `status`, so call sites read
 * `return fl_fail(s, FL_ERR_X, "table %u ...", t);`. */
fl_status fl_fail(const void *handle, fl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The calling thread's last message for `handle`, "" when none. */
const char *fl_error_get(const void *handle);
/* Moves the calling thread's message for `from` to `to` (a create call that
 * failed inside a sub-object reports under the caller's handle). */
void fl_error_forward(const void *from, const void *to);
/* Forgets the calling thread's message for `handle` (a new object at the
 * address of a destroyed one). */
void fl_error_clear(const void *handle);

#ifdef __cplusplus
}
#endif
#endif
