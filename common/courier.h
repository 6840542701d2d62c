/* courier.h: one thread that runs jobs handed to it, one at a time, so that
 * a caller can return before work that does not belong on its critical path
 * (the CUDA query's admission round launch) is done. */
#ifndef FL_COMMON_COURIER_H
#define FL_COMMON_COURIER_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fl_courier fl_courier;

/* NULL when the thread or memory cannot be had. */
fl_courier *fl_courier_create(void);
/* Runs the job handed over, if any, then stops the thread. NULL does nothing. */
void fl_courier_destroy(fl_courier *k);
/* Hands fn(ctx) to the thread and returns at once; first waits for the
 * previous job to end (the courier holds one job). ctx must live until the
 * job has run (fl_courier_idle). */
void fl_courier_post(fl_courier *k, void (*fn)(void *ctx), void *ctx);
/* Returns once no job is waiting or running. Cheap when idle. */
void fl_courier_idle(fl_courier *k);

#ifdef __cplusplus
}
#endif
#endif
