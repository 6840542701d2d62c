#!/usr/bin/env bash
# redis_cluster.sh: a local Redis Cluster on loopback ports (3 masters, 3
# replicas, from Debian's redis-server), for the tests, CI and users
# (docs/TIERS.md). Every node's files live under DIR/<port>/.
#
#   redis_cluster.sh start DIR [PORT]  6 nodes on PORT..PORT+5 [7000]; returns
#                                      once the cluster is ok and replicas synced
#   redis_cluster.sh stop DIR          stops the nodes started in DIR, removes DIR
#   redis_cluster.sh kill DIR PORT     kills one node (SIGKILL, as a crash)
#   redis_cluster.sh wait DIR PORT     waits until the cluster is ok from PORT
#                                      and every master's replicas caught up
#   redis_cluster.sh master DIR PORT   prints the port of a master (not PORT)
#
# A failed start stops whatever it started. Exits non-zero, loudly, when
# redis-server or redis-cli is missing (apt-get install redis-server redis-tools).
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,16p' "$0" >&2; exit 2; }
for b in redis-server redis-cli; do
  command -v "$b" >/dev/null || { echo "redis_cluster.sh: $b is missing (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

ports_of() { for p in "$dir"/*/redis.pid; do [ -e "$p" ] && basename "$(dirname "$p")"; done; }

stop() {
  for port in $(ports_of); do
    pid="$(cat "$dir/$port/redis.pid" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

# Waits (up to 30 s) for cluster_state:ok seen from $1 and, for every
# master, replicas whose replication offset equals the master's.
wait_ok() {
  local port="$1"
  for _ in $(seq 300); do
    if cli "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
      local synced=1 m
      for m in $(cli "$port" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && $8 == "connected" {split($2, a, "[:@]"); print a[2]}'); do
        local info off
        info="$(cli "$m" info replication | tr -d '\r')"
        off="$(echo "$info" | sed -n 's/^master_repl_offset://p')"
        echo "$info" | grep -q '^connected_slaves:[1-9]' || synced=0
        echo "$info" | grep '^slave[0-9]' | grep -qv "offset=$off," && synced=0
      done
      [ "$synced" = 1 ] && return 0
    fi
    sleep 0.1
  done
  echo "redis_cluster.sh: the cluster at 127.0.0.1:$port is not ok after 30 s" >&2
  return 1
}

case "$cmd" in
  start)
    base="${3:-7000}"
    mkdir -p "$dir"
    trap 'echo "redis_cluster.sh: start failed; stopping the nodes" >&2; stop' ERR
    nodes=()
    for i in 0 1 2 3 4 5; do
      port=$((base + i))
      mkdir -p "$dir/$port"
      # Node timeout 1 s: a dead master is failed over in about 2 s.
      # Full coverage off: the other masters' slots keep answering meanwhile.
      redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
        --dir "$dir/$port" --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" \
        --cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf" \
        --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 \
        --cluster-require-full-coverage no --save '' --appendonly no
      nodes+=("127.0.0.1:$port")
    done
    for i in 0 1 2 3 4 5; do
      for _ in $(seq 100); do cli $((base + i)) ping >/dev/null 2>&1 && break; sleep 0.05; done
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
      { cat "$dir/create.log" >&2; false; }
    wait_ok "$base"
    trap - ERR
    echo "redis cluster: 3 masters + 3 replicas on 127.0.0.1:$base..$((base + 5)) (files in $dir)"
    ;;
  stop) stop ;;
  kill)
    kill -9 "$(cat "$dir/$3/redis.pid")"
    rm -f "$dir/$3/redis.pid"
    ;;
  wait) wait_ok "$3" ;;
  master)
    cli "$3" cluster nodes | awk -v me="$3" '$3 ~ /master/ && $3 !~ /fail/ {split($2, a, "[:@]"); if (a[2] != me) {print a[2]; exit}}'
    ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
