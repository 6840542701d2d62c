/* sim_recovery.c: how many batches a row of the policy simulator takes to
 * recover after the hot set moves (policy_sim.h, fl_sim_recovery_of).
 *
 * Batch `from` is the first of the new distribution; the n - from batches
 * from..n-1 follow the switch. A row's new steady state is the mean of its
 * per-batch hit rates over the last quarter of them (ceil((n - from) / 4)
 * batches, each counting once).
 * Its recovery is the least k such that batch from + k has a hit rate of at
 * least that mean minus the tolerance: 0 when the switch batch itself does,
 * and never more than n - from - 1, since the last quarter holds a batch at or
 * above its own mean. Reaching the band from below is what counts: a rate
 * that overshoots the steady state has recovered too.
 *
 * The mean of the last quarter, not a fixed figure, is the target because
 * each row settles at its own rate; a quarter is long enough to average out
 * a batch's noise, and on replay's workload it starts after every row has
 * settled (docs/POLICY_SIM.md has the figures). */
#include "tools/policy_sim.h"

fl_sim_recovery fl_sim_recovery_of(const double *pct, uint64_t n, uint64_t from, double tol_pts) {
  uint64_t after = n - from, quarter = (after + 3) / 4;
  double sum = 0;
  for (uint64_t b = n - quarter; b < n; b++) sum += pct[b];
  fl_sim_recovery r = {0, sum / (double)quarter};
  /* A tolerance above 0 stops the walk inside the last quarter; at 0 the
   * mean's rounding could leave every batch a hair below it. */
  while (r.batches < after && pct[from + r.batches] < r.steady_pct - tol_pts) r.batches++;
  return r;
}
