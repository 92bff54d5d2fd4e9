#!/usr/bin/env bash
# A local stratakv cluster on loopback ports, for trying things out and for the tests
# (docs/cluster.md, "Operating a cluster"):
#
#   scripts/cluster.sh up N [--replicas R] [--base-port P]   etcd + N*(1+R) nodes on ports
#                                                            P, P+1, ... (default 7000); the
#                                                            cluster is created; prints the seed
#   scripts/cluster.sh status                                stratakv-admin status
#   scripts/cluster.sh down                                  stops what `up` started
#
# State (etcd's data, each node's directory and log, pids) lives in $STRATAKV_CLUSTER_DIR
# (default /tmp/stratakv-cluster). etcd listens on 127.0.0.1:P+1000 (peer P+1001). Binaries come
# from $BUILD_DIR (default build/release; built when missing). Each node loads
# conf/stratakv.toml (the SSD tier under its own directory), then the options above.
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
  etcd --name local --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "local=http://127.0.0.1:$peer_port" \
    --heartbeat-interval 50 --election-timeout 500 >"$STATE/etcd.log" 2>&1 &
  echo $! >> "$STATE/pids"
  wait_for 30 curl -sf "http://127.0.0.1:$etcd_port/health" || {
    echo "cluster.sh: etcd did not start; the end of its log:" >&2
    tail -20 "$STATE/etcd.log" >&2; down; exit 1; }

  for ((i = 0; i < total; i++)); do
    local port=$((base + i)) dir="$STATE/node-$((base + i))"
    mkdir -p "$dir"
    "$BUILD_DIR/bin/stratakv-server" "$ROOT/conf/stratakv.toml" --port "$port" --bind 127.0.0.1 \
      --dir "$dir" --tiering.ssd.path "$dir/ssd" \
      --unixsocket "$dir/stratakv.sock" --cluster-enabled yes \
      --cluster.etcd.endpoints "http://127.0.0.1:$etcd_port" --cluster.etcd.prefix "$PREFIX" \
      --memory.capacity "${NODE_MEMORY:-1gb}" >"$dir/server.log" 2>&1 &
    echo $! >> "$STATE/pids"
  done
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

case "${1:-}" in
  up) shift; up "$@" ;;
  status) [[ -e "$STATE/etcd.url" ]] || { echo "cluster.sh: no cluster is up" >&2; exit 1; }; admin status ;;
  down) down ;;
  -h|--help) usage 0 ;;
  *) usage ;;
esac
