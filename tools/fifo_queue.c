/* fifo_queue.c: the ideal FIFO queue of k servers (fifo_queue.h). */
#include "tools/fifo_queue.h"

#include <stdlib.h>

#include "common/error.h"

fl_status fl_fifo_latency(const int64_t *arrive_ns, const double *service_us, uint64_t n,
                          uint32_t k, double *latency_us) {
  if (k == 0) return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT, "fifo queue: 0 servers");
  for (uint64_t i = 1; i < n; i++)
    if (arrive_ns[i] < arrive_ns[i - 1])
      return fl_fail(NULL, FL_ERR_INVALID_ARGUMENT,
                     "fifo queue: request %llu arrives at %lld ns, before request %llu (%lld ns)",
                     (unsigned long long)i, (long long)arrive_ns[i], (unsigned long long)(i - 1),
                     (long long)arrive_ns[i - 1]);
  /* free_ns[s]: when server s ends its last request; every server is free
   * before the first arrival. */
  double *free_ns = malloc(k * sizeof *free_ns);
  if (!free_ns)
    return fl_fail(NULL, FL_ERR_OUT_OF_MEMORY, "fifo queue: %u servers", (unsigned)k);
  for (uint32_t s = 0; s < k; s++) free_ns[s] = n ? (double)arrive_ns[0] : 0;
  for (uint64_t i = 0; i < n; i++) {
    uint32_t first = 0;
    for (uint32_t s = 1; s < k; s++)
      if (free_ns[s] < free_ns[first]) first = s;
    double arrive = (double)arrive_ns[i];
    double start = free_ns[first] > arrive ? free_ns[first] : arrive;
    free_ns[first] = start + 1e3 * service_us[i];
    latency_us[i] = (free_ns[first] - arrive) / 1e3;
  }
  free(free_ns);
  return FL_OK;
}
