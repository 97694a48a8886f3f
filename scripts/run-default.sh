#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job on the bundled default fabric.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p out
.venv/bin/smroute fabric summary fixtures/pgft-2level-648.topo
