/* fault.c: the armed fault points (fault.h). Each point holds the passes
 * left before it fires plus one; 0 is unarmed. */
#include "common/fault.h"

static int fl_fault_left[FL_FAULT_POINTS];

void fl_fault_arm(fl_fault_point point, unsigned skip) {
  __atomic_store_n(&fl_fault_left[point], (int)skip + 1, __ATOMIC_SEQ_CST);
}

void fl_fault_clear(void) {
  for (int i = 0; i < FL_FAULT_POINTS; i++) __atomic_store_n(&fl_fault_left[i], 0, __ATOMIC_SEQ_CST);
}

int fl_fault_armed(fl_fault_point point) {
  return __atomic_load_n(&fl_fault_left[point], __ATOMIC_SEQ_CST) > 0;
}

int fl_fault_hit(fl_fault_point point) {
  int left = __atomic_load_n(&fl_fault_left[point], __ATOMIC_RELAXED);
  while (left > 0) {
    /* Only the caller that takes it to 0 fires. */
    if (__atomic_compare_exchange_n(&fl_fault_left[point], &left, left - 1, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
      return left == 1;
  }
  return 0;
}
