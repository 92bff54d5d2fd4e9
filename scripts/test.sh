#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: unit tests (doctest) and integration
# tests (a real stratakv-server driven by hiredis, redis-py, redis-cli and redis-benchmark, and
# short runs of each mode of stratakv-bench checking its own accounting),
# first on the Release build, then on an ASan+UBSan build.
#   STRATAKV_TEST_SANITIZE=0 skips the ASan+UBSan pass (it is on by default and in CI).
#   STRATAKV_TEST_TSAN=1 adds a ThreadSanitizer pass (off by default: it roughly doubles the time).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

run_suite() {
  local kind=$1
  echo "=== build: $kind"
  scripts/build.sh "$kind"
  echo "=== tests: $kind"
  ctest --test-dir "build/$kind" --output-on-failure --timeout 900 -j 1
}

run_suite release
if [ "${STRATAKV_TEST_SANITIZE:-1}" != "0" ]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_suite asan
fi
if [ "${STRATAKV_TEST_TSAN:-0}" = "1" ]; then
  # TSan's deadlock detector tracks at most 64 held locks; a DEL of many keys holds up to one
  # lock per keyspace shard (128), in a fixed order, so that detector is switched off.
  export TSAN_OPTIONS="detect_deadlocks=0:halt_on_error=1:suppressions=$PWD/tests/tsan.supp"
  run_suite tsan
fi
echo "=== all tests passed"
