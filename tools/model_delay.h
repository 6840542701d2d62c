/* model_delay.h: a stand-in for an inference server's model in the replay
 * (--model-us): GPU work of a given duration on the batch's stream after
 * its lookup, as the model's layers follow the embedding lookup. It is one
 * block that waits on the GPU's clock: it takes the model's time, not its
 * SMs, so work on other streams (a look-ahead's index phase, an admission
 * round) runs beside it on idle SMs, where beside a real model it would
 * share them. */
#ifndef FL_TOOLS_MODEL_DELAY_H
#define FL_TOOLS_MODEL_DELAY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues `ns` nanoseconds of GPU work on `stream` (a cudaStream_t);
 * returns the launch's cudaError_t (0: enqueued). */
int fl_model_delay(void *stream, uint64_t ns);

#ifdef __cplusplus
}
#endif
#endif
