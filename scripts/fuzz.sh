#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang into build/fuzz and runs each over a
# copy of its seed corpus (tests/fuzz/corpus/<name>; the repository's corpus is never written).
#   scripts/fuzz.sh [--seconds N] [--runs N] [target...]
#     --seconds N  run each target N seconds (default 30; 0: no time limit, with --runs)
#     --runs N     stop each target after N executions (default: no limit)
#     target       resp_parser, repl_frame, topology, ssd_codec, config, kv_layout (default: all)
# Fails on any crash, sanitizer report, leak, timeout or out-of-memory; the input that caused
# it is left in build/fuzz/artifacts/<name>/ (add it to the seed corpus as a regression once
# fixed). Prints each target's executions and execs/s.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
runs=-1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "usage: $0 [--seconds N] [--runs N] [target...]" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then targets=(resp_parser repl_frame topology ssd_codec config kv_layout); fi

dir=build/fuzz
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
start=$SECONDS
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S tests/fuzz -B "$dir" -G Ninja "${launcher[@]}" >/dev/null
fi
cmake --build "$dir" -j "$(nproc)"
echo "=== fuzz: built in $((SECONDS - start)) s"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for t in "${targets[@]}"; do
  bin="$dir/bin/${t}_fuzz"
  seeds="tests/fuzz/corpus/$t"
  if [ ! -x "$bin" ] || [ ! -d "$seeds" ]; then
    echo "fuzz: unknown target $t" >&2
    exit 2
  fi
  work="$dir/run/$t"
  rm -rf "$work" "$dir/artifacts/$t"
  mkdir -p "$work/corpus" "$dir/artifacts/$t"
  cp "$seeds"/* "$work/corpus/"
  log="$work/log"
  limits=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -runs="$runs")
  if [ "$seconds" != "0" ]; then limits+=(-max_total_time="$seconds"); fi
  rc=0
  "$bin" "${limits[@]}" -artifact_prefix="$dir/artifacts/$t/" "$work/corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$work/corpus" -type f | wc -l)
  if [ "$rc" -ne 0 ]; then
    echo "=== fuzz $t: FAILED (exit $rc); the end of $log:"
    tail -60 "$log"
    ls -l "$dir/artifacts/$t/"
    failed+=("$t")
  else
    echo "=== fuzz $t: ${execs:-?} execs, ${rate:-?} execs/s, 0 crashes, corpus $(ls "$seeds" | wc -l) seeds -> $corpus"
  fi
done
echo "=== fuzz: $((SECONDS - start)) s"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: crashes in ${failed[*]}" >&2
  exit 1
fi
