#!/usr/bin/env bash
# eviction-bench.sh: SET and GET throughput of 1 MiB values under constant eviction, against
# the same load without eviction, for stratakv and redis-server in one run (issue 3's goal:
# under eviction at least 0.8x of the figure without).
#
# For each server, two runs of the same shape:
#   no eviction   maxmemory 1gb; the writer overwrites 256 keys (256 MiB stays resident)
#   eviction      maxmemory 128mb; the writer writes unique keys (every SET evicts ~1 MiB)
# and in each run two phases:
#   SET           one writer connection alone (stratakv-bulkbench --op set; median of 3)
#   GET+SET       a reader of 32 hot keys (--op get) while the writer runs as above: the
#                 GETs must stay fast while the evictor works beside them
# Prints a markdown table: MB/s per phase and the ratio eviction / no eviction.
#
# usage: bench/eviction-bench.sh [--out FILE]
# environment: STRATAKV_SERVER, REDIS_SERVER, BUILD_DIR, COUNT (SETs per phase, default 3000)
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build/release}
STRATAKV_SERVER=${STRATAKV_SERVER:-$BUILD_DIR/bin/stratakv-server}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server)}
BULK=$BUILD_DIR/bin/stratakv-bulkbench
COUNT=${COUNT:-3000}
OUT=""
[ "${1:-}" = "--out" ] && OUT=$2
PY=/usr/bin/python3

WORK=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {  # kind maxmemory
  PORT=$(free_port)
  if [ "$1" = redis ]; then
    "$REDIS_SERVER" --port "$PORT" --save "" --appendonly no --maxmemory "$2" \
      --maxmemory-policy allkeys-lru >"$WORK/redis.log" 2>&1 &
  else
    "$STRATAKV_SERVER" --port "$PORT" --memory.capacity 2gb --maxmemory "$2" \
      --maxmemory-policy allkeys-lru >"$WORK/stratakv.log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server $1 did not start" >&2; exit 1
}
stop() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; PID=""; }

mbps() { $PY -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.0f" % d[sys.argv[1]]["mb_per_sec"])' "$1"; }

# run kind maxmemory writer_keys -> "set_mbps get_mbps set_during_get_mbps"
run() {
  start "$1" "$2"
  local keys=$3
  # The writer alone, then the hot set, then reader and writer at once.
  # The median of three runs: single runs on a busy 2-core machine vary by +-20%.
  local runs=()
  for i in 1 2 3; do
    runs+=("$("$BULK" --port "$PORT" --size 1m --count "$COUNT" --keys "$keys" --prefix "w1$i:" --op set --json | mbps set)")
  done
  local set_alone
  set_alone=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p)
  "$BULK" --port "$PORT" --size 1m --count 32 --prefix hot: --op set --json >/dev/null
  "$BULK" --port "$PORT" --size 1m --count "$COUNT" --keys "$keys" --prefix w2: --op set --json >"$WORK/w.json" &
  local wpid=$!
  local get_mbps
  get_mbps=$("$BULK" --port "$PORT" --size 1m --count "$COUNT" --keys 32 --prefix hot: --op get --json | mbps get)
  wait $wpid
  local set_during
  set_during=$(mbps set <"$WORK/w.json")
  local evicted
  evicted=$(redis-cli -p "$PORT" info stats | tr -d '\r' | sed -n 's/^evicted_keys://p')
  stop
  echo "$set_alone $get_mbps $set_during $evicted"
}

table="| server | phase | no eviction MB/s | eviction MB/s | ratio |
|---|---|---|---|---|"
for kind in stratakv redis; do
  read -r a1 a2 a3 e0 < <(run $kind 1gb 256)
  read -r b1 b2 b3 e1 < <(run $kind 128mb "$COUNT")
  [ "$e0" = 0 ] || echo "warning: $kind evicted $e0 keys in the no-eviction run" >&2
  ratio() { $PY -c "print('%.2fx' % ($2/$1 if $1 else 0))" "$1" "$2"; }
  table+="
| $kind | SET alone | $a1 | $b1 (evicted $e1 keys) | $(ratio "$a1" "$b1") |
| $kind | GET of a hot set, beside a writer | $a2 | $b2 | $(ratio "$a2" "$b2") |
| $kind | SET beside a reader | $a3 | $b3 | $(ratio "$a3" "$b3") |"
done
echo "$table"
[ -n "$OUT" ] && { echo; echo "$table"; } >>"$OUT"
exit 0
