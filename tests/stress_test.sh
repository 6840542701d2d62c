#!/bin/sh
# stress_test.sh: short runs of //tools:stress on the host backend: exit 0, a
# summary line with rows checked and 0 violations, queries asked each of the
# three ways (fl_query, prepared run, prepared launch), a final pass asked all
# three ways, the --json summary, more writers than one over more tables, a
# cache without unified entries, and the exit code of bad usage (2).
set -eu
STRESS="$1"
T="${TEST_TMPDIR:-/tmp}"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$STRESS" --help | grep -q -- "--budget-kb" || fail "--help lists the options"

"$STRESS" --backend host --seconds 2 --json "$T/s.json" > "$T/out.txt" \
  || fail "stress exits 0: $(cat "$T/out.txt")"
line=$(grep '^stress: backend host, ' "$T/out.txt") || fail "no summary line: $(cat "$T/out.txt")"
rows=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) rows checked.*/\1/p')
[ "${rows:-0}" -gt 0 ] || fail "no rows checked: $line"
echo "$line" | grep -q ', 0 violations$' || fail "violations: $line"
echo "$line"
asked=$(grep '^queries by ' "$T/out.txt") || fail "no line of queries by kind: $(cat "$T/out.txt")"
for n in $(echo "$asked" | sed 's/[^0-9 ]//g'); do
  [ "$n" -gt 0 ] || fail "a way of asking was not used: $asked"
done
echo "$asked"
final=$(grep '^failed calls 0; final pass, 3 ways of asking: [1-9][0-9]* rows, 0 violations$' \
  "$T/out.txt") || fail "the final pass asks every way, with no violation: $(cat "$T/out.txt")"
echo "$final"
grep -q '"violations": 0,' "$T/s.json" || fail "json has the numbers"
grep -q '"final_ways": 3,' "$T/s.json" || fail "json counts the final pass's ways"
grep -q '"asked": {"fl_query": [1-9]' "$T/s.json" || fail "json counts the queries by kind"
grep -q '"kind": "hashed fp32"' "$T/s.json" || fail "json lists the tables"

# Rows split between writers; two of each table kind; a cache of a few pages.
"$STRESS" --backend host --seconds 1 --writers 2 --readers 2 --tables 6 --budget-kb 320 \
  > "$T/w.txt" || fail "two writers: $(cat "$T/w.txt")"
grep -q '^stress: backend host, .*, 0 violations$' "$T/w.txt" || fail "two writers: $(cat "$T/w.txt")"
grep '^stress: ' "$T/w.txt"

# The per-table layout: a prepared query there is one part batch per table.
"$STRESS" --backend host --seconds 1 --layout per-table --readers 3 > "$T/p.txt" \
  || fail "per-table layout: $(cat "$T/p.txt")"
grep -q '^stress: backend host, per-table layout, .*, 0 violations$' "$T/p.txt" \
  || fail "per-table layout: $(cat "$T/p.txt")"
grep '^stress: ' "$T/p.txt"

# A cache created without unified entries (the default config's index of
# 32-bit locations): no pointer is ever made, and none is switched on.
"$STRESS" --backend host --seconds 1 --unified 0 > "$T/u.txt" || fail "--unified 0: $(cat "$T/u.txt")"
grep -q '^stress: backend host, flat layout, .*, 0 violations$' "$T/u.txt" \
  || fail "--unified 0: $(cat "$T/u.txt")"
grep -q ' 0 unified-index changes' "$T/u.txt" || fail "--unified 0 switched: $(cat "$T/u.txt")"
grep -q ' 0 unified-index hits' "$T/u.txt" || fail "--unified 0 made pointers: $(cat "$T/u.txt")"
grep '^stress: ' "$T/u.txt"

for bad in "--readers 0" "--backend gpu" "--seconds 0" "--no-such-option 1" "--seed" \
           "--zero-copy-rows x" "--layout rows" "--unified x"; do
  rc=0; "$STRESS" $bad > /dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "'$bad' exits 2, got $rc"
done
echo PASS
