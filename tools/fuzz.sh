#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan,
# the system allocator instead of jemalloc) into fuzz/build/ (git-ignored) and
# runs each from its seed corpus fuzz/corpus/<target>/.
#
#   tools/fuzz.sh --runs N [--only NAME]      N executions per target (CI)
#   tools/fuzz.sh --seconds S [--only NAME]   S seconds per target
#   options: --jobs J (targets run at once, default: cores), --seed N,
#     --copt FLAG (repeatable): FLAG is added to every compile, the library's
#     and the targets' (clang as given; nvcc takes -D, -U and -I itself and
#     hands any other flag to its host compiler), and everything is built
#     and run in fuzz/build/copt-<hash of the flags>/ (the flags are in its
#     copts.txt), never in the plain build's fuzz/build/. For example
#     tools/fuzz.sh --runs 500 --copt -DFL_MUTANT=3 fuzzes a library with
#     mutant 3 compiled in (common/mutant.h).
#
# One line per target: name, executions done, crashes (0, or the file holding
# the input that crashed: replay it with BUILD/bin/NAME FILE, BUILD being
# fuzz/build or the --copt folder). Exit status 1 when a target crashed, 2 on
# a usage or build error. Limits: 2 GiB of RSS and 512 MiB per allocation (a
# header that claims a huge size must be an error, not an allocation), 25 s
# per input. New inputs the fuzzer finds go to BUILD/work/NAME, never into
# the seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
  exit 2
}

mode="" amount="" only="" jobs="" seed="" copts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs|--seconds) mode="$1"; amount="${2:-}"; shift 2 || usage ;;
    --only) only="${2:-}"; shift 2 || usage ;;
    --jobs) jobs="${2:-}"; shift 2 || usage ;;
    --seed) seed="${2:-}"; shift 2 || usage ;;
    --copt) [ $# -ge 2 ] && [ -n "$2" ] || usage; copts+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[ -n "$mode" ] && [[ "$amount" =~ ^[0-9]+$ ]] || usage
[ -z "$jobs" ] && jobs="$(nproc)"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || usage
[ -z "$seed" ] || [[ "$seed" =~ ^[0-9]+$ ]] || usage

targets=()
for f in fuzz/fuzz_*.c; do
  t="$(basename "$f" .c)"
  [ -z "$only" ] || [ "$t" = "$only" ] && targets+=("$t")
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz.sh: no target named '$only' (fuzz/fuzz_*.c)" >&2
  exit 2
fi

# ------------------------------------------------------------------ tools
# Debian's clang, and the libFuzzer runtime it only recommends, installed like
# ./bazelw installs its packages.
fuzzer_runtime() {
  command -v clang >/dev/null 2>&1 &&
    [ -f "$(clang -print-runtime-dir)/libclang_rt.fuzzer-$(uname -m).a" ]
}
if ! fuzzer_runtime; then
  echo "fuzz.sh: installing clang libclang-rt-dev" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang libclang-rt-dev >&2
  fuzzer_runtime || { echo "fuzz.sh: clang has no libFuzzer runtime" >&2; exit 2; }
fi
cuda=/usr/local/cuda
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "fuzz.sh: the CUDA toolkit is missing: expected $cuda/bin/nvcc" >&2
  exit 2
fi

# ------------------------------------------------------------------ build
# The library's C sources, compiled once for every target: coverage, ASan and
# UBSan (any undefined behaviour aborts), the system allocator (ASan cannot
# check jemalloc's blocks; dram_store/mem.c). The CUDA kernels are nvcc's: the
# host backend never launches them, but the library links their launchers.
# Extra flags (--copt) build in a folder of their own, named by a hash of the
# flags, so a plain run never reuses or removes their objects, nor they its.
build=fuzz/build
nvcc_copts=""
if [ ${#copts[@]} -gt 0 ]; then
  build="fuzz/build/copt-$(printf '%s\n' "${copts[@]}" | sha1sum | cut -c1-10)"
  for f in "${copts[@]}"; do
    case "$f" in
      -D*|-U*|-I*) nvcc_copts+=" $f" ;;
      *) nvcc_copts+=" -Xcompiler $f" ;;
    esac
  done
fi
rm -rf "$build/obj" "$build/bin" "$build/logs"
mkdir -p "$build/obj" "$build/bin" "$build/logs"
[ ${#copts[@]} -eq 0 ] || printf '%s\n' "${copts[@]}" >"$build/copts.txt"
export FL_CFLAGS="-std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -DFL_MEM_SYSTEM_MALLOC -g -O1
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. -I$cuda/include
  ${copts[*]}"
export FL_NVCC="$cuda/bin/nvcc -gencode arch=compute_90,code=sm_90 -O2 -std=c++17 -Xcompiler -fPIC -I.$nvcc_copts"
export FL_OBJ="$build/obj"
compile_source() { # one source file -> $FL_OBJ/<path with / as _>.o
  local o="$FL_OBJ/${1//\//_}.o"
  case "$1" in
    *.cu) $FL_NVCC -c "$1" -o "$o" ;;
    *) clang $FL_CFLAGS -c "$1" -o "$o" ;;
  esac || { echo "fuzz.sh: cannot compile $1" >&2; return 1; }
}
export -f compile_source
start=$(date +%s)
shopt -s nullglob
printf '%s\n' common/*.c cluster/*.c cluster_store/*.c dram_store/*.c encoding/*.c cache/*.c \
  fusion/*.c tools/trace/*.c encoding/*.cu cache/*.cu fusion/*.cu |
  xargs -P "$(nproc)" -I{} bash -c 'compile_source {}' || exit 2
link_target() { # fuzz/NAME.c -> bin/NAME
  local t="$(basename "$1" .c)"
  clang $FL_CFLAGS "$1" "$FL_OBJ"/*.o "$FL_CUDART" -l:libhiredis.a -ldl -lrt -lpthread -lm \
    -o "$FL_BIN/$t" || { echo "fuzz.sh: cannot link $t" >&2; return 1; }
}
export -f link_target
export FL_CUDART="$cuda/lib64/libcudart_static.a" FL_BIN="$build/bin"
printf 'fuzz/%s.c\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'link_target {}' || exit 2
echo "fuzz.sh: built ${#targets[@]} target(s) in $(( $(date +%s) - start )) s" >&2

# ------------------------------------------------------------------ run
if [ "$mode" = --runs ]; then limit="-runs=$amount"; else limit="-max_total_time=$amount"; fi
run_one() {
  local t="$1" work="$build/work/$t" tmp="$build/tmp/$t"
  rm -rf "$work" "$tmp" "$build/crashes/$t-"*
  mkdir -p "$work" "$tmp" "$build/crashes" "fuzz/corpus/$t"
  # Temporary model and trace files of the targets go to $tmp ($TMPDIR).
  set +e
  TMPDIR="$tmp" "$build/bin/$t" $limit ${seed:+-seed=$seed} -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -timeout=25 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$t-" "$work" "fuzz/corpus/$t" >"$build/logs/$t.log" 2>&1
  echo $? >"$build/logs/$t.rc"
  set -e
}
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

crashed=0
for t in "${targets[@]}"; do
  log="$build/logs/$t.log"
  rc="$(cat "$build/logs/$t.rc")"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  [ -n "$execs" ] || execs="$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)"
  crash=0
  if [ "$rc" -ne 0 ]; then
    crashed=1
    crash="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
    [ -n "$crash" ] || crash="exit status $rc, no input saved"
    crash="$crash (log: $log)"
  fi
  printf '%-20s executions %-9s crashes %s\n' "$t" "${execs:-?}" "$crash"
done
exit "$crashed"
