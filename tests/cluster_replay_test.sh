#!/usr/bin/env bash
# cluster_replay_test.sh: replay through all three tiers (host cache, local
# DRAM tier at 20% of the model, Redis Cluster) with --verify against the
# cluster, then again while a master is killed mid-replay: the replica is
# promoted, queries answer again, nothing wrong is returned. A second model
# in its own namespace (--store-ns) is loaded and replayed beside the first.
# Starts its own cluster on ports 7120..7125 and stops it. Fails without
# redis-server.
# Args: redis_cluster.sh load_redis replay
set -euo pipefail
cluster="$1" load="$2" replay="$3"
dir="${TEST_TMPDIR:-$(mktemp -d)}/rc"
port=7120
url="redis://127.0.0.1:$port"
trap '"$cluster" stop "$dir"' EXIT
"$cluster" start "$dir" "$port"

"$load" --store "$url" --backend host --quiet
# Replica offsets caught up with the load before a master may die.
"$cluster" wait "$dir" "$port"

echo "== three tiers, --verify"
out="$("$replay" --store "$url" --backend host --verify --dram-budget-pct 20 --quiet 2>&1)"
echo "$out" | grep -E '^(verify|tiers|local tier|batches)'
echo "$out" | grep -q 'verify: [1-9][0-9]* rows checked, 0 mismatches' || { echo "$out"; exit 1; }
# Every tier served some of the lookups.
echo "$out" | grep -Eq 'tiers: cache [1-9][0-9.]*%.*local DRAM [1-9][0-9.]*%.*cluster [1-9][0-9.]*%' ||
  { echo "a tier served nothing"; exit 1; }

echo "== a second model in its own namespace (--store-ns), half the dim"
"$load" --store "$url" --store-ns m2 --dim 16 --backend host --quiet
out2="$("$replay" --store "$url" --store-ns m2 --backend host --verify --batches 4 --quiet 2>&1)"
echo "$out2" | grep -q 'verify: [1-9][0-9]* rows checked, 0 mismatches' || { echo "$out2"; exit 1; }
mb() { echo "$1" | sed -n 's/^trace .* \([0-9.]*\) MB$/\1/p'; }
[ -n "$(mb "$out")" ] && [ -n "$(mb "$out2")" ] && [ "$(mb "$out2")" != "$(mb "$out")" ] ||
  { echo "--store-ns m2 read the default model: $(echo "$out2" | grep '^trace')"; exit 1; }
echo "m2: $(echo "$out2" | grep '^trace')"
"$cluster" wait "$dir" "$port"

echo "== a master killed mid-replay"
"$replay" --store "$url" --backend host --verify --dram-budget-pct 20 --batches 160 --quiet \
  >"$dir/failover.out" 2>&1 &
pid=$!
sleep 2
victim="$("$cluster" master "$dir" "$port")"
echo "killing master 127.0.0.1:$victim"
"$cluster" kill "$dir" "$victim"
rc=0
wait "$pid" || rc=$?
grep -E '^(verify|tiers|latency|batches)|error' "$dir/failover.out" || true
[ "$rc" = 0 ] || { cat "$dir/failover.out"; echo "replay failed across the failover"; exit 1; }
grep -q 'verify: [1-9][0-9]* rows checked, 0 mismatches' "$dir/failover.out"
redis-cli -p "$port" cluster nodes | grep -q "127.0.0.1:$victim.*fail" ||
  { echo "the killed master is not marked failed"; exit 1; }
echo "replay answered every batch across the failover, 0 mismatches"
