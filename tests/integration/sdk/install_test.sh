#!/bin/sh
# install_test.sh BUILD_DIR SOURCE_DIR: installs libstratakv from BUILD_DIR into a temporary
# prefix, then builds and runs a consumer through find_package(stratakv) and through
# pkg-config, each against the installed files only.
set -eu
build=$1
src=$2
prefix=$(mktemp -d /tmp/stratakv-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build/clients/cpp" --prefix "$prefix" >/dev/null
test -f "$prefix/include/stratakv/client.h"
test -f "$prefix/lib/cmake/stratakv/stratakvConfig.cmake"
test -f "$prefix/lib/pkgconfig/stratakv.pc"
cmake -S "$src/consumer" -B "$prefix/consumer-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer-build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer-build/consumer"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" c++ -std=c++20 "$src/consumer/main.cc" -o "$prefix/consumer-pc" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs stratakv)
LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer-pc"
echo "install test ok"
