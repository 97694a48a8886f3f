"""Dragonfly+ variants for the side-by-side comparison with OpenSM's engines.

Writes ibnetdiscover captures of Dragonfly+ fabrics
(:func:`~smroute.fabric.generate.shapegen.dragonfly_plus`) to a folder:
spine ``j`` of every group to spine ``j`` of every other (``planar``) or
the canonical wiring (``spread``: a group's spines spread the other
groups, so a spine reaches only some across), with and without a SHARP
aggregation node on every switch, a UFM host on a spine, two groups (two
trees joined at their tops), cables cut.  Then::

    PYTHONPATH=. .venv/bin/python research/dragonfly_plus.py DIR
    PYTHONPATH=. .venv/bin/python bench/real_fabrics.py --catalogue --no-shapes --real DIR

Findings: ``research/dragonfly-plus.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from smroute.fabric.export.writers import format_topology
from smroute.fabric.generate.shapes import attach_cas, dragonfly_plus, with_aggregation_nodes
from smroute.fabric.generate.trees import degrade
from smroute.fabric.model.arrays import Fabric
from smroute.fileio import atomic_write_text

#: name: (groups, leaves, spines, hosts a leaf, global cables, spread, aggregation nodes,
#: UFM hosts on the last spine, cables cut)
VARIANTS: dict[str, tuple[int, int, int, int, int, bool, bool, int, int]] = {
    "dfp-planar-6g-agg": (6, 8, 8, 16, 2, False, True, 0, 0),
    "dfp-spread-9g": (9, 4, 4, 8, 1, True, False, 0, 0),
    "dfp-spread-9g-agg": (9, 4, 4, 8, 1, True, True, 0, 0),
    "dfp-spread-17g-agg": (17, 8, 8, 8, 1, True, True, 0, 0),
    "dfp-2trees-ufm-agg": (2, 12, 6, 18, 3, False, True, 2, 0),
    "dfp-planar-8g-cut-agg": (8, 4, 4, 12, 1, False, True, 0, 10),
}


def variant(name: str) -> Fabric:
    """The fabric of one variant (deterministic)."""
    groups, leaves, spines, hosts, cables, spread, agg, ufm, cut = VARIANTS[name]
    f = dragonfly_plus(groups, leaves, spines, hosts, global_cables=cables, spread=spread,
                       seed=len(name))
    if cut:
        f, _ = degrade(f, np.random.default_rng(7), links=cut)
    if ufm:
        f = attach_cas(f, [int(f.switches[-1])] * ufm, [f"ufm-{k + 1:02d} HCA-1"
                                                       for k in range(ufm)])
    return with_aggregation_nodes(f) if agg else f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to write the captures to")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in VARIANTS:
        f = variant(name)
        atomic_write_text(args.out / f"{name}.topo", "\n".join(format_topology(f)) + "\n")
        print(f"{name}: {len(f.switches)} switches, {len(f.cas)} CAs")


if __name__ == "__main__":
    main()
