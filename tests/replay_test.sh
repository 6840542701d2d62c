#!/usr/bin/env bash
# replay_test.sh: end-to-end runs of //tools:replay on the host backend with
# tiny workloads: the generator, the real Criteo sample, gen/convert, --json,
# --plot, --compare, and the exit codes of bad traces (1) and bad usage (2).
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

# Hashed-id generator with unified-index pointers: answers still verified.
"$REPLAY" --tables 1000,50,20000 --hashed --batch 512 --batches 6 --unified 2000 --admit 0.2 \
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
