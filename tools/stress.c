/* stress.c: the concurrency stress run (//tools:stress): the rules below,
 * which every file of the run keeps, and main (setup, the timed run, the
 * final pass, the exit code). The other files, one job each, share
 * stress.h: stress_opts.c (the command line), stress_setup.c (a store of
 * dense fp32, dense fp16 and hashed fp32 tables, a small cache over it),
 * stress_rows.c (the row encoding), stress_writer.c and stress_reader.c (the
 * threads), stress_judge.c (the checking rule, failed calls) and
 * stress_report.c (a summary line, a table, optional JSON).
 *
 * Readers ask in three ways, in turn by their index (--ask picks which):
 * fl_query with fresh batch sizes each time; a prepared query
 * (fl_query_prepare, sizes fixed per reader) run with fl_prepared_run; and
 * one launched with fl_prepared_launch then fl_prepared_wait (CUDA: its
 * outputs in device memory, so the run does not wait for the host's part).
 * Before every query, every buffer its answer passes through (the host
 * buffers and, on CUDA, the device ones) is filled with POISON bytes, so a
 * query that leaves rows unwritten shows them as such rather than passing
 * with an earlier answer.
 * Exit codes: 0 no violation, 1 a violation (or a failed setup), 2 usage error.
 *
 * Row encoding: the row (table t, id, version v) holds v in base 1024 in its
 * first DIGITS elements and, in every later one, an integer in [-1023, 1023]
 * hashed from (t, id, v, element). Small integers are exact in fp16 as in
 * fp32, so any returned row can be checked on its own: decode v, re-encode
 * (t, id, v), compare every byte. A torn row (parts of two writes) or another
 * id's row fails the comparison. Version 0 is never written, so zeros always
 * mean "no row"; POISON is no row's bytes (all-ones elements are NaN).
 *
 * Versions: every write (upsert or remove) of any row takes its number from
 * one clock, s->clock, by fetch-and-add before the store is called (setup
 * writes 1). So numbers order each row's writes, and place every write
 * against a reader's load of the clock. Row k of every table has one writer
 * (k % writers), which keeps three atomics per row:
 *   removing      the number of the last remove announced: stored after the
 *                 number was taken, before the fl_store_remove call;
 *   removing_prev what removing held before that store (the remove before);
 *   done          the last write whose call returned: number << 1, | 1 for a
 *                 remove, stored after the call returned.
 *
 * The rule, for every row a query returns, with `before` the row's done word
 * loaded just before the query was asked and `end` the clock loaded as soon
 * as the answer was complete (the call returned; CUDA: the stream was
 * synchronised):
 * - POISON means the query did not write the row                (unwritten);
 * - a non-zero row encodes (t, id, v) exactly                      (else torn);
 * - v >= before's number: never older than the write complete before the
 *   query started; a remove's number is never a row's, so a row from before
 *   a completed remove is stale too                               (else stale);
 * - v <= end: no write that took its number after the answer     (else future);
 * - zeros only for a hashed id with a remove in progress or complete, and
 *   the id not re-added, at some moment of the query: before is a remove
 *   (complete at the start; the re-add after it had not returned), or the
 *   last remove announced by `end` is numbered after before's write (it was
 *   announced before the answer, and had not completed before the query
 *   started). Dense rows are never zero.                      (else bad zero)
 * A remove announced after the answer never excuses a zero: that is why the
 * rule needs the last remove announced by `end`, not the last one announced
 * by the time the row is checked. It is removing when that is <= end, else
 * removing_prev, because a row gets at most one remove announced after end
 * before its reader is done checking: while it checks, a reader holds
 * (holds[], seq_cst like every atomic here) `end`, and a writer about to
 * announce a remove of a row whose last remove is numbered above some hold
 * waits for that hold to go. The reader stores its hold (first HOLD_PENDING,
 * which every such writer waits for) before it loads end, and the writer
 * loads the holds before it takes the new number: so a writer that went on
 * either saw this check's hold at or above the row's last remove, or loaded
 * the holds before this check began, and then the row's last remove took
 * its number before end was loaded. Either way removing_prev is <= end.
 *
 * A failed library or CUDA call is a violation too. At the end, with every
 * thread stopped and the cache synced, every row of every table is asked for
 * each way (fl_query with host buffers and, on CUDA, with device buffers; a
 * prepared run; a prepared launch), twice so that the second answer comes
 * from the cache where the first was admitted (final_pass): the same rule,
 * with nothing in flight, asks for exactly the last version written (zeros
 * for removed ids). */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"
#include "tools/stress.h"

/* Every row of every table, after the run, through reader r (made with
 * MAX_IDS ids per table) at iteration `iter` of its way to ask: each batch
 * takes the next MAX_IDS rows of every table, a table that has run out
 * starting over (every corpus holds MAX_IDS rows or more). Each batch is
 * asked twice, with a sync between, so that the second reads from the cache
 * the rows the first admitted: asked once, in order, every row would be a
 * miss (evicted before it comes round again). Nothing is in flight, so the
 * rule asks for exactly the last version written. */
static void final_pass(stress *s, reader *r, uint64_t iter) {
  uint64_t most = 0;
  for (uint32_t t = 0; t < s->n_tables; t++)
    if (s->tables[t].shape->corpus > most) most = s->tables[t].shape->corpus;
  for (uint64_t k0 = 0; k0 < most; k0 += MAX_IDS) {
    for (uint32_t t = 0; t < s->n_tables; t++) {
      lane *l = &r->lanes[t];
      l->n = MAX_IDS;
      for (size_t i = 0; i < l->n; i++) {
        l->rows[i] = (k0 + i) % s->tables[t].shape->corpus;
        l->ids[i] = row_id(&s->tables[t], l->rows[i]);
      }
    }
    ask_and_check(r, iter);
    cache_ok(s, "fl_cache_sync", fl_cache_sync(s->cache));
    ask_and_check(r, iter);
  }
}

static void sleep_s(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Starts the threads, lets them run for the configured time, stops them. */
static int run(stress *s, reader *readers, writer *writers, double *seconds) {
  uint32_t nr = 0, nw = 0;
  int ok = 1;
  double t0 = fl_now_s();
  /* nr and nw count the threads started, to be joined. */
  for (; ok && nr < s->o.readers; nr += ok)
    ok = pthread_create(&readers[nr].thread, NULL, reader_main, &readers[nr]) == 0;
  for (; ok && nw < s->o.writers; nw += ok)
    ok = pthread_create(&writers[nw].thread, NULL, writer_main, &writers[nw]) == 0;
  if (ok) sleep_s(s->o.seconds);
  else fprintf(stderr, "error: cannot start a thread\n");
  atomic_store(&s->stop, 1);
  for (uint32_t i = 0; i < nr; i++) pthread_join(readers[i].thread, NULL);
  for (uint32_t i = 0; i < nw; i++) pthread_join(writers[i].thread, NULL);
  *seconds = fl_now_s() - t0;
  return ok;
}

static void add_up(const stress *s, const reader *readers, const writer *writers, totals *x) {
  for (uint32_t i = 0; i < s->o.readers; i++) {
    x->queries += readers[i].queries;
    x->asked[readers[i].how] += readers[i].queries;
    for (uint32_t t = 0; t < s->n_tables; t++)
      for (int v = 0; v < N_VERDICTS; v++) x->per_table[t].n[v] += readers[i].tally[t].n[v];
  }
  for (uint32_t i = 0; i < s->o.writers; i++) {
    const write_counts *n = &writers[i].n;
    x->writes.upserts += n->upserts;
    x->writes.removes += n->removes;
    x->writes.readds += n->readds;
    x->writes.clears += n->clears;
    x->writes.unified_changes += n->unified_changes;
    x->writes.syncs += n->syncs;
  }
}

/* After a sync, the final pass every way: each ask (fl_query twice on
 * CUDA: its even iterations pass host buffers, its odd ones device buffers),
 * through a reader made for it (hold: reader 0's, idle now). Counted into x
 * apart and in the totals; 0 when a final reader cannot be set up. */
static int finish(stress *s, totals *x) {
  cache_ok(s, "fl_cache_sync", fl_cache_sync(s->cache));
  int ok = 1;
  for (int a = 0; ok && a < N_ASKS; a++) {
    reader r;
    ok = reader_init(s, &r, 0, (ask)a, 1);
    for (uint64_t iter = 0; ok && iter < (a == ASK_QUERY && s->cuda ? 2u : 1u); iter++) {
      final_pass(s, &r, iter);
      x->final_ways++;
    }
    for (uint32_t t = 0; ok && t < s->n_tables; t++) {
      x->final_rows += checked(&r.tally[t]);
      x->final_violations += violations(&r.tally[t]);
      for (int v = 0; v < N_VERDICTS; v++) x->per_table[t].n[v] += r.tally[t].n[v];
    }
    if (r.s) reader_free(&r);
  }
  for (uint32_t t = 0; t < s->n_tables; t++) {
    x->rows += checked(&x->per_table[t]);
    x->violations += violations(&x->per_table[t]);
  }
  x->failed_calls = atomic_load(&s->errors);
  x->violations += x->failed_calls;
  fl_cache_stats_get(s->cache, &x->cache, NULL, 0);
  return ok;
}

int main(int argc, char **argv) {
  stress s = {0};
  int p = parse(argc, argv, &s.o);
  if (p != 0) return p > 0 ? 0 : 2;
  s.n_tables = s.o.tables;
  reader *readers = calloc(s.o.readers, sizeof *readers);
  writer *writers = calloc(s.o.writers ? s.o.writers : 1, sizeof *writers);
  totals x = {.per_table = NULL};
  s.n_holds = s.o.readers;
  s.holds = calloc(s.n_holds, sizeof *s.holds);
  for (uint32_t i = 0; s.holds && i < s.n_holds; i++) atomic_init(&s.holds[i], HOLD_NONE);
  int ok = readers && writers && s.holds && make_store(&s) && make_cache(&s);
  ok = ok && (x.per_table = calloc(s.n_tables, sizeof *x.per_table)) != NULL;
  for (uint32_t i = 0; ok && i < s.o.readers; i++)
    ok = reader_init(&s, &readers[i], i, ask_of(s.o.asks, i), 0);
  for (uint32_t i = 0; ok && i < s.o.writers; i++) {
    writers[i] = (writer){.s = &s, .index = i, .rng = fl_hash2(s.o.seed + 1, ~(uint64_t)i)};
    ok = (writers[i].vectors = malloc(WRITE_ROWS * s.widest)) != NULL;
  }
  ok = ok && run(&s, readers, writers, &x.seconds);
  if (ok) {
    add_up(&s, readers, writers, &x);
    ok = finish(&s, &x);
  }
  if (ok) {
    print_report(&s, &x);
    if (s.o.json) ok = write_json(&s, &x, s.o.json);
  }
  for (uint32_t i = 0; readers && i < s.o.readers; i++)
    if (readers[i].s) reader_free(&readers[i]);
  for (uint32_t i = 0; writers && i < s.o.writers; i++) free(writers[i].vectors);
  fl_cache_destroy(s.cache);
  fl_store_destroy(s.store);
  for (uint32_t t = 0; s.tables && t < s.n_tables; t++) free(s.tables[t].state);
  free(s.tables);
  free(readers);
  free(writers);
  free(s.holds);
  free(x.per_table);
  return !ok || x.violations ? 1 : 0;
}
