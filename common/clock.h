/* clock.h: the process's clocks: monotonic time (ns; ms, s) and thread CPU time. */
#ifndef FL_COMMON_CLOCK_H
#define FL_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic clock in ns. */
static inline uint64_t fl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Monotonic clock in ms (the cluster client's deadlines and heartbeats). */
static inline double fl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Monotonic clock in seconds (the tools' reports). */
static inline double fl_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the calling thread in ns. */
static inline uint64_t fl_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
