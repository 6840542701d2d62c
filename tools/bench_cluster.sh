#!/usr/bin/env bash
# bench_cluster.sh: the cluster tier's benchmark (docs/PERFORMANCE.md). On a
# fresh local cluster (ports 7200..7205): rows/s our fetch gets from the
# cluster (bench_cluster_fetch), redis-benchmark's MGET on the same cluster
# with the same value size and keys per MGET (no pipelining, and 16 deep),
# and the end-to-end replay with 20% of the model in the local DRAM tier
# (host backend). Prints a table; writes JSON to OUT [bench_cluster.json].
#   ./bazelw run //tools:bench_cluster -- [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r="${RUNFILES_DIR:-$0.runfiles}/fleche/tools"
[ -x "$r/replay" ] || r="$here"
out="${1:-bench_cluster.json}"
case "$out" in /*) ;; *) out="${BUILD_WORKING_DIRECTORY:-$PWD}/$out" ;; esac
dir="$(mktemp -d /tmp/fleche-bench.XXXXXX)"
port=7200
url="redis://127.0.0.1:$port"
trap '"$r/redis_cluster.sh" stop "$dir"' EXIT
"$r/redis_cluster.sh" start "$dir" "$port" >&2

fetch="$("$r/bench_cluster_fetch" --store "$url" --seconds 5 --threads 4)"
field() { echo "$1" | sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p"; }
keys="$(printf '%.0f' "$(field "$fetch" keys_per_mget)")"
bytes="$(field "$fetch" value_bytes)"
ours="$(field "$fetch" fetch_rows_per_s)"

# The baseline's own keys, with our value size, then MGETs of `keys` keys.
# In cluster mode redis-benchmark's SET writes "key:{TAG}:N" (TAG a hash tag
# of the client's node), so the MGET names keys of that form: "key{tag}:N"
# would name keys that do not exist and time MGETs of nils. 1,000,000 SETs
# over 100,000 ids per node: about 96% of the MGET's keys exist.
redis-benchmark --cluster -p "$port" -t set -d "$bytes" -r 100000 -n 1000000 -P 16 -q >/dev/null 2>&1
args=()
for _ in $(seq "$keys"); do args+=("key:{tag}:__rand_int__"); done
mget() {
  redis-benchmark --cluster -p "$port" -r 100000 -n 300000 -c 50 -P "$1" -q MGET "${args[@]}" 2>&1 |
    tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1
}
rps1="$(mget 1)"
rps16="$(mget 16)"
base1="$(echo "$rps1 * $keys" | bc)"
base16="$(echo "$rps16 * $keys" | bc)"

"$r/load_redis" --store "$url" --backend host --quiet >&2
"$r/replay" --store "$url" --backend host --dram-budget-pct 20 --batches 64 --quiet \
  --json "$dir/replay.json" >"$dir/replay.txt" 2>&1
e2e="$(grep -m1 '^batches' "$dir/replay.txt" | sed 's/.*s, \([0-9.]*\) M lookups\/s.*/\1/')"
tiers="$(grep -m1 '^tiers' "$dir/replay.txt")"

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
printf '%-52s %14s\n' "what (value $bytes B, $keys keys per MGET)" "rows/s"
printf '%-52s %14.0f\n' "fleche cluster fetch (4 callers, batches of 16384)" "$ours"
printf '%-52s %14.0f  (ours: %.0f%%)\n' "redis-benchmark MGET -c 50 -P 1" "$base1" "$(echo "100 * $ours / $base1" | bc -l)"
printf '%-52s %14.0f  (ours: %.0f%%)\n' "redis-benchmark MGET -c 50 -P 16" "$base16" "$(echo "100 * $ours / $base16" | bc -l)"
echo "replay, host backend, local DRAM tier 20% of the model: $e2e M lookups/s"
echo "$tiers"
echo "machine: $cpu"
cat >"$out" <<JSON
{"date": "$(date +%F)", "machine": "$cpu", "fetch": $fetch,
 "redis_benchmark_mget": {"keys": $keys, "value_bytes": $bytes, "clients": 50,
   "rows_per_s_pipeline_1": $base1, "rows_per_s_pipeline_16": $base16},
 "replay_dram_20pct": {"lookups_per_s_millions": $e2e, "json": $(cat "$dir/replay.json")}}
JSON
echo "wrote $out"
