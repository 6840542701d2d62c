/* mutant.h: deliberate bugs for mutation testing (tools/mutants.sh). A build
 * with -DFL_MUTANT=N compiles in bug N wherever FL_MUTANT_ON(N) guards it;
 * every other build (FL_MUTANT undefined or 0) compiles in none, and the
 * guard folds to a constant 0. Each mutant is a bug some test must catch: the
 * script builds one at a time and fails when a mutant survives every test.
 * Usable from C, C++ and CUDA (FL_HD code included).
 *
 * The catalogue, read by tools/mutants.sh (number, the backends whose tests
 * run against it, the bug). "host" mutants run in CI against the host
 * backend's tests, fuzzers and stress run; "cuda" ones also in the GPU
 * bundle against the CUDA tests and stress run: the bugs on paths that
 * differ on the GPU (kernels, events, rounds).
 *
 * mutant 1 host cuda: a hit serves the next slot's row, another id's (cache/index.h)
 * mutant 2 host cuda: a store write leaves the written ids' rows cached (cache/cache.c)
 * mutant 3 host: a store read keeps a copy that a writer tore: no seqlock retry (dram_store/table.h)
 * mutant 4 host cuda: slabs are reused while queries that may read them run (cache/reclaim.c)
 * mutant 5 host cuda: rows fetched before a store write are admitted after it (cache/query_side.c)
 * mutant 6 host: a stale hashed reference is read without the owner check (dram_store/table.h)
 * mutant 7 host cuda: a missed position gets its neighbour's row: one row off in the scatter (batch/miss_set.h)
 * mutant 8 host: the parallel for loses its last partial chunk (common/parallel.c)
 * mutant 9 host: a cluster value of the wrong length fails the gather but leaves a zero row (cluster/rows.c)
 * mutant 10 host: the worker pool calls in every worker, whatever its cost model plans (common/parallel.c)
 * mutant 11 host cuda: TinyLFU forgets the evicted entries' frequency: every missed row is admitted (cache/admit_rule.h)
 * mutant 12 host cuda: the tombstone sweep empties a slot on a live key's chain (cache/index.h)
 * mutant 13 host cuda: eviction ignores the index's load: rows smaller than the mean fill it, and admission stops (cache/evict.c)
 * mutant 14 host cuda: a 32-bit location decodes one 16-byte unit off: a hit serves bytes of the wrong place (cache/index.h)
 * mutant 15 host: FL_KEY_BITS_AUTO takes 32-bit keys even where they fold ids together (cache/cache.c)
 * mutant 16 host: a cache created with unified entries gets 32-bit locations: no pointer can be made (cache/cache.c)
 * mutant 17 host: a query's begin never takes back the slots of queries whose events fired: slots and events grow with every all-hit query (cache/reclaim.c)
 * mutant 18 host cuda: TinyLFU's sketch never ages: counts of long ago outweigh today's (cache/admit_sketch.h)
 * mutant 19 host cuda: entries' ages are inverted: eviction takes the newest entries first (cache/index.h)
 * mutant 20 cuda: fl_cache_reserve makes no buffer set: its callers' first queries allocate (cache/cuda_state.c)
 * mutant 21 host: a hashed row read by id is kept without checking that the index still maps the id to it (dram_store/table.h)
 * mutant 22 host: an upsert that found no memory for its rows writes them anyway (dram_store/local_tier.c)
 * mutant 23 host cuda: TinyLFU's shift detector never opens: a moved hot set's rows must miss twice (cache/admit_shift.c)
 * mutant 24 host: the shift detector forgets the short share's peak: a share coming back to where it was opens it (cache/admit_shift.c)
 * mutant 25 host: a watched job's caller never takes a chunk itself: helpers that come late hold the job up (common/parallel.c)
 * mutant 26 host: a query's slot is ended on an event asked before the slot was ended and taken again: slabs are reused under the new query (cache/reclaim.c)
 * mutant 27 cuda: fl_cache_reserve sizes no admission round's ring or reservoir: the pool's first evictions allocate (cache/cache.c)
 * mutant 28 cuda: a query's buffer counts as device memory once any allocation of the call has been asked about: unregistered buffers are read in place (fusion/device_view.c)
 * mutant 29 cuda: every missed position's warp reads its row in place itself, without the claim: positions of one id get copies of different versions (fusion/query_kernels.cu)
 * mutant 30 cuda: a hashed slot read in place at its reference is kept without the owner check: a slot reused by another id serves that id's row (fusion/query_kernels.cu)
 * mutant 31 host: the unified index takes pointers past the index's load: it fills until inserts fail, and every miss probes the whole limit (cache/evict.c)
 * mutant 32 host: woken ahead of a job, the pool's workers spin only the usual 20 us and sleep again before it comes (common/parallel.c)
 * mutant 33 cuda: a store of hashed tables only is not calibrated: its pointer rows never read in place by default (fusion/zc_calibrate.c)
 * mutant 34 host cuda: a prefetch's rows are admitted by the policy as a query's are, not all of them (cache/admit_rule.h)
 */
#ifndef FL_COMMON_MUTANT_H
#define FL_COMMON_MUTANT_H

#ifndef FL_MUTANT
#define FL_MUTANT 0
#endif

#define FL_MUTANT_ON(n) (FL_MUTANT == (n))

#endif
