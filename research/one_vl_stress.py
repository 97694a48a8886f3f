#!/usr/bin/env python3
"""Random director and three-level sites, routed by smroute's default on one
VL, judged as `smroute route` judges them: every needed pair delivered
(the validation walk) and no credit loop (the channel-dependency check).

Each variant draws, with the seed given: two or three directors of mixed
kinds (CS7500, CS7510, CS7520, CS8500) under 8-30 leaves with 1-3 cables to
each, UFM/storage on the line ASICs of one or more of them, sometimes a
management island; or a three-level tree of unequal pods with storage on
the cores; then 0-10 cables cut. The builders are `unseen_sweep.py`'s.
One line per variant (ok / BAD, seconds, mode, parameters), then the count
of BAD ones. ``3lvl`` draws only the three-level trees, with 0, 3, 8 or 15
cables cut; ``2lvl`` leaf/spine trees of 4-17 leaves under 2-9 spines, 1-2
cables, 0-4 service hosts on the spines, sometimes a management island,
0-10 cables cut (at most a quarter); ``sharp`` two- and three-level PGFTs
with a SHARP aggregation node on every switch and 1-6% of their
switch-to-switch cables cut (aggregation node to host pairs need turns).

    .venv/bin/python research/one_vl_stress.py [SEED [COUNT [3lvl|2lvl|sharp]]]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402
from unseen_sweep import Plan, build, leaves_dirs, three_level, two_level  # noqa: E402

from smroute.fabric.generate.shapes import with_aggregation_nodes  # noqa: E402
from smroute.fabric.generate.trees import degrade, pgft  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fabric.model.base import NodeType  # noqa: E402
from smroute.routing.deadlock import check_credit_loops  # noqa: E402
from smroute.routing.engine import route, validate_result  # noqa: E402

KINDS = ["cs7500", "cs7510", "cs7520", "cs8500"]


def variant(rng: np.random.Generator, family: str = "") -> tuple[Plan, str, int]:
    """One random site plan, its description and the cables to cut
    (``family``: ``3lvl`` or ``2lvl`` only, else mostly directors)."""
    if family == "2lvl":
        leaves, spines, cables = (int(rng.integers(4, 18)), int(rng.integers(2, 10)),
                                  int(rng.integers(1, 3)))
        svc, island = int(rng.integers(0, 5)), bool(rng.random() < 0.3)
        return (two_level(leaves, 16, spines, cables, spine_svc=svc, island=island),
                f"2lvl L{leaves} S{spines} c{cables} spine_svc{svc}"
                f"{' island' if island else ''}",
                min(int(rng.choice([0, 2, 5, 10])), leaves * spines // 4))
    if family != "3lvl" and rng.random() < 0.75:
        nd = int(rng.integers(2, 4))
        kinds = [str(rng.choice(KINDS)) for _ in range(nd)]
        leaves, cables = int(rng.integers(8, 30)), int(rng.integers(1, 4))
        svc, dirs = int(rng.integers(1, 6)), int(rng.integers(1, nd + 1))
        island = bool(rng.random() < 0.3)
        return (leaves_dirs(leaves, 16, kinds, cables, line_svc=svc, line_svc_dirs=dirs,
                            island=island),
                f"dirs L{leaves} {'+'.join(kinds)} c{cables} line_svc{svc}/{dirs}dir"
                f"{' island' if island else ''}", int(rng.choice([0, 0, 2, 5, 10])))
    pods = [int(x) for x in rng.integers(3, 8, size=int(rng.integers(2, 4)))]
    spines, cores, svc = int(rng.integers(4, 9)), int(rng.integers(1, 3)), int(rng.integers(1, 5))
    return (three_level(pods, 16, spines, cores, core_svc=svc),
            f"3lvl pods{pods} S{spines} cc{cores} core_svc{svc}",
            int(rng.choice([0, 3, 8, 15] if family == "3lvl" else [0, 0, 2, 5, 10])))


SHARP_TREES = [  # (h, m, w, p) of PGFTs with an aggregation node on every switch
    (2, (16, 8), (1, 8), (1, 1)),
    (2, (12, 6), (1, 6), (1, 2)),
    (3, (8, 8, 8), (1, 8, 8), (1, 1, 1)),
    (3, (6, 6, 6), (1, 6, 6), (1, 1, 1)),
    (3, (4, 8, 8), (1, 4, 8), (1, 1, 1)),
    (3, (8, 4, 4), (1, 4, 2), (1, 1, 2)),
]


def sharp_tree(rng: np.random.Generator) -> tuple[Fabric, str, int]:
    """A PGFT of :data:`SHARP_TREES` with aggregation nodes, 1-6% of its
    switch-to-switch cables cut; the fabric, its description and the cut."""
    h, m, w, p = SHARP_TREES[int(rng.integers(len(SHARP_TREES)))]
    base = with_aggregation_nodes(pgft(h, m, w, p))
    sw = base.node_type == NodeType.SWITCH
    cables = int((sw[base.port_node[base.link_a]] & sw[base.port_node[base.link_b]]).sum())
    links = max(1, int(cables * rng.uniform(0.01, 0.06)))
    f, _ = degrade(base, rng, links=links)
    return f, f"sharp PGFT({h};{m};{w};{p})", links


def run(seed: int, count: int, family: str = "") -> int:
    """Route ``count`` variants drawn with ``seed`` (``family``: as
    :func:`variant`); the number that fail."""
    rng = np.random.default_rng(seed)
    bad = 0
    for i in range(count):
        if family == "sharp":
            build_seed = seed
            f, desc, links = sharp_tree(rng)
        else:
            plan, desc, links = variant(rng, family)
            build_seed = int(rng.integers(1, 100))
            f = build(plan, seed=build_seed, links=links)
        t0 = time.perf_counter()
        r = route(f, workers=1, labels=False)
        took = time.perf_counter() - t0
        v = validate_result(r)
        ok = v.ok and check_credit_loops(f, r.tables).ok
        bad += not ok
        print(f"{i:3d} {'ok ' if ok else 'BAD'} {took:5.1f} s {r.mode:13s} {desc} "
              f"-{links} links seed{build_seed}" + ("" if ok else f": {v.summary()[:70]}"),
              flush=True)
    print(f"BAD: {bad} of {count}")
    return bad


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    run(*(args + [7, 40][len(args):]), family=(sys.argv[3:4] or [""])[0])
