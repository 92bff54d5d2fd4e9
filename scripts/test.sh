#!/usr/bin/env bash
# Installs what is missing, builds, and runs the tests: unit tests (doctest) and integration
# tests (a real stratakv-server driven by hiredis, redis-py, redis-cli and redis-benchmark, and
# short runs of each mode of stratakv-bench checking its own accounting).
#
# Tests carry labels (tests/CMakeLists.txt): unit, single (one server process), cluster
# (several), and slow. The Release pass runs every test; the sanitizer passes run the unit and
# single tests that are not slow (cluster and slow ones run in Release only). Every test has its
# own timeout (at most 300 s). Each pass ends with its wall time, build included:
# "=== release: N s (build B s, tests T s)".
#   STRATAKV_TEST_SANITIZE=0 skips the ASan+UBSan pass (it is on by default and in CI).
#   STRATAKV_TEST_TSAN=1 adds a ThreadSanitizer pass (off by default: it roughly doubles the time).
# After the Release pass, scripts/fuzz.sh builds the libFuzzer targets (tests/fuzz, clang) and
# runs each 30 s over a copy of its seed corpus, failing on any crash (about 3 min with the
# build). STRATAKV_SKIP_FUZZ=1 skips it (for local runs; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --tests

# ctest's -L and -LE take regular expressions that match anywhere in a label ("unit|single"
# would also pick a label "community"): anchor them.
SANITIZER_LABELS=(-L '^(unit|single)$' -LE '^slow$')

# Every test must have a kind label and its own timeout of at most 300 s.
check_labels() {
  ctest --test-dir "build/$1" --show-only=json-v1 | /usr/bin/python3 -c '
import json, sys
bad = []
for t in json.load(sys.stdin)["tests"]:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    kinds = [l for l in props.get("LABELS", []) if l in ("unit", "single", "cluster")]
    timeout = props.get("TIMEOUT", 0)
    if len(kinds) != 1 or not 0 < timeout <= 300:
        bad.append("%s (labels %s, timeout %s)" % (t["name"], props.get("LABELS"), timeout))
if bad:
    sys.exit("tests without one kind label (unit, single, cluster) or a timeout <= 300 s: "
             "see tests/CMakeLists.txt\n  " + "\n  ".join(bad))
'
}

run_suite() {
  local kind=$1
  shift
  local start=$SECONDS
  echo "=== build: $kind"
  scripts/build.sh "$kind"
  check_labels "$kind"
  local built=$SECONDS
  echo "=== tests: $kind"
  ctest --test-dir "build/$kind" --output-on-failure --no-tests=error -j 1 "$@"
  echo "=== $kind: $((SECONDS - start)) s (build $((built - start)) s, tests $((SECONDS - built)) s)"
}

run_suite release
if [ "${STRATAKV_SKIP_FUZZ:-0}" != "1" ]; then
  echo "=== fuzz"
  scripts/fuzz.sh --seconds 30
fi
if [ "${STRATAKV_TEST_SANITIZE:-1}" != "0" ]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_suite asan "${SANITIZER_LABELS[@]}"
fi
if [ "${STRATAKV_TEST_TSAN:-0}" = "1" ]; then
  # TSan's deadlock detector tracks at most 64 held locks; a DEL of many keys holds up to one
  # lock per keyspace shard (128), in a fixed order, so that detector is switched off.
  export TSAN_OPTIONS="detect_deadlocks=0:halt_on_error=1:suppressions=$PWD/tests/tsan.supp"
  run_suite tsan "${SANITIZER_LABELS[@]}"
fi
echo "=== all tests passed"
