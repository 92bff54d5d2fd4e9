#!/usr/bin/env bash
# Configures and builds one build tree.
#   scripts/build.sh [release|asan|tsan|debug]   (default: release)
# release -> build/release (Release), asan -> build/asan (ASan+UBSan), tsan -> build/tsan.
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-release}
case "$kind" in
  release) type=Release; sanitize="" ;;
  debug)   type=Debug; sanitize="" ;;
  asan)    type=RelWithDebInfo; sanitize="address,undefined" ;;
  tsan)    type=RelWithDebInfo; sanitize="thread" ;;
  *) echo "usage: $0 [release|asan|tsan|debug]" >&2; exit 2 ;;
esac

dir="build/$kind"
launcher=()
# ccache (installed by install-deps.sh) makes rebuilds of unchanged files free across trees.
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DSTRATAKV_SANITIZE="$sanitize" \
    "${launcher[@]}" >/dev/null
fi
cmake --build "$dir" -j "$(nproc)"
