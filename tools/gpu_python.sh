#!/usr/bin/env bash
# The Python package on the GPU machine, from the bundle's python/ folder
# (tools/gpu_bundle.sh puts libfleche.so, the package's sources, setup.py,
# its tests and bench_overhead.py there): compiles the extensions
# fleche._fast and, against this machine's torch, fleche._torch_view with
# setup.py (no network, no pip: the C and C++ compilers, Python.h and
# torch's headers), runs the package's tests (JUnit XML, counted by run.sh's
# summary; the torch reader's cases may not skip) and, unless
# FL_SKIP_BENCH=1, bench_overhead.py with its defaults (CUDA backend, torch
# CUDA tensors when torch sees a GPU). Writes to OUTDIR: python_build.log,
# python_tests.{log,xml}, bench_overhead.{log,json}. Exits non-zero on any
# failure. Usage: python.sh OUTDIR (run.sh calls it).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="$here/python"
out="$(mkdir -p "${1:-gpu-out}" && cd "${1:-gpu-out}" && pwd)"
rc=0
echo "== python ($(python3 --version 2>&1))"
inc="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [ ! -f "$inc/Python.h" ]; then
  echo "python: $inc/Python.h is missing: this python3 has no headers (python3-dev), so" \
       "fleche._fast cannot be built" | tee "$out/python_build.log"
  exit 1
fi
if ! (cd "$py" && FLECHE_TORCH=1 python3 setup.py -q build_ext --inplace \
      --build-temp "$out/python_build") >"$out/python_build.log" 2>&1; then
  cat "$out/python_build.log"
  exit 1
fi
# From OUTDIR, so that nothing of the bundle's tests is cached or written there.
(cd "$out" && PYTHONPATH="$py" python3 -m pytest "$py/tests" -q -rs -p no:cacheprovider --require-torch-cpu \
  --junitxml="$out/python_tests.xml" >"$out/python_tests.log" 2>&1) || rc=1
tail -n 3 "$out/python_tests.log"
if [ "${FL_SKIP_BENCH:-0}" != 1 ]; then
  PYTHONPATH="$py" python3 "$py/bench/bench_overhead.py" --json "$out/bench_overhead.json" \
    >"$out/bench_overhead.log" 2>&1 || rc=1
  tail -n 14 "$out/bench_overhead.log"
fi
exit $rc
