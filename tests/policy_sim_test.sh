#!/usr/bin/env bash
# policy_sim_test.sh: end-to-end runs of //tools:policy_sim: a generator
# trace, one whose hot set moves (--switch-at) and the Criteo sample; checks
# the table's rows, the JSON (OPT at least every policy, the gaps, the fleche
# row replaying the same lookups through the library with a pool that holds
# the vectors, and what replay gets with that cache), each row's per-batch hit
# rates and its recovery after the hot set moves, and the exit code of bad
# usage (2).
set -euo pipefail
SIM="$1"
CRITEO="$2"
REPLAY="$3"
T="${TEST_TMPDIR:-/tmp}"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SIM" --help > "$T/help.txt" || fail "--help exits 0"
for o in --vectors --policies tinylfu --budget-pct --switch-at --admit-policy --recovery-from; do
  grep -q -- "$o" "$T/help.txt" || fail "--help names $o"
done

# The table has a row per policy, then names the best batched one.
rows() {
  for p in opt lru arc tinylfu lfu fleche; do
    grep -Eq "^$p +[0-9.]+% +[-+][0-9.]+ +[-+][0-9.]+ " "$1" || fail "$1: a row for $p"
  done
  grep -Eq "^best batched policy: (lru|arc|tinylfu|lfu)$" "$1" || fail "$1: the best batched policy"
}

# The JSON: every row saw the trace's lookups; OPT is at least every row;
# the gaps are differences of hit rates; the library's pool holds the vectors.
check_json() {
  python3 - "$1" <<'PY' || fail "$1: json checks"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {p["name"]: p for p in d["policies"]}
assert list(rows) == ["opt", "lru", "arc", "tinylfu", "lfu", "fleche"], list(rows)
opt = rows["opt"]["hit_rate_pct"]
best = rows[d["best_batched"]]["hit_rate_pct"]
for name, p in rows.items():
    assert p["lookups"] == d["lookups"] > 0, (name, p["lookups"], d["lookups"])
    assert 0 <= p["hits"] <= p["lookups"], name
    assert p["hit_rate_pct"] <= opt + 1e-9, (name, p["hit_rate_pct"], opt)
    assert abs(p["vs_opt_pts"] - (p["hit_rate_pct"] - opt)) < 1e-3, name
    assert abs(p["vs_best_pts"] - (p["hit_rate_pct"] - best)) < 1e-3, name
    assert p["admissions"] - p["evictions"] <= p["capacity"], name
    if name not in ("opt", "fleche"):
        assert p["hit_rate_pct"] <= best + 1e-9, name
        assert p["capacity"] == d["vectors"], name
assert d["vectors"] <= rows["fleche"]["capacity"] <= d["vectors"] + 512
assert 0 < rows["fleche"]["hits"], "the library hits"
assert opt <= d["never_evicting_hit_rate_pct"] + 1e-9
assert 0 <= d["in_batch_repeats_pct"] < 100
for name, p in rows.items():
    assert len(p["batch_hit_rate_pct"]) == d["batches"], name
    assert all(0 <= x <= 100 for x in p["batch_hit_rate_pct"]), name
PY
}

# A generator trace's batches have equal lookups: a row's hit rate is the
# mean of its per-batch ones.
check_batch_mean() {
  python3 - "$1" <<'PY' || fail "$1: per-batch hit rates average to the hit rate"
import json, sys
for p in json.load(open(sys.argv[1]))["policies"]:
    v = p["batch_hit_rate_pct"]
    assert abs(sum(v) / len(v) - p["hit_rate_pct"]) < 1e-3, (p["name"], sum(v) / len(v), p["hit_rate_pct"])
PY
}

# Recovery from batch $2: per row an integer in [0, batches after it], as
# docs/POLICY_SIM.md defines it from the per-batch hit rates; the table has
# the column and says whether fleche recovers within LRU's batches. Without
# $2, no recovery anywhere.
check_recovery() {
  python3 - "$1.json" "${2:-}" <<'PY' || fail "$1.json: recovery"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {p["name"]: p for p in d["policies"]}
if not sys.argv[2]:
    assert d["recovery_from"] is None and d["fleche_recovers_within_lru"] is None, d
    assert all(p["recovery_batches"] is None for p in rows.values())
    sys.exit(0)
b = int(sys.argv[2])
assert d["recovery_from"] == b and d["recovery_tolerance_pts"] == 0.5, d
after = d["batches"] - b
for name, p in rows.items():
    v = p["batch_hit_rate_pct"][b:]
    steady = sum(v[-((after + 3) // 4):]) / ((after + 3) // 4)
    k = next(k for k, x in enumerate(v) if x >= steady - 0.5)
    assert isinstance(p["recovery_batches"], int) and 0 <= p["recovery_batches"] <= after, name
    assert p["recovery_batches"] == k, (name, p["recovery_batches"], k)
    assert abs(p["steady_after_switch_pct"] - steady) < 1e-3, (name, p["steady_after_switch_pct"], steady)
assert d["fleche_recovers_within_lru"] == (rows["fleche"]["recovery_batches"] <= rows["lru"]["recovery_batches"])
PY
  if [ -z "${2:-}" ]; then
    grep -q "recover" "$1.txt" && fail "$1.txt: recovery without a switch"
    return 0
  fi
  for p in opt lru arc tinylfu lfu fleche; do
    grep -Eq "^$p +[0-9.]+% +[-+][0-9.]+ +[-+][0-9.]+ +[0-9]+ " "$1.txt" || fail "$1.txt: $p's recovery"
  done
  grep -Eq "^fleche recovers in [0-9]+ batches, batched LRU in [0-9]+: (within LRU's|slower than LRU)$" \
    "$1.txt" || fail "$1.txt: whether fleche recovers within LRU's batches"
}

"$SIM" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 --vectors 400 --quiet --json "$T/g.json" \
  > "$T/g.txt" || fail "generator trace"
cat "$T/g.txt"
rows "$T/g.txt"
grep -q "^vectors: 400 (--vectors)$" "$T/g.txt" || fail "names how the vectors were chosen"
check_json "$T/g.json"
check_batch_mean "$T/g.json"
check_recovery "$T/g"
# The fleche row is the library: replay with its budget hits as often.
budget=$(python3 -c 'import json,sys; print([p for p in json.load(open(sys.argv[1]))["policies"] if p["name"] == "fleche"][0]["budget_bytes"])' "$T/g.json")
FL_BACKEND=host "$REPLAY" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 \
  --budget-bytes "$budget" --quiet --json "$T/r.json" > /dev/null || fail "replay"
python3 - "$T/g.json" "$T/r.json" <<'PY' || fail "the fleche row equals replay's hits"
import json, sys
sim = [p for p in json.load(open(sys.argv[1]))["policies"] if p["name"] == "fleche"][0]
run = json.load(open(sys.argv[2]))["runs"][0]
assert (sim["hits"], sim["lookups"]) == (run["hits"], run["lookups"]), (sim, run["hits"])
PY

# The fleche row under TinyLFU admission (--admit-policy, the default) is
# the library too: replay with the same policy and budget hits as often, and
# more often than the coin on this trace.
"$SIM" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 --vectors 400 --quiet \
  --policies fleche --admit-policy tinylfu --json "$T/t.json" > /dev/null || fail "tinylfu row"
FL_BACKEND=host "$REPLAY" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 \
  --budget-bytes "$budget" --admit-policy tinylfu --quiet --json "$T/rt.json" > /dev/null \
  || fail "replay --admit-policy tinylfu"
"$SIM" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 --vectors 400 --quiet \
  --policies fleche --admit-policy coin --json "$T/coin.json" > /dev/null || fail "coin row"
python3 - "$T/t.json" "$T/rt.json" "$T/coin.json" <<'PY' || fail "the tinylfu fleche row equals replay's hits"
import json, sys
sim = json.load(open(sys.argv[1]))["policies"][0]
run = json.load(open(sys.argv[2]))["runs"][0]
coin = [p for p in json.load(open(sys.argv[3]))["policies"] if p["name"] == "fleche"][0]
assert sim["name"] == "fleche", sim
assert (sim["hits"], sim["lookups"]) == (run["hits"], run["lookups"]), (sim, run["hits"])
assert sim["hits"] > coin["hits"], (sim["hits"], coin["hits"])
PY

# The cache options reach the library, in both tools: a fuller index
# leaves more of a budget to the pool, so the row needs less budget, and
# replay with the same options and that budget hits as often.
"$SIM" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 --vectors 400 --quiet \
  --policies fleche --max-load 0.9 --watermarks 0.9,0.97 --json "$T/o.json" > /dev/null \
  || fail "--max-load and --watermarks"
obudget=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["policies"][0]["budget_bytes"])' "$T/o.json")
[ "$obudget" -lt "$budget" ] || fail "--max-load 0.9: budget $obudget, not under the default's $budget"
FL_BACKEND=host "$REPLAY" --tables 2000,300,5000 --scale 1 --batch 256 --batches 24 \
  --budget-bytes "$obudget" --max-load 0.9 --watermarks 0.9,0.97 --quiet --json "$T/ro.json" \
  > /dev/null || fail "replay --max-load --watermarks"
python3 - "$T/o.json" "$T/ro.json" <<'PY' || fail "the row with options equals replay's hits"
import json, sys
sim = json.load(open(sys.argv[1]))["policies"][0]
run = json.load(open(sys.argv[2]))["runs"][0]
assert (sim["hits"], sim["lookups"]) == (run["hits"], run["lookups"]), (sim, run["hits"])
PY
rc=0; "$SIM" --watermarks 0.9 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "--watermarks with one fraction exits 2, got $rc"
rc=0; "$SIM" --batches 2 --policies fleche --watermarks 0.98,0.95 2> "$T/wm.txt" || rc=$?
[ "$rc" = 1 ] && grep -q "watermarks out of order" "$T/wm.txt" \
  || fail "watermarks out of order: exit 1 with the library's message, got $rc: $(cat "$T/wm.txt")"

# The hot set moves halfway; the vectors those of a 1% cache (1 MiB).
"$SIM" --tables 200000,3000,500000 --scale 1 --batch 256 --batches 64 --switch-at 32 --budget-pct 1 \
  --quiet --json "$T/s.json" > "$T/s.txt" || fail "switching trace"
rows "$T/s.txt"
grep -q "^vectors: [1-9][0-9]* (the slab pool of a cache of 1% of the model's bytes" "$T/s.txt" \
  || fail "vectors from --budget-pct"
check_json "$T/s.json"
check_batch_mean "$T/s.json"
check_recovery "$T/s" 32

# The Criteo sample: hashed ids, keys are (table, id); --recovery-from names
# a batch of a file's trace to measure recovery from (and --switch-at, the
# generator's, does not apply to a file).
"$SIM" --batch 64 --vectors 300 --quiet --json "$T/c.json" --recovery-from 8 --switch-at 3 "$CRITEO" \
  > "$T/c.txt" || fail "Criteo sample"
rows "$T/c.txt"
check_json "$T/c.json"
check_recovery "$T/c" 8

# One sample per batch: no key repeats inside a batch, so OPT is exact there.
"$SIM" --batch 1 --batches 300 --vectors 50 --policies opt,lru --quiet "$CRITEO" > "$T/one.txt" \
  || fail "batch 1"
grep -q "^in-batch repeats: 0.00% of lookups" "$T/one.txt" || fail "batch 1 has no repeats"

rc=0; "$SIM" --policies lru,belady 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "an unknown policy exits 2, got $rc"
rc=0; "$SIM" --vectors 0 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "--vectors 0 exits 2, got $rc"
rc=0; "$SIM" --recovery-from 0 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "--recovery-from 0 exits 2, got $rc"
rc=0; "$SIM" --admit-policy lru 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "an unknown --admit-policy exits 2, got $rc"
rc=0; "$SIM" --compare 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "--compare exits 2, got $rc"
echo PASS
