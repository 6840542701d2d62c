#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries here (cudart, jemalloc and gtest
# linked statically; sm_90 machine code plus PTX) into gpu-bundle/, a folder
# that runs on a GPU machine without Bazel: `gpu-bundle/run.sh [OUTDIR]`.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(cache_test index_sweep_test encoding_test store_test admit_sketch_test)
tools=(replay tune bench_store bench_query flatkeys stress serve_bench)
targets=()
for t in "${tests[@]}"; do targets+=("//tests:$t"); done
for t in "${tools[@]}"; do targets+=("//tools:$t"); done
./bazelw build -c opt "${targets[@]}"
bin="$(./bazelw info -c opt bazel-bin 2>/dev/null)"
rm -rf gpu-bundle
mkdir -p gpu-bundle
for t in "${tests[@]}"; do cp "$bin/tests/$t" gpu-bundle/; done
for t in "${tools[@]}"; do cp "$bin/tools/$t" gpu-bundle/; done
cp tools/gpu_run.sh gpu-bundle/run.sh
# The driver-call tracer (tools/driver_calls.c) and the CUPTI it needs:
# CUDA_INJECTION64_PATH=gpu-bundle/libfl_driver_calls.so with
# LD_LIBRARY_PATH=gpu-bundle.
./bazelw build -c opt //tools:libfl_driver_calls.so
cp "$bin/tools/libfl_driver_calls.so" tools/driver_calls.py gpu-bundle/
cp -L /usr/local/cuda/lib64/libcupti.so.13 gpu-bundle/
# The Python package (gpu-bundle/python.sh, which run.sh calls, compiles its
# extensions there): libfleche.so with CUDA and the system allocator, as pip
# builds it; the package's sources, setup.py, tests and bench_overhead.py;
# fleche.h where setup.py looks for it.
./bazelw build -c opt --define=fl_malloc=system //python:libfleche.so
pybin="$(./bazelw info -c opt --define=fl_malloc=system bazel-bin 2>/dev/null)"
mkdir -p gpu-bundle/python gpu-bundle/include
cp -r python/fleche python/tests python/bench python/setup.py python/pyproject.toml \
  python/README.md gpu-bundle/python/
find gpu-bundle/python \( -name __pycache__ -o -name '*.so' \) -prune -exec rm -rf {} +
cp include/fleche.h gpu-bundle/include/
cp "$pybin/python/libfleche.so" gpu-bundle/python/fleche/
cp tools/gpu_python.sh gpu-bundle/python.sh
chmod -R u+w gpu-bundle
echo "gpu-bundle/: $(du -sh gpu-bundle | cut -f1); run it with gpu-bundle/run.sh [OUTDIR]"
