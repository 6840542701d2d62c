/* error.c: thread-local, per-handle last-error messages (see error.h). */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { FL_ERROR_SLOTS = 8, FL_ERROR_LEN = 512 };

/* A small ring per thread: a thread working with a few handles keeps one
 * message for each; past FL_ERROR_SLOTS handles a new one takes a free slot
 * (fl_error_clear), else the oldest. */
typedef struct fl_error_slot {
  const void *handle;
  int used;
  char msg[FL_ERROR_LEN];
} fl_error_slot;

static _Thread_local fl_error_slot slots[FL_ERROR_SLOTS];
static _Thread_local unsigned next_slot;

static fl_error_slot *slot_for(const void *handle, int create) {
  for (unsigned i = 0; i < FL_ERROR_SLOTS; i++)
    if (slots[i].used && slots[i].handle == handle) return &slots[i];
  if (!create) return NULL;
  fl_error_slot *s = NULL;
  for (unsigned i = 0; i < FL_ERROR_SLOTS && !s; i++)
    if (!slots[i].used) s = &slots[i];
  if (!s) s = &slots[next_slot++ % FL_ERROR_SLOTS];
  s->used = 1;
  s->handle = handle;
  return s;
}

fl_status fl_fail(const void *handle, fl_status status, const char *fmt, ...) {
  /* Formatted first: the arguments may be another handle's message, in the
   * very slot the new one would take over. */
  char msg[FL_ERROR_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(slot_for(handle, 1)->msg, msg, sizeof msg);
  return status;
}

const char *fl_error_get(const void *handle) {
  fl_error_slot *s = slot_for(handle, 0);
  return s ? s->msg : "";
}

void fl_error_clear(const void *handle) {
  fl_error_slot *s = slot_for(handle, 0);
  if (s) s->used = 0;
}

void fl_error_forward(const void *from, const void *to) {
  fl_error_slot *s = slot_for(from, 0);
  if (!s) return;
  char msg[FL_ERROR_LEN];
  memcpy(msg, s->msg, sizeof msg);
  memcpy(slot_for(to, 1)->msg, msg, sizeof msg);
}
