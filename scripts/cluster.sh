#!/usr/bin/env bash
# A local stratakv cluster on loopback ports, for trying things out and for the tests
# (docs/cluster.md, "Operating a cluster"):
#
#   scripts/cluster.sh up N [--replicas R] [--base-port P]   etcd + N*(1+R) nodes on ports
#                                                            P, P+1, ... (default 7000); the
#                                                            cluster is created; prints the seed
#   scripts/cluster.sh status                                stratakv-admin status
#   scripts/cluster.sh add-node [--replicas R]               one more node (and R replicas of it)
#                                                            on the next free ports: the primary
#                                                            of a new shard without slots; prints
#                                                            its host:port and id
#   scripts/cluster.sh rebalance [--exclude SHARD]...        stratakv-admin rebalance: slots move
#                                                            until the shards hold equal shares
#   scripts/cluster.sh remove-node ID|HOST:PORT              a node leaves and stops: a primary
#                                                            with slots moves them away first
#                                                            (rebalance --exclude), its replicas
#                                                            leave with it
#   scripts/cluster.sh down                                  stops what `up` and add-node started
#
# State (etcd's data, each node's directory, log and pid, the pids) lives in
# $STRATAKV_CLUSTER_DIR (default /tmp/stratakv-cluster). etcd listens on 127.0.0.1:P+1000 (peer
# P+1001). Binaries come from $BUILD_DIR (default build/release; built when missing). Each node
# loads conf/stratakv.toml (the SSD tier under its own directory), then the options above.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STATE=${STRATAKV_CLUSTER_DIR:-/tmp/stratakv-cluster}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/release}
PREFIX=/stratakv/local

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

admin() { "$BUILD_DIR/bin/stratakv-admin" --etcd "$(cat "$STATE/etcd.url")" --prefix "$PREFIX" "$@"; }

wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then return 1; fi
    sleep 0.2
  done
}

start_node() {  # start_node PORT: one node in $STATE/node-PORT, its pid recorded
  local port=$1 dir="$STATE/node-$1"
  mkdir -p "$dir"
  "$BUILD_DIR/bin/stratakv-server" "$ROOT/conf/stratakv.toml" --port "$port" --bind 127.0.0.1 \
    --dir "$dir" --tiering.ssd.path "$dir/ssd" --tiering.ssd.flush-on-shutdown no \
    --unixsocket "$dir/stratakv.sock" --cluster-enabled yes \
    --cluster.etcd.endpoints "$(cat "$STATE/etcd.url")" --cluster.etcd.prefix "$PREFIX" \
    --memory.capacity "${NODE_MEMORY:-1gb}" >"$dir/server.log" 2>&1 &
  echo $! >> "$STATE/pids"
  echo $! > "$dir/pid"
}

up() {
  local n=${1:-}; shift || true
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
  local replicas=0 base=7000
  while (( $# )); do
    case "$1" in
      --replicas) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; replicas=$2; shift 2 ;;
      --base-port) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage; base=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  if [[ -e "$STATE/pids" ]]; then
    echo "cluster.sh: a cluster is up already ($STATE); scripts/cluster.sh down first" >&2; exit 1
  fi
  if [[ ! -x "$BUILD_DIR/bin/stratakv-server" || ! -x "$BUILD_DIR/bin/stratakv-admin" ]]; then
    scripts/build.sh release >/dev/null
  fi
  command -v etcd >/dev/null || { echo "cluster.sh: etcd is missing (scripts/install-deps.sh)" >&2; exit 1; }
  local etcd_port=$((base + 1000)) peer_port=$((base + 1001))
  local total=$((n * (1 + replicas))) p
  # Every port must be free: something answering on one would pass for a node.
  for p in $(seq "$base" $((base + total - 1))) "$etcd_port" "$peer_port"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "cluster.sh: port $p is in use; choose another --base-port" >&2; exit 1
    fi
  done
  mkdir -p "$STATE"
  : > "$STATE/pids"
  echo "http://127.0.0.1:$etcd_port" > "$STATE/etcd.url"
  echo "$base" > "$STATE/base-port"
  etcd --name local --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "local=http://127.0.0.1:$peer_port" \
    --heartbeat-interval 50 --election-timeout 500 >"$STATE/etcd.log" 2>&1 &
  echo $! >> "$STATE/pids"
  wait_for 30 curl -sf "http://127.0.0.1:$etcd_port/health" || {
    echo "cluster.sh: etcd did not start; the end of its log:" >&2
    tail -20 "$STATE/etcd.log" >&2; down; exit 1; }

  for ((i = 0; i < total; i++)); do start_node $((base + i)); done
  for ((i = 0; i < total; i++)); do
    wait_for 20 redis-cli -p $((base + i)) ping || {
      echo "cluster.sh: node on port $((base + i)) did not start; the end of its log:" >&2
      tail -20 "$STATE/node-$((base + i))/server.log" >&2; down; exit 1; }
  done
  admin create --shards "$n" --replicas "$replicas" --wait 30 || { down >/dev/null; exit 1; }
  for ((i = 0; i < total; i++)); do
    wait_for 30 bash -c "redis-cli -p $((base + i)) cluster info | grep -q cluster_state:ok" || {
      echo "cluster.sh: node on port $((base + i)) did not take the topology" >&2; down; exit 1; }
  done
  echo "cluster up: $n shard(s) x $((1 + replicas)) node(s); seed 127.0.0.1:$base" \
       "(redis-cli -c -p $base; stratakv redis+cluster://127.0.0.1:$base)"
}

stop_pids() {  # SIGTERM, up to 5 s, then SIGKILL
  local pid
  for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

down() {
  [[ -e "$STATE/pids" ]] || { echo "cluster.sh: no cluster is up ($STATE)"; return 0; }
  # Nodes first (they revoke their leases while etcd still answers), etcd (the first pid) last.
  local etcd_pid nodes
  etcd_pid=$(head -1 "$STATE/pids")
  nodes=$(tail -n +2 "$STATE/pids")
  stop_pids $nodes
  stop_pids "$etcd_pid"
  rm -rf "$STATE"
  echo "cluster down"
}

need_cluster() {
  [[ -e "$STATE/pids" && -e "$STATE/etcd.url" ]] || { echo "cluster.sh: no cluster is up ($STATE)" >&2; exit 1; }
}

registered() {  # registered PORT: the node on PORT has its record in etcd
  admin status 2>/dev/null | grep -q " 127.0.0.1:$1 "
}

has_role() {  # has_role PORT ROLE: the node on PORT serves the topology in ROLE
  redis-cli -p "$1" info cluster 2>/dev/null | grep -q "cluster_my_role:$2"
}

add_node() {
  local replicas=0
  while (( $# )); do
    case "$1" in
      --replicas) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; replicas=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  need_cluster
  # The next free ports after the highest a node of this cluster has.
  local highest d p port
  highest=$(( $(cat "$STATE/base-port" 2>/dev/null || echo 7000) - 1 ))
  for d in "$STATE"/node-*; do
    [[ -d "$d" ]] || continue
    p=${d##*/node-}
    if [[ "$p" =~ ^[0-9]+$ ]] && (( p > highest )); then highest=$p; fi
  done
  local ports=()
  port=$highest
  while (( ${#ports[@]} < 1 + replicas )); do
    port=$((port + 1))
    if (( port > 65535 )); then echo "cluster.sh: no free port left" >&2; exit 1; fi
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then ports+=("$port"); fi
  done
  for port in "${ports[@]}"; do start_node "$port"; done
  for port in "${ports[@]}"; do
    wait_for 20 redis-cli -p "$port" ping || {
      echo "cluster.sh: node on port $port did not start; the end of its log:" >&2
      tail -20 "$STATE/node-$port/server.log" >&2; exit 1; }
    wait_for 30 registered "$port" || {
      echo "cluster.sh: node on port $port did not register in etcd" >&2; exit 1; }
  done
  local primary="127.0.0.1:${ports[0]}"
  admin add-node "$primary" >/dev/null
  for port in "${ports[@]:1}"; do admin add-node "127.0.0.1:$port" --replica-of "$primary" >/dev/null; done
  wait_for 30 has_role "${ports[0]}" primary || {
    echo "cluster.sh: node $primary did not take the topology" >&2; exit 1; }
  for port in "${ports[@]:1}"; do
    wait_for 30 has_role "$port" replica || {
      echo "cluster.sh: node 127.0.0.1:$port did not take the topology" >&2; exit 1; }
  done
  echo "node $primary id $(redis-cli -p "${ports[0]}" cluster myid):" \
       "primary of shard $(redis-cli -p "${ports[0]}" cluster myshardid), no slots yet" \
       "(scripts/cluster.sh rebalance)"
  for port in "${ports[@]:1}"; do
    echo "node 127.0.0.1:$port id $(redis-cli -p "$port" cluster myid): replica of $primary"
  done
}

stop_node() {  # stop_node PORT: stops the node cluster.sh started on PORT and forgets it
  local dir="$STATE/node-$1" pid
  if [[ ! -e "$dir/pid" ]]; then
    echo "cluster.sh: no node of cluster.sh on port $1: stop it yourself" >&2; return 0
  fi
  pid=$(cat "$dir/pid")
  stop_pids "$pid"
  grep -vx "$pid" "$STATE/pids" > "$STATE/pids.new" || true
  mv "$STATE/pids.new" "$STATE/pids"
  rm -rf "$dir"
}

remove_node() {
  [[ $# -eq 1 && -n "$1" ]] || usage
  need_cluster
  # What the topology says of the node: "<role> <shard id> <slots> <host:port> <replica host:port>...".
  local facts
  facts=$(admin topology | python3 -c '
import json, sys
t, which = json.load(sys.stdin), sys.argv[1]
addr = lambda n: "%s:%d" % (n["host"], n["port"])
nodes = {n["id"]: n for n in t["nodes"]}
node = next((n for n in t["nodes"] if which in (n["id"], addr(n))), None)
if node is None:
    sys.exit("cluster.sh: no node %s in the topology (give its id or host:port)" % which)
for s in t["shards"]:
    if node["id"] == s["primary"]:
        slots = sum(last - first + 1 for first, last in s["slots"])
        print("primary", s["id"], slots, addr(node), *[addr(nodes[r]) for r in s.get("replicas", [])])
        break
    if node["id"] in s.get("replicas", []):
        print("replica", s["id"], 0, addr(node))
        break
else:
    print("none", "-", 0, addr(node))
' "$1")
  local role shard slots addr replicas
  read -r role shard slots addr replicas <<< "$facts"
  if [[ "$role" == primary ]] && (( slots > 0 )); then
    echo "moving the $slots slots of shard $shard away first"
    admin rebalance --exclude "$shard"
  fi
  local r gone=()
  for r in $replicas; do admin remove-node "$r" >/dev/null; gone+=("$r"); done
  admin remove-node "$addr" >/dev/null
  gone+=("$addr")
  for r in "${gone[@]}"; do stop_node "${r##*:}"; done
  echo "removed from the cluster and stopped: ${gone[*]}"
}

case "${1:-}" in
  up) shift; up "$@" ;;
  status) [[ -e "$STATE/etcd.url" ]] || { echo "cluster.sh: no cluster is up" >&2; exit 1; }; admin status ;;
  add-node) shift; add_node "$@" ;;
  rebalance) shift; need_cluster; admin rebalance "$@" ;;
  remove-node) shift; remove_node "$@" ;;
  down) down ;;
  -h|--help) usage 0 ;;
  *) usage ;;
esac
