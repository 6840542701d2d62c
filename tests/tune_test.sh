#!/bin/sh
# tune_test.sh: end-to-end runs of //tools:tune on the host backend: a small
# generated trace whose distribution switches halfway, tuned with a short
# window; checks the exit code, the chosen size, the --json and --plot files,
# and the exit code of bad usage (2). Throughput shape is not asserted: host
# timings are noisy and the unified index may not produce DRAM hits yet.
set -eu
TUNE="$1"
REPLAY="$2"
T="${TEST_TMPDIR:-/tmp}"
export FL_BACKEND=host
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TUNE" --help > "$T/help.txt" || fail "--help exits 0"
grep -q -- "--window" "$T/help.txt" || fail "--help lists the tuning options"
grep -q -- "--budget-pct" "$T/help.txt" || fail "--help lists replay's options"

"$REPLAY" gen "$T/s.fltr" --tables 2000,300,5000 --batch 256 --batches 48 --switch-at 24 \
  || fail "gen of a switching trace"
"$TUNE" "$T/s.fltr" --window 2 --step 200 --verify --json "$T/t.json" --plot "$T/t.svg" \
  > "$T/out.txt" || fail "tune exits 0"
cat "$T/out.txt"
grep -q "^chosen: [0-9]* unified entries" "$T/out.txt" || fail "output names a chosen size"
grep -q "chosen size [0-9]* unified entries" "$T/out.txt" || fail "summary names a chosen size"
grep -q "re-searches [0-9]" "$T/out.txt" || fail "summary counts re-searches"
grep -q ", 0 mismatches" "$T/out.txt" || fail "verify reports 0 mismatches"
python3 - "$T/t.json" "$T/t.svg" <<'PY' || fail "json and svg are well-formed"
import json, sys, xml.dom.minidom
d = json.load(open(sys.argv[1]))
assert d["searches"] and d["steps"], "searches and steps recorded"
assert d["re_searches"] == len(d["searches"]) - 1
assert all(len(p) == 2 for s in d["searches"] for p in s["curve"]), "curve points"
assert d["searches"][0]["curve"][0][0] == 0, "the first search starts empty"
assert xml.dom.minidom.parse(sys.argv[2]).documentElement.tagName == "svg"
PY

# The default step (2% of the index slots) and several rounds over the trace.
"$TUNE" "$T/s.fltr" --window 4 --rounds 2 --quiet > "$T/r.txt" || fail "tune with --rounds"
grep -q "batches 96," "$T/r.txt" || fail "--rounds 2 replays the trace twice"

rc=0; "$TUNE" --unified 10 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "--unified is refused with exit 2, got $rc"
rc=0; "$TUNE" --drop 1.5 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "bad --drop exits 2, got $rc"
rc=0; "$TUNE" --window 0 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "bad --window exits 2, got $rc"
echo PASS
