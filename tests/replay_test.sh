#!/usr/bin/env bash
# replay_test.sh: end-to-end runs of //tools:replay on the host backend with
# tiny workloads: the generator, the real Criteo sample, gen/convert, --json,
# --plot, --compare, the steady-state batch against its floor, and the exit
# codes of bad traces (1) and bad usage (2).
set -euo pipefail
REPLAY="$1"
CRITEO="$2"
T="${TEST_TMPDIR:-/tmp}"
export FL_BACKEND=host
fail() { echo "FAIL: $*" >&2; exit 1; }

"$REPLAY" --help > "$T/help.txt" || fail "--help exits 0"
grep -q -- "--model-npy" "$T/help.txt" || fail "--help lists the options"
# "verify: N rows checked, 0 mismatches" with N > 0 (not "10 mismatches").
verified() { grep -Eq '^verify: [1-9][0-9]* rows checked, 0 mismatches$' "$1"; }

"$REPLAY" --tables 1000,50,20000 --batch 512 --batches 6 --verify --quiet \
  --json "$T/r.json" --plot "$T/r.svg" > "$T/out.txt" || fail "generator replay"
verified "$T/out.txt" || fail "verify reports 0 mismatches"
grep -q '"mismatches": 0' "$T/r.json" || fail "json has the numbers"
grep -q "<svg" "$T/r.svg" || fail "plot is an svg"

# The steady-state batch against its floor (tools/replay_floor.c), on a
# workload whose steady batches miss (a 1 MiB cache over 250,000 rows): the
# floor, both its parts, the memcpy-gather rate and the ratio are positive,
# on stdout and in the JSON.
"$REPLAY" --tables 200000,50000 --scale 1 --batch 2048 --batches 20 --budget-bytes 1048576 \
  --quiet --json "$T/f.json" > "$T/f.txt" || fail "floor replay"
positive() { awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; }
floor_line=$(grep '^floor of the steady-state batch: ' "$T/f.txt") || fail "replay prints the floor"
read -r f_ms f_hit f_rows f_rate f_gather <<< "$(sed -nE 's/^floor of the steady-state batch: ([0-9.]+) ms = all-hit ([0-9.]+) ms \+ ([0-9]+) distinct misses at the memcpy-gather rate ([0-9.e+]+) rows\/s .*\) ([0-9.]+) ms; .*/\1 \2 \3 \4 \5/p' <<< "$floor_line")"
for x in "$f_ms" "$f_hit" "$f_rows" "$f_rate" "$f_gather"; do
  positive "$x" || fail "the floor's numbers are positive: $floor_line"
done
ratio=$(sed -nE 's/^steady-state batch \/ floor: ([0-9.]+)x .*/\1/p' "$T/f.txt")
positive "$ratio" || fail "replay prints the ratio to the floor: $(grep '^steady-state batch /' "$T/f.txt")"
for k in ms all_hit_ms gather_ms distinct_misses memcpy_rows_per_s steady_latency_ms ratio; do
  v=$(grep -oE "\"$k\": [0-9.e+-]+" "$T/f.json" | head -1 | cut -d' ' -f2)
  positive "$v" || fail "json floor.$k is positive (got '$v')"
done

# Hashed-id generator with unified-index pointers: answers still verified.
"$REPLAY" --tables 1000,50,20000 --hashed --batch 512 --batches 6 --unified 2000 \
  --admit-policy coin --admit 0.2 \
  --verify --quiet > "$T/h.txt" || fail "hashed generator replay"
verified "$T/h.txt" || fail "hashed replay verifies"
grep -q "unified index [1-9]" "$T/h.txt" || fail "pointers are hit"

# Prepared queries, kept while batches keep their shape: the same answers.
"$REPLAY" --tables 1000,50,20000 --batch 512 --batches 6 --prepared --verify --quiet \
  > "$T/p.txt" || fail "prepared replay"
verified "$T/p.txt" || fail "prepared replay verifies"
"$REPLAY" --prepared --verify --quiet --batch 256 "$CRITEO" > "$T/pc.txt" || fail "prepared Criteo replay"
verified "$T/pc.txt" || fail "prepared Criteo replay verifies"

"$REPLAY" --compare --verify --quiet --batch 256 "$CRITEO" > "$T/c.txt" || fail "Criteo replay"
verified "$T/c.txt" || fail "Criteo replay verifies"
grep -q "flat / per-table" "$T/c.txt" || fail "compare prints ratios"

"$REPLAY" gen "$T/g.fltr" --tables 300,40 --batch 64 --batches 4 --switch-at 2 || fail "gen"
"$REPLAY" --quiet --verify "$T/g.fltr" > "$T/g.txt" || fail "replay of a generated .fltr"
verified "$T/g.txt" || fail "replay of a generated .fltr verifies"
"$REPLAY" convert "$CRITEO" "$T/c.fltr" --batch 500 || fail "convert"
"$REPLAY" --quiet "$T/c.fltr" > "$T/cf.txt" || fail "replay of a converted trace"
grep -q "batches 2," "$T/cf.txt" || fail "replay of a converted trace has its batches"

printf '0 1\n0 zz\n' > "$T/bad.txt"
rc=0; "$REPLAY" "$T/bad.txt" 2> "$T/err.txt" || rc=$?
[ "$rc" = 1 ] || fail "bad trace exits 1, got $rc"
grep -q "bad.txt: line 2" "$T/err.txt" || fail "bad trace message names the line"
head -c 200 "$T/g.fltr" > "$T/cut.fltr"
rc=0; "$REPLAY" "$T/cut.fltr" 2> "$T/err.txt" || rc=$?
[ "$rc" = 1 ] || fail "truncated trace exits 1, got $rc"
grep -q "offset .*truncated" "$T/err.txt" || fail "truncation names the offset"

: > "$T/empty.txt"
rc=0; "$REPLAY" "$T/empty.txt" 2> "$T/err.txt" || rc=$?
[ "$rc" = 1 ] || fail "empty trace exits 1, got $rc"
grep -q "no lookups" "$T/err.txt" || fail "empty trace message: $(cat "$T/err.txt")"
rc=0; "$REPLAY" --no-such-option 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "usage error exits 2, got $rc"
rc=0; "$REPLAY" --batch 0 2> /dev/null || rc=$?
[ "$rc" = 2 ] || fail "bad value exits 2, got $rc"
echo PASS
