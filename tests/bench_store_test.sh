#!/bin/sh
# bench_store_test.sh: //tools:bench_store on a tiny model: every way of the
# main figure (the store, the store as the CUDA miss path calls it, the
# memcpy floor) gathers at a positive rate and the printed ratios are the
# JSON's; --min-rows and --gap-us are recorded; each sweep has its six sizes
# with medians inside their ranges; bad usage (a --min-rows above every
# table, an unknown option) exits 2.
set -eu
BENCH="$1"
T="${TEST_TMPDIR:-/tmp}"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BENCH" --ids both --dims 32,8 --scale 0.002 --threads 2 --batch 64 --seconds 0.05 \
  --sweep-runs 2 --sweep-seconds 0.005 --min-rows 1000 --gap-us 30 --json "$T/b.json" \
  > "$T/out.txt" || fail "bench_store exits 0"
cat "$T/out.txt"
python3 - "$T/out.txt" "$T/b.json" <<'PY' || fail "rows, ratios or json"
import json, sys
text = open(sys.argv[1]).read().splitlines()
assert "(tables of 1000 rows or more), 30 us idle before each call" in text[0], text[0]
printed = [l.split() for l in text[2:6]]
d = json.load(open(sys.argv[2]))
assert d["min_rows"] == 1000 and d["gap_us"] == 30 and d["threads"] == 2, d
res = d["results"]
assert [(r["dim"], r["ids"]) for r in res] == [(32, "dense"), (32, "hashed"), (8, "dense"), (8, "hashed")]
for r, p in zip(res, printed):
    assert [int(p[0]), p[1]] == [r["dim"], r["ids"]], (p, r)
    for k in ("store_rows_per_s", "staged_rows_per_s", "memcpy_rows_per_s"):
        assert r[k] > 0, (k, r)
    assert abs(r["ratio"] - r["store_rows_per_s"] / r["memcpy_rows_per_s"]) < 1e-3, r
    assert abs(r["staged_ratio"] - r["staged_rows_per_s"] / r["memcpy_rows_per_s"]) < 1e-3, r
    assert abs(float(p[5]) - r["ratio"]) < 0.006 and abs(float(p[6]) - r["staged_ratio"]) < 0.006, (p, r)
assert len(d["sweeps"]) == 4
for sw in d["sweeps"]:
    assert [p["rows_per_call"] for p in sw["points"]] == [1, 8, 64, 512, 4096, 32768], sw
    for p in sw["points"]:
        for k in ("store_1_thread", "store_pool", "memcpy_1_thread", "memcpy_pool"):
            s = p[k]
            assert 0 < s["min"] <= s["median"] <= s["max"], (k, p)
PY

for bad in "--min-rows 99999999" "--gap-us -1" "--no-such-option 1"; do
  rc=0; "$BENCH" --scale 0.002 $bad 2> /dev/null || rc=$?
  [ "$rc" = 2 ] || fail "'$bad' exits 2, got $rc"
done
echo PASS
