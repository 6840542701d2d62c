#!/usr/bin/env bash
# mutants.sh: mutation testing. Builds the library with one deliberate bug at
# a time (the catalogue in common/mutant.h) and runs what should catch it:
# the test suite, the fuzzers briefly and the stress run. Prints, per mutant,
# which of them caught it; exits 1 when a mutant survived all of them (or
# did not build), 2 on a usage error.
#
#   tools/mutants.sh [options]          host mutants, host backend (CI)
#   options: --only N (one mutant), --output_base DIR (Bazel's; default a
#   fresh temporary one, removed at the end), --fuzz-runs N (executions per
#   fuzz target, default 300; 0 skips them), --stress-seconds S (default 4)
#
#   tools/mutants.sh --bundle DIR       builds, per "cuda" mutant N, -c opt
#                                       cache_test, index_sweep_test and stress
#                                       into DIR/N/
#   tools/mutants.sh --run-bundle DIR OUT   on the GPU machine: runs each
#                                       DIR/N/ against the CUDA tests and a
#                                       CUDA stress run, logs into OUT
#
# Only the library's own C files get -DFL_MUTANT=N (--per_file_copt); the
# CUDA files get it through --define=fl_mutant=N (bazel/cuda.bzl), in the
# bundle only: the host backend runs no kernel. Test binaries are not
# rebuilt, so the tests check the broken library, not a broken copy of
# themselves.
set -uo pipefail

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
  exit 2
}

mode=host only="" base="" fuzz_runs=300 stress_s=4 dir="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="${2:-}"; shift 2 || usage ;;
    --output_base) base="${2:-}"; shift 2 || usage ;;
    --fuzz-runs) fuzz_runs="${2:-}"; shift 2 || usage ;;
    --stress-seconds) stress_s="${2:-}"; shift 2 || usage ;;
    --bundle) mode=bundle; dir="${2:-}"; shift 2 || usage ;;
    --run-bundle) mode=run; dir="${2:-}"; out="${3:-}"; shift 3 || usage ;;
    -h|--help) usage ;;
    *) echo "mutants.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$fuzz_runs" =~ ^[0-9]+$ ]] && [[ "$stress_s" =~ ^[1-9][0-9]*$ ]] || usage
[ -z "$only" ] || [[ "$only" =~ ^[1-9][0-9]*$ ]] || usage
# Paths the caller gave, before the builds' cd to the checkout.
[ -z "$dir" ] || dir="$(mkdir -p "$dir" && cd "$dir" && pwd)"
[ -z "$out" ] || out="$(mkdir -p "$out" && cd "$out" && pwd)"
[ "$mode" = run ] || cd "$(dirname "$0")/.."

# The catalogue: "N backends: bug" per line of common/mutant.h.
catalogue() {
  sed -n 's/^ \* mutant \([0-9][0-9]*\) \([a-z ]*\): \(.*\)$/\1|\2|\3/p' common/mutant.h
}
# Mutants whose backends include $1, or --only's.
mutants_for() {
  catalogue | while IFS='|' read -r n backends what; do
    [ -z "$only" ] || [ "$n" = "$only" ] || continue
    [[ " $backends " == *" $1 "* ]] && echo "$n"
  done
}
describe() { catalogue | awk -F'|' -v n="$1" '$1 == n { print $3 }'; }

# A catalogue entry without a site in the library is a mutant nothing tests.
check_sites() {
  for n in $(catalogue | cut -d'|' -f1); do
    grep -rqs "FL_MUTANT_ON($n)" batch cache cluster cluster_store common dram_store encoding fusion ||
      { echo "mutants.sh: mutant $n has no FL_MUTANT_ON($n) site" >&2; exit 2; }
  done
}

lib_copt() { echo "--per_file_copt=^(cache|common|dram_store|encoding|fusion|cluster|cluster_store)/.*\\.c\$@-DFL_MUTANT=$1"; }

# Failed GoogleTest cases of a test.xml, "a, b, c" (three at most, then "+N").
failed_cases() {
  python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (ET.ParseError, OSError):
    sys.exit(0)
bad = [c.get("name") for c in root.iter("testcase")
       if c.find("failure") is not None or c.find("error") is not None]
more = f" +{len(bad) - 3}" if len(bad) > 3 else ""
print(", ".join(bad[:3]) + more)
PY
}

# Appends the stress run's verdict to `caught` from its exit status and log.
stress_verdict() {
  [ "$1" -eq 0 ] && return
  local v
  v="$(sed -n 's/^stress: .*, \([0-9]* violations\)$/\1/p' "$2")"
  caught+=("stress (${v:-exit $1})")
}

# ------------------------------------------------------------- host mode
own_base=""  # a temporary output base of ours, removed at exit
run_host() {
  if [ -z "$base" ]; then
    base="$(mktemp -d /tmp/fleche-mutants.XXXXXX)"
    own_base="$base"
  fi
  trap '[ -n "$own_base" ] && { bazel --output_base="$own_base" shutdown >/dev/null 2>&1; rm -rf "$own_base"; }' EXIT
  local bz=(./bazelw --output_base="$base")
  local survived=0 total=0 summary=()
  for n in $(mutants_for host); do
    total=$((total + 1))
    echo "== mutant $n: $(describe "$n")"
    local caught=()
    "${bz[@]}" test //... "$(lib_copt "$n")" --keep_going --test_output=summary \
      --test_summary=short --test_timeout=300 >"/tmp/fleche-mutant-$n.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
      echo "   did not build (bazel exit $rc): /tmp/fleche-mutant-$n.log"
      survived=$((survived + 1))
      summary+=("mutant $n: BUILD FAILED")
      continue
    fi
    local logs
    logs="$("${bz[@]}" info bazel-testlogs 2>/dev/null)"
    while read -r target; do
      local name="${target#//tests:}" cases
      cases="$(failed_cases "$logs/tests/$name/test.xml")"
      caught+=("$name${cases:+ ($cases)}")
    done < <(grep -E '^//tests:[a-z_]+ .*(FAILED|TIMEOUT|NO STATUS)' "/tmp/fleche-mutant-$n.log" |
             awk '{print $1}')
    if [ "$fuzz_runs" -gt 0 ]; then
      while read -r target; do caught+=("$target"); done < <(
        tools/fuzz.sh --runs "$fuzz_runs" --copt "-DFL_MUTANT=$n" 2>/dev/null |
          awk '$1 ~ /^fuzz_/ && $2 == "executions" && $NF != "0" { print $1 }')
    fi
    local bin
    bin="$("${bz[@]}" info bazel-bin 2>/dev/null)"
    "${bz[@]}" build //tools:stress "$(lib_copt "$n")" >/dev/null 2>&1
    FL_BACKEND=host timeout $((stress_s + 120)) "$bin/tools/stress" --backend host \
      --seconds "$stress_s" >"/tmp/fleche-mutant-$n-stress.log" 2>&1
    stress_verdict $? "/tmp/fleche-mutant-$n-stress.log"
    if [ ${#caught[@]} -eq 0 ]; then
      survived=$((survived + 1))
      echo "   SURVIVED"
      summary+=("mutant $n: SURVIVED")
    else
      printf '   caught by %s\n' "${caught[@]}"
      summary+=("mutant $n: caught by ${#caught[@]}: $(printf '%s\n' "${caught[@]}" | sed 's/ (.*//' | paste -sd' ')")
    fi
  done
  echo "mutants: $total run, $((total - survived)) caught, $survived survived"
  printf '  %s\n' "${summary[@]}"
  [ "$total" -gt 0 ] && [ "$survived" -eq 0 ]
}

# ----------------------------------------------------------- bundle mode
build_bundle() {
  [ -n "$dir" ] || usage
  for n in $(mutants_for cuda); do
    ./bazelw build -c opt --define=fl_mutant="$n" "$(lib_copt "$n")" //tests:cache_test \
      //tests:index_sweep_test //tools:stress || { echo "mutants.sh: mutant $n did not build" >&2; exit 1; }
    local bin
    bin="$(./bazelw info -c opt bazel-bin 2>/dev/null)"
    mkdir -p "$dir/$n"
    cp "$bin/tests/cache_test" "$bin/tests/index_sweep_test" "$bin/tools/stress" "$dir/$n/"
    describe "$n" >"$dir/$n/what.txt"
    chmod -R u+w "$dir/$n"
  done
  # The plain build again, so that later -c opt builds start from it.
  ./bazelw build -c opt //tests:cache_test //tests:index_sweep_test //tools:stress >/dev/null 2>&1
  cp "$0" "$dir/mutants.sh"
}

# On the GPU machine: each mutant against the CUDA cases of cache_test and
# index_sweep_test and 5 s of CUDA stress.
run_bundle() {
  [ -n "$dir" ] && [ -n "$out" ] || usage
  local survived=0 total=0
  for m in "$dir"/[0-9]*; do
    local n caught=()
    n="$(basename "$m")"
    total=$((total + 1))
    echo "== mutant $n (cuda): $(cat "$m/what.txt")"
    for t in cache_test index_sweep_test; do
      timeout 600 "$m/$t" --gtest_filter='*Cuda*' --gtest_output="xml:$out/mutant_${n}_$t.xml" \
        >"$out/mutant_${n}_$t.log" 2>&1
      case $? in
        0) ;;
        124) caught+=("$t (timed out)") ;;
        *) cases="$(failed_cases "$out/mutant_${n}_$t.xml")"
           caught+=("$t${cases:+ ($cases)}") ;;
      esac
    done
    timeout 120 "$m/stress" --backend cuda --seconds 5 >"$out/mutant_${n}_stress.log" 2>&1
    stress_verdict $? "$out/mutant_${n}_stress.log"
    if [ ${#caught[@]} -eq 0 ]; then
      survived=$((survived + 1))
      echo "   SURVIVED"
    else
      printf '   caught by %s\n' "${caught[@]}"
    fi
  done
  echo "cuda mutants: $total run, $((total - survived)) caught, $survived survived" |
    tee "$out/mutants_summary.txt"
  [ "$total" -gt 0 ] && [ "$survived" -eq 0 ]
}

case "$mode" in
  host) check_sites; run_host ;;
  bundle) check_sites; build_bundle ;;
  run) run_bundle ;;
esac
