/* driver_calls.c: a CUDA injection library (CUDA_INJECTION64_PATH) that
 * times every CUDA driver API call of the process it is loaded into, with
 * no change to that program: which calls stall, and which thread was in
 * which call meanwhile (a call that waits for the driver's locks shows
 * beside the one that holds them). Built by tools/gpu_bundle.sh; the
 * program's cudart may be static (the driver loads this library itself).
 *
 * Environment: FL_DRIVER_CALLS (the output path; required),
 * FL_DRIVER_CALLS_MIN_US (calls at least this long are listed; default 50).
 * The output, written at exit, is tab-separated:
 *   call    <thread name>  <tid>  <function>  <start ns>  <end ns>
 *   sum     <function>  <calls>  <total us>  <max us>
 *   thread  <thread name>  <tid>  <function>  <calls>  <total us>
 * (`thread`: every call of each thread, by function; its name as last read,
 * every 4,096 calls)
 * with start and end on CLOCK_MONOTONIC (serve_bench's levels give their
 * t0 on the same clock). tools/driver_calls.py reads it. */
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CALLS = 1 << 21, N_IDS = CUPTI_DRIVER_TRACE_CBID_SIZE };

typedef struct {
  uint64_t start, end;
  const char *name; /* CUPTI's, static */
  int tid;
  char thread[16];
} call;

typedef struct {
  uint64_t count, total_ns, max_ns;
  const char *name;
} per_id;

/* A thread's calls by function, kept by the thread itself and listed for
 * the output. */
typedef struct thread_calls {
  uint64_t count[N_IDS], total_ns[N_IDS], seen;
  char name[16];
  int tid;
  struct thread_calls *next;
} thread_calls;

static call *calls;
static uint64_t n_calls, dropped;
static thread_calls *threads; /* every thread that made a call (under threads_mu) */
static pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread thread_calls *mine;
static per_id ids[N_IDS];
static uint64_t min_ns = 50000;
static const char *out_path;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void keep(const CUpti_CallbackData *d, uint64_t start, uint64_t end) {
  uint64_t i = __atomic_fetch_add(&n_calls, 1, __ATOMIC_RELAXED);
  if (i >= MAX_CALLS) {
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  call *k = &calls[i];
  k->start = start;
  k->end = end;
  k->name = d->functionName;
  k->tid = (int)syscall(SYS_gettid);
  if (pthread_getname_np(pthread_self(), k->thread, sizeof k->thread) != 0) k->thread[0] = 0;
}

/* The calling thread's counts, made at its first call (NULL without
 * memory); its name read again every 4,096 calls (threads name themselves
 * after they start). */
static thread_calls *my_calls(void) {
  if (!mine && (mine = calloc(1, sizeof *mine))) {
    mine->tid = (int)syscall(SYS_gettid);
    pthread_mutex_lock(&threads_mu);
    mine->next = threads;
    threads = mine;
    pthread_mutex_unlock(&threads_mu);
  }
  if (mine && mine->seen++ % 4096 == 0 &&
      pthread_getname_np(pthread_self(), mine->name, sizeof mine->name) != 0)
    mine->name[0] = 0;
  return mine;
}

/* The call's start rides in its correlation slot from entry to exit. */
static void CUPTIAPI on_call(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                             const void *data) {
  (void)user;
  const CUpti_CallbackData *d = data;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || id >= N_IDS) return;
  if (d->callbackSite == CUPTI_API_ENTER) {
    *d->correlationData = now_ns();
    return;
  }
  uint64_t end = now_ns(), start = *d->correlationData, ns = end - start;
  per_id *p = &ids[id];
  __atomic_fetch_add(&p->count, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&p->total_ns, ns, __ATOMIC_RELAXED);
  uint64_t m = __atomic_load_n(&p->max_ns, __ATOMIC_RELAXED);
  while (ns > m && !__atomic_compare_exchange_n(&p->max_ns, &m, ns, 1, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED)) {
  }
  if (!p->name) p->name = d->functionName;
  thread_calls *tc = my_calls();
  if (tc) {
    tc->count[id]++;
    tc->total_ns[id] += ns;
  }
  if (ns >= min_ns) keep(d, start, end);
}

static void write_out(void) {
  FILE *f = fopen(out_path, "w");
  if (!f) {
    fprintf(stderr, "driver_calls: cannot write %s\n", out_path);
    return;
  }
  uint64_t n = n_calls < MAX_CALLS ? n_calls : MAX_CALLS;
  for (uint64_t i = 0; i < n; i++)
    fprintf(f, "call\t%s\t%d\t%s\t%llu\t%llu\n", calls[i].thread, calls[i].tid,
            calls[i].name ? calls[i].name : "?", (unsigned long long)calls[i].start,
            (unsigned long long)calls[i].end);
  for (int i = 0; i < N_IDS; i++)
    if (ids[i].count)
      fprintf(f, "sum\t%s\t%llu\t%.1f\t%.1f\n", ids[i].name ? ids[i].name : "?",
              (unsigned long long)ids[i].count, ids[i].total_ns / 1e3, ids[i].max_ns / 1e3);
  pthread_mutex_lock(&threads_mu);
  for (const thread_calls *tc = threads; tc; tc = tc->next)
    for (int i = 0; i < N_IDS; i++)
      if (tc->count[i])
        fprintf(f, "thread\t%s\t%d\t%s\t%llu\t%.1f\n", tc->name, tc->tid,
                ids[i].name ? ids[i].name : "?", (unsigned long long)tc->count[i],
                tc->total_ns[i] / 1e3);
  pthread_mutex_unlock(&threads_mu);
  if (dropped) fprintf(f, "dropped\t%llu\n", (unsigned long long)dropped);
  fclose(f);
}

/* The driver calls this once, at its initialization. */
int InitializeInjection(void) {
  out_path = getenv("FL_DRIVER_CALLS");
  if (!out_path) {
    fprintf(stderr, "driver_calls: FL_DRIVER_CALLS (the output path) is not set\n");
    return 0;
  }
  const char *m = getenv("FL_DRIVER_CALLS_MIN_US");
  if (m) min_ns = (uint64_t)(atof(m) * 1e3);
  calls = calloc(MAX_CALLS, sizeof *calls);
  CUpti_SubscriberHandle sub;
  if (!calls || cuptiSubscribe(&sub, on_call, NULL) != CUPTI_SUCCESS ||
      cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
    fprintf(stderr, "driver_calls: cannot subscribe to the driver's calls\n");
    return 0;
  }
  atexit(write_out);
  return 1;
}
