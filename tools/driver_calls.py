#!/usr/bin/env python3
"""Reads tools/driver_calls.c's output (the CUDA driver calls of a run that
took at least its threshold, and every function's totals) and prints:
- the functions by total time, with their calls, mean and longest;
- every call by thread kind and function (with --serve, also a request of
  the levels: warm-up calls count too, so a little more than a request's);
- the long calls by function and thread kind;
- pile-ups: stretches in which --threads or more threads were each inside a
  long call at once, the longest first, with every call that overlaps each
  (the one that started first is the likeliest holder of what the others
  wait for);
- with --serve (serve_bench's JSON, whose levels give their t0 on the same
  clock), for each level's slowest services, the long calls of any thread
  during the request.

usage: driver_calls.py CALLS.tsv [--serve RUN.json] [--threads 3] [--top 12]
"""
import argparse
import collections
import json
import re


def kind(thread):
    """A thread's name less a trailing -N or digits (serve_bench's kinds)."""
    return re.sub(r"(-\d+|\d+)$", "", thread) or "?"


def read(path):
    calls, sums, threads, dropped = [], [], collections.Counter(), 0
    total = collections.Counter()
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "call":
                calls.append((int(p[4]), int(p[5]), p[1], int(p[2]), p[3]))
            elif p[0] == "sum":
                sums.append((p[1], int(p[2]), float(p[3]), float(p[4])))
            elif p[0] == "thread":
                threads[(kind(p[1]), p[3])] += int(p[4])
                total[(kind(p[1]), p[3])] += float(p[5])
            elif p[0] == "dropped":
                dropped = int(p[1])
    calls.sort()
    return calls, sums, (threads, total), dropped


def print_sums(sums, top):
    print("functions by total time (every call)")
    print("%-36s %10s %12s %9s %10s" % ("function", "calls", "total ms", "mean us", "max us"))
    for name, n, total_us, max_us in sorted(sums, key=lambda s: -s[2])[:top]:
        print("%-36s %10d %12.2f %9.2f %10.1f" % (name, n, total_us / 1e3, total_us / n, max_us))


def print_threads(threads, top, requests):
    counts, total = threads
    print("\nevery call by thread kind and function")
    print("%-16s %-36s %10s %12s %10s" % ("thread", "function", "calls", "total ms",
                                         "a request" if requests else ""))
    for (k, fn), n in counts.most_common(top):
        print("%-16s %-36s %10d %12.2f %10s" % (k, fn, n, total[(k, fn)] / 1e3,
                                               "%.2f" % (n / requests) if requests else ""))


def print_long(calls, top):
    by = collections.defaultdict(list)
    for s, e, th, _, fn in calls:
        by[(fn, kind(th))].append((e - s) / 1e3)
    print("\nlong calls by function and thread kind")
    print("%-36s %-16s %7s %7s %7s %10s" % ("function", "thread", "calls", ">200us", ">1ms",
                                            "max us"))
    for (fn, k), d in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:top]:
        print("%-36s %-16s %7d %7d %7d %10.1f" % (fn, k, len(d), sum(x > 200 for x in d),
                                                sum(x > 1000 for x in d), max(d)))


def pileups(calls, threads):
    """Maximal stretches in which at least `threads` distinct threads were in
    a long call."""
    ev = []
    for s, e, _, tid, _ in calls:
        ev.append((s, 1, tid))
        ev.append((e, -1, tid))
    ev.sort()
    inside, out, begin = collections.Counter(), [], None
    for t, d, tid in ev:
        inside[tid] += d
        if not inside[tid]:
            del inside[tid]
        if len(inside) >= threads and begin is None:
            begin = t
        elif len(inside) < threads and begin is not None:
            out.append((begin, t))
            begin = None
    return out


def print_calls(calls, lo, hi, origin):
    for s, e, th, tid, fn in calls:
        if s < hi and e > lo:
            print("    %-16s %7d %-32s from %+9.1f us  %9.1f us" % (th, tid, fn,
                                                                 (s - origin) / 1e3,
                                                                 (e - s) / 1e3))


def print_pileups(calls, threads, top):
    p = pileups(calls, threads)
    print("\npile-ups: %d stretches with %d or more threads in a long call at once, %.2f ms "
          "in all" % (len(p), threads, sum(b - a for a, b in p) / 1e6))
    for a, b in sorted(p, key=lambda x: x[0] - x[1])[:top]:
        print("  %.1f us at %d:" % ((b - a) / 1e3, a))
        print_calls(calls, a, b, a)


def print_serve(calls, path, top):
    with open(path) as f:
        run = json.load(f)
    for lv in run["levels"]:
        t0 = lv.get("t0_ns")
        if t0 is None:
            print("\n%s: no t0_ns in the JSON" % lv["label"])
            continue
        print("\n%s: the slowest services and the long driver calls meanwhile" % lv["label"])
        for r in lv["slowest_service"][:top]:
            lo = t0 + int(r["start_ms"] * 1e6)
            hi = t0 + int(r["end_ms"] * 1e6)
            c = r["call"]
            print("  worker %d, %d samples, %.1f us (setup %.1f, index %.1f, fetch %.1f):"
                  % (r["worker"], r["size"], r["service_us"], c["setup_us"], c["index_us"],
                     c["fetch_us"]))
            print_calls(calls, lo, hi, lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("calls")
    ap.add_argument("--serve")
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    calls, sums, threads, dropped = read(a.calls)
    if dropped:
        print("%d long calls not kept (the buffer was full)" % dropped)
    requests = 0
    if a.serve:
        with open(a.serve) as f:
            requests = sum(lv["requests"] for lv in json.load(f)["levels"])
    print_sums(sums, a.top)
    print_threads(threads, 2 * a.top, requests)
    print_long(calls, a.top)
    print_pileups(calls, a.threads, a.top)
    if a.serve:
        print_serve(calls, a.serve, a.top)


if __name__ == "__main__":
    main()
