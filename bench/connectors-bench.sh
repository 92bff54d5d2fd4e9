#!/usr/bin/env bash
# connectors-bench.sh: the inference-engine connectors (stratakv.integrations) driven as their
# engines drive them, and LMCache's own RESP pattern against redis-server, in one run.
#
# Starts stratakv-server (TCP + a Unix socket) and redis-server (TCP) on free ports, runs
# bench/connectors_bench.py (SGLang: pages of 64 tokens, batch_exists then batch_get_v1;
# LMCache: 256-token chunks, batched_async_contains then batched_get; Redis and stratakv over
# TCP through LMCache's redis connector pattern: two keys per chunk, EXISTS/SET/GET per key),
# prints a markdown report (load GB/s and p50/p99 per request), stops both.
#
# usage: bench/connectors-bench.sh [--quick] [--out FILE] [-- DRIVER ARGS...]
#   --quick        tiny sizes and 5 requests (a smoke test, a few seconds)
#   --out FILE     also append the report to FILE (e.g. bench/RESULTS.md)
#   DRIVER ARGS    passed to connectors_bench.py (--requests N, --pages P, --chunks C, --layers,
#                  --heads, --head-dim, --groups; --help there)
# environment:
#   BUILD_DIR        build directory with bin/ and python/ (default <repo>/build/release); the
#                    server and the Python module are built there when missing (REBUILD=1: always)
#   STRATAKV_SERVER  server binary (default $BUILD_DIR/bin/stratakv-server)
#   REDIS_SERVER     redis-server binary (default: on PATH)
#   THREADS          stratakv --threads (default 2)
#   MAXMEMORY        both servers' memory (default 6gb; the default run stores about 4 GB)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build/release}
THREADS=${THREADS:-2}
MAXMEMORY=${MAXMEMORY:-6gb}
OUT=""
DRIVER_ARGS=()

die() { echo "connectors-bench: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) DRIVER_ARGS+=(--quick) ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    --) shift; DRIVER_ARGS+=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done

STRATAKV_SERVER=${STRATAKV_SERVER:-$BUILD_DIR/bin/stratakv-server}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}
[[ -x $REDIS_SERVER ]] || die "redis-server not found (set REDIS_SERVER)"
if [[ ! -x $STRATAKV_SERVER || ! -d $BUILD_DIR/python/stratakv/integrations || ${REBUILD:-0} == 1 ]]; then
  [[ -f $BUILD_DIR/CMakeCache.txt ]] ||
    cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$BUILD_DIR" -j2 --target stratakv-server stratakv_python >&2
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d /tmp/stratakv-connectors-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_ping() {  # port
  for _ in $(seq 100); do
    redis-cli -p "$1" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  die "no server answered on port $1"
}

SPORT=$(free_port)
"$STRATAKV_SERVER" --port "$SPORT" --bind 127.0.0.1 --unixsocket "$WORK/stratakv.sock" \
  --threads "$THREADS" --maxmemory "$MAXMEMORY" --memory.capacity "$MAXMEMORY" \
  >"$WORK/stratakv.log" 2>&1 &
PIDS+=($!)
RPORT=$(free_port)
"$REDIS_SERVER" --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --maxmemory "$MAXMEMORY" \
  >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_ping "$SPORT"
wait_ping "$RPORT"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
TABLE=$(PYTHONPATH="$BUILD_DIR/python" /usr/bin/python3 "$SCRIPT_DIR/connectors_bench.py" \
  --unix "$WORK/stratakv.sock" --port "$SPORT" --redis-port "$RPORT" "${DRIVER_ARGS[@]}")
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

REPORT=$(cat <<MD
### Connectors run of $(date -u '+%Y-%m-%d %H:%M UTC')${DRIVER_ARGS[*]:+ (${DRIVER_ARGS[*]})}

- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, Linux $(uname -r); load average before: $LOAD_BEFORE, after: $LOAD_AFTER
- stratakv: $STRATAKV_SERVER --threads $THREADS (connectors over the Unix socket: shm fast path); redis: $REDIS_SERVER ($("$REDIS_SERVER" --version | grep -o 'v=[0-9.]*')), TCP, single thread; both --maxmemory $MAXMEMORY
- one client, requests back to back, every request all hits; load GB/s = 10^9 payload bytes per second of request time (lookup + load)

$TABLE
MD
)
echo "$REPORT"
if [[ -n $OUT ]]; then
  printf '\n%s\n' "$REPORT" >>"$OUT"
  echo "connectors-bench: appended to $OUT" >&2
fi
