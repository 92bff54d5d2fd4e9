#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need; with --tests also
# the npm packages of the tests (tests/clients/node).
# Idempotent and quick when everything is present (no apt-get call at all then).
set -euo pipefail

packages=(
  # build
  g++ cmake ninja-build pkg-config ccache
  # the fuzz targets (scripts/fuzz.sh): clang with libFuzzer and its sanitizer runtimes
  clang libclang-rt-dev
  # libraries
  libasio-dev libhiredis-dev libtoml11-dev doctest-dev libjemalloc-dev libxxhash-dev
  librocksdb-dev libibverbs-dev pybind11-dev python3-dev
  # TLS on tls-port (Asio's SSL streams over OpenSSL); openssl makes the tests' certificates
  libssl-dev openssl
  # scripts (EVAL): Lua 5.1, as Redis embeds, and the cjson and bit libraries Redis bundles
  liblua5.1-0-dev lua-cjson-dev lua-bitop-dev
  # the cluster: etcd's v3 JSON gateway over HTTP, JSON topology records; etcd for the tests
  nlohmann-json3-dev libcurl4-openssl-dev etcd-server curl
  # tests and benchmarks: real Redis tools and clients as peers
  redis-server redis-tools python3 python3-redis python3-pytest python3-numpy python3-torch
  fio python3-matplotlib
  # Node.js's Redis clients (ioredis, node-redis from npm) as cluster peers in the tests (npm:
  # below; some images ship a Node.js that bundles its own and conflicts with Debian's)
  nodejs
)

# npm packages of the tests (tests/clients/node: versions pinned by its package-lock.json).
install_node_clients() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/clients/node"
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "install-deps: npm ci in tests/clients/node"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) && touch "$dir/node_modules"
  fi
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  if [ "${1:-}" = "--tests" ]; then install_node_clients; fi
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
if [ "${1:-}" = "--tests" ]; then install_node_clients; fi
