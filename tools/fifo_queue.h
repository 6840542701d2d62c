/* fifo_queue.h: the latency of requests through an ideal FIFO queue of k
 * servers, from their arrivals and service times: each request, in arrival
 * order, starts the moment it has arrived and a server is free (the one free
 * earliest), with no wake-up or hand-off between them. serve_bench sets a
 * level's own arrivals and service times through it: the queueing that those
 * service times imply at that rate, below which no dispatch can bring the
 * level's latency (the queue's K-server recursion is monotone: later starts
 * never let a request start earlier). */
#ifndef FL_TOOLS_FIFO_QUEUE_H
#define FL_TOOLS_FIFO_QUEUE_H

#include <stdint.h>

#include "include/fleche.h"

/* latency_us[i] = end - arrival of request i, for n requests whose arrivals
 * (ns, nondecreasing) and service times (us, >= 0) are given, through k >= 1
 * servers. FL_ERR_INVALID_ARGUMENT for k == 0 or arrivals out of order,
 * FL_ERR_OUT_OF_MEMORY, each with its message (fl_error_get(NULL): which
 * request); latency_us is written only on FL_OK. */
fl_status fl_fifo_latency(const int64_t *arrive_ns, const double *service_us, uint64_t n,
                          uint32_t k, double *latency_us);

#endif
