#!/usr/bin/env bash
# ab.sh: before/after comparison of two stratakv-server binaries in one sitting.
#
# Runs bench/compare-redis.sh (100-byte SET/GET with redis-benchmark, 32 MiB SET/GET with
# stratakv-bulkbench) and bench/sdk-bench.sh (the SDK's shm and RESP paths) against binary A
# and binary B alternately, ROUNDS pairs in the order A B, B A, A B ... (a machine that drifts
# slower or faster over the sitting then favours neither), with the same bench clients, then prints
# for every stratakv figure each run's value, the median of A, the median of B and B/A. The
# redis-server figures of each run are printed too, as the machine's yardstick.
#
# usage: bench/ab.sh A_SERVER B_SERVER [--out FILE]
# environment: ROUNDS (default 3), BUILD_DIR (bench clients; default <repo>/build/release),
#   COMPARE_ARGS / SDK_ARGS (extra arguments of the two scripts)
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
A=${1:?usage: bench/ab.sh A_SERVER B_SERVER [--out FILE]}
B=${2:?usage: bench/ab.sh A_SERVER B_SERVER [--out FILE]}
OUT=""
if [[ "${3:-}" == "--out" ]]; then OUT=${4:?--out needs a file}; fi
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # $1: label (A|B), $2: server, $3: round
  BULK_SIZES=32m BULK_CONNS=1 "$SCRIPT_DIR/compare-redis.sh" --server "$2" ${COMPARE_ARGS:-} \
    > "$work/compare-$1-$3.md" 2> "$work/compare-$1-$3.err"
  STRATAKV_SERVER="$2" "$SCRIPT_DIR/sdk-bench.sh" ${SDK_ARGS:-} \
    > "$work/sdk-$1-$3.md" 2> "$work/sdk-$1-$3.err"
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then
    echo "ab: round $r: A" >&2; run A "$A" "$r"
    echo "ab: round $r: B" >&2; run B "$B" "$r"
  else
    echo "ab: round $r: B" >&2; run B "$B" "$r"
    echo "ab: round $r: A" >&2; run A "$A" "$r"
  fi
done

/usr/bin/python3 - "$work" "$ROUNDS" "$A" "$B" <<'PY' | tee "$work/report.md"
import re, statistics, sys, os, datetime
work, rounds, a_bin, b_bin = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def compare_rows(path):
    rows = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        if len(c) >= 5 and c[1] in ('req/s', 'MB/s') and c[2].replace('.', '').isdigit():
            rows[c[0]] = (float(c[3]), float(c[2]), c[1])  # stratakv, redis, unit
    return rows
def sdk_rows(path):
    rows = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        if len(c) >= 4 and c[1] in ('put', 'get') and c[2] in (
                'sdk shm, registered', 'sdk shm, plain', 'sdk resp, stratakv tcp'):
            try: rows[f"{c[0]} {c[1]} {c[2]}"] = (float(c[3]), None, 'GB/s')
            except ValueError: pass
    return rows
runs = {}
for side in 'AB':
    for r in range(1, rounds + 1):
        fig = compare_rows(f"{work}/compare-{side}-{r}.md")
        fig.update(sdk_rows(f"{work}/sdk-{side}-{r}.md"))
        runs[(side, r)] = fig
names = list(runs[('A', 1)].keys())
print(f"### A/B of {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC ({rounds} rounds: A B, B A, ...)\n")
print(f"- A: `{a_bin}`\n- B: `{b_bin}`\n")
print("| figure | unit | A runs | B runs | median A | median B | B/A | redis (A runs) |")
print("|---|---|---|---|--:|--:|--:|---|")
worst = None
for n in names:
    av = [runs[('A', r)].get(n, (float('nan'),))[0] for r in range(1, rounds + 1)]
    bv = [runs[('B', r)].get(n, (float('nan'),))[0] for r in range(1, rounds + 1)]
    red = [runs[('A', r)][n][1] for r in range(1, rounds + 1) if runs[('A', r)].get(n) and runs[('A', r)][n][1]]
    unit = runs[('A', 1)][n][2]
    ma, mb = statistics.median(av), statistics.median(bv)
    ratio = mb / ma if ma else float('nan')
    worst = ratio if worst is None else min(worst, ratio)
    fmt = lambda v: ' '.join(f"{x:g}" for x in v)
    print(f"| {n} | {unit} | {fmt(av)} | {fmt(bv)} | {ma:g} | {mb:g} | {ratio:.2f}x | {fmt(red)} |")
print(f"\nLowest B/A of the medians: {worst:.2f}x")
PY
if [[ -n "$OUT" ]]; then cat "$work/report.md" >> "$OUT"; fi
