#!/usr/bin/env bash
# small-ops.sh: 100-byte SET and GET with redis-benchmark (-P 16 -c 50) against redis-server and
# stratakv in the same run, with the CPU each side spent: the server's (utime+stime of its
# process, from /proc) and the client's (redis-benchmark's, from its rusage), per request.
# On a 2-core machine the client and the server share the cores, so requests/s alone hides
# who was the bottleneck; CPU per request does not.
#
# usage: bench/small-ops.sh [STRATAKV_SERVER]    (default: build/release/bin/stratakv-server)
# environment: N (requests per run, default 1000000), ROUNDS (default 3), THREADS (stratakv
#   --threads, default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
SRV=${1:-build/release/bin/stratakv-server}
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
TICK=$(getconf CLK_TCK)
command -v redis-benchmark >/dev/null || { echo "small-ops: redis-benchmark not found" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

# run NAME PID PORT TEST: one redis-benchmark run; prints "NAME TEST rps server_us client_us"
run() {
  local name=$1 pid=$2 port=$3 t=$4
  local s0 s1 out
  s0=$(cpu_ticks "$pid")
  # (time's own line goes to a file: redis-benchmark's stderr is dropped)
  out=$(/usr/bin/time -f "%U %S" -o "$work/time" redis-benchmark -h 127.0.0.1 -p "$port" \
          -t "$t" -n "$N" -P 16 -c 50 -d 100 -q 2>/dev/null)
  s1=$(cpu_ticks "$pid")
  local rps client
  rps=$(grep -o '[0-9.]* requests per second' <<<"$out" | awk '{print $1}')
  client=$(tail -1 "$work/time" | awk '{print $1+$2}')
  awk -v n="$name" -v t="$t" -v r="$rps" -v s="$((s1 - s0))" -v k="$TICK" -v c="$client" -v N="$N" \
    'BEGIN { printf "%s %s %.0f %.3f %.3f\n", n, t, r, s / k * 1e6 / N, c * 1e6 / N }'
}

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
pids+=($!); rpid=$!
sport=$(free_port)
"$SRV" --port "$sport" --bind 127.0.0.1 --threads "$THREADS" --memory.capacity 1gb >/dev/null 2>&1 &
pids+=($!); spid=$!
for p in "$rport" "$sport"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
for r in $(seq "$ROUNDS"); do
  for t in set get; do
    run redis "$rpid" "$rport" "$t" >>"$work/rows"
    run stratakv "$spid" "$sport" "$t" >>"$work/rows"
  done
done

/usr/bin/python3 - "$work/rows" "$THREADS" "$(uptime)" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("# 100-byte SET/GET, redis-benchmark -P 16 -c 50, medians of %d rounds; stratakv --threads %s"
      % (len(rows) // 4, sys.argv[2]))
print("# load:", sys.argv[3].strip())
print()
print("| test | target | req/s | server CPU us/req | client CPU us/req | req/s vs redis | server CPU vs redis |")
print("|---|---|--:|--:|--:|--:|--:|")
med = {}
for name, t, rps, srv, cli in rows:
    med.setdefault((name, t), []).append((float(rps), float(srv), float(cli)))
for t in ("set", "get"):
    base = None
    for name in ("redis", "stratakv"):
        runs = med[(name, t)]
        m = [statistics.median(x[i] for x in runs) for i in range(3)]
        if name == "redis": base = m
        print("| %s | %s | %.0f | %.3f | %.3f | %.2fx | %.2fx |" % (
            t.upper(), name, m[0], m[1], m[2], m[0] / base[0], m[1] / base[1]))
PY
