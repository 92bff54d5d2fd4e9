#!/usr/bin/env bash
# fresh-warm.sh: 32 MiB SET and GET on one connection against the loopback TCP bandwidth of the
# same run, from a server started fresh and after a warm-up (issue 17's goal: each at least
# 0.75x loopback), for stratakv-server and redis-server 7.0 alike.
#
# Per server: round 1 SETs 16 new keys of 32 MiB (512 MiB of memory the process never touched),
# rounds 2-4 overwrite them (the memory the old versions free), then 32 GETs. Each figure is a
# GB/s of stratakv-bulkbench on one connection (pipeline 1) and its fraction of the best of
# three stratakv-loopback runs (4 MiB writes, the receiver writing through 512 MiB as a server
# storing values does).
#
# usage: bench/fresh-warm.sh   (BUILD_DIR: default build/release; REDIS: default redis-server;
#                               STRATAKV_ARGS: more server options, e.g. "--memory.prefault 1gb")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release}
REDIS=${REDIS:-redis-server}
BULK=$BUILD_DIR/bin/stratakv-bulkbench
LOOP=$BUILD_DIR/bin/stratakv-loopback
WORK=$(mktemp -d /tmp/fresh-warm.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# GB/s of one bulkbench phase (its JSON line on stdin); fails on any error, miss or mismatch.
gbs() {
  /usr/bin/python3 -c 'import json,sys
p = json.loads(sys.stdin.read())[sys.argv[1]]
if p["errors"] or p["misses"] or p["mismatches"]: sys.exit("bulkbench: %s" % p)
print("%.2f" % (p["mb_per_sec"] / 1000))' "$1"
}

best=0
for _ in 1 2 3; do
  g=$("$LOOP" --seconds 2 --recv-span 512m --json | /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["gb_per_sec"])')
  best=$(/usr/bin/python3 -c "print(max($best, $g))")
done
echo "loopback (best of 3, 2 s each): $best GB/s"
echo
echo "| server | SET round 1 (fresh) | SET rounds 2-4 (warm) | GET | SET fresh / loopback | SET warm / loopback | GET / loopback |"
echo "|---|--:|--:|--:|--:|--:|--:|"
for srv in stratakv redis; do
  port=$(free_port)
  if [[ $srv == stratakv ]]; then
    "$BUILD_DIR/bin/stratakv-server" --port "$port" --bind 127.0.0.1 --memory.capacity 2gb \
      --maxmemory 2gb ${STRATAKV_ARGS:-} >"$WORK/$srv.log" 2>&1 &
  else
    "$REDIS" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory 2gb \
      >"$WORK/$srv.log" 2>&1 &
  fi
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  common=(--port "$port" --size 32m --connections 1 --json)
  fresh=$("$BULK" "${common[@]}" --count 16 --keys 16 --op set | gbs set)
  warm=()
  for _ in 2 3 4; do warm+=("$("$BULK" "${common[@]}" --count 16 --keys 16 --op set | gbs set)"); done
  warm_med=$(printf '%s\n' "${warm[@]}" | sort -n | sed -n 2p)
  get=$("$BULK" "${common[@]}" --count 32 --keys 16 --op get | gbs get)
  /usr/bin/python3 -c "b=$best; print('| $srv | %s | %s (%s) | %s | %.2fx | %.2fx | %.2fx |' % ('$fresh', '$warm_med', '${warm[*]}', '$get', $fresh/b, $warm_med/b, $get/b))"
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait || true
done
