#!/usr/bin/env bash
# cluster-kvcache.sh: the cluster against one node of the same total memory, in one run.
#
#   1. stratakv-bench's KV-cache workload (conversations, chunks of VALUE bytes, a working set
#      of WS_FACTOR x the total memory), --protocol fast through the SDK: on a 3-node cluster
#      (redis+cluster:// URL: batches split by node, shm to each node) and on one node with
#      the cluster's total memory (unix:// URL). Hit ratio, throughput, request latency.
#   2. One 64 MiB value fetched striped over the 3 nodes (put(stripes=3): a part per node,
#      fetched in parallel) against the same value whole from one node, with the Python SDK.
#
# Nodes: static topology (cluster.topology-file), loopback ports, Unix sockets, --threads 2.
# The machine's cores are shared by every node and the client; the report says how many.
#
# usage: bench/cluster-kvcache.sh [--out FILE]
# environment: MEMORY (total, default 768mb), VALUE (default 1m), WS_FACTOR (default 3),
#   STREAMS (default 4), NODES (default 3), BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/release}
SERVER=$BUILD_DIR/bin/stratakv-server
BENCH=$BUILD_DIR/bin/stratakv-bench
MEMORY=${MEMORY:-768mb}
VALUE=${VALUE:-1m}
WS_FACTOR=${WS_FACTOR:-3}
STREAMS=${STREAMS:-4}
NODES=${NODES:-3}
OUT=""
if [[ "${1:-}" == "--out" ]]; then OUT=${2:?--out needs a file}; fi
work=$(mktemp -d)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

to_bytes() { /usr/bin/python3 -c "
import re,sys; m=re.fullmatch(r'(\d+)([kmg]?)b?', sys.argv[1].lower()); print(int(m[1]) * {'':1,'k':1<<10,'m':1<<20,'g':1<<30}[m[2]])" "$1"; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
hexid() { head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
wait_ok() { for _ in $(seq 200); do redis-cli -p "$1" cluster info 2>/dev/null | grep -q cluster_state:ok && return 0; sleep 0.1; done; return 1; }

mem=$(to_bytes "$MEMORY")
value=$(to_bytes "$VALUE")
per_node=$((mem / NODES))
users=$(( (mem * WS_FACTOR / value + 11) / 12 ))

# The cluster: NODES primaries over a static topology, each with a Unix socket.
ports=(); ids=(); nodes=""; shards=""
for ((i = 0; i < NODES; i++)); do ports+=("$(free_port)"); ids+=("$(hexid)"); done
first=0
for ((i = 0; i < NODES; i++)); do
  last=$((first + 16384 / NODES - 1 + (i < 16384 % NODES ? 1 : 0)))
  nodes+="${nodes:+,}{\"id\":\"${ids[$i]}\",\"host\":\"127.0.0.1\",\"port\":${ports[$i]},\"unix_socket\":\"$work/n$i/s.sock\"}"
  shards+="${shards:+,}{\"id\":\"$(hexid)\",\"slots\":[[$first,$last]],\"primary\":\"${ids[$i]}\"}"
  first=$((last + 1))
done
echo "{\"format\":1,\"version\":1,\"name\":\"bench\",\"nodes\":[$nodes],\"shards\":[$shards],\"migrations\":[]}" > "$work/topology.json"
start_cluster() {
  for ((i = 0; i < NODES; i++)); do
    mkdir -p "$work/n$i"
    echo "id ${ids[$i]}" > "$work/n$i/nodes.conf"
    "$SERVER" --port "${ports[$i]}" --bind 127.0.0.1 --dir "$work/n$i" --unixsocket "$work/n$i/s.sock" \
      --cluster-enabled yes --cluster.topology-file "$work/topology.json" \
      --memory.capacity "$per_node" --threads 2 >"$work/n$i/log" 2>&1 &
    pids+=($!)
  done
  for p in "${ports[@]}"; do wait_ok "$p"; done
}
single_port=$(free_port)
start_single() {
  mkdir -p "$work/one"
  "$SERVER" --port "$single_port" --bind 127.0.0.1 --dir "$work/one" --unixsocket "$work/one/s.sock" \
    --memory.capacity "$mem" --threads 2 >"$work/one/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$single_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

run_kv() {  # label, then the target's arguments
  local label=$1; shift
  "$BENCH" --protocol fast "$@" --streams "$STREAMS" --value-size "$value" --users "$users" \
    --rounds 4 --label "$label" --json "$work/$label.json" >"$work/$label.txt" 2>&1 || {
      echo "cluster-kvcache: $label failed:" >&2; tail -5 "$work/$label.txt" >&2; exit 1; }
}

start_cluster
run_kv cluster --url "redis+cluster://127.0.0.1:${ports[0]}" --host 127.0.0.1 --port "${ports[0]}"
stop_all
start_single
run_kv single --unix "$work/one/s.sock"
stop_all

# The striped fetch: 64 MiB, whole from one node vs 3 parts from 3 nodes, best of 10 each.
start_cluster
start_single
PYTHONPATH=$BUILD_DIR/python /usr/bin/python3 - "${ports[0]}" "$work/one/s.sock" > "$work/stripe.txt" <<'PY'
import sys, time, os
import numpy as np
import stratakv
port, sock = sys.argv[1], sys.argv[2]
size = 64 << 20
data = np.frombuffer(os.urandom(size), dtype=np.uint8)
def best(fn, n=10):
    times = []
    for _ in range(n):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return min(times)
cluster = stratakv.Client("redis+cluster://127.0.0.1:%s" % port)
one = stratakv.Client("unix://" + sock)
cluster.put("striped", data, stripes=3)
one.put("whole", data)
out = np.empty(size, dtype=np.uint8)
def get_striped():
    assert cluster.get_into("striped", out) == size
def get_whole():
    assert one.get_into("whole", out) == size
t_striped, t_whole = best(get_striped), best(get_whole)
assert np.array_equal(out, data)
print("%.2f %.2f" % (size / t_striped / 1e9, size / t_whole / 1e9))
PY
stop_all
read -r striped whole < "$work/stripe.txt"

/usr/bin/python3 - "$work" "$NODES" "$MEMORY" "$VALUE" "$striped" "$whole" "$(nproc)" <<'PY' | tee "$work/report.md"
import json, sys, datetime
work, nodes, memory, value, striped, whole, cores = sys.argv[1:]
c = json.load(open(f"{work}/cluster.json")); s = json.load(open(f"{work}/single.json"))
def row(name, f, unit, fmt="%.3f"):
    a, b = f(c), f(s)
    print(f"| {name} | {unit} | {fmt % a} | {fmt % b} | {a / b if b else 0:.2f}x |")
print(f"### Cluster vs one node, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n")
print(f"{nodes} nodes of {memory}/{nodes} each against one node of {memory}; {cores} cores shared by "
      f"every server and the client. stratakv-bench conversations, {value} chunks, "
      f"--protocol fast through the SDK (the cluster: redis+cluster://, shm to each node).\n")
print("| figure | unit | cluster | one node | cluster/one |")
print("|---|---|--:|--:|--:|")
row("hit ratio (chunks)", lambda j: j["hit_ratio"]["chunks"], "share")
row("load", lambda j: j["throughput"]["load_gbps"], "GB/s", "%.2f")
row("store", lambda j: j["throughput"]["store_gbps"], "GB/s", "%.2f")
row("requests", lambda j: j["throughput"]["requests_per_s"], "req/s", "%.1f")
row("request p50", lambda j: j["latency"]["request"]["p50_ms"], "ms", "%.2f")
row("request p99", lambda j: j["latency"]["request"]["p99_ms"], "ms", "%.2f")
print(f"| GET of 64 MiB: striped over {nodes} nodes vs whole from one | GB/s | {float(striped):.2f} | {float(whole):.2f} | {float(striped) / float(whole):.2f}x |")
PY
if [[ -n "$OUT" ]]; then { echo; cat "$work/report.md"; } >> "$OUT"; fi
