#!/usr/bin/env bash
# ssd-bench.sh: the SSD tier's benchmarks (issue 4), all in one run on one disk.
#
#   1. The disk: sequential read of a file in the SSD tier's directory (same filesystem) with
#      direct I/O: fio (1 MiB blocks, iodepth 16) and dd (1 MiB blocks, one stream).
#   2. GET of 1 MiB and 32 MiB values that all live on SSD: DATA bytes of values are written,
#      maxmemory is lowered until every value is demoted, the page cache is dropped, and every
#      key is read once with stratakv-bulkbench over CONNS connections. tiering.promote_after
#      is huge, so each GET reads the disk and the value leaves memory after its reply.
#      Reported as MB/s and as a fraction of the disk's fio figure (goal: at least 0.6x).
#   3. p99 of memory-resident GETs (redis-benchmark GET of 100-byte hot keys) while a writer
#      streams 1 MiB values at WRITE_MBPS past maxmemory: with the SSD tier (demotion runs in
#      the background) vs without it (eviction drops), and with no writer at all
#      (goal: demotion at most 2x the p99 without it).
#
# usage: bench/ssd-bench.sh [--quick] [--out FILE]
# environment (all optional):
#   STRATAKV_SERVER  server binary (default <repo>/build/release/bin/stratakv-server)
#   BUILD_DIR        holds bin/stratakv-bulkbench (default <repo>/build/release)
#   SSD_DIR          work directory on the disk under test (default /tmp/stratakv-ssd-bench)
#   DATA             bytes of values per size in part 2 (default 4g; 1g with --quick)
#   CONNS            bulkbench connections in part 2 (default 4)
#   IO_THREADS       tiering.ssd.io_threads (default 4)
#   DIRECT_READS     tiering.ssd.direct_reads yes|no (default no: the page cache is dropped)
#   WRITE_MBPS       part 3 writer rate (default 200)
#   GET_N            part 3 redis-benchmark -n (default 300000)
# Dropping the page cache needs root (/proc/sys/vm/drop_caches); without it part 2 uses
# DIRECT_READS=yes so the figure is still the disk's.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
QUICK=0
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "ssd-bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

BUILD_DIR=${BUILD_DIR:-$REPO/build/release}
SERVER=${STRATAKV_SERVER:-$BUILD_DIR/bin/stratakv-server}
BULK=$BUILD_DIR/bin/stratakv-bulkbench
SSD_DIR=${SSD_DIR:-/tmp/stratakv-ssd-bench}
DATA=${DATA:-$([[ $QUICK == 1 ]] && echo 1g || echo 4g)}
CONNS=${CONNS:-4}
IO_THREADS=${IO_THREADS:-4}
DIRECT_READS=${DIRECT_READS:-no}
WRITE_MBPS=${WRITE_MBPS:-200}
GET_N=${GET_N:-$([[ $QUICK == 1 ]] && echo 100000 || echo 300000)}
PY=/usr/bin/python3

for bin in "$SERVER" "$BULK"; do
  [[ -x $bin ]] || { echo "ssd-bench: $bin missing (scripts/build.sh release)" >&2; exit 2; }
done
command -v fio >/dev/null || { echo "ssd-bench: fio missing (scripts/install-deps.sh)" >&2; exit 2; }

bytes() { $PY -c "import sys; s=sys.argv[1].lower(); u={'k':1<<10,'m':1<<20,'g':1<<30}; print(int(s[:-1])*u[s[-1]] if s[-1] in u else int(s))" "$1"; }
log() { echo "ssd-bench: $*" >&2; }
can_drop=0
if [[ -w /proc/sys/vm/drop_caches ]] && (sync && echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null; then
  can_drop=1
else
  DIRECT_READS=yes
fi
drop_caches() { if [[ $can_drop == 1 ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi; }

rm -rf "$SSD_DIR"
mkdir -p "$SSD_DIR"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ ${KEEP:-0} == 1 ]]; then echo "ssd-bench: kept $SSD_DIR" >&2; else rm -rf "$SSD_DIR"; fi
}
trap cleanup EXIT

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cli() { redis-cli -p "$PORT" "$@"; }
info_field() { cli info "$1" | tr -d '\r' | sed -n "s/^$2://p"; }

# start_server NAME ARGS... : starts a server on $PORT with its own SSD path.
start_server() {
  local name=$1; shift
  PORT=$(free_port)
  "$SERVER" --port "$PORT" --threads 2 --loglevel warning "$@" >"$SSD_DIR/$name.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 100); do cli ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "ssd-bench: server $name did not start" >&2; cat "$SSD_DIR/$name.log" >&2; exit 1
}
stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 600); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  wait "$SERVER_PID" 2>/dev/null || true
}

wait_quiet() {  # until no demotion is queued
  for _ in $(seq 600); do
    [[ $(info_field tiering pending_demotion_bytes) == 0 ]] && return 0
    sleep 0.1
  done
}

# ---- 1. the disk ----
log "disk: fio and dd, direct I/O sequential read"
fio_file=$SSD_DIR/fio.data
fio --name=prep --filename="$fio_file" --size=4g --rw=write --bs=4m --direct=1 \
    --ioengine=libaio --iodepth=8 >/dev/null
drop_caches
fio_mbs=$(fio --name=seqread --filename="$fio_file" --size=4g --rw=read --bs=1m --direct=1 \
              --ioengine=libaio --iodepth=16 --runtime=10 --time_based --output-format=json |
          $PY -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6))')
dd_mbs=$(dd if="$fio_file" of=/dev/null bs=1M count=2048 iflag=direct 2>&1 |
         sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p' | $PY -c 'import sys; print(round(2048*1048576/float(sys.stdin.read())/1e6))')
rm -f "$fio_file"

# ---- 2. GET of values on SSD ----
declare -A get_mbs set_mbs get_p99
for size in 1m 32m; do
  count=$(( $(bytes "$DATA") / $(bytes "$size") ))
  log "GET $size from SSD: $count values"
  start_server "get-$size" --maxmemory 1gb --memory.capacity 2gb \
    --tiering.ssd.enabled yes --tiering.ssd.path "$SSD_DIR/db-$size" \
    --tiering.ssd.io_threads "$IO_THREADS" --tiering.ssd.direct_reads "$DIRECT_READS" \
    --tiering.promote_after 1000000
  set_mbs[$size]=$("$BULK" --port "$PORT" --size "$size" --count "$count" --keys "$count" \
                     --connections 2 --op set --verify --json |
                   $PY -c 'import json,sys; print(round(json.load(sys.stdin)["set"]["mb_per_sec"]))')
  cli config set maxmemory 1mb >/dev/null  # every value goes to SSD
  sleep 0.5
  wait_quiet
  cli config set maxmemory 256mb >/dev/null  # room for the reads in flight
  on_ssd=$(info_field tiering ssd_only_keys)
  drop_caches
  json=$("$BULK" --port "$PORT" --size "$size" --count "$count" --keys "$count" \
           --connections "$CONNS" --op get --json)
  get_mbs[$size]=$(echo "$json" | $PY -c 'import json,sys; print(round(json.load(sys.stdin)["get"]["mb_per_sec"]))')
  get_p99[$size]=$(echo "$json" | $PY -c 'import json,sys; print(json.load(sys.stdin)["get"]["p99_ms"])')
  log "  $on_ssd of $count on SSD before the reads; GET ${get_mbs[$size]} MB/s"
  # One more pass with --verify: every byte read from SSD is checked.
  drop_caches
  "$BULK" --port "$PORT" --size "$size" --count "$count" --keys "$count" --connections "$CONNS" \
    --op get --verify >/dev/null || { log "verify FAILED for $size"; exit 1; }
  stop_server
  rm -rf "$SSD_DIR/db-$size" || { sleep 1; rm -rf "$SSD_DIR/db-$size"; }
done

# ---- 3. p99 of memory-resident GETs with and without background demotion ----
writer_py=$SSD_DIR/writer.py
cat >"$writer_py" <<'EOF'
import sys, time, redis
port, mbps, secs = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
r = redis.Redis(port=port)
value = bytes(1 << 20)
period = 1.048576 / mbps
t0 = time.monotonic(); i = 0
while time.monotonic() - t0 < secs:
    r.set("stream:%d" % i, value); i += 1
    delay = t0 + i * period - time.monotonic()
    if delay > 0: time.sleep(delay)
EOF
p99_run() {  # p99_run NAME WRITER(yes|no) SERVER-ARGS...
  local name=$1 writer=$2; shift 2
  start_server "p99-$name" --maxmemory 256mb --memory.capacity 1gb "$@"
  redis-benchmark -p "$PORT" -t set -n 10000 -r 10000 -d 100 -q >/dev/null
  local wpid=""
  if [[ $writer == yes ]]; then
    # Past maxmemory first, so that eviction (or demotion) runs all through the measurement.
    "$BULK" --port "$PORT" --size 1m --count 320 --keys 320 --op set --prefix prefill: >/dev/null
    $PY "$writer_py" "$PORT" "$WRITE_MBPS" 600 >/dev/null 2>&1 &
    wpid=$!
    PIDS+=("$wpid")
    sleep 1
  fi
  local csv
  csv=$(redis-benchmark -p "$PORT" -t get -n "$GET_N" -c 8 -r 10000 -d 100 --csv | tail -1)
  local demotions evicted
  demotions=$(info_field tiering demotions); evicted=$(info_field stats evicted_keys)
  [[ -n $wpid ]] && kill "$wpid" 2>/dev/null
  stop_server
  # "GET","rps","avg","min","p50","p95","p99","max"
  echo "$csv" | tr -d '"' | awk -F, -v d="${demotions:-0}" -v e="${evicted:-0}" \
    '{printf "%s %s %s %s %s\n", $2, $5, $7, d, e}'
}
log "p99: no writer"
read -r idle_rps idle_p50 idle_p99 _ _ <<<"$(p99_run idle no)"
log "p99: writer, SSD tier on"
read -r on_rps on_p50 on_p99 on_dem _ <<<"$(p99_run ssd yes --tiering.ssd.enabled yes \
  --tiering.ssd.path "$SSD_DIR/db-p99")"
log "p99: writer, SSD tier off"
read -r off_rps off_p50 off_p99 _ off_ev <<<"$(p99_run drop yes)"

ratio() { $PY -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2fx' % (a/b) if b else 'n/a')" "$1" "$2"; }
report=$(cat <<EOF
### Run of $(date -u '+%Y-%m-%d %H:%M') UTC

- machine: $(nproc) cores, $(uname -r); load average before the report: $(cut -d' ' -f1-3 /proc/loadavg)
- server: $SERVER --threads 2; SSD tier on $(df --output=source,fstype "$SSD_DIR" | tail -1 | tr -s ' '), io_threads $IO_THREADS, direct_reads $DIRECT_READS, page cache $([[ $can_drop == 1 ]] && echo "dropped before each read pass" || echo "not dropped (no root)")
- disk, sequential read with direct I/O: fio (1 MiB, iodepth 16) **$fio_mbs MB/s**, dd (1 MiB, one stream) $dd_mbs MB/s

| benchmark | MB/s | vs fio | vs dd | p99 ms |
|---|--:|--:|--:|--:|
| SET 1 MiB (2 conns) while demoting to SSD | ${set_mbs[1m]} | | | |
| SET 32 MiB (2 conns) while demoting to SSD | ${set_mbs[32m]} | | | |
| GET 1 MiB on SSD, $CONNS conns | ${get_mbs[1m]} | $(ratio "${get_mbs[1m]}" "$fio_mbs") | $(ratio "${get_mbs[1m]}" "$dd_mbs") | ${get_p99[1m]} |
| GET 32 MiB on SSD, $CONNS conns | ${get_mbs[32m]} | $(ratio "${get_mbs[32m]}" "$fio_mbs") | $(ratio "${get_mbs[32m]}" "$dd_mbs") | ${get_p99[32m]} |

Memory-resident GETs (redis-benchmark -t get -c 8 -r 10000 -d 100, $GET_N requests), maxmemory
256mb, a writer streaming 1 MiB values at $WRITE_MBPS MB/s past it:

| background | GET req/s | p50 ms | p99 ms | p99 vs no demotion |
|---|--:|--:|--:|--:|
| none | $idle_rps | $idle_p50 | $idle_p99 | |
| writer, SSD tier off (eviction drops; $off_ev evicted) | $off_rps | $off_p50 | $off_p99 | 1.00x |
| writer, SSD tier on (demotion; $on_dem demoted) | $on_rps | $on_p50 | $on_p99 | $(ratio "$on_p99" "$off_p99") |
EOF
)
echo "$report"
if [[ -n $OUT ]]; then printf '\n%s\n' "$report" >>"$OUT"; fi
