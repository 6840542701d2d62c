/* serve_sched.c: the kernel's account of serve_bench's threads (serve.h's
 * fl_serve_sched): a worker's probe, read as it takes a request's ticket,
 * just before the request and just after it, and the whole process's
 * threads, read at a level's two ends.
 *
 * A probe is one pread of the thread's /proc/thread-self/schedstat, opened
 * once ("run_ns delay_ns timeslices"), and one getrusage(RUSAGE_THREAD).
 * A request's service less its worker's time on a CPU and in the run queue
 * is time it slept or, where it never switched out, time the hypervisor
 * took its vCPU (the guest's kernel counts steal apart from run time where
 * it accounts steal at all).
 * On a 2-vCPU VM (kernel 6.18) the pread costs about 0.3-0.4 us and the
 * getrusage 0.14 us, so a request's three probes about 1.5 us (the first
 * before its arrival, unless it is late), against requests
 * of 100 us and more: cheap enough for every request. serve_bench measures
 * it again where it runs (fl_serve_probe_cost_ns) and prints it. The
 * process's threads are read from /proc/self/task/TID/{status,schedstat,
 * comm}: open, read, close for each, about 6 us a thread, so only at a
 * level's ends. Their names group them by kind (fl_serve_kind): which pool
 * waited for a CPU. And the machine's steal time (/proc/stat), which the
 * sampler reads with the cache's counters: time the hypervisor gave this
 * VM's CPUs to others, which no thread's account inside the VM shows. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "tools/serve.h"

/* A request's three probes, timed so often by fl_serve_probe_cost_ns. */
#define PROBE_COST_ROUNDS 2000

fl_serve_sched fl_serve_sched_diff(const fl_serve_sched *a, const fl_serve_sched *b) {
  int known = a->run_delay_ns >= 0 && b->run_delay_ns >= 0;
  return (fl_serve_sched){known ? b->run_delay_ns - a->run_delay_ns : -1, b->nivcsw - a->nivcsw,
                          b->nvcsw - a->nvcsw, known ? b->run_ns - a->run_ns : 0};
}

void fl_serve_sched_add(fl_serve_sched *sum, const fl_serve_sched *d) {
  int known = sum->run_delay_ns >= 0 && d->run_delay_ns >= 0;
  sum->run_delay_ns = known ? sum->run_delay_ns + d->run_delay_ns : -1;
  sum->nivcsw += d->nivcsw;
  sum->nvcsw += d->nvcsw;
  sum->run_ns += d->run_ns;
}

/* A schedstat text's fields 1 and 2, the ns on a CPU and the ns spent
 * runnable, waiting for one, into s; run_delay_ns -1 if it has no such
 * fields. */
static void schedstat_of(const char *text, fl_serve_sched *s) {
  char *end;
  unsigned long long run = strtoull(text, &end, 10);
  s->run_delay_ns = -1;
  s->run_ns = 0;
  if (end == text) return;
  const char *f2 = end;
  unsigned long long d = strtoull(f2, &end, 10);
  if (end == f2) return;
  s->run_delay_ns = (int64_t)d;
  s->run_ns = (int64_t)run;
}

void fl_serve_probe_open(fl_serve_probe *p) {
  p->fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

void fl_serve_probe_read(const fl_serve_probe *p, fl_serve_sched *s) {
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  getrusage(RUSAGE_THREAD, &ru);
  s->nivcsw = (uint64_t)ru.ru_nivcsw;
  s->nvcsw = (uint64_t)ru.ru_nvcsw;
  s->run_delay_ns = -1;
  s->run_ns = 0;
  char buf[96];
  ssize_t n = p->fd >= 0 ? pread(p->fd, buf, sizeof buf - 1, 0) : -1;
  if (n > 0) {
    buf[n] = '\0';
    schedstat_of(buf, s);
  }
}

void fl_serve_probe_close(fl_serve_probe *p) {
  if (p->fd >= 0) close(p->fd);
  p->fd = -1;
}

void fl_serve_sched_self(fl_serve_sched *s) {
  fl_serve_probe p;
  fl_serve_probe_open(&p);
  fl_serve_probe_read(&p, s);
  fl_serve_probe_close(&p);
}

/* fl_serve_steal_ms from the text of /proc/stat. */
static double steal_ms_of(const char *text) {
  if (strncmp(text, "cpu ", 4) != 0) return 0;
  /* cpu user nice system idle iowait irq softirq steal ...: ticks. */
  const char *at = text + 4;
  unsigned long long v = 0;
  for (int field = 1; field <= 8; field++) {
    char *end;
    v = strtoull(at, &end, 10);
    if (end == at) return 0;
    at = end;
  }
  long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? (double)v * 1e3 / (double)hz : 0;
}

double fl_serve_steal_ms(int fd) {
  char buf[512]; /* the first line fits */
  ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0) return 0;
  buf[n] = '\0';
  return steal_ms_of(buf);
}

double fl_serve_probe_cost_ns(int *known) {
  fl_serve_probe p;
  fl_serve_sched a, b, c;
  fl_serve_probe_open(&p);
  fl_serve_probe_read(&p, &a); /* the first read pays for faulting things in */
  uint64_t t0 = fl_now_ns();
  for (int i = 0; i < PROBE_COST_ROUNDS; i++) {
    fl_serve_probe_read(&p, &a);
    fl_serve_probe_read(&p, &b);
    fl_serve_probe_read(&p, &c);
  }
  double ns = (double)(fl_now_ns() - t0) / PROBE_COST_ROUNDS;
  *known = c.run_delay_ns >= 0;
  fl_serve_probe_close(&p);
  return ns;
}

/* A small /proc file into buf (NUL-terminated); its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n >= 0) buf[n] = '\0';
  return n;
}

/* The number after "\n<key>:" in a status text, 0 if absent. */
static uint64_t status_field(const char *text, const char *key) {
  const char *at = strstr(text, key);
  return at ? strtoull(at + strlen(key), NULL, 10) : 0;
}

/* A thread's kind: its name less a trailing number and the '-' before it
 * (the whole name if that leaves nothing), with every character that would
 * split a table's word or need escaping in JSON made '_'. */
static void kind_of(const char *comm, char kind[16]) {
  size_t n = strnlen(comm, 15);
  while (n > 0 && isdigit((unsigned char)comm[n - 1])) n--;
  if (n > 0 && n < strnlen(comm, 15) && comm[n - 1] == '-') n--;
  if (n == 0) n = strnlen(comm, 15);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)comm[i];
    kind[i] = isgraph(c) && c != '"' && c != '\\' ? (char)c : '_';
  }
  kind[n] = '\0';
}

void fl_serve_kinds_add(fl_serve_kinds *ks, const char *comm, const fl_serve_sched *d) {
  char name[16];
  kind_of(comm, name);
  uint32_t i = 0;
  while (i < ks->n && strcmp(ks->k[i].name, name) != 0) i++;
  if (i == ks->n) {
    fl_serve_kind *k = realloc(ks->k, (ks->n + 1) * sizeof *k);
    if (!k) return;
    ks->k = k;
    k[i] = (fl_serve_kind){.threads = 0};
    memcpy(k[i].name, name, sizeof name);
    ks->n++;
  }
  ks->k[i].threads++;
  fl_serve_sched_add(&ks->k[i].s, d);
}

void fl_serve_kinds_free(fl_serve_kinds *ks) {
  free(ks->k);
  memset(ks, 0, sizeof *ks);
}

/* One thread's counters and name; 0 if it has ended meanwhile. */
static int read_task(int tid, fl_serve_task *t) {
  char path[64], buf[4096];
  fl_serve_sched *s = &t->s;
  snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  if (read_small(path, buf, sizeof buf) <= 0) return 0;
  s->nivcsw = status_field(buf, "\nnonvoluntary_ctxt_switches:");
  s->nvcsw = status_field(buf, "\nvoluntary_ctxt_switches:");
  snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
  if (read_small(path, buf, sizeof buf) > 0) {
    schedstat_of(buf, s);
  } else {
    s->run_delay_ns = -1;
    s->run_ns = 0;
  }
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
  if (read_small(path, t->comm, sizeof t->comm) < 0) snprintf(t->comm, sizeof t->comm, "?");
  t->comm[strcspn(t->comm, "\n")] = '\0';
  t->tid = tid;
  return 1;
}

void fl_serve_tasks_read(fl_serve_tasks *ts) {
  uint32_t cap = 0;
  memset(ts, 0, sizeof *ts);
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    int tid = atoi(e->d_name);
    if (tid <= 0) continue; /* "." and ".." */
    if (ts->n == cap) {
      cap = cap ? 2 * cap : 64;
      fl_serve_task *t = realloc(ts->t, cap * sizeof *t);
      if (!t) break;
      ts->t = t;
    }
    ts->n += read_task(tid, &ts->t[ts->n]);
  }
  closedir(d);
}

void fl_serve_tasks_delta(const fl_serve_tasks *a, const fl_serve_tasks *b, fl_serve_sched *d,
                          fl_serve_kinds *kinds) {
  *d = (fl_serve_sched){0, 0, 0, 0};
  for (uint32_t i = 0; i < b->n; i++) {
    const fl_serve_sched *now = &b->t[i].s, *then = NULL;
    for (uint32_t j = 0; j < a->n && !then; j++)
      if (a->t[j].tid == b->t[i].tid) then = &a->t[j].s;
    if (then && (now->nivcsw < then->nivcsw || now->nvcsw < then->nvcsw ||
                 now->run_delay_ns < then->run_delay_ns))
      then = NULL; /* the id of an ended thread, reused */
    fl_serve_sched zero = {now->run_delay_ns >= 0 ? 0 : -1, 0, 0, 0};
    fl_serve_sched change = fl_serve_sched_diff(then ? then : &zero, now);
    fl_serve_sched_add(d, &change);
    fl_serve_kinds_add(kinds, b->t[i].comm, &change);
  }
}

void fl_serve_tasks_free(fl_serve_tasks *ts) {
  free(ts->t);
  memset(ts, 0, sizeof *ts);
}
