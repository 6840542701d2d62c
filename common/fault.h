/* fault.h: fault injection at named points of failure paths that no real
 * test can provoke (a device allocation or a graph's instantiation failing
 * on a healthy GPU, the store's arena running out on a healthy host). A
 * test arms a point; the point's next pass, after `skip` passes, fails as
 * if the call it guards had. Unarmed, a pass costs one relaxed atomic
 * load. */
#ifndef FL_COMMON_FAULT_H
#define FL_COMMON_FAULT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fl_fault_point {
  FL_FAULT_ROUND_BLOCK = 0,  /* an admission round's input block allocation (admit_round.c) */
  FL_FAULT_ROUND_GRAPH = 1,  /* instantiating a round's graph */
  FL_FAULT_ROUND_LAUNCH = 2, /* launching a round's graph */
  FL_FAULT_PLAN_GRAPH = 3,   /* instantiating a prepared query's graph (plan.c) */
  FL_FAULT_KERNEL_LOAD = 4,  /* loading a module's kernels at cache creation (fl_load_module) */
  FL_FAULT_STORE_ALLOC = 5,  /* a block of the DRAM store's arena (fl_mem_alloc): a hashed
                                table's index, chunk, directory or free stack, a dense array */
  FL_FAULT_ROUND_GROW = 6,   /* growing a round's ring of evicted slabs or a class's reservoir
                                (admit_round.c) */
  FL_FAULT_POINTS = 7
} fl_fault_point;

/* The pass of `point` after the next `skip` fails, once. */
void fl_fault_arm(fl_fault_point point, unsigned skip);
/* Disarms every point. */
void fl_fault_clear(void);
/* 1 when this pass through `point` must fail. */
int fl_fault_hit(fl_fault_point point);
/* 1 while `point` is armed and has not fired. */
int fl_fault_armed(fl_fault_point point);

#ifdef __cplusplus
}
#endif
#endif
