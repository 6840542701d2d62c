#!/bin/sh
# serve_bench_test.sh: //tools:serve_bench --quick on the host backend: every
# level is printed and served (achieved rate > 0), latency percentiles are
# ordered, the JSON agrees with itself (the slowest request is the maximum,
# a request's total is its queueing plus its service, open-loop rates follow
# the closed loop's), the scheduler's account is there and consistent
# (counts within their wholes: preempted requests within the requests, the
# requests' run-queue delay within the workers', the workers' within the
# process's), the process's threads by kind add up to the process and name
# the store's pool (fl-store), the workers (serve-w) and the sampler, each
# level has its slowest services (sorted, the first the maximum) and its
# backlog (an onset queued over the threshold and before every other such
# stall, none and no saturation in the closed loop; the machine's steal time
# over the level bounds that of its stretch and of its slowest requests), its
# frozen stretches (each over its threshold, none longer than a service, a
# known phase for every worker), the ideal queue's latency lies between the
# service time and the measured latency (equal to the service in the closed
# loop), the SVG is well-formed,
# the trace has every level, its slowest requests (by service, by total)
# marked on their requests,
# each request's phases inside it, its queued time when it queued, the
# counters when sampled, and every request when whole levels are traced, a
# log-uniform size mix stays in its range, and bad usage exits 2.
set -eu
SERVE="$1"
T="${TEST_TMPDIR:-/tmp}"
export FL_BACKEND=host
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SERVE" --help > "$T/help.txt" || fail "--help exits 0"
grep -q -- "--loads" "$T/help.txt" || fail "--help lists the options"

# Two host threads: the store's pool has a worker whatever the machine's cores.
"$SERVE" --quick --threads 3 --host-threads 2 --json "$T/s.json" --svg "$T/s.svg" \
  --trace "$T/s.trace.json" > "$T/out.txt" || fail "serve_bench --quick exits 0"
cat "$T/out.txt"
python3 - "$T/out.txt" "$T/s.json" "$T/s.svg" <<'PY' || fail "levels, percentiles, json or svg"
import json, sys, xml.dom.minidom
text = open(sys.argv[1]).read().splitlines()
def level_rows(lines):
    return {l.split()[0] + " " + l.split()[1]: l.split() for l in lines
            if l.startswith("closed K=") or l.startswith("open ")}
at = next(i for i, l in enumerate(text) if l.startswith("scheduler per level"))
end = text.index("", at)
rows, sched_rows = level_rows(text[:at]), level_rows(text[at:end])
assert sorted(rows) == ["closed K=3", "open 50%", "open 90%"], rows.keys()
assert sorted(sched_rows) == sorted(rows), sched_rows.keys()
at = next(i for i, l in enumerate(text) if l.startswith("backlog per level"))
assert sorted(level_rows(text[at:text.index("", at)])) == sorted(rows), "a backlog row a level"
assert sum(l.startswith("slowest services of ") for l in text) == 3, "a service list a level"
at = next(i for i, l in enumerate(text) if l.startswith("frozen per level"))
assert sorted(level_rows(text[at:text.index("", at)])) == sorted(rows), "a frozen row a level"
at = next(i for i, l in enumerate(text) if l.startswith("queueing per level"))
assert "the p50 of open 50%" in text[at], text[at]
queue_rows = level_rows(text[at:text.index("", at)])
assert sorted(queue_rows) == sorted(rows), "a queueing row a level"
for name, f in queue_rows.items():
    i50, i99, i999, r99, r999 = map(float, f[2:5] + f[6:8])
    assert 0 < i50 <= i99 <= i999 and r99 >= 0.99 and r999 >= 0.99, (name, f)
for name, f in sched_rows.items():
    n, pre, slow, slow_pre, slow_hv = map(int, f[2:7])
    assert 0 <= slow_pre <= min(pre, slow) and max(pre, slow) <= n, (name, f)
    assert slow_pre + slow_hv <= slow, (name, f)  # slow.hv: never switched out
    assert int(f[-1]) >= 3 + 1, name + ": threads: the workers and main at least"
assert any(l.startswith("scheduler probes: ") for l in text)
at = next(i for i, l in enumerate(text) if l.startswith("scheduler per level by thread kind"))
kind_rows = text[at + 2:text.index("", at)]
assert sum(" fl-store " in l for l in kind_rows) == 3, kind_rows
for name, f in rows.items():
    achieved, p50, p99, p999, mx = map(float, f[3:4] + f[5:9])
    assert achieved > 0, name + ": achieved rate"
    assert p50 <= p99 <= p999 <= mx, name + ": percentiles ordered"
    assert 0 < float(f[12].rstrip("%")) <= 100, name + ": hit rate"
    assert f[14] == "0", name + ": the host backend allocates no CUDA buffer"

d = json.load(open(sys.argv[2]))
assert d["backend"] == "host" and d["threads"] == 3
# Linux has schedstat unless the kernel lacks CONFIG_SCHED_INFO: then every
# run-queue delay is null.
known = d["run_delay_known"]
assert 0 < d["scheduler_probe_us"] < 1000, d["scheduler_probe_us"]
def delay_ok(v):
    return v is None if not known else v >= 0
levels = d["levels"]
assert [l["mode"] for l in levels] == ["closed", "open", "open"], levels
closed = levels[0]["achieved_rps"]
for l in levels:
    lat = l["latency_us"]
    assert l["requests"] > 0 and l["achieved_rps"] > 0, l["label"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"], l["label"]
    assert 0 < l["hit_rate"] <= 1, l["label"]
    assert l["allocations"] == 0, l["label"]
    sc, wk, pr = l["scheduler"], l["scheduler"]["workers"], l["scheduler"]["process"]
    assert 0 <= sc["slow_preempted"] <= min(sc["preempted"], sc["slow"]), sc
    assert sc["slow_preempted"] + sc["slow_unseen"] <= sc["slow"], sc
    assert max(sc["preempted"], sc["slow"]) <= l["requests"], sc
    assert sc["threads"] >= d["threads"] + 1 and pr is not None, sc
    for key in ("run_delay_ms", "slow_run_delay_ms"):
        assert delay_ok(sc[key]), sc
    assert delay_ok(wk["run_delay_ms"]) and delay_ok(pr["run_delay_ms"]), sc
    assert 0 <= wk["nivcsw"] <= pr["nivcsw"] and 0 <= wk["nvcsw"] <= pr["nvcsw"], sc
    kinds = {k["kind"]: k for k in sc["kinds"]}
    assert len(kinds) == len(sc["kinds"]), sc["kinds"]
    for name, n in (("fl-store", 1), ("serve-w", 3), ("serve-sampler", 1)):
        assert name in kinds and kinds[name]["threads"] == n, (name, sc["kinds"])
    assert sum(k["threads"] for k in kinds.values()) == sc["threads"], sc
    for key in ("nivcsw", "nvcsw"):
        assert sum(k[key] for k in kinds.values()) == pr[key], (key, sc)
    assert kinds["serve-w"]["nivcsw"] == wk["nivcsw"], sc
    if known:
        assert abs(sum(k["run_delay_ms"] for k in kinds.values()) - pr["run_delay_ms"]) < 0.05, sc
    if known:
        assert sc["slow_run_delay_ms"] <= sc["run_delay_ms"] + 0.001, sc
        assert sc["run_delay_ms"] <= wk["run_delay_ms"] + 0.001 <= pr["run_delay_ms"] + 0.002, sc
    st = l["stalls"]
    assert len(st) == min(3, l["requests"]), l["label"] + ": --quick reports 3 stalls"
    assert abs(st[0]["total_us"] - lat["max"]) < 0.02, l["label"] + ": the slowest is the max"
    for a, b in zip(st, st[1:]):
        assert a["total_us"] >= b["total_us"], l["label"] + ": stalls slowest first"
    for s in st:
        assert abs(s["queue_us"] + s["service_us"] - s["total_us"]) < 0.05, s
        assert s["sched_ms"] <= s["start_ms"] <= s["end_ms"], s
        assert 0 <= s["dispatch_us"] <= s["queue_us"] + 0.01 or l["mode"] == "closed", s
        assert s["size"] in (64, 256, 1024, 2048), s
        for ss in (s["scheduler"], s["wait_scheduler"]):
            assert delay_ok(ss["run_delay_us"]) and ss["nivcsw"] >= 0 and ss["nvcsw"] >= 0, ss
            assert ss["nivcsw"] <= wk["nivcsw"], (ss, wk)
            if known:
                assert ss["run_delay_us"] <= 1000 * wk["run_delay_ms"] + 1, (ss, wk)
        ss = s["scheduler"]
        assert ss["nivcsw"] <= wk["nivcsw"], (ss, wk)
        # On a CPU, waiting for one, and the rest ('unseen') make up the service.
        if known:
            assert 0 <= ss["on_cpu_us"] <= s["service_us"] + 20, (ss, s["service_us"])
            parts = ss["on_cpu_us"] + ss["run_delay_us"] + s["unseen_us"]
            assert s["unseen_us"] >= 0 and parts >= s["service_us"] - 0.01, (s, parts)
            assert s["unseen_us"] == 0 or abs(parts - s["service_us"]) < 0.01, (s, parts)
        else:
            assert ss["on_cpu_us"] is None and s["unseen_us"] is None, s
        if known:
            assert ss["run_delay_us"] <= 1000 * sc["run_delay_ms"] + 1, (ss, sc)
    sv = l["slowest_service"]
    assert len(sv) == min(3, l["requests"]), l["label"] + ": --quick reports 3 services"
    assert abs(sv[0]["service_us"] - l["service_us"]["max"]) < 0.02, l["label"]
    for a, b in zip(sv, sv[1:]):
        assert a["service_us"] >= b["service_us"], l["label"] + ": services slowest first"
    fr = l["frozen"]
    # Every worker is in service through a frozen stretch: none outlasts a
    # service, each names a phase (or "call"), and each is over the threshold.
    assert fr["threshold_us"] >= max(300, 2 * l["service_us"]["p50"]) - 0.1, fr
    if fr["count"]:
        assert fr["threshold_us"] < fr["longest_us"] <= l["service_us"]["max"] + 0.01, fr
        assert fr["count"] * fr["threshold_us"] <= 1000 * fr["total_ms"] + 0.1, fr
        assert fr["longest_us"] <= 1000 * fr["total_ms"] + 0.1, fr
        assert len(fr["phases"]) == d["threads"], fr
        assert set(fr["phases"]) <= {"setup", "find buffers", "index", "counters wait", "fetch",
                                     "admission", "gpu + sync", "call"}, fr
    else:
        assert fr["longest_us"] == 0 and fr["longest_from_ms"] is None, fr
        assert fr["total_ms"] == 0 and fr["phases"] == ["-"] * d["threads"], fr
    bl = l["backlog"]
    on, limit = bl["onset"], bl["threshold_us"]
    if on is not None:
        assert on["queue_us"] > limit and on["sched_ms"] <= on["start_ms"], bl
        assert 0 <= on["in_service"] <= d["threads"], bl
        assert all(s["sched_ms"] >= on["sched_ms"] - 0.001 for s in st + sv
                   if s["queue_us"] > limit), (bl, "onset: the first queued over the threshold")
    else:
        assert all(s["queue_us"] <= limit for s in st + sv), (bl, "a queued stall, no onset")
    assert bl["saturated_from_ms"] <= bl["saturated_to_ms"], bl
    assert abs(bl["saturated_to_ms"] - bl["saturated_from_ms"] - bl["saturated_ms"]) < 0.01, bl
    # The machine's steal time: a stretch of the level has at most the level's.
    assert 0 <= bl["saturated_steal_ms"] <= bl["steal_ms"] + 0.05, bl
    assert all(0 <= s["counters"]["steal_ms"] <= bl["steal_ms"] + 0.05 for s in st + sv), bl
    if l["mode"] == "open":
        want = l["load"] * closed
        assert 0.4 * want < l["offered_rps"] < 1.6 * want, (l["label"], l["offered_rps"], want)
    else:
        assert l["queue_us"]["max"] == 0, "closed loop: no queueing"
        assert bl["onset"] is None and bl["saturated_ms"] == 0, bl
    assert 0 <= l["dispatch_us"]["p50"] <= l["dispatch_us"]["max"], l["label"]
    # The ideal queue's latency: at least each request's service, at most its
    # measured latency (the K-server queue is monotone in its starts); in the
    # closed loop, the service itself.
    ideal = l["ideal_us"]
    for q in ("p50", "p99", "p999", "max"):
        assert l["service_us"][q] - 0.02 <= ideal[q] <= lat[q] + 0.02, (l["label"], q, ideal, lat)
        if l["mode"] == "closed":
            assert abs(ideal[q] - l["service_us"][q]) < 0.02, (q, ideal, l["service_us"])
xml.dom.minidom.parse(sys.argv[3])
PY

# A log-uniform mix, one worker, no counter sampler, the canary, whole
# levels traced.
"$SERVE" --quick --threads 1 --loads 0.7 --sizes log:1-300 --sample-ms 0 --canary \
  --json "$T/l.json" --trace "$T/l.trace.json" --trace-window 0 > "$T/l.txt" ||
  fail "log-uniform sizes exit 0"
python3 - "$T/s.json" "$T/s.trace.json" "$T/l.json" "$T/l.trace.json" <<'PY' || fail "traces"
import bisect, itertools, json, sys
from collections import defaultdict
def check(run, trace, whole):
    d, t = json.load(open(run)), json.load(open(trace))
    ev = t["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert [names[p] for p in sorted(names)] == [l["label"] for l in d["levels"]], names
    reqs, phases, marks = defaultdict(list), defaultdict(list), defaultdict(list)
    opened, closed, counters = defaultdict(int), defaultdict(int), defaultdict(int)
    for e in ev:
        if e["ph"] == "X" and e["name"].endswith(" samples"): reqs[e["pid"]].append(e)
        elif e["ph"] == "X": phases[(e["pid"], e["tid"])].append(e)
        elif e["ph"] == "i": marks[e["pid"]].append(e)
        elif e["ph"] == "b": opened[e["pid"]] += 1
        elif e["ph"] == "e": closed[e["pid"]] += 1
        elif e["ph"] == "C": counters[e["pid"]] += 1
    for v in phases.values(): v.sort(key=lambda p: p["ts"])
    for pid, l in zip(sorted(names), d["levels"]):
        rs = reqs[pid]
        assert 0 < len(rs) <= l["requests"], (l["label"], len(rs))
        if whole:
            assert len(rs) == l["requests"], (l["label"], len(rs), "every request traced")
            assert abs(max(r["dur"] for r in rs) - l["service_us"]["max"]) < 0.01, l["label"]
        assert opened[pid] == closed[pid] == sum(r["args"]["queue_us"] > 0 for r in rs), l["label"]
        if l["mode"] == "closed": assert opened[pid] == 0, "closed loop: nothing queued"
        for s in l["stalls"] + l["slowest_service"]:
            c = s["call"]
            assert c["index_wait_us"] <= c["index_us"] + 0.01, c
            assert c["setup_find_us"] + c["setup_wait_us"] + c["setup_grow_us"] <= c["setup_us"] + 0.03, c
        for rank, stalls in (("service", l["slowest_service"]), ("total", l["stalls"])):
            ms = sorted((m for m in marks[pid] if m["name"].startswith("slowest " + rank)),
                        key=lambda m: int(m["name"].split("#")[1]))
            assert len(ms) == len(stalls), (l["label"], rank)
            for m, s in zip(ms, stalls):
                assert abs(m["args"][rank + "_us"] - s[rank + "_us"]) < 0.01, (m, s)
                assert any(r["tid"] == m["tid"] and abs(r["ts"] - m["ts"]) < 0.002 and
                           abs(r["dur"] - s["service_us"]) < 0.01 and
                           abs(r["args"]["queue_us"] - s["queue_us"]) < 0.01 and
                           (s["unseen_us"] is None or
                            abs(r["args"]["unseen_us"] - s["unseen_us"]) < 0.01)
                           for r in rs), (m, "its request")
        for r in rs:  # a request's phases lie inside it
            ps = phases[(pid, r["tid"])]
            at = bisect.bisect_left(ps, r["ts"] - 0.002, key=lambda p: p["ts"])
            inside = list(itertools.takewhile(lambda p: p["ts"] < r["ts"] + r["dur"], ps[at:]))
            assert inside, r
            for p in inside:
                assert p["ts"] + p["dur"] <= r["ts"] + r["dur"] + 0.004, (p, r)
        assert (counters[pid] > 0) == (d["sample_ms"] > 0), (l["label"], counters[pid])
        # The canary's gaps: each on its track, all of them in a whole trace.
        k = l["canary"]
        gs = [e for (p, _), v in phases.items() if p == pid for e in v if "gap" in e["name"]]
        assert (k is None) == (not whole), l["label"]
        if k is None:
            assert not gs
            continue
        assert k["lost"] == 0 and k["frozen"] == l["frozen"]["count"], k
        assert k["slow"] <= l["requests"], k
        for kind, mine in (("clock", lambda g: g["name"].startswith("gap")),
                           ("syscall", lambda g: g["name"] == "syscall gap")):
            s, ks = [g for g in gs if mine(g)], k[kind]
            assert len(s) == ks["gaps"], (l["label"], kind, len(s), ks)
            assert all(g["dur"] > 100 for g in s), s
            assert abs(sum(g["dur"] for g in s) / 1e3 - ks["total_ms"]) < 0.01, ks
            # total_ms has 4 decimals (0.05 us of rounding), longest_us 2.
            assert ks["longest_us"] <= 1000 * ks["total_ms"] + 0.06, ks
            assert ks["unaccounted"] + ks["unknown"] <= ks["gaps"], ks
            assert ks["frozen_gapped"] <= k["frozen"] and ks["slow_gapped"] <= k["slow"], ks
        assert sum(g["name"] == "gap (machine)" for g in gs) == k["clock"]["unaccounted"], k
check(sys.argv[1], sys.argv[2], False)
check(sys.argv[3], sys.argv[4], True)
PY
python3 - "$T/l.json" <<'PY' || fail "log-uniform run"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sizes"] == "log:1-300" and len(d["levels"]) == 2
assert 1 <= d["mean_samples"] <= 300
for l in d["levels"]:
    assert l["achieved_rps"] > 0
    assert all(1 <= s["size"] <= 300 for s in l["stalls"])
    assert l["scheduler"]["threads"] >= 3, "the worker, the canary and main, no sampler"
PY

for bad in "--loads 0" "--sizes log:5-2" "--trace-window -1" "--threads 0" "--compare" "--no-such-option"; do
  rc=0; "$SERVE" $bad 2> /dev/null || rc=$?
  [ "$rc" = 2 ] || fail "'$bad' exits 2, got $rc"
done
echo PASS
