#!/usr/bin/env bash
# Runs the GPU bundle (see tools/gpu_bundle.sh) on a GPU machine: every test
# binary, the CUDA tests again under compute-sanitizer memcheck and racecheck,
# the stress run on CUDA (plain and under memcheck), the default replay and
# its --compare, the query and store benchmarks, and the Python package's
# tests and overhead benchmark (python.sh). Logs, XML and
# JSON go to OUTDIR (default ./gpu-out); the last line is the test summary
# `N passed, N failed, N skipped` counted from the GoogleTest and pytest XML.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-gpu-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
rc=0
for t in cache_test index_sweep_test encoding_test store_test admit_sketch_test; do
  echo "== $t"
  "$here/$t" --gtest_output="xml:$out/$t.xml" >"$out/$t.log" 2>&1 || rc=1
  tail -n 3 "$out/$t.log"
done
# memcheck over every CUDA cache test in one process. racecheck is ~50x
# slower and stalls on the second CUDA case of a process (RELIABILITY.md), so
# it runs one case per process, each given FL_RACECHECK_TIMEOUT seconds
# (default 60), over the 64-bit flat layout's tests but the five longest
# (batch sizes to a million, two churns, TinyLFU's aging over thousands of
# admission rounds and its shift detector over half a million lookups,
# which run minutes under racecheck; memcheck covers them; FL_RACECHECK_FILTER widens it; FL_SANITIZERS picks the tools). A case that
# runs out of time is run once more (racecheck's stalls come and go); a case
# that runs out twice fails the run, as hazards do: a case never finished
# was never checked. 10 s before each try's end the test binary's watchdog
# (tests/watchdog.cc) prints every thread's stack into the case's log.
# index_sweep_test's CUDA cases run under both tools too (racecheck: its
# 64-bit erase case; its churn, minutes under racecheck, has no shared
# memory to check, and memcheck covers it).
api_failing='*AnEarlierFailedCudaCall*Cuda*'
if command -v compute-sanitizer >/dev/null; then
  for tool in ${FL_SANITIZERS:-memcheck racecheck}; do
    if [ "$tool" != racecheck ]; then
      echo "== compute-sanitizer --tool $tool (*Cuda*)"
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$here/cache_test" \
        --gtest_filter="*Cuda*:-$api_failing" --gtest_output="xml:$out/sanitizer_$tool.xml" \
        >"$out/sanitizer_$tool.log" 2>&1 || rc=1
      grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer_$tool.log" | tail -n 3
      # The case that fails a CUDA call on purpose: that call's error is not
      # counted (the sanitizer reports every failed API call).
      compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 3 \
        "$here/cache_test" --gtest_filter="$api_failing" >"$out/sanitizer_${tool}_api.log" 2>&1 || rc=1
      grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer_${tool}_api.log" | tail -n 2
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$here/index_sweep_test" \
        --gtest_filter="*Cuda*" --gtest_output="xml:$out/sanitizer_${tool}_index.xml" \
        >"$out/sanitizer_${tool}_index.log" 2>&1 || rc=1
      grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer_${tool}_index.log" | tail -n 2
      continue
    fi
    filter="${FL_RACECHECK_FILTER:-*CudaFlat64*:-*BatchSizes*:*Churn*:*RoundsFailingAfterARecycle*:*TinyLfuForgets*:*TinyLfuAdmitsAMovedHotSet*}"
    echo "== compute-sanitizer --tool racecheck, one case per process ($filter; index_sweep_test *Cuda64*:-*Churn*)"
    clean=0 hazards=0 unfinished=0
    for case in $("$here/cache_test" --gtest_filter="$filter" --gtest_list_tests |
                  awk '/^[^ ]/ {suite=$1} /^  / {print "cache_test:" suite $1}') \
                $("$here/index_sweep_test" --gtest_filter="*Cuda64*:-*Churn*" --gtest_list_tests |
                  awk '/^[^ ]/ {suite=$1} /^  / {print "index_sweep_test:" suite $1}'); do
      bin="${case%%:*}" t="${case#*:}"
      log="$out/racecheck_${t//\//_}.log"
      limit="${FL_RACECHECK_TIMEOUT:-60}"
      for try in 1 2; do
        FL_TEST_WATCHDOG_S=$((limit > 20 ? limit - 10 : 10)) timeout "$limit" \
          compute-sanitizer --tool racecheck --error-exitcode 3 \
          "$here/$bin" --gtest_filter="$t" >"$log" 2>&1
        status=$?
        [ $status -eq 124 ] && [ $try -eq 1 ] && { echo "  not finished, once more: $t"; continue; }
        break
      done
      case $status in
        0) clean=$((clean + 1)) ;;
        124) unfinished=$((unfinished + 1)); rc=1; echo "  not finished twice: $t (see $log)" ;;
        *) hazards=$((hazards + 1)); rc=1; echo "  hazards or failure: $t (see $log)" ;;
      esac
    done
    echo "racecheck: $clean clean, $hazards with hazards or failures, $unfinished not finished" |
      tee "$out/racecheck_summary.txt"
  done
fi
# The stress run on the CUDA backend: 20 s plain; 10 s each with six readers
# and a large cache (more batches read in place, and two launching readers:
# the setup in which wrong rows from launches show), in the per-table
# layout, and without unified entries (the default config's index of 32-bit
# locations); then FL_STRESS_MEMCHECK_S seconds (default 60) under memcheck.
echo "== stress --backend cuda"
"$here/stress" --backend cuda --seconds 20 --json "$out/stress.json" >"$out/stress.log" 2>&1 || rc=1
tail -n 2 "$out/stress.log"
for more in "--readers 6 --budget-kb 65536 --writers 2" "--layout per-table --readers 6" \
            "--unified 0 --readers 6"; do
  log="$out/stress_${more// /_}.log"
  "$here/stress" --backend cuda --seconds 10 $more >"$log" 2>&1 || rc=1
  grep -E "^stress:" "$log"
done
if command -v compute-sanitizer >/dev/null && [ "${FL_STRESS_MEMCHECK_S:-60}" != 0 ]; then
  echo "== compute-sanitizer --tool memcheck stress --backend cuda"
  compute-sanitizer --tool memcheck --error-exitcode 3 "$here/stress" --backend cuda \
    --seconds "${FL_STRESS_MEMCHECK_S:-60}" --json "$out/stress_memcheck.json" \
    >"$out/stress_memcheck.log" 2>&1 || rc=1
  grep -E "^stress:|ERROR SUMMARY" "$out/stress_memcheck.log" | tail -n 2
fi
# The Python package (tools/gpu_python.sh): its extension built with this
# machine's python3, its tests (CUDA ones included), bench_overhead.py.
if [ -x "$here/python.sh" ]; then
  "$here/python.sh" "$out" || rc=1
fi
# The CUDA mutants (tools/mutants.sh --bundle), when the bundle has them:
# each must be caught by the CUDA tests or the stress run.
if [ -d "$here/mutants" ]; then
  echo "== CUDA mutants"
  "$here/mutants/mutants.sh" --run-bundle "$here/mutants" "$out/mutants" || rc=1
fi
if [ "${FL_SKIP_BENCH:-0}" != 1 ]; then
  echo "== replay (default workload)"
  "$here/replay" --json "$out/replay.json" --plot "$out/replay.svg" >"$out/replay.log" 2>&1 || rc=1
  tail -n 40 "$out/replay.log"
  echo "== replay --compare"
  "$here/replay" --compare --json "$out/compare.json" >"$out/compare.log" 2>&1 || rc=1
  tail -n 25 "$out/compare.log"
  echo "== bench_query"
  "$here/bench_query" --json "$out/bench_query.json" >"$out/bench_query.log" 2>&1 || rc=1
  tail -n 12 "$out/bench_query.log"
  echo "== bench_store"
  "$here/bench_store" --json "$out/bench_store.json" >"$out/bench_store.log" 2>&1 || rc=1
  tail -n 8 "$out/bench_store.log"
  echo "== serve_bench (4 workers, closed and open loop)"
  "$here/serve_bench" --threads 4 --json "$out/serve_bench.json" --svg "$out/serve_bench.svg" \
    >"$out/serve_bench.log" 2>&1 || rc=1
  grep -A8 "^level" "$out/serve_bench.log" | head -n 9
  # The scheduler's account per level: preempted requests, run-queue delay;
  # then by thread kind: which threads waited for a CPU.
  grep -A6 "^scheduler per level (" "$out/serve_bench.log" | tail -n 6
  sed -n '/^scheduler per level by thread kind/,/^$/p' "$out/serve_bench.log" | sed '1d;/^$/d'
fi
python3 - "$out" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
p = f = s = 0
for x in sorted(glob.glob(sys.argv[1] + "/*.xml")):
    for c in ET.parse(x).getroot().iter("testcase"):
        if c.find("failure") is not None or c.find("error") is not None: f += 1
        elif c.find("skipped") is not None or c.get("result") == "skipped": s += 1
        else: p += 1
print(f"{p} passed, {f} failed, {s} skipped")
sys.exit(1 if f else 0)
PY
[ $? -eq 0 ] && exit $rc
exit 1
