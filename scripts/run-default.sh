#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job on the bundled default fabric:
# route fixtures/pgft-2level-648.topo (PGFT(2;18,36;1,18;1,1), 648 hosts, 54
# switches, as the real ibnetdiscover printed it) with Dmodc, validate every
# route, write OpenSM file-engine tables (opensm -R file -U) to out/ and print
# the summary.  Exit status as `smroute route`: 0 valid, 1 invalid, 2 bad
# input, 3 unroutable.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p out
topo=fixtures/pgft-2level-648.topo
if [ ! -f "$topo" ]; then
    # Stopgap until the fixture is committed: the same fabric from the
    # generator, written in ibnetdiscover format (not real tool output).
    topo=out/pgft-2level-648.topo
    echo "run-default: fixtures/pgft-2level-648.topo missing; generating $topo" >&2
    .venv/bin/python -c 'import sys
from smroute.fabric.generate import pgft
from smroute.fabric.writers import write_topology
write_topology(pgft(2, [18, 36], [1, 18], [1, 1]), sys.argv[1])' "$topo"
fi
.venv/bin/smroute route "$topo" --algorithm dmodc --out out/pgft-2level-648.lfts "$@"
