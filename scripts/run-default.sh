#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job on the bundled default fabric:
# route fixtures/pgft-2level-648.topo (PGFT(2;18,36;1,18;1,1), 648 hosts, 54
# switches, as the real ibnetdiscover printed it under ibsim after OpenSM
# assigned LIDs) with the default engine (Nmodc: on this complete tree Dmodc's
# tables), validate every route, write OpenSM file-engine
# tables (opensm -R file -U) to out/ and print the summary.  Extra arguments go
# to `smroute route`.  Exit status as `smroute route`: 0 valid, 1 invalid,
# 2 bad input, 3 unroutable.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p out
.venv/bin/smroute route fixtures/pgft-2level-648.topo \
    --out out/pgft-2level-648.lfts "$@"
