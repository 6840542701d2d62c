/* serve.h: the serving benchmark's pieces (serve_bench.c). Skip to "options".
 *
 * The benchmark plays an inference server in front of the cache, through the
 * public API only: K worker threads, each with its own CUDA stream and its
 * own preallocated output buffers, answer requests of varying size (a request
 * of s samples is one fl_query of s ids in each table). It measures latency
 * under load in levels:
 * - closed loop: the K workers serve requests back to back; the achieved rate
 *   is the saturation rate;
 * - open loop: requests arrive by a Poisson process at a fraction of that
 *   rate into one shared FIFO queue that the K workers drain, as a server's
 *   thread pool does. A request's latency runs from its scheduled arrival to
 *   the end of its answer (stream synchronised), so time spent queued counts.
 *
 * Requests are cut, before anything is timed, from replay's workload (the
 * embedded Zipf generator over the Criteo-sized tables): the first requests
 * take the first samples of the trace, the next ones the next samples. The
 * pool is served as one stream that continues from level to level and starts
 * over at its end (each level reports how many passes it made).
 *
 * Attribution: a request's latency splits into time queued and time served
 * (fl_query and the stream synchronisation); of the time queued, the
 * dispatch delay is the part after the request had arrived and its worker
 * was free: the worker thread waking up and getting a CPU, not the library.
 * The public API counts cache activity globally, not per call, and
 * fl_cache_stats_get takes the cache's lock, so a sampler thread reads the
 * counters every --sample-ms and the stall report gives, for each slow
 * request, the counters' change over the reads around it (all workers'
 * activity). Each request also keeps the library's own account of its call
 * (fl_query_timing_last: setup, index, fetch, admission, rows fetched), and
 * the part of its service after the call returned (the GPU's tail and the
 * synchronisation). To tell a slow call from a thread without a CPU, the
 * kernel's account comes beside it: the worker thread's involuntary context
 * switches and run-queue delay while it served the request, and while it
 * waited for the request after taking its ticket (a late dispatch with no
 * run-queue delay is a late wake-up, or the host's doing), and per level
 * the same for the workers and for every thread of the process (the
 * library's pools, courier and answerer), also grouped by the threads' names
 * (serve_sched.c). */
#ifndef FL_TOOLS_SERVE_H
#define FL_TOOLS_SERVE_H

#include <stdint.h>
#include <stdio.h>

#include "tools/replay.h"

/* ---------------------------------------------------------------- options */

enum { FL_SERVE_MAX_LOADS = 32, FL_SERVE_MAX_SIZES = 64 };

/* Request sizes in samples: uniform over a list, or log-uniform in [lo, hi]
 * (every power-of-two band equally likely). */
typedef struct fl_serve_sizes {
  int log_uniform;
  uint32_t list[FL_SERVE_MAX_SIZES]; /* uniform over list[0 .. n) */
  uint32_t n;
  uint32_t lo, hi;                   /* log-uniform range, 1 <= lo <= hi */
} fl_serve_sizes;

typedef struct fl_serve_opts {
  fl_replay_opts w;     /* workload, model and cache: replay's options (w.threads: the
                           library's host threads, --host-threads) */
  uint32_t threads;     /* K worker threads */
  double seconds;       /* per measured level */
  double loads[FL_SERVE_MAX_LOADS]; /* open-loop rates, fractions of the closed loop's */
  uint32_t n_loads;
  fl_serve_sizes sizes;
  int device_ids;       /* CUDA: a worker copies the request's ids to device memory
                           (one copy on its stream) before fl_query; else fl_query reads
                           them from the pinned request pool */
  int no_reserve;       /* skip fl_cache_reserve for the K workers' largest request */
  uint32_t stalls;      /* slowest requests reported per level */
  uint32_t sample_ms;   /* period of the counter sampler, 0: none */
  double warm_seconds;  /* the warm-up stops here even if the hit rate still moves */
  const char *svg;
  const char *trace;    /* --trace: the run in the Trace Event Format (serve_trace.c) */
  double trace_window_ms; /* traced around each level's slowest requests; 0: whole levels */
  int canary;           /* --canary: a thread spins on the clock during each level */
} fl_serve_opts;

/* Parses argv; 0 ok, 1 --help printed, -1 usage error (message printed). */
int fl_serve_parse(fl_serve_opts *o, int argc, char **argv);
/* Draws one request size. *rng: a splitmix64 state. */
uint32_t fl_serve_draw_size(const fl_serve_sizes *s, uint64_t *rng);
/* The --sizes text of a distribution ("64,256" or "log:1-2048"). */
void fl_serve_sizes_desc(const fl_serve_sizes *s, char *buf, size_t cap);

/* ----------------------------------------------------------- request pool */

typedef struct fl_serve_request {
  uint32_t samples;
  uint64_t *ids;        /* n_tables x samples ids: table t's at ids + t * samples */
} fl_serve_request;

typedef struct fl_serve_pool {
  fl_serve_request *req;
  uint64_t n;           /* requests */
  uint64_t samples;     /* over all requests */
  uint32_t n_tables;
  uint32_t max_samples; /* the largest request */
  uint64_t *ids;        /* every request's ids; pinned host memory when pinned */
  int pinned;
} fl_serve_pool;

/* Cuts the workload's trace into requests of sizes drawn from o->sizes; the
 * ids are pinned (cudaHostAlloc) when pinned != 0. Errors are printed. */
fl_status fl_serve_pool_build(const fl_workload *w, const fl_serve_opts *o, int pinned,
                              fl_serve_pool *p);
void fl_serve_pool_free(fl_serve_pool *p);

/* ---------------------------------------------------------------- workers */

/* One worker's stream and preallocated buffers, sized for the largest request. */
typedef struct fl_serve_worker fl_serve_worker;

fl_status fl_serve_worker_create(fl_cache *c, const fl_workload *w, const fl_serve_pool *p,
                                 int device_ids, fl_serve_worker **out);
void fl_serve_worker_destroy(fl_serve_worker *k);
/* Answers one request and waits for it (the stream synchronised); *t: the
 * library's account of the fl_query call. Errors are printed. Called by one
 * thread at a time per worker. */
fl_status fl_serve_worker_answer(fl_serve_worker *k, const fl_serve_request *r,
                                 fl_query_timing *t);

/* ------------------------------------------------------- counter sampling */

/* What the counters can say about a stretch of time (deltas, all workers). */
enum {
  FL_ATTR_QUERIES,     /* fl_query calls that ended */
  FL_ATTR_MISSES,      /* unique rows fetched from the store */
  FL_ATTR_EVICTIONS,
  FL_ATTR_STARVED,     /* CUDA admission rounds that found no free slot */
  FL_ATTR_SHED,        /* CUDA admission rounds dropped */
  FL_ATTR_ADMIT_WAIT,  /* ms waiting for the last admission round */
  FL_ATTR_GATHER,      /* ms inside the store's gathers */
  FL_ATTR_STEAL,       /* ms the hypervisor ran something else on this machine's CPUs,
                          summed over them (/proc/stat's steal; 0 where not reported) */
  FL_ATTR_ALLOCS,      /* CUDA buffers the cache allocated: each holds every caller */
  FL_ATTR_COUNT
};
/* Each counter's name in the reports, and the decimals it is printed with. */
typedef struct fl_serve_attr_col {
  const char *name;
  int decimals;
} fl_serve_attr_col;
extern const fl_serve_attr_col fl_attr_cols[FL_ATTR_COUNT];

typedef struct fl_serve_attrib {
  double v[FL_ATTR_COUNT];
} fl_serve_attrib;

typedef struct fl_serve_level fl_serve_level;

typedef struct fl_serve_sample {
  uint64_t t_ns;        /* monotonic */
  fl_serve_attrib a;    /* counters then */
} fl_serve_sample;

void fl_serve_attrib_of(const fl_cache_stats *s, fl_serve_attrib *a);
/* The change of the counters between the last sample at or before start_ns
 * and the first at or after end_ns (monotonic), into *d, and the span of
 * those samples into *window_ms (all 0 without samples). */
void fl_serve_attrib_between(const fl_serve_level *l, uint64_t start_ns, uint64_t end_ns,
                             fl_serve_attrib *d, double *window_ms);

/* -------------------------------------------------------------- scheduler */

/* The kernel's account of a thread (serve_sched.c): whether it lost its CPU
 * while runnable, and how long it waited for one. An involuntary switch is
 * a preemption (its slice ended, or a woken thread went first) or a
 * sched_yield that let another thread run; a voluntary one is the thread
 * blocking (futex, sleep). Run-queue delay is time runnable but not running:
 * after a preemption, or between a wake-up and getting a CPU. */
typedef struct fl_serve_sched {
  int64_t run_delay_ns; /* field 2 of schedstat; -1: unknown (no schedstat file) */
  uint64_t nivcsw;      /* involuntary context switches */
  uint64_t nvcsw;       /* voluntary context switches */
  int64_t run_ns;       /* field 1 of schedstat: on a CPU (known with run_delay_ns). The
                           guest's kernel leaves out the time the hypervisor took the vCPU
                           (steal), where it accounts steal */
} fl_serve_sched;

/* b - a, the change over a stretch (unknown if either is). */
fl_serve_sched fl_serve_sched_diff(const fl_serve_sched *a, const fl_serve_sched *b);
/* *sum += d (the run-queue delay stays unknown once one part is). */
void fl_serve_sched_add(fl_serve_sched *sum, const fl_serve_sched *d);

/* The calling thread's counters, cheap enough to read around every request:
 * its schedstat opened once, then read with pread; getrusage(RUSAGE_THREAD).
 * Open and read it in the thread it describes. */
typedef struct fl_serve_probe {
  int fd;               /* /proc/thread-self/schedstat; -1: absent */
} fl_serve_probe;

void fl_serve_probe_open(fl_serve_probe *p);
/* The thread's totals since it was created. */
void fl_serve_probe_read(const fl_serve_probe *p, fl_serve_sched *s);
void fl_serve_probe_close(fl_serve_probe *p);
/* The machine's steal time so far, ms summed over its CPUs, from
 * /proc/stat opened as fd (its first line's eighth number); 0 when fd is
 * -1 or the line has no such field. */
double fl_serve_steal_ms(int fd);
/* The calling thread's totals, for a thread that reads them once. */
void fl_serve_sched_self(fl_serve_sched *s);
/* What one request's probes cost (three reads), ns, measured in the calling
 * thread; *known: its run-queue delay can be read. */
double fl_serve_probe_cost_ns(int *known);

/* Threads of one kind: those whose names differ only in a trailing "-N" or
 * digits (the library's fl-store-0, fl-store-1, ... are "fl-store"; the
 * workers' serve-w-N "serve-w"). A thread never named has its process's
 * name; CUDA's have theirs ("cuda-EvtHandlr"). */
typedef struct fl_serve_kind {
  char name[16];        /* the name less its number; one word, no '"' or '\' */
  uint32_t threads;
  fl_serve_sched s;     /* their changes, summed */
} fl_serve_kind;

typedef struct fl_serve_kinds {
  fl_serve_kind *k;     /* in the order their first thread was added */
  uint32_t n;
} fl_serve_kinds;

/* Adds one thread's change d to the kind of its name (comm); without memory
 * for a new kind the thread is left out. */
void fl_serve_kinds_add(fl_serve_kinds *ks, const char *comm, const fl_serve_sched *d);
void fl_serve_kinds_free(fl_serve_kinds *ks);

/* Every thread of the process at one moment (/proc/self/task). */
typedef struct fl_serve_task {
  int tid;
  char comm[16];        /* its name (Linux keeps 15 characters) */
  fl_serve_sched s;     /* nivcsw, nvcsw from its status file */
} fl_serve_task;

typedef struct fl_serve_tasks {
  fl_serve_task *t;
  uint32_t n;           /* 0: unreadable */
} fl_serve_tasks;

void fl_serve_tasks_read(fl_serve_tasks *ts);
/* The change from a to b summed over b's threads into *d, and per kind into
 * *kinds (added to); a thread that a lacks, or one whose id was reused (it
 * counts less in b), counts from 0; a thread that b lacks is not counted. */
void fl_serve_tasks_delta(const fl_serve_tasks *a, const fl_serve_tasks *b, fl_serve_sched *d,
                          fl_serve_kinds *kinds);
void fl_serve_tasks_free(fl_serve_tasks *ts);

/* ----------------------------------------------------------------- levels */

typedef struct fl_serve_record {
  uint64_t req;         /* index into the pool */
  uint32_t worker;
  uint32_t nth;         /* the worker's nth request of the level, from 1 */
  int64_t sched_ns;     /* scheduled arrival (closed loop: the start), from t0 */
  int64_t start_ns, end_ns;
  fl_query_timing call; /* fl_query_timing_last after its fl_query */
  fl_serve_sched sched; /* its worker thread's, from just before start to just after end */
  fl_serve_sched wait;  /* its worker thread's from taking the ticket to just before start:
                           the wait for its arrival, and a late dispatch's cause (a
                           run-queue delay: no CPU; none: a late wake-up, or the host's) */
} fl_serve_record;

/* The canary (--canary, serve_canary.c): a thread that reads the clock in a
 * loop while a level runs, and every FL_SERVE_CALL_EVERY_US makes a system
 * call that does nothing (getppid). A gap: over FL_SERVE_GAP_US between two
 * reads, or in one such call. */
#define FL_SERVE_GAP_US 100.0
#define FL_SERVE_CALL_EVERY_US 20.0

typedef struct fl_serve_gap {
  int64_t from_ns, len_ns; /* from the level's t0 */
  int64_t run_delay_ns;    /* the canary's run-queue delay since the gap before (it lies in
                              its gaps); -1: unknown */
  int syscall;             /* in the system call: the kernel (or the sandbox) kept it */
} fl_serve_gap;

struct fl_serve_level {
  char label[32];       /* "closed K=4", "open 50%", "warm 3" */
  int open;             /* open loop */
  double load;          /* open: fraction of the saturation rate */
  double offered_rps;   /* open: arrivals scheduled / seconds; closed: 0 */
  double seconds;       /* asked for */
  uint64_t n;           /* requests answered */
  uint64_t unserved;    /* open: scheduled, not answered before the deadline */
  uint64_t samples, lookups;
  double wall_s;        /* t0 to the last answer */
  double passes;        /* pool passes */
  uint64_t t0_ns;       /* monotonic; records count from here */
  fl_serve_record *rec; /* n records, by ticket (arrival order) */
  double *lat_us, *queue_us, *service_us; /* per record: end - sched, start - sched,
                                             end - start */
  double *dispatch_us;  /* per record: start - (arrival or its worker's last end, the
                           later): how late the worker thread began (wake-up, CPU) */
  fl_cache_stats before, after;
  fl_serve_sample *samples_at; /* the sampler's reads, n_samples of them */
  uint64_t n_samples;
  /* The scheduler over the level, from before its threads are created to
   * after they are joined: */
  fl_serve_sched workers; /* the K workers over their lives */
  fl_serve_sched process; /* every thread: the workers and the sampler over their
                             lives, the others (the library's, main) over the level */
  uint32_t threads;       /* counted in process; 0: /proc/self/task unreadable */
  fl_serve_kinds kinds;   /* process's threads by kind (none when threads is 0) */
  int canary;             /* the canary ran (--canary) */
  fl_serve_gap *gaps;     /* its gaps, in time order */
  uint64_t n_gaps, gaps_lost;
};

/* Everything a level runs on. */
typedef struct fl_serve_ctx {
  const fl_serve_opts *o;
  fl_cache *cache;
  const fl_serve_pool *pool;
  fl_serve_worker **workers; /* o->threads of them */
  uint64_t cursor;           /* the pool's next request */
  uint64_t seed;             /* arrival streams: one per level from (seed, levels_run) */
  uint64_t levels_run;
  double est_rps;            /* closed loop's rate so far (sizes its records) */
} fl_serve_ctx;

/* Runs one level: closed loop for `seconds` or until max_requests (0: no
 * limit; a closed level needs one or the other), or open loop at `rps` for
 * `seconds`. Records are allocated here; fl_serve_level_free frees them. */
fl_status fl_serve_run_closed(fl_serve_ctx *x, const char *label, double seconds,
                              uint64_t max_requests, fl_serve_level *l);
fl_status fl_serve_run_open(fl_serve_ctx *x, const char *label, double load, double rps,
                            double seconds, fl_serve_level *l);
void fl_serve_level_free(fl_serve_level *l);

/* --------------------------------------------------------------- results */

double fl_serve_achieved_rps(const fl_serve_level *l);
double fl_serve_hit_rate(const fl_serve_level *l);
/* Latency percentile (q in [0, 1]) in us: scheduled arrival to answer. */
double fl_serve_latency_us(const fl_serve_level *l, double q);

/* Each request's latency (us, by ticket) through the ideal FIFO queue of
 * `workers` servers (fifo_queue.h) from the level's own arrivals and service
 * times: what queueing alone makes of those service times at that rate. A
 * request's measured latency is never below its ideal one; the difference is
 * dispatch (a worker waking, taking the ticket, getting a CPU) carried
 * through the queue. In the closed loop, where a request arrives as a
 * worker takes it, it is the service time. A malloc'd array of l->n (the
 * caller frees it); NULL on failure, with fl_error_get(NULL) saying why. */
double *fl_serve_ideal_latency(const fl_serve_level *l, uint32_t workers);

/* A request served in more than this is slow, for the scheduler's summary. */
#define FL_SERVE_SLOW_US 1000.0

/* What the scheduler did to a level's requests, from their records. */
typedef struct fl_serve_preempt {
  uint64_t preempted;      /* requests with an involuntary switch while served */
  uint64_t slow;           /* requests served in over FL_SERVE_SLOW_US */
  uint64_t slow_preempted; /* of those, preempted */
  uint64_t slow_unseen;    /* of those, never switched out yet off a CPU and not waiting for
                              one for over half the service (fl_serve_unseen_ns): the
                              hypervisor's */
  int64_t run_delay_ns;    /* run-queue delay while served, all requests; -1: unknown */
  int64_t slow_run_delay_ns; /* the slow ones'; -1: unknown */
} fl_serve_preempt;

void fl_serve_preempt_of(const fl_serve_level *l, fl_serve_preempt *out);
/* Of r's service, the ns its worker was neither on a CPU nor waiting for
 * one: asleep (a voluntary switch: a lock, a wait) or, with no switch, its
 * vCPU taken by the hypervisor; -1: unknown. */
int64_t fl_serve_unseen_ns(const fl_serve_record *r);

/* The warm-up: closed-loop rounds until the hit rate is steady. */
typedef struct fl_serve_warm {
  uint32_t rounds;
  int steady;           /* 0: stopped by --warm-seconds */
  double seconds, hit_rate, rps; /* total time; the last round's hit rate and rate */
  double first_p50_us, first_max_us; /* the first round's latency: the first calls
                                        (CUDA modules loaded lazily, buffers grown) */
} fl_serve_warm;

/* A whole run: what it ran on, the warm-up, the levels (closed loop first). */
typedef struct fl_serve_result {
  fl_backend backend;
  uint64_t budget_bytes;
  fl_serve_warm warm;
  fl_serve_level *levels;
  uint32_t n_levels;
  double probe_ns;      /* what a request's scheduler probes cost */
  int run_delay_known;  /* /proc/thread-self/schedstat is there */
} fl_serve_result;

/* The open level of the lowest load, whose p50 the reports take as the
 * unloaded latency; NULL without open levels. */
const fl_serve_level *fl_serve_lightest(const fl_serve_result *res);

void fl_serve_print(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                    const fl_serve_result *res);
/* The slowest requests of a level, with what went on around them. */
void fl_serve_print_stalls(FILE *f, const fl_serve_opts *o, const fl_serve_pool *p,
                           const fl_serve_level *l);
fl_status fl_serve_json(const char *path, const fl_serve_opts *o, const fl_serve_pool *p,
                        const fl_serve_result *res);
/* The levels' requests as a trace for Perfetto (serve_trace.c). */
fl_status fl_serve_trace(const char *path, const fl_serve_opts *o, const fl_serve_pool *p,
                         const fl_serve_result *res);
/* Latency percentiles and achieved rate against the offered rate (open loop). */
fl_status fl_serve_svg(const char *path, const fl_serve_result *res);

/* One slow request and what went on around it; its record holds the
 * library's account of its call. */
typedef struct fl_serve_stall {
  const fl_serve_record *r;
  uint32_t samples;
  double queue_us, service_us, total_us, dispatch_us;
  uint64_t busy;        /* other requests in service at its start */
  uint64_t ahead;       /* requests that arrived before it and had not started by its arrival */
  fl_serve_attrib d;    /* the counters' change over the reads enclosing its service */
  double window_ms;     /* the span of those reads */
} fl_serve_stall;

/* What the slowest requests are ranked by. By total, an open loop's backlog
 * fills the list with the requests that queued behind it; by service, it
 * shows the requests that may have caused it. */
typedef enum fl_serve_rank { FL_SERVE_BY_TOTAL, FL_SERVE_BY_SERVICE } fl_serve_rank;

/* The min(k, l->n) slowest requests of a level by `rank`, slowest first. */
uint32_t fl_serve_stalls(const fl_serve_level *l, const fl_serve_pool *p, fl_serve_rank rank,
                         uint32_t k, fl_serve_stall *out);

/* A request queued longer than this (us) marks the onset of a backlog. */
#define FL_SERVE_BACKLOG_US 1000.0

/* How a level's queue backed up (serve_backlog.c says how it is measured). */
typedef struct fl_serve_backlog {
  const fl_serve_record *onset; /* the first by arrival queued over FL_SERVE_BACKLOG_US;
                                   NULL: none */
  double onset_queue_us;
  uint64_t onset_in_service;    /* requests in service at its arrival */
  int64_t saturated_from_ns, saturated_to_ns; /* the longest stretch with every worker
                                                 busy and a request queued, from t0;
                                                 equal: none */
  double saturated_steal_ms;    /* the machine's steal time over the samples around it */
  double steal_ms;              /* the same over the whole level */
} fl_serve_backlog;

/* The backlog of a level served by `workers` workers. */
fl_status fl_serve_backlog_of(const fl_serve_level *l, uint32_t workers, fl_serve_backlog *out);

/* A request's phases as the library accounts them (fl_query_timing:
 * setup, index, fetch, admission; those of 0 ns left out), laid back to
 * back from its start; "find buffers" nested at the start of the setup,
 * "counters wait" at the end of the index;
 * then "gpu + sync", the part after the call returned. Times in ns from the
 * level's t0. */
typedef struct fl_serve_phase {
  const char *name;
  int64_t from_ns, to_ns;
} fl_serve_phase;
enum { FL_SERVE_PHASES = 7 };
/* r's phases into out (FL_SERVE_PHASES at most), in time order (a nested
 * one after its parent); returns how many. */
uint32_t fl_serve_phases_of(const fl_serve_record *r, fl_serve_phase *out);

/* A stretch longer than this (us), or than twice the level's median
 * service, with every worker in service and none starting or ending a
 * request is counted as frozen (serve_frozen.c). */
#define FL_SERVE_FROZEN_US 300.0

typedef struct fl_serve_frozen {
  double threshold_us;     /* the level's */
  uint64_t count;          /* frozen stretches */
  uint64_t gapped[2];      /* of them, those that overlap a canary gap (--canary):
                              between clock reads, in a system call */
  double total_ms;         /* their length, summed */
  int64_t from_ns, to_ns;  /* the longest, from t0; equal: none */
} fl_serve_frozen;

/* The frozen stretches of a level served by `workers` workers; with phase
 * non-NULL (workers entries), each worker's phase at the longest one's
 * middle ("-": none found). */
fl_status fl_serve_frozen_of(const fl_serve_level *l, uint32_t workers, fl_serve_frozen *out,
                             const char **phase);

/* ---------------------------------------------------------------- canary */

typedef struct fl_serve_canary {
  int on;                  /* it runs while 1 (atomic) */
  uint64_t t0;             /* the level's, monotonic ns */
  fl_serve_gap *gaps;      /* in time order */
  uint64_t n, cap;
  uint64_t lost;           /* gaps not recorded for want of memory */
} fl_serve_canary;

/* The canary thread's body; arg: an fl_serve_canary. */
void *fl_serve_canary_main(void *arg);
/* 1 when a gap of l of the kind (syscall or not) overlaps [from_ns, to_ns). */
int fl_serve_gapped(const fl_serve_level *l, int64_t from_ns, int64_t to_ns, int syscall);

/* The gaps of one kind, and what they overlap. */
typedef struct fl_serve_gap_sum {
  uint64_t gaps;
  double total_ms, longest_us;
  uint64_t unaccounted;    /* gaps its run-queue delay covers less than half of */
  double unaccounted_ms;   /* their length beyond that delay */
  uint64_t unknown;        /* gaps without a run-queue delay (no schedstat) */
  uint64_t frozen_gapped;  /* frozen stretches that overlap a gap */
  uint64_t slow_gapped;    /* slow requests that overlap a gap */
} fl_serve_gap_sum;

typedef struct fl_serve_canary_sum {
  fl_serve_gap_sum clock, syscall; /* between clock reads; in the system calls */
  uint64_t frozen;         /* frozen stretches */
  uint64_t slow;           /* requests served longer than the frozen threshold */
} fl_serve_canary_sum;

fl_status fl_serve_canary_of(const fl_serve_level *l, uint32_t workers, fl_serve_canary_sum *out);

#endif
