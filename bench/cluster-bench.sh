#!/usr/bin/env bash
# cluster-bench.sh: aggregate SET and GET of 1 MiB values over clusters of 1, 2 and 3 shards,
# stratakv against redis-server 7.0 in cluster mode, in one run, with redis-benchmark --cluster
# (it routes each key to its slot's node, as any cluster client does; one shard: plain mode).
#
# Both clusters are started here on free loopback ports: stratakv nodes over a static topology
# file (cluster.topology-file; etcd only changes the topology, not the serving path), Redis nodes
# with CLUSTER ADDSLOTSRANGE and CLUSTER MEET. Prints a markdown table: MB/s of each, and
# stratakv/redis. On a machine of C cores, N shards plus the benchmark client share those C
# cores: past C the aggregate cannot grow (the table says how many cores there were).
#
# usage: bench/cluster-bench.sh [--out FILE]
# environment: SHARDS (default "1 2 3"), BENCH_N (requests per test, default 2000), KEYS
#   (distinct keys, redis-benchmark -r; default 200: 2000 SETs cover them all, so every GET
#   hits), CONNS (redis-benchmark -c, default 8), SIZE (value bytes, default 1048576), BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/release}
SERVER=$BUILD_DIR/bin/stratakv-server
SHARDS=${SHARDS:-"1 2 3"}
BENCH_N=${BENCH_N:-2000}
KEYS=${KEYS:-200}
CONNS=${CONNS:-8}
SIZE=${SIZE:-1048576}
OUT=""
if [[ "${1:-}" == "--out" ]]; then OUT=${2:?--out needs a file}; fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
hexid() { head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
wait_ping() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
wait_ok() { for _ in $(seq 200); do redis-cli -p "$1" cluster info 2>/dev/null | grep -q cluster_state:ok && return 0; sleep 0.1; done; return 1; }

# Slot ranges of n shards, as "first last" lines (the first 16384 % n one slot larger).
ranges() {
  local n=$1 size=$((16384 / $1)) extra=$((16384 % $1)) first=0 i last
  for ((i = 0; i < n; i++)); do
    last=$((first + size - 1 + (i < extra ? 1 : 0)))
    echo "$first $last"
    first=$((last + 1))
  done
}

start_stratakv() {  # n -> prints the ports
  local n=$1 ports=() ids=() sids=() i
  for ((i = 0; i < n; i++)); do ports+=("$(free_port)"); ids+=("$(hexid)"); sids+=("$(hexid)"); done
  local topo="$work/topology-$n.json" nodes="" shards="" r=0
  while read -r first last; do
    nodes+="${nodes:+,}{\"id\":\"${ids[$r]}\",\"host\":\"127.0.0.1\",\"port\":${ports[$r]}}"
    shards+="${shards:+,}{\"id\":\"${sids[$r]}\",\"slots\":[[$first,$last]],\"primary\":\"${ids[$r]}\"}"
    r=$((r + 1))
  done < <(ranges "$n")
  echo "{\"format\":1,\"version\":1,\"name\":\"bench\",\"nodes\":[$nodes],\"shards\":[$shards],\"migrations\":[]}" > "$topo"
  for ((i = 0; i < n; i++)); do
    local dir="$work/s$n-$i"
    mkdir -p "$dir"
    echo "id ${ids[$i]}" > "$dir/nodes.conf"
    "$SERVER" --port "${ports[$i]}" --bind 127.0.0.1 --dir "$dir" --cluster-enabled yes \
      --cluster.topology-file "$topo" --memory.capacity 2gb --threads 2 >"$dir/log" 2>&1 &
    pids+=($!)
  done
  for p in "${ports[@]}"; do wait_ping "$p"; wait_ok "$p"; done
  echo "${ports[@]}"
}

start_redis() {  # n -> prints the ports
  local n=$1 ports=() i
  for ((i = 0; i < n; i++)); do
    ports+=("$(free_port)")
    local dir="$work/r$n-$i"
    mkdir -p "$dir"
    redis-server --port "${ports[$i]}" --bind 127.0.0.1 --cluster-enabled yes --dir "$dir" \
      --save "" --appendonly no --maxmemory 2gb >"$dir/log" 2>&1 &
    pids+=($!)
  done
  for p in "${ports[@]}"; do wait_ping "$p"; done
  local r=0
  while read -r first last; do
    redis-cli -p "${ports[$r]}" cluster addslotsrange "$first" "$last" >/dev/null
    r=$((r + 1))
  done < <(ranges "$n")
  for p in "${ports[@]:1}"; do redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "$p" >/dev/null; done
  for p in "${ports[@]}"; do wait_ok "$p"; done
  echo "${ports[@]}"
}

# MB/s of one redis-benchmark --cluster test ("set" or "get") against the node at $1.
# One shard: without --cluster (redis-benchmark refuses a cluster of one node; that node
# serves every slot, so no request is redirected either way).
bench() {
  local port=$1 test=$2 shards=$3 rps mode=()
  (( shards > 1 )) && mode=(--cluster)
  rps=$(redis-benchmark "${mode[@]}" -p "$port" -t "$test" -n "$BENCH_N" -c "$CONNS" -d "$SIZE" \
        -r "$KEYS" --csv 2>/dev/null | awk -F'","' '/^"(SET|GET)"/ {gsub(/"/,"",$2); print $2; exit}')
  if [[ -z "$rps" ]]; then echo "cluster-bench: redis-benchmark gave no figure ($test, port $port)" >&2; exit 1; fi
  /usr/bin/python3 -c "print('%.0f' % ($rps * $SIZE / 1e6))"
}

stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

{
  echo "### Cluster: aggregate SET/GET of $((SIZE / 1048576)) MiB values, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "redis-benchmark --cluster -n $BENCH_N -c $CONNS -d $SIZE; $(nproc) cores shared by every node and the client."
  echo
  echo "| shards | test | stratakv MB/s | redis MB/s | stratakv/redis | stratakv vs its 1 shard |"
  echo "|---|---|--:|--:|--:|--:|"
} > "$work/table.md"
declare -A base
for n in $SHARDS; do
  read -r -a sp <<<"$(start_stratakv "$n")"
  s_set=$(bench "${sp[0]}" set "$n"); s_get=$(bench "${sp[0]}" get "$n")
  stop_all
  read -r -a rp <<<"$(start_redis "$n")"
  r_set=$(bench "${rp[0]}" set "$n"); r_get=$(bench "${rp[0]}" get "$n")
  stop_all
  for t in set get; do
    s_var="s_$t"; r_var="r_$t"
    s=${!s_var}; r=${!r_var}
    [[ -z "${base[$t]:-}" ]] && base[$t]=$s
    /usr/bin/python3 -c "print('| %s | %s | %s | %s | %.2fx | %.2fx |' % ('$n', '${t^^} 1 MiB', '$s', '$r', $s / max($r, 1), $s / max(${base[$t]}, 1)))" >> "$work/table.md"
  done
done
cat "$work/table.md"
if [[ -n "$OUT" ]]; then { echo; cat "$work/table.md"; } >> "$OUT"; fi
