/* admit_shift.c: TinyLFU's shift detector (admit_shift.h). */
#include "cache/admit_shift.h"

#include <math.h>

#include "common/mutant.h"

void fl_shift_init(fl_admit_shift *s, uint64_t capacity) {
  *s = (fl_admit_shift){.capacity = capacity ? (double)capacity : 1.0};
}

void fl_shift_evicted(fl_admit_shift *s) { s->started = 1; }

/* Moves an exponential average with a window of `window` lookups by a batch
 * of n lookups whose value is x. Until the detector has seen a window of
 * lookups it is their plain mean (the first batch sets it), so that no
 * early batch weighs as a whole window. */
static double average(const fl_admit_shift *s, double avg, double x, double n, double window) {
  double ewma = 1.0 - exp(-n / window), mean = n / (s->seen + n);
  return avg + (ewma > mean ? ewma : mean) * (x - avg);
}

int fl_shift_observe(fl_admit_shift *s, uint64_t lookups, uint64_t missed) {
  if (lookups == 0 || !s->started) return s->open_left > 0;
  double n = (double)lookups, r = (double)missed / n, v = s->capacity;
  double w = v / FL_SHIFT_SHORT_DIV;
  double short_miss = average(s, s->short_miss, r, n, w);
  /* The jump is measured against the long window before this batch, in
   * misses over the lookups the short share stands for (a batch longer
   * than the window stands for itself). */
  double m = n > w ? n : w;
  double excess = (short_miss - s->long_miss) * m, sd = sqrt(s->long_miss * m + 1.0);
  if (s->open_left <= 0 && s->seen >= FL_SHIFT_WARM * v &&
      short_miss > FL_SHIFT_RATIO * s->long_miss && excess > FL_SHIFT_SIGMAS * sd &&
      (short_miss > FL_SHIFT_RATIO * s->peak || FL_MUTANT_ON(24)) && !FL_MUTANT_ON(23)) {
    s->open_left = FL_SHIFT_OPEN * v;
    s->opened++;
  }
  s->short_miss = short_miss;
  double faded = s->peak * exp(-n / (FL_SHIFT_PEAK * v));
  s->peak = s->seen > 0 && faded > short_miss ? faded : short_miss;
  s->long_miss = average(s, s->long_miss, r, n, FL_SHIFT_LONG * v);
  s->seen += n;
  int open = s->open_left > 0;
  s->open_left -= n;
  return open;
}
