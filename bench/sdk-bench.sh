#!/usr/bin/env bash
# sdk-bench.sh: libstratakv (shm and RESP) against redis-server and memcpy, in one run.
#
# Starts stratakv-server (TCP + a Unix socket) and redis-server (TCP) on free ports, runs
# stratakv-sdk-bench (bench/sdk_bench.cc) against both, prints a markdown report, stops both.
#
# usage: bench/sdk-bench.sh [--quick] [--out FILE]
#   --quick        0.2 s per figure instead of 1 s (a smoke test)
#   --out FILE     also append the report to FILE (e.g. bench/RESULTS.md)
# environment:
#   BUILD_DIR        build directory with bin/ (default <repo>/build/release); the bench and
#                    the server are built there when missing (REBUILD=1: always)
#   STRATAKV_SERVER  server binary (default $BUILD_DIR/bin/stratakv-server)
#   REDIS_SERVER     redis-server binary (default: on PATH)
#   THREADS          stratakv --threads (default 2)
#   SECONDS_PER      seconds per figure (default 1)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build/release}
THREADS=${THREADS:-2}
SECONDS_PER=${SECONDS_PER:-1}
OUT=""

die() { echo "sdk-bench: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) SECONDS_PER=0.2 ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done

BENCH=$BUILD_DIR/bin/stratakv-sdk-bench
STRATAKV_SERVER=${STRATAKV_SERVER:-$BUILD_DIR/bin/stratakv-server}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}
[[ -x $REDIS_SERVER ]] || die "redis-server not found (set REDIS_SERVER)"
if [[ ! -x $BENCH || ! -x $STRATAKV_SERVER || ${REBUILD:-0} == 1 ]]; then
  [[ -f $BUILD_DIR/CMakeCache.txt ]] ||
    cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$BUILD_DIR" -j2 --target stratakv-sdk-bench stratakv-server >&2
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d /tmp/stratakv-sdk-bench.XXXXXX)
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
  --threads "$THREADS" --maxmemory 4gb --memory.capacity 4gb >"$WORK/stratakv.log" 2>&1 &
PIDS+=($!)
RPORT=$(free_port)
"$REDIS_SERVER" --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --maxmemory 4gb \
  >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_ping "$SPORT"
wait_ping "$RPORT"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
TABLE=$("$BENCH" --unix "$WORK/stratakv.sock" --port "$SPORT" --redis-port "$RPORT" --seconds "$SECONDS_PER")
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

REPORT=$(cat <<MD
### SDK run of $(date -u '+%Y-%m-%d %H:%M UTC')

- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, Linux $(uname -r); load average before: $LOAD_BEFORE, after: $LOAD_AFTER
- stratakv: $STRATAKV_SERVER --threads $THREADS (TCP and a Unix socket); redis: $REDIS_SERVER ($("$REDIS_SERVER" --version | grep -o 'v=[0-9.]*')), TCP, single thread
- $SECONDS_PER s per figure after a warm-up; every get path checked byte for byte first; GB/s = 10^9 payload bytes/s
- x redis-server: against the faster redis-server client of the same workload and op (the SDK's RESP client or hiredis)

$TABLE
MD
)
echo "$REPORT"
if [[ -n $OUT ]]; then
  printf '\n%s\n' "$REPORT" >>"$OUT"
  echo "sdk-bench: appended to $OUT" >&2
fi
