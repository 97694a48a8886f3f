"""Fabrics that are no tree, for the side-by-side comparison with OpenSM's engines.

Writes ibnetdiscover captures to a folder: tori and hypercubes of switches
with hosts on each (:func:`~smroute.fabric.generate.shapegen.torus`: SDSC
Gordon's 3-D torus, SGI ICE's hypercubes), a ring, two switches, and trees
that are no tree because every top switch carries a login host (a PGFT, a
director site with aggregation nodes, a degraded PGFT, the 174-switch site
shape).  Then::

    PYTHONPATH=. .venv/bin/python research/non_tree.py DIR
    PYTHONPATH=. .venv/bin/python bench/real_fabrics.py --catalogue --no-shapes --real DIR

Findings: ``research/non-tree-fabrics.md``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

from smroute.fabric.export.writers import format_topology
from smroute.fabric.generate.catalogue import build_shape, director_site
from smroute.fabric.generate.shapes import attach_cas, ring, torus, two_switch
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.fileio import atomic_write_text


def _logins_on_tops(f: Fabric) -> Fabric:
    """``f`` with a login host on every switch of its top rank: no tree."""
    rank = fabric_roles(f).rank
    top = np.flatnonzero(rank == rank.max())
    return attach_cas(f, top, [f"login{k:02d} HCA-1" for k in range(len(top))])


VARIANTS: dict[str, Callable[[], Fabric]] = {
    "torus-4x4": lambda: torus((4, 4), 8, parallel=2),
    "torus-6x4": lambda: torus((6, 4), 6, parallel=2),
    "torus-4x4x4": lambda: torus((4, 4, 4), 8, parallel=2),
    "hypercube-4d": lambda: torus((2, 2, 2, 2), 16, parallel=2),
    "hypercube-5d": lambda: torus((2, 2, 2, 2, 2), 16),
    "ring-6": lambda: ring(6, 8, parallel=2),
    "two-switch": lambda: two_switch(8, parallel=2),
    "pgft-tops": lambda: _logins_on_tops(pgft(2, (8, 8), (1, 4), (1, 1))),
    "director-tops": lambda: _logins_on_tops(director_site(spine_hosts=0, line_hosts=4,
                                                           remove_links=2, seed=0)),
    "degraded-tops": lambda: _logins_on_tops(degrade(pgft(3, (4, 4, 4), (1, 2, 2), (1, 1, 1)),
                                                     np.random.default_rng(2), links=8)[0]),
    "site-174sw-tops": lambda: _logins_on_tops(build_shape("edr-site-174sw")),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to write the captures to")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, make in VARIANTS.items():
        f = make()
        atomic_write_text(args.out / f"{name}.topo", "\n".join(format_topology(f)) + "\n")
        print(f"{name}: {len(f.switches)} switches, {len(f.cas)} CAs")


if __name__ == "__main__":
    main()
