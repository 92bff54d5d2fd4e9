#!/usr/bin/env bash
# compare-redis.sh: run the same load against redis-server and stratakv-server in one go
# and print a markdown table of each figure and the ratio stratakv/redis.
#
#   - 100-byte SET and GET with redis-benchmark (-t set,get -P 16 -c 50 -d 100 -q)
#   - SET and GET of 1 MiB and 32 MiB values with stratakv-bulkbench, 1 and 4 connections
#     (each preceded by a --verify pass that writes every key and checks it byte by byte;
#     the timed SETs then overwrite those keys)
#   - loopback TCP bandwidth (stratakv-loopback), and every large-value figure as a
#     fraction of it: no RESP server can beat the loopback here
#
# Both servers are started here on free 127.0.0.1 ports with the same maxmemory, Redis with
# `--save "" --appendonly no`, and are stopped on exit. The bench binaries are built when
# missing (configure build/release if needed, cmake --build of the two targets; a
# standalone build of bench/ in build/bench if the whole tree does not build yet).
#
# usage: bench/compare-redis.sh [--quick] [--out FILE] [--server PATH] [--threads N]
#                               [--maxmemory SIZE]
#   --quick          small counts (a smoke test, ~20 s); same as QUICK=1
#   --out FILE       also append the table to FILE (e.g. bench/RESULTS.md)
#   --server PATH    stratakv-server binary (default $STRATAKV_SERVER, else
#                    <repo>/build/release/bin/stratakv-server)
#   --threads N      stratakv --threads (default $THREADS, else nproc)
#   --maxmemory S    maxmemory of both servers (default $MAXMEMORY, else 4gb)
# environment (all optional):
#   STRATAKV_SERVER, THREADS, MAXMEMORY  as above
#   REDIS_SERVER     redis-server binary (default: redis-server on PATH)
#   REDIS_ARGS       extra redis-server arguments, e.g. "--io-threads 2"
#   STRATAKV_ARGS    extra stratakv-server arguments
#   BENCH_N          redis-benchmark -n (default 1000000; 100000 with --quick)
#   BULK_SIZES       value sizes for bulkbench (default "1m 32m")
#   BULK_CONNS       connection counts for bulkbench (default "1 4")
#   BULK_PIPELINE    bulkbench --pipeline (default 1)
#   BULK_BYTES       payload bytes per bulkbench phase (default 2g; 256m with --quick)
#   KEY_BUDGET       bytes of distinct keys per value size (default 1g; bounds memory)
#   LOOPBACK_RUNS    loopback runs, best one counts (default 3; 1 with --quick)
#   LOOPBACK_SECS    seconds per loopback run (default 2; 1 with --quick)
#   BUILD_DIR        build directory holding bin/ (default <repo>/build/release)
#   REBUILD=1        run cmake --build for the bench targets even if their binaries exist
#   KEEP_LOGS=1      keep the work directory (server logs, raw JSON) after the run
#
# To check the script itself without stratakv: STRATAKV_SERVER=$(command -v redis-server).
# Exit status: 0 when every benchmark ran and verified, 1 otherwise.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)

QUICK=${QUICK:-0}
OUT=""
STRATAKV_SERVER=${STRATAKV_SERVER:-}
THREADS=${THREADS:-$(nproc)}
MAXMEMORY=${MAXMEMORY:-4gb}

die() { echo "compare-redis: $*" >&2; exit 1; }
log() { echo "compare-redis: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    --out=*) OUT=${1#*=} ;;
    --server) STRATAKV_SERVER=${2:?--server needs a path}; shift ;;
    --server=*) STRATAKV_SERVER=${1#*=} ;;
    --threads) THREADS=${2:?--threads needs a number}; shift ;;
    --threads=*) THREADS=${1#*=} ;;
    --maxmemory) MAXMEMORY=${2:?--maxmemory needs a size}; shift ;;
    --maxmemory=*) MAXMEMORY=${1#*=} ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done

if [[ $QUICK == 1 ]]; then
  BENCH_N=${BENCH_N:-100000}
  BULK_BYTES=${BULK_BYTES:-256m}
  LOOPBACK_RUNS=${LOOPBACK_RUNS:-1}
  LOOPBACK_SECS=${LOOPBACK_SECS:-1}
else
  BENCH_N=${BENCH_N:-1000000}
  BULK_BYTES=${BULK_BYTES:-2g}
  LOOPBACK_RUNS=${LOOPBACK_RUNS:-3}
  LOOPBACK_SECS=${LOOPBACK_SECS:-2}
fi
BULK_SIZES=${BULK_SIZES:-"1m 32m"}
BULK_CONNS=${BULK_CONNS:-"1 4"}
BULK_PIPELINE=${BULK_PIPELINE:-1}
KEY_BUDGET=${KEY_BUDGET:-1g}
BUILD_DIR=${BUILD_DIR:-$REPO/build/release}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}
STRATAKV_SERVER=${STRATAKV_SERVER:-$BUILD_DIR/bin/stratakv-server}

[[ -x $REDIS_SERVER ]] || die "redis-server not found (set REDIS_SERVER)"
[[ -x $STRATAKV_SERVER ]] || die "stratakv server not found at $STRATAKV_SERVER (build it, or set STRATAKV_SERVER / --server)"
command -v redis-benchmark >/dev/null || die "redis-benchmark not found"
command -v redis-cli >/dev/null || die "redis-cli not found"

# "32m" -> bytes (binary units, as stratakv-bulkbench reads them).
to_bytes() {
  local v=${1,,}
  case "$v" in
    *kib|*kb|*k) echo $(( ${v%%[k]*} * 1024 )) ;;
    *mib|*mb|*m) echo $(( ${v%%[m]*} * 1024 * 1024 )) ;;
    *gib|*gb|*g) echo $(( ${v%%[g]*} * 1024 * 1024 * 1024 )) ;;
    *) echo $(( v )) ;;
  esac
}

# bytes -> "32 MiB" for labels.
human_size() {
  local b=$1
  if (( b >= 1048576 && b % 1048576 == 0 )); then echo "$(( b / 1048576 )) MiB"
  elif (( b >= 1024 && b % 1024 == 0 )); then echo "$(( b / 1024 )) KiB"
  else echo "$b B"; fi
}

# ---------------------------------------------------------------------------------------
# Bench binaries

build_bench() {
  local targets=(stratakv-bulkbench stratakv-loopback)
  if [[ ! -f $BUILD_DIR/build.ninja && ! -f $BUILD_DIR/Makefile ]]; then
    log "configuring $BUILD_DIR"
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -G Ninja >&2 || true
  fi
  if cmake --build "$BUILD_DIR" --target "${targets[@]}" >&2; then
    BENCH_BIN=$BUILD_DIR/bin
    return
  fi
  # The whole tree may not configure/build yet: build bench/ on its own.
  local alone=$REPO/build/bench
  log "full build failed; building bench/ standalone in $alone"
  if ! cmake -S "$REPO/bench" -B "$alone" -DCMAKE_BUILD_TYPE=Release -G Ninja >&2 ||
     ! cmake --build "$alone" --target "${targets[@]}" >&2; then
    die "cannot build the bench binaries"
  fi
  BENCH_BIN=$alone/bin
}

BENCH_BIN=$BUILD_DIR/bin
if [[ ${REBUILD:-0} == 1 || ! -x $BENCH_BIN/stratakv-bulkbench || ! -x $BENCH_BIN/stratakv-loopback ]]; then
  if [[ ${REBUILD:-0} != 1 && -f $REPO/build/bench/build.ninja ]] &&
     cmake --build "$REPO/build/bench" --target stratakv-bulkbench stratakv-loopback >&2; then
    BENCH_BIN=$REPO/build/bench/bin   # the standalone build of an earlier run, brought up to date
  else
    build_bench
  fi
fi
[[ -x $BENCH_BIN/stratakv-bulkbench && -x $BENCH_BIN/stratakv-loopback ]] || die "bench binaries missing in $BENCH_BIN"

# ---------------------------------------------------------------------------------------
# Servers

WORK=$(mktemp -d "${TMPDIR:-/tmp}/compare-redis.XXXXXX")
declare -A PID=() PORT=()
FAILED=0

stop_server() {
  local name=$1 pid=${PID[$1]:-}
  [[ -n $pid ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  PID[$name]=""
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_server redis
  stop_server stratakv
  if [[ ${KEEP_LOGS:-0} == 1 || $FAILED != 0 || $rc != 0 ]]; then
    log "logs kept in $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Private copies, so a rebuild of the build directory during the run cannot break it.
cp "$BENCH_BIN/stratakv-bulkbench" "$BENCH_BIN/stratakv-loopback" "$WORK/"
BULKBENCH=$WORK/stratakv-bulkbench
LOOPBACK=$WORK/stratakv-loopback

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
  local p
  for _ in $(seq 100); do
    p=$(( 20000 + RANDOM % 40000 ))
    [[ $p == "${PORT[redis]:-}" || $p == "${PORT[stratakv]:-}" ]] && continue
    port_in_use "$p" || { echo "$p"; return; }
  done
  die "no free port found"
}

alive() { [[ -n ${PID[$1]:-} ]] && kill -0 "${PID[$1]}" 2>/dev/null; }

# start_server NAME BINARY ARGS... : starts it on a free port and waits for PING.
start_server() {
  local name=$1; shift
  local bin=$1; shift
  local attempt port
  for attempt in 1 2 3; do
    port=$(pick_port)
    (cd "$WORK" && exec "$bin" --port "$port" --bind 127.0.0.1 "$@") >"$WORK/$name.log" 2>&1 &
    PID[$name]=$!
    PORT[$name]=$port
    for _ in $(seq 150); do
      if [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
        log "$name: pid ${PID[$name]}, port $port: $bin --port $port --bind 127.0.0.1 $(printf '%q ' "$@")"
        return 0
      fi
      alive "$name" || break
      sleep 0.1
    done
    log "$name did not start on port $port (attempt $attempt); log:"
    tail -n 20 "$WORK/$name.log" >&2 || true
    stop_server "$name"
  done
  die "cannot start $name"
}

# Whether the "stratakv" binary is really a redis-server (to test this script).
stratakv_is_redis() { [[ $(basename "$STRATAKV_SERVER") == redis-server* ]]; }

read -r -a redis_extra <<<"${REDIS_ARGS:-}"
read -r -a stratakv_extra <<<"${STRATAKV_ARGS:-}"
start_server redis "$REDIS_SERVER" --save "" --appendonly no --maxmemory "$MAXMEMORY" "${redis_extra[@]}"
if stratakv_is_redis; then
  log "STRATAKV_SERVER is a redis-server: --threads is not passed"
  start_server stratakv "$STRATAKV_SERVER" --save "" --appendonly no --maxmemory "$MAXMEMORY" "${stratakv_extra[@]}"
else
  # Values live in stratakv's memory region: as large as maxmemory, so both bound the same.
  start_server stratakv "$STRATAKV_SERVER" --maxmemory "$MAXMEMORY" --memory.capacity "$MAXMEMORY" \
    --threads "$THREADS" "${stratakv_extra[@]}"
fi

# ---------------------------------------------------------------------------------------
# Measurements. Results go to R[<server>:<metric>]; "" means the run failed.

declare -A R=()
ROWS=()          # metric ids, in table order
declare -A LABEL=() UNIT=() VS_LOOPBACK=()

add_row() { ROWS+=("$1"); LABEL[$1]=$2; UNIT[$1]=$3; VS_LOOPBACK[$1]=${4:-0}; }

# JSON field of one phase in a bulkbench line: jget JSON PHASE FIELD
jget() { sed -nE "s/.*\"$2\":\{[^}]*\"$3\":([-0-9.eE+]+).*/\1/p" <<<"$1"; }

# Loopback bandwidth: LOOPBACK_RUNS runs before the server benchmarks and as many after;
# the best one counts (on a shared or virtual machine single runs vary a lot).
LOOPBACK_MBS=0
LOOPBACK_ALL=()
measure_loopback() {
  local line mbs
  log "loopback: $LOOPBACK_RUNS x ${LOOPBACK_SECS}s"
  for _ in $(seq "$LOOPBACK_RUNS"); do
    line=$("$LOOPBACK" --seconds "$LOOPBACK_SECS" --json) || die "stratakv-loopback failed"
    mbs=$(sed -nE 's/.*"mb_per_sec":([0-9.]+).*/\1/p' <<<"$line")
    LOOPBACK_ALL+=("$(awk -v m="$mbs" 'BEGIN{printf "%.2f", m/1000}')")
    LOOPBACK_MBS=$(awk -v a="$LOOPBACK_MBS" -v b="$mbs" 'BEGIN{print (b>a)?b:a}')
  done
  LOOPBACK_GBS=$(awk -v m="$LOOPBACK_MBS" 'BEGIN{printf "%.2f", m/1000}')
  log "loopback: best $LOOPBACK_GBS GB/s (runs: ${LOOPBACK_ALL[*]})"
}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
measure_loopback

# 100-byte SET/GET with redis-benchmark.
add_row small_set "SET 100 B (redis-benchmark -P 16 -c 50)" "req/s"
add_row small_get "GET 100 B (redis-benchmark -P 16 -c 50)" "req/s"
for srv in redis stratakv; do
  log "$srv: redis-benchmark -t set,get -n $BENCH_N -P 16 -c 50 -d 100 -q"
  out=""
  if alive "$srv"; then
    out=$(redis-benchmark -h 127.0.0.1 -p "${PORT[$srv]}" -t set,get -n "$BENCH_N" -P 16 -c 50 -d 100 -q 2>&1 |
          tr '\r' '\n') || true
  fi
  echo "$out" >"$WORK/$srv.redis-benchmark.txt"
  R[$srv:small_set]=$(awk '/^SET: [0-9.]+ requests per second/ {v=$2} END{print v}' <<<"$out")
  R[$srv:small_get]=$(awk '/^GET: [0-9.]+ requests per second/ {v=$2} END{print v}' <<<"$out")
  [[ -n ${R[$srv:small_set]} && -n ${R[$srv:small_get]} ]] || { log "$srv: redis-benchmark failed:"; tail -n 5 <<<"$out" >&2; FAILED=1; }
done

# Large values with stratakv-bulkbench.
budget=$(to_bytes "$KEY_BUDGET")
bulk_total=$(to_bytes "$BULK_BYTES")
for size in $BULK_SIZES; do
  bytes=$(to_bytes "$size")
  (( bytes > 0 )) || die "bad size $size"
  for c in $BULK_CONNS; do
    count=$(( bulk_total / bytes ))
    (( count < c * 2 )) && count=$(( c * 2 ))
    keys=$(( budget / bytes ))
    (( keys < 1 )) && keys=1
    (( keys > count )) && keys=$count
    id="${size}_c${c}"
    desc="$(human_size "$bytes"), $c conn"; [[ $c != 1 ]] && desc+="s"; [[ $BULK_PIPELINE != 1 ]] && desc+=", pipeline $BULK_PIPELINE"
    add_row "set_$id" "SET $desc" "MB/s" 1
    add_row "get_$id" "GET $desc" "MB/s" 1
    for srv in redis stratakv; do
      R[$srv:set_$id]=""; R[$srv:get_$id]=""
      alive "$srv" || { log "$srv is not running"; FAILED=1; continue; }
      common=(--host 127.0.0.1 --port "${PORT[$srv]}" --size "$size" --keys "$keys"
              --connections "$c" --pipeline "$BULK_PIPELINE" --prefix "cmp:$size:" --op both --json)
      # Verify pass: writes every key once with its pattern, reads and checks it.
      log "$srv: bulkbench --size $size --connections $c --verify (count $keys)"
      if ! vline=$("$BULKBENCH" "${common[@]}" --count "$keys" --verify 2>>"$WORK/$srv.bulkbench.err"); then
        log "$srv: verify FAILED at size $size: $vline"
        echo "$vline" >>"$WORK/$srv.bulkbench.json"
        FAILED=1
        continue
      fi
      log "$srv: bulkbench --size $size --connections $c --count $count --keys $keys"
      line=$("$BULKBENCH" "${common[@]}" --count "$count" 2>>"$WORK/$srv.bulkbench.err") || {
        log "$srv: bulkbench FAILED: $line"; FAILED=1; }
      echo "$line" >>"$WORK/$srv.bulkbench.json"
      if [[ $line == *'"ok":true'* ]]; then
        R[$srv:set_$id]=$(jget "$line" set mb_per_sec)
        R[$srv:get_$id]=$(jget "$line" get mb_per_sec)
      fi
    done
  done
  # Free this size's values before the next size (best effort: the server may lack FLUSHALL).
  for srv in redis stratakv; do
    if alive "$srv"; then redis-cli -h 127.0.0.1 -p "${PORT[$srv]}" flushall >/dev/null 2>&1 || true; fi
  done
done

for srv in redis stratakv; do
  alive "$srv" || { log "$srv died during the run; log: $WORK/$srv.log"; FAILED=1; }
done
measure_loopback
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------------------
# Report

fmt_num() { awk -v v="$1" 'BEGIN{ if (v=="") print "FAIL"; else if (v>=1000) printf "%.0f", v; else printf "%.1f", v }'; }
fmt_ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a=="" || b=="" || b==0) print "n/a"; else printf "%.2fx", a/b }'; }
fmt_pct() { awk -v a="$1" -v l="$LOOPBACK_MBS" 'BEGIN{ if (a=="" || l==0) print "n/a"; else printf "%.0f%%", 100*a/l }'; }

redis_version=$("$REDIS_SERVER" --version 2>/dev/null | sed -nE 's/.*v=([0-9.]+).*/\1/p')
cpu=$(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n 1)
if stratakv_is_redis; then stratakv_desc="$STRATAKV_SERVER (a redis-server: script self-test)"
else stratakv_desc="$STRATAKV_SERVER --threads $THREADS"; fi

report() {
  echo "## stratakv vs Redis, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- machine: ${cpu:-unknown CPU}, $(nproc) cores, Linux $(uname -r); load average before: $LOAD_BEFORE, after: $LOAD_AFTER"
  echo "- redis: $REDIS_SERVER ${redis_version:+(v$redis_version)} ${REDIS_ARGS:-}"
  echo "- stratakv: $stratakv_desc ${STRATAKV_ARGS:-}"
  echo "- both: 127.0.0.1, maxmemory $MAXMEMORY; redis-benchmark -n $BENCH_N; bulkbench $BULK_BYTES per phase, pipeline $BULK_PIPELINE, SETs overwrite verified keys"
  echo "- loopback TCP (stratakv-loopback, 1 stream, best of ${#LOOPBACK_ALL[@]}: ${LOOPBACK_ALL[*]} GB/s): **$LOOPBACK_GBS GB/s**"
  echo
  echo "| benchmark | unit | redis | stratakv | stratakv/redis | redis / loopback | stratakv / loopback |"
  echo "|---|---|--:|--:|--:|--:|--:|"
  local id r s
  for id in "${ROWS[@]}"; do
    r=${R[redis:$id]:-}; s=${R[stratakv:$id]:-}
    if [[ ${VS_LOOPBACK[$id]} == 1 ]]; then
      printf '| %s | %s | %s | %s | %s | %s | %s |\n' "${LABEL[$id]}" "${UNIT[$id]}" "$(fmt_num "$r")" \
        "$(fmt_num "$s")" "$(fmt_ratio "$s" "$r")" "$(fmt_pct "$r")" "$(fmt_pct "$s")"
    else
      printf '| %s | %s | %s | %s | %s | | |\n' "${LABEL[$id]}" "${UNIT[$id]}" "$(fmt_num "$r")" \
        "$(fmt_num "$s")" "$(fmt_ratio "$s" "$r")"
    fi
  done
  echo
  echo "MB/s = 10^6 payload bytes per second; GB/s = 10^9. FAIL: the run errored or did not verify."
  if [[ $OVER_LOOPBACK == 1 ]]; then
    echo "Figures above 100% of loopback mean the machine was busier during the loopback runs than"
    echo "during that benchmark (check the load average): treat this run's fractions as noisy."
  fi
  echo
}

OVER_LOOPBACK=0
for id in "${ROWS[@]}"; do
  [[ ${VS_LOOPBACK[$id]} == 1 ]] || continue
  for srv in redis stratakv; do
    v=${R[$srv:$id]:-}
    [[ -n $v ]] && awk -v a="$v" -v l="$LOOPBACK_MBS" 'BEGIN{exit !(a > l)}' && OVER_LOOPBACK=1
  done
done

report
if [[ -n $OUT ]]; then
  report >>"$OUT"
  log "appended to $OUT"
fi
[[ $FAILED == 0 ]] || { log "some benchmarks failed; logs in $WORK"; exit 1; }
