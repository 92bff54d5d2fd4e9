#!/usr/bin/env bash
# kvcache-compare.sh: the KV-cache (prefix cache) workload of stratakv-bench against
# redis-server and stratakv in one run, with a working set several times the memory, and the
# figures side by side with ratios.
#
# Targets (each run on a freshly started server, so every run starts cold):
#   redis          redis-server, maxmemory M, allkeys-lru, no persistence; --protocol resp
#   stratakv-resp  stratakv-server, maxmemory M = memory.capacity M, allkeys-lru, SSD tier on
#                  when the build has it; --protocol resp (TCP, like redis)
#   stratakv-fast  the same server; --protocol fast: the C++ SDK on the Unix socket (KV.PREFIX /
#                  KV.MGET / KV.MPUT from and into an alloc_buffer)
#   stratakv-fast-raw  (only when named in TARGETS) --protocol fast-raw: the same commands
#                  without the SDK, to separate the SDK's overhead from the server's cost
#   stratakv-resp-wait, stratakv-fast-wait  (only when named in TARGETS) the same with
#                  --tiering.ssd.admission wait (every victim written, writes wait for the
#                  disk): the SSD tier's admission against the waiting mode in one run
# Workloads:
#   conv-SIZE      conversations (shared system prompt, users with several rounds each) with
#                  chunks of SIZE bytes (256 tokens x SIZE/256 bytes per token), as many users
#                  as make WS_FACTOR x M of distinct chunks; one run per size in VALUE_SIZES
#   trace          the Mooncake trace TRACE (TRACE_REQUESTS requests, timestamps compressed),
#                  one block = TRACE_VALUE bytes
# The SSD tier (`--tiering.ssd.enabled yes --tiering.ssd.path DIR`) is detected: when the server
# refuses the option it runs memory-only and the report says so.
#
# usage: bench/kvcache-compare.sh [--quick] [--out FILE] [--json-dir DIR] [--plot]
#   --quick         small sizes and counts (a smoke test, about a minute)
#   --out FILE      also append the markdown report to FILE (e.g. bench/RESULTS.md)
#   --json-dir DIR  keep every run's JSON report in DIR (default: the work dir, deleted)
#   --plot          also draw the charts (bench/plot.py) into PLOT_DIR
# environment (all optional):
#   MAXMEMORY      memory of every server (default 1gb; 256mb with --quick)
#   WS_FACTOR      distinct data / MAXMEMORY (default 4)
#   VALUE_SIZES    chunk sizes of the conversation runs (default "1m 8m 32m"; "256k 2m" quick;
#                  "none" = no conversation runs)
#   TRACE          trace file (default <repo>/../shared/traces/synthetic_trace.jsonl; "" = none)
#   TRACE_REQUESTS requests replayed (default 0 = all: 3,993 requests, 43,924 distinct blocks,
#                  so 5.4 GiB at 128 KiB; 1000 quick)
#   TRACE_VALUE    bytes per trace block (default 128k; 64k quick)
#   TRACE_SPEEDUP  stratakv-bench --speedup of the trace runs (default 0: as fast as possible;
#                  1 = the recorded timestamps, about 17 minutes for the whole trace)
#   STREAMS        concurrent request streams (default 4)
#   THREADS        stratakv --threads (default nproc)
#   TARGETS        subset of "redis stratakv-resp stratakv-fast" (default all three), and/or
#                  stratakv-fast-raw
#   BENCH_ARGS     extra stratakv-bench arguments for every run, e.g. --prefill-tokens-per-s R
#                  (the modeled TTFT's prefill rate; default 10000, an A100 estimate for
#                  Llama-3-8B: bench/README.md)
#   REDIS_SERVER, REDIS_ARGS, STRATAKV_SERVER, STRATAKV_ARGS, SSD_ARGS (extra SSD options)
#   BUILD_DIR      build tree with bin/stratakv-bench and bin/stratakv-server (default
#                  <repo>/build/release; built when missing)
#   PLOT_DIR       where --plot writes PNGs (default: the --json-dir, else ./kvcache-plots;
#                  the charts in bench/ were made by running bench/plot.py by hand)
#   KEEP_LOGS=1    keep the work directory
# Exit status: 0 when every run completed clean (no error, no mismatch), 1 otherwise.

set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
PY=/usr/bin/python3

QUICK=${QUICK:-0}
OUT=""
JSON_DIR=""
PLOT=0
die() { echo "kvcache-compare: $*" >&2; exit 1; }
log() { echo "kvcache-compare: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    --json-dir) JSON_DIR=${2:?--json-dir needs a directory}; shift ;;
    --plot) PLOT=1 ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done

if [[ $QUICK == 1 ]]; then
  MAXMEMORY=${MAXMEMORY:-256mb}; VALUE_SIZES=${VALUE_SIZES:-"256k 2m"}
  TRACE_REQUESTS=${TRACE_REQUESTS:-1000}; TRACE_VALUE=${TRACE_VALUE:-64k}
else
  MAXMEMORY=${MAXMEMORY:-1gb}; VALUE_SIZES=${VALUE_SIZES:-"1m 8m 32m"}
  TRACE_REQUESTS=${TRACE_REQUESTS:-0}; TRACE_VALUE=${TRACE_VALUE:-128k}
fi
WS_FACTOR=${WS_FACTOR:-4}
TRACE_SPEEDUP=${TRACE_SPEEDUP:-0}
[[ $VALUE_SIZES == none ]] && VALUE_SIZES=""
TRACE=${TRACE-$REPO/../shared/traces/synthetic_trace.jsonl}
STREAMS=${STREAMS:-4}
THREADS=${THREADS:-$(nproc)}
TARGETS=${TARGETS:-"redis stratakv-resp stratakv-fast"}
BUILD_DIR=${BUILD_DIR:-$REPO/build/release}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}
STRATAKV_SERVER=${STRATAKV_SERVER:-$BUILD_DIR/bin/stratakv-server}

[[ -x $REDIS_SERVER ]] || die "redis-server not found (set REDIS_SERVER)"
command -v redis-cli >/dev/null || die "redis-cli not found"
if [[ ! -x $BUILD_DIR/bin/stratakv-bench || ! -x $STRATAKV_SERVER ]]; then
  [[ -f $BUILD_DIR/build.ninja ]] || cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$BUILD_DIR" --target stratakv-bench stratakv-server >&2
fi
[[ -x $STRATAKV_SERVER ]] || die "no stratakv server at $STRATAKV_SERVER"
STRATAKV_SERVER=$(realpath "$STRATAKV_SERVER")
BUILD_DIR=$(realpath "$BUILD_DIR")

to_bytes() {
  local v=${1,,}
  case "$v" in
    *k|*kb|*kib) echo $(( ${v%%k*} * 1024 )) ;;
    *m|*mb|*mib) echo $(( ${v%%m*} * 1024 * 1024 )) ;;
    *g|*gb|*gib) echo $(( ${v%%g*} * 1024 * 1024 * 1024 )) ;;
    *) echo $(( v )) ;;
  esac
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvcache-compare.XXXXXX")
if [[ -n $JSON_DIR ]]; then PLOT_DIR=${PLOT_DIR:-$JSON_DIR}; else JSON_DIR=$WORK/json; fi
PLOT_DIR=${PLOT_DIR:-$PWD/kvcache-plots}
mkdir -p "$JSON_DIR"
cp "$BUILD_DIR/bin/stratakv-bench" "$WORK/"  # a rebuild during the run cannot break it
BENCH=$WORK/stratakv-bench
PID=""
FAILED=0

stop_server() {
  [[ -n $PID ]] || return 0
  if kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null || true
  fi
  wait "$PID" 2>/dev/null || true
  PID=""
}
cleanup() {
  local rc=$?
  trap - EXIT
  stop_server
  if [[ ${KEEP_LOGS:-0} == 1 || $rc != 0 || $FAILED != 0 ]]; then log "logs kept in $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_server NAME BINARY ARGS...: on a free port; true once it answers PING.
start_server() {
  local name=$1 bin=$2; shift 2
  PORT=$(free_port)
  (cd "$WORK" && exec "$bin" --port "$PORT" --bind 127.0.0.1 "$@") >"$WORK/$name.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do
    [[ $(redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null) == PONG ]] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.05
  done
  stop_server
  return 1
}

SOCK=$WORK/stratakv.sock
SSD_NOTE=""
SSD_ON=0
read -r -a redis_extra <<<"${REDIS_ARGS:-}"
read -r -a stratakv_extra <<<"${STRATAKV_ARGS:-}"
read -r -a ssd_extra <<<"${SSD_ARGS:-}"
read -r -a bench_extra <<<"${BENCH_ARGS:-}"

start_target() {  # target
  if [[ $1 == redis ]]; then
    start_server redis "$REDIS_SERVER" --save "" --appendonly no --maxmemory "$MAXMEMORY" \
      --maxmemory-policy allkeys-lru "${redis_extra[@]}" || die "redis-server did not start: $(tail -5 "$WORK/redis.log")"
    return
  fi
  local base=(--unixsocket "$SOCK" --maxmemory "$MAXMEMORY" --memory.capacity "$MAXMEMORY"
              --maxmemory-policy allkeys-lru --threads "$THREADS" "${stratakv_extra[@]}")
  local mode=()
  [[ $1 == *-wait ]] && mode=(--tiering.ssd.admission wait)
  if [[ $SSD_ON != -1 ]]; then
    rm -rf "$WORK/ssd" && mkdir -p "$WORK/ssd"
    if start_server stratakv "$STRATAKV_SERVER" "${base[@]}" --tiering.ssd.enabled yes \
         --tiering.ssd.path "$WORK/ssd" "${ssd_extra[@]}" "${mode[@]}"; then
      SSD_ON=1
      SSD_NOTE="SSD tier on (tiering.ssd.path in the work dir ${SSD_ARGS:+, $SSD_ARGS})"
      return
    fi
    SSD_ON=-1
    local why
    why=$(grep -m1 -i -E 'unknown|error' "$WORK/stratakv.log" | cut -c1-100 || true)
    SSD_NOTE="SSD tier not available in this build (the server refused --tiering.ssd.enabled: \"$why\"): stratakv ran memory-only"
    log "$SSD_NOTE"
  fi
  start_server stratakv "$STRATAKV_SERVER" "${base[@]}" || die "stratakv did not start: $(tail -5 "$WORK/stratakv.log")"
}

# run_bench WORKLOAD TARGET ARGS...: one run on a fresh server; its JSON in $JSON_DIR.
RUNS=()
run_bench() {
  local workload=$1 target=$2; shift 2
  local json=$JSON_DIR/$workload-$target.json proto=(--protocol resp)
  start_target "$target"
  [[ $target == stratakv-fast || $target == stratakv-fast-wait ]] && proto=(--protocol fast --unix "$SOCK")
  [[ $target == stratakv-fast-raw ]] && proto=(--protocol fast-raw --unix "$SOCK")
  log "$workload on $target: stratakv-bench ${proto[*]} $*"
  if ! "$BENCH" --port "$PORT" "${proto[@]}" --streams "$STREAMS" --label "$workload/$target" \
         --json "$json" --progress lines --progress-secs 10 "$@" "${bench_extra[@]}" >"$WORK/$workload-$target.txt" 2>&1; then
    log "$workload on $target FAILED:"; tail -n 8 "$WORK/$workload-$target.txt" >&2; FAILED=1
  fi
  grep -E '^(requests|chunks|throughput|result)' "$WORK/$workload-$target.txt" | sed 's/^/    /' >&2 || true
  [[ $target == stratakv-* ]] && redis-cli -p "$PORT" config get tiering.ssd.enabled >>"$WORK/ssd-config.txt" 2>&1
  stop_server
  RUNS+=("$json")
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
maxmem_bytes=$(to_bytes "$MAXMEMORY")
for size in $VALUE_SIZES; do
  bytes=$(to_bytes "$size")
  # One user adds about 12 distinct chunks of 256 tokens (4 rounds x (512 + 256) tokens).
  users=$(( (maxmem_bytes * WS_FACTOR / bytes + 11) / 12 ))
  (( users < STREAMS )) && users=$STREAMS
  for target in $TARGETS; do
    run_bench "conv-$size" "$target" --value-size "$bytes" --users "$users" --rounds 4
  done
done
if [[ -n $TRACE && -f $TRACE ]]; then
  tbytes=$(to_bytes "$TRACE_VALUE")
  for target in $TARGETS; do
    limit=()
    (( TRACE_REQUESTS > 0 )) && limit=(--requests "$TRACE_REQUESTS")
    run_bench "trace" "$target" --trace "$TRACE" "${limit[@]}" --value-size "$tbytes" --sample-secs 0.5 \
      --speedup "$TRACE_SPEEDUP"
  done
elif [[ -n $TRACE ]]; then
  log "trace $TRACE not found: trace runs skipped"
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

report() {
  echo "### kvcache-compare, $START"
  echo
  echo "- machine: $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n 1), $(nproc) cores, Linux $(uname -r); load average before: $LOAD_BEFORE, after: $LOAD_AFTER"
  echo "- redis: $REDIS_SERVER ($("$REDIS_SERVER" --version | sed -nE 's/.*v=([0-9.]+).*/\1/p')) --maxmemory $MAXMEMORY --maxmemory-policy allkeys-lru ${REDIS_ARGS:-}"
  echo "- stratakv: $STRATAKV_SERVER --maxmemory $MAXMEMORY --memory.capacity $MAXMEMORY --maxmemory-policy allkeys-lru --threads $THREADS ${STRATAKV_ARGS:-}"
  echo "- ${SSD_NOTE:-SSD tier: not tried (no stratakv target)}"
  echo "- stratakv-bench: $STREAMS streams;${VALUE_SIZES:+ conversations ($VALUE_SIZES) with a working set of ${WS_FACTOR}x maxmemory;} trace: ${TRACE:+$(basename "$TRACE"), $( ((TRACE_REQUESTS > 0)) && echo "first $TRACE_REQUESTS" || echo all) requests, $TRACE_VALUE per block, $( [[ $TRACE_SPEEDUP == 0 ]] && echo "timestamps compressed" || echo "timestamps at ${TRACE_SPEEDUP}x speed")} ${BENCH_ARGS:-}"
  echo
  $PY "$SCRIPT_DIR/kvcache_table.py" "${RUNS[@]}"
}
report
if [[ -n $OUT ]]; then report >>"$OUT"; log "appended to $OUT"; fi
if [[ $PLOT == 1 ]]; then $PY "$SCRIPT_DIR/plot.py" --out-dir "$PLOT_DIR" "${RUNS[@]}"; fi
[[ $FAILED == 0 ]] || { log "some runs failed; logs in $WORK"; exit 1; }
