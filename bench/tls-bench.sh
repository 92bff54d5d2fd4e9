#!/usr/bin/env bash
# tls-bench.sh: the cost of TLS, measured against plain TCP in the same run on one server.
#
#   - 32 MiB SET and GET (stratakv-bulkbench, 1 and 4 connections, after a --verify pass over
#     TLS that checks every byte): MB/s over tls-port and over the plain port, and the ratio
#   - 100-byte SET and GET (redis-benchmark -P 16 -c 50 -d 100): requests/s, both ports
#   - with BASELINE_SERVER=<another stratakv-server>: the same 100-byte load over plain TCP on
#     it and on this server, AB_ROUNDS (10) runs each, alternating, medians and bests: a change
#     of the plain path shows (before/after a patch)
#
# One stratakv-server (then one redis-server, for reference) is started on free 127.0.0.1 ports
# with tls-port on, with a throw-away CA and certificates made here with openssl (the client
# shows one: tls-auth-clients yes), and stopped on exit. Every figure is the best of RUNS runs;
# the client of both ports is the same program (stratakv-bulkbench, with --tls on tls-port;
# redis-benchmark for 100 B), so its own costs are on both sides of the ratio.
#
# usage: bench/tls-bench.sh [--server PATH] [--out FILE]
#   --server PATH   stratakv-server (default $STRATAKV_SERVER, else <repo>/build/release/bin/...);
#                   stratakv-bulkbench is taken from the same directory (or $BULKBENCH)
#   --out FILE      also append the markdown table to FILE (e.g. bench/RESULTS.md)
# environment (all optional):
#   THREADS          stratakv --threads (default 2)
#   RUNS             runs per figure, best counts (default 3)
#   BIG_N            32 MiB requests per run (default 64)
#   SMALL_N          100-byte requests per run (default 1000000)
#   BASELINE_SERVER  a second stratakv-server for the plain 100-byte before/after check
#   STRATAKV_ARGS    extra stratakv-server arguments
#   REDIS=0          skip redis-server (by default it is measured the same way, TLS vs plain,
#                    after stratakv, when redis-server is installed; REDIS_SERVER: its path)
# Exit status: 0 when every run completed, 1 otherwise.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
STRATAKV_SERVER=${STRATAKV_SERVER:-$REPO/build/release/bin/stratakv-server}
OUT=""
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
BIG_N=${BIG_N:-64}
SMALL_N=${SMALL_N:-1000000}
BASELINE_SERVER=${BASELINE_SERVER:-}
AB_ROUNDS=${AB_ROUNDS:-10}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}
REDIS=${REDIS:-1}
[[ -x $REDIS_SERVER ]] || REDIS=0

die() { echo "tls-bench: $*" >&2; exit 1; }
log() { echo "tls-bench: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --server) STRATAKV_SERVER=${2:?--server needs a path}; shift ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done

[[ -x $STRATAKV_SERVER ]] || die "no stratakv-server at $STRATAKV_SERVER (--server)"
BULKBENCH=${BULKBENCH:-$(dirname "$STRATAKV_SERVER")/stratakv-bulkbench}
[[ -x $BULKBENCH ]] || die "no stratakv-bulkbench at $BULKBENCH (build it, or set BULKBENCH)"
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (redis-tools)"
command -v openssl >/dev/null || die "openssl not found"

WORK=$(mktemp -d /tmp/tls-bench.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ---- certificates: a CA, a server certificate for 127.0.0.1, a client certificate ----
(
  cd "$WORK"
  key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${key[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=tls-bench-ca
  printf 'subjectAltName=IP:127.0.0.1\n' > ext.cnf
  for n in server client; do
    openssl req "${key[@]}" -keyout $n.key -out $n.csr -subj /CN=$n
    openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $n.crt -days 2 \
      -extfile ext.cnf
  done
) >/dev/null 2>&1 || die "openssl could not make the certificates"
TLS_CLIENT=(--tls --cacert "$WORK/ca.crt" --cert "$WORK/client.crt" --key "$WORK/client.key")

# best_mbs <port> <bulkbench args...>: the best MB/s of SET and of GET over RUNS runs of 32 MiB
# values, printed as "SET <MB/s>" and "GET <MB/s>" lines.
best_mbs() {
  local port=$1; shift
  for _ in $(seq "$RUNS"); do
    "$BULKBENCH" --port "$port" --size 32m --count "$BIG_N" --keys 8 --op both --json "$@" ||
      die "stratakv-bulkbench failed on port $port"
  done | python3 -c '
import json, sys
best = {"SET": 0.0, "GET": 0.0}
for line in sys.stdin:
    r = json.loads(line)
    for op in ("set", "get"):
        best[op.upper()] = max(best[op.upper()], r[op]["mb_per_sec"])
for op in ("SET", "GET"):
    print(op, "%.0f" % best[op])'
}

# start <binary> <name> [args...]: starts a server on a free plain port, waits for PING; sets PORT.
start() {
  local bin=$1 name=$2; shift 2
  PORT=$(free_port)
  "$bin" --bind 127.0.0.1 --port "$PORT" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG && return 0
    sleep 0.1
  done
  cat "$WORK/$name.log" >&2
  die "$name did not start"
}

# best_rps <port> <redis-benchmark args...>: the best requests/s of SET and of GET over RUNS
# runs, printed as "SET <rps>" and "GET <rps>" lines.
best_rps() {
  local port=$1; shift
  local -A best=()
  for _ in $(seq "$RUNS"); do
    while IFS=, read -r test rps _; do
      test=${test//\"/}; rps=${rps//\"/}
      [[ $test == test ]] && continue
      if [[ -z ${best[$test]:-} ]] || awk "BEGIN{exit !($rps > ${best[$test]})}"; then
        best[$test]=$rps
      fi
    done < <(redis-benchmark -h 127.0.0.1 -p "$port" "$@" --csv 2>/dev/null)
  done
  [[ -n ${best[SET]:-} && -n ${best[GET]:-} ]] || die "redis-benchmark failed on port $port"
  echo "SET ${best[SET]}"
  echo "GET ${best[GET]}"
}

SMALL_ARGS=(-t set,get -d 100 -n "$SMALL_N" -c 50 -P 16 -r 100000)
ROWS=()
row() { ROWS+=("$1"); echo "$1" >&2; }
ratio() { awk "BEGIN{printf \"%.2f\", $1 / $2}"; }

# measure <name> <plain port> <tls port>: every figure of one server, plain then TLS.
measure() {
  local name=$1 plain_port=$2 tls_port=$3 c t args
  redis-cli "${TLS_CLIENT[@]}" -p "$tls_port" PING | grep -q PONG || die "$name: no PONG over TLS"
  # Every byte of 32 MiB values over TLS, written and read back, checked.
  "$BULKBENCH" --port "$tls_port" --size 32m --count 16 --keys 8 --connections 2 --verify \
    "${TLS_CLIENT[@]}" >/dev/null || die "$name: the --verify pass over TLS failed"
  for c in 1 4; do
    log "$name: 32 MiB SET/GET, $c connection(s): plain, then TLS"
    declare -A plain=() tls=()
    while read -r t v; do plain[$t]=$v; done < <(best_mbs "$plain_port" --connections "$c")
    while read -r t v; do tls[$t]=$v; done < <(best_mbs "$tls_port" --connections "$c" "${TLS_CLIENT[@]}")
    [[ -n ${plain[GET]:-} && -n ${tls[GET]:-} ]] || die "$name: stratakv-bulkbench failed"
    for t in SET GET; do
      row "| $name | 32 MiB $t, $c conn | ${plain[$t]} MB/s | ${tls[$t]} MB/s | $(ratio "${tls[$t]}" "${plain[$t]}") |"
    done
  done
  log "$name: 100-byte SET/GET, -P 16 -c 50: plain, then TLS"
  declare -A splain=() stls=()
  while read -r t v; do splain[$t]=$v; done < <(best_rps "$plain_port" "${SMALL_ARGS[@]}")
  while read -r t v; do stls[$t]=$v; done < <(best_rps "$tls_port" "${TLS_CLIENT[@]}" "${SMALL_ARGS[@]}")
  [[ -n ${splain[GET]:-} && -n ${stls[GET]:-} ]] || die "$name: redis-benchmark failed"
  for t in SET GET; do
    row "| $name | 100 B $t, -P 16 -c 50 | ${splain[$t]} rps | ${stls[$t]} rps | $(ratio "${stls[$t]}" "${splain[$t]}") |"
  done
}

TLS_FILES=(--tls-cert-file "$WORK/server.crt" --tls-key-file "$WORK/server.key"
           --tls-ca-cert-file "$WORK/ca.crt")
TLS_PORT=$(free_port)
start "$STRATAKV_SERVER" stratakv --threads "$THREADS" --memory.capacity 2gb \
  --maxmemory-policy noeviction --tls-port "$TLS_PORT" "${TLS_FILES[@]}" ${STRATAKV_ARGS:-}
PLAIN_PORT=$PORT
measure stratakv "$PLAIN_PORT" "$TLS_PORT"

if [[ $REDIS == 1 ]]; then
  REDIS_TLS_PORT=$(free_port)
  start "$REDIS_SERVER" redis --save "" --appendonly no --tls-port "$REDIS_TLS_PORT" "${TLS_FILES[@]}"
  REDIS_PORT=$PORT
  measure redis-server "$REDIS_PORT" "$REDIS_TLS_PORT"
fi

BASE_ROWS=()
if [[ -n $BASELINE_SERVER ]]; then
  [[ -x $BASELINE_SERVER ]] || die "no baseline server at $BASELINE_SERVER"
  start "$BASELINE_SERVER" baseline --threads "$THREADS" --memory.capacity 2gb \
    --maxmemory-policy noeviction ${STRATAKV_ARGS:-}
  BASE_PORT=$PORT
  log "100-byte SET/GET over plain TCP: baseline vs this server, $AB_ROUNDS alternating rounds"
  for _ in $(seq "$AB_ROUNDS"); do
    for side in base this; do
      port=$PLAIN_PORT; [[ $side == base ]] && port=$BASE_PORT
      redis-benchmark -h 127.0.0.1 -p "$port" "${SMALL_ARGS[@]}" --csv 2>/dev/null |
        grep -v '"test"' | sed "s/^/$side,/"
    done
  done > "$WORK/ab.csv"
  while IFS= read -r line; do BASE_ROWS+=("$line"); echo "$line" >&2; done < <(python3 -c '
import csv, statistics, sys
d = {}
for row in csv.reader(open(sys.argv[1])):
    d.setdefault((row[0], row[1]), []).append(float(row[2]))
for t in ("SET", "GET"):
    a, b = d[("base", t)], d[("this", t)]
    ma, mb = statistics.median(a), statistics.median(b)
    print("| 100 B %s, -P 16 -c 50 | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |"
          % (t, ma, mb, mb / ma, max(a), max(b), max(b) / max(a)))' "$WORK/ab.csv")
fi

{
  echo
  echo "#### Run of $(date -u '+%Y-%m-%d %H:%M') UTC ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), stratakv --threads $THREADS, best of $RUNS)"
  echo
  echo "| server | load | plain TCP | TLS | TLS / plain |"
  echo "|---|---|---:|---:|---:|"
  printf '%s\n' "${ROWS[@]}"
  if [[ ${#BASE_ROWS[@]} -gt 0 ]]; then
    echo
    echo "The plain path before and after ($AB_ROUNDS alternating runs each; baseline: $BASELINE_SERVER):"
    echo
    echo "| load (plain TCP) | baseline median rps | this build | this / baseline | baseline best | this build | this / baseline |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${BASE_ROWS[@]}"
  fi
} | tee -a "${OUT:-/dev/null}"
