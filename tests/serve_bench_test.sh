#!/bin/sh
# serve_bench_test.sh: //tools:serve_bench --quick on the host backend: every
# level is printed and served (achieved rate > 0), latency percentiles are
# ordered, the JSON agrees with itself (the slowest request is the maximum,
# a request's total is its queueing plus its service, open-loop rates follow
# the closed loop's), the SVG is well-formed, a log-uniform size mix stays in
# its range, and bad usage exits 2.
set -eu
SERVE="$1"
T="${TEST_TMPDIR:-/tmp}"
export FL_BACKEND=host
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SERVE" --help > "$T/help.txt" || fail "--help exits 0"
grep -q -- "--loads" "$T/help.txt" || fail "--help lists the options"

"$SERVE" --quick --threads 3 --json "$T/s.json" --svg "$T/s.svg" > "$T/out.txt" \
  || fail "serve_bench --quick exits 0"
cat "$T/out.txt"
python3 - "$T/out.txt" "$T/s.json" "$T/s.svg" <<'PY' || fail "levels, percentiles, json or svg"
import json, sys, xml.dom.minidom
text = open(sys.argv[1]).read().splitlines()
rows = {l.split()[0] + " " + l.split()[1]: l.split() for l in text
        if l.startswith("closed K=") or l.startswith("open ")}
assert sorted(rows) == ["closed K=3", "open 50%", "open 90%"], rows.keys()
for name, f in rows.items():
    achieved, p50, p99, p999, mx = map(float, f[3:4] + f[5:9])
    assert achieved > 0, name + ": achieved rate"
    assert p50 <= p99 <= p999 <= mx, name + ": percentiles ordered"
    assert 0 < float(f[12].rstrip("%")) <= 100, name + ": hit rate"

d = json.load(open(sys.argv[2]))
assert d["backend"] == "host" and d["threads"] == 3
levels = d["levels"]
assert [l["mode"] for l in levels] == ["closed", "open", "open"], levels
closed = levels[0]["achieved_rps"]
for l in levels:
    lat = l["latency_us"]
    assert l["requests"] > 0 and l["achieved_rps"] > 0, l["label"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"], l["label"]
    assert 0 < l["hit_rate"] <= 1, l["label"]
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
    if l["mode"] == "open":
        want = l["load"] * closed
        assert 0.4 * want < l["offered_rps"] < 1.6 * want, (l["label"], l["offered_rps"], want)
    else:
        assert l["queue_us"]["max"] == 0, "closed loop: no queueing"
    assert 0 <= l["dispatch_us"]["p50"] <= l["dispatch_us"]["max"], l["label"]
xml.dom.minidom.parse(sys.argv[3])
PY

# A log-uniform mix, one worker, no counter sampler.
"$SERVE" --quick --threads 1 --loads 0.7 --sizes log:1-300 --sample-ms 0 --json "$T/l.json" \
  > "$T/l.txt" || fail "log-uniform sizes exit 0"
python3 - "$T/l.json" <<'PY' || fail "log-uniform run"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sizes"] == "log:1-300" and len(d["levels"]) == 2
assert 1 <= d["mean_samples"] <= 300
for l in d["levels"]:
    assert l["achieved_rps"] > 0
    assert all(1 <= s["size"] <= 300 for s in l["stalls"])
PY

for bad in "--loads 0" "--sizes log:5-2" "--threads 0" "--compare" "--no-such-option"; do
  rc=0; "$SERVE" $bad 2> /dev/null || rc=$?
  [ "$rc" = 2 ] || fail "'$bad' exits 2, got $rc"
done
echo PASS
