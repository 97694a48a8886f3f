#!/usr/bin/env bash
# Regenerate the pictures of the docs' "Pictures" page (needs Graphviz's dot
# and matplotlib: scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/python - "$tmp" <<'PY'
import sys

import numpy as np

from smroute.fabric import shapes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.export.writers import write_topology

out = sys.argv[1]
base = pgft(2, (4, 6), (1, 4), (1, 1))
spine = int(base.switches[-1])
site = shapes.attach_cas(shapes.with_aggregation_nodes(base), [spine, spine],
                         ["ufm01 HCA-1", "storage-gw01 HCA-1"])
write_topology(site, f"{out}/site.topo")
tree = pgft(3, (6, 6, 6), (1, 6, 6), (1, 1, 1))
write_topology(tree, f"{out}/tree.topo")
write_topology(degrade(tree, np.random.default_rng(2), switches=2, links=6)[0],
               f"{out}/degraded.topo")
write_topology(pgft(3, (18, 18, 36), (1, 18, 18), (1, 1, 1)), f"{out}/big.topo")
PY
smroute=(.venv/bin/python -m smroute)
"${smroute[@]}" fabric draw "$tmp/site.topo" --out docs/pictures/site.png \
    --title "PGFT(2;4,6;1,4;1,1) + aggregation nodes + 2 hosts on a spine"
"${smroute[@]}" fabric draw "$tmp/degraded.topo" --removed "$tmp/tree.topo" \
    --out docs/pictures/degraded.png --title "PGFT(3;6,6,6;1,6,6;1,1,1) minus 2 switches, 6 links"
"${smroute[@]}" fabric draw "$tmp/big.topo" --out docs/pictures/pgft-11664.png \
    --title "PGFT(3;18,18,36;1,18,18;1,1,1)"
"${smroute[@]}" route "$tmp/degraded.topo" --workers 1 -q --out "$tmp/degraded.lfts"
"${smroute[@]}" analyze "$tmp/degraded.lfts" --fabric "$tmp/degraded.topo" --pattern sp \
    --quiet --plot docs/pictures/degraded-sp.png
# 128-colour palettes: the same pictures at a third of the size
.venv/bin/python - docs/pictures/{site,degraded,pgft-11664,degraded-sp}.png <<'PY'
import sys

from PIL import Image

for path in sys.argv[1:]:
    im = Image.open(path).convert("RGB")
    im.quantize(colors=128, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
PY
