#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries here (cudart, jemalloc and gtest
# linked statically; sm_90 machine code plus PTX) into gpu-bundle/, a folder
# that runs on a GPU machine without Bazel: `gpu-bundle/run.sh [OUTDIR]`.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(cache_test encoding_test store_test)
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
chmod -R u+w gpu-bundle
echo "gpu-bundle/: $(du -sh gpu-bundle | cut -f1); run it with gpu-bundle/run.sh [OUTDIR]"
