#!/usr/bin/env bash
# Installs what is missing, builds (Release), and starts the server on conf/stratakv.toml.
# Extra arguments go to the server, e.g. scripts/run.sh --port 6380
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh release
exec build/release/bin/stratakv-server conf/stratakv.toml "$@"
