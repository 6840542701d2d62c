/* admit_shift.c: TinyLFU's shift detector (admit_shift.h). */
#include "cache/admit_shift.h"

#include <math.h>

#include "common/mutant.h"

void fl_shift_init(fl_admit_shift *s, uint64_t capacity) {
  *s = (fl_admit_shift){.capacity = capacity ? (double)capacity : 1.0};
}

void fl_shift_evicted(fl_admit_shift *s) { s->started = 1; }

/* Moves an exponential average with a window of `window` lookups by a batch
 * of n lookups whose share is r (the first batch sets it). */
static double average(double avg, double r, double n, double window, int first) {
  return first ? r : avg + (1.0 - exp(-n / window)) * (r - avg);
}

int fl_shift_observe(fl_admit_shift *s, uint64_t lookups, uint64_t missed) {
  if (lookups == 0 || !s->started) return s->open_left > 0;
  double n = (double)lookups, r = (double)missed / n, v = s->capacity;
  double w = v / FL_SHIFT_SHORT_DIV;
  int first = s->seen == 0;
  double short_miss = average(s->short_miss, r, n, w, first);
  /* The jump is measured against the long window before this batch, in
   * misses over the lookups the short share stands for (a batch longer
   * than the window stands for itself). */
  double m = n > w ? n : w;
  double excess = (short_miss - s->long_miss) * m, sd = sqrt(s->long_miss * m + 1.0);
  if (s->open_left <= 0 && s->seen >= FL_SHIFT_WARM * v &&
      short_miss > FL_SHIFT_RATIO * s->long_miss && excess > FL_SHIFT_SIGMAS * sd &&
      !FL_MUTANT_ON(23)) {
    s->open_left = FL_SHIFT_OPEN * v;
    s->opened++;
  }
  s->short_miss = short_miss;
  s->long_miss = average(s->long_miss, r, n, FL_SHIFT_LONG * v, first);
  s->seen += n;
  int open = s->open_left > 0;
  s->open_left -= n;
  return open;
}
