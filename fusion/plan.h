/* plan.h: a prepared query's plan on the CUDA engine: its kept scratch and
 * header, its launch graphs, and the protocol of launched runs, whose host
 * half (the counters, the gather, the gate, the round) the cache's answerer
 * thread runs (plan.c). The engine (query_cuda.c) calls these around a
 * prepared run; prepared.c and query.c see only query.h's fl_plan_*. */
#ifndef FL_FUSION_PLAN_H
#define FL_FUSION_PLAN_H

#include "fusion/phases.h"

/* Starts a run of the plan: reports a launched run's failure not reported
 * yet; takes the next gate ticket; on the first run builds the header (and
 * keeps the scratch), on later ones orders this run after the last run's
 * uses of the kept scratch. *s, *v: the plan's setup and views. */
fl_status fl_plan_begin(fl_plan *pl, fl_part_batch *b, const fl_run_setup **s,
                        const fl_run_views **v, uint32_t *ticket);
/* The graph a run with this set state replays (NULL: direct launches):
 * none while the set must be cleared or the run is profiled. *gated: it is
 * the gated graph of a launch. */
void *fl_plan_graph(const fl_plan *pl, int clear_set, int profiled, int *gated);
/* A gated run, its graph launched: hands its host half to the answerer
 * (taking *gen), then ends the run's reads (reclamation ticket `ticket`). */
void fl_plan_hand_over(fl_plan *pl, fl_part_batch *b, uint64_t **gen, int want_refs, uint64_t t0,
                       int64_t ticket);
/* A run answered on the calling thread ended: ok, and whether it handed an
 * admission round over. The plan's graphs are built, once, after a run that
 * left the miss set empty. */
void fl_plan_end_run(fl_plan *pl, fl_part_batch *b, int ok, int posted);

#endif
