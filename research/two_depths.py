#!/usr/bin/env python3
"""The parts of Nmodc's pass "entries" (:mod:`smroute.routing.nmodc.entries`:
the entries into the leaves ranked apart, ``--part enter_dealt``; their
skewed way up, ``--part up_skewed``) on and off, on generated sites of two
depths (an investigation, not the product).

Each site: two CS7500 directors, K leaves of 18 hosts cabled straight to
them (9 cables to each), P pods of N leaves behind 9 spines (2 cables per
leaf and spine, the spines' free ports, at most 9, to each director); K,
P and N drawn from 8-32, 1-4 and 6-14 with ``--seed``.  Each is routed by
the default on one VL, with the part and without it, and measured over the
compute hosts (``bench/site_compare.table_metrics``: SP / A2A / RP / shift
HSD in GUID order, SP and HSD in host-name order); ``--summary`` prints per
metric on how many sites ``on`` is below / above ``off`` and the sign test.

    .venv/bin/python research/two_depths.py --sites 24 --summary [--part up_skewed]
    .venv/bin/python research/two_depths.py --sites 24 --write DIR   # the sites as files
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from site_compare import table_metrics  # noqa: E402

from smroute.fabric.export.writers import write_topology  # noqa: E402
from smroute.fabric.generate.shapes import with_aggregation_nodes  # noqa: E402
from smroute.fabric.generate.sitegen import CONNECTX5, SWITCHIB, Site  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.routing.nmodc import entries  # noqa: E402
from smroute.study.signtest import sign_test  # noqa: E402

METRICS = ("sp", "a2a", "rp", "hsd", "sp_name", "hsd_name")
#: the parts of the pass that ``--part`` turns off and on
PARTS = ("enter_dealt", "up_skewed")


def site(first: int, pods: int, per_pod: int, seed: int) -> Fabric:
    """The site of the module doc."""
    s = Site(speed="EDR", host_device=CONNECTX5)
    dirs = [s.director(f"core{k + 1}", "CS7500", line_asics=36, spine_asics=18, radix=36,
                       device=SWITCHIB) for k in range(2)]
    n = 0
    leaves = s.switches([f"MF0;cn-first{i + 1:02d}:SB7800/U1" for i in range(first)], 36,
                        SWITCHIB)
    up = min(9, (36 - 2 * per_pod) // 2)
    groups = [(leaves, [])] + [
        (s.switches([f"MF0;cn-p{p + 1}-leaf{i + 1:02d}:SB7800/U1" for i in range(per_pod)], 36,
                    SWITCHIB),
         s.switches([f"MF0;cn-p{p + 1}-spine{j + 1:02d}:SB7800/U1" for j in range(9)], 36,
                    SWITCHIB)) for p in range(pods)]
    for g, (lv, spines) in enumerate(groups):
        for x in lv:
            for _ in range(18):
                s.host(x, f"cn-{'ab'[g > 0]}{n // 100:02d}-c{n % 100:02d} mlx5_0")
                n += 1
            if not spines:
                for d in dirs:
                    s.cable_director(x, d, 9)
            for sp in spines:
                s.cable(x, sp, 2)
        for sp in spines:
            for d in dirs:
                s.cable_director(sp, d, up)
    return with_aggregation_nodes(s.build(np.random.default_rng(seed)))


def measured(f: Fabric, off: str = "") -> dict[str, float]:
    """The default on one VL, without the part ``off`` of the pass (one of
    :data:`PARTS`; ``""``: the whole pass)."""
    keep = getattr(entries, off) if off else None
    if off:
        setattr(entries, off, lambda *a: None)
    try:
        r = route(f, workers=1)
    finally:
        if off:
            setattr(entries, off, keep)
    m = table_metrics(f, r.tables, r.roles, r.lanes, seed=1, rp_samples=100)
    c = m["sets"]["compute"]
    return {"left": m["missing_needed"], "sp": c["guid"]["sp"], "a2a": c["a2a"],
            "rp": c["guid"]["rp"], "hsd": c["guid"]["hsd"], "sp_name": c["name"]["sp"],
            "hsd_name": c["name"]["hsd"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=24)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--part", choices=PARTS, default=PARTS[0],
                    help="the part of the pass compared on and off (default: %(default)s)")
    ap.add_argument("--write", metavar="DIR", type=Path,
                    help="write the sites as ibnetdiscover files here, route nothing")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for k in range(args.sites):
        first = int(rng.choice([8, 12, 16, 24, 32]))
        pods = int(rng.choice([1, 2, 3, 4]))
        per_pod = int(rng.choice([6, 9, 12, 14]))
        if pods * 9 * min(9, (36 - 2 * per_pod) // 2) + first * 9 > 648:
            continue  # (more cables than a CS7500's line ports)
        f = site(first, pods, per_pod, k)
        if args.write:
            args.write.mkdir(parents=True, exist_ok=True)
            write_topology(f, args.write / f"td{k:02d}-{first}L-{pods}x{per_pod}.topo")
            continue
        off, on = measured(f, args.part), measured(f)
        rows.append((off, on))
        print(f"{first} leaves on the directors, {pods} pods of {per_pod}: "
              f"off {off}, on {on}", flush=True)
    if args.summary:
        for m in METRICS:
            d = np.array([on[m] - off[m] for off, on in rows])
            lower, higher = int((d < 0).sum()), int((d > 0).sum())
            print(f"{m}: lower on {lower}, higher on {higher} of {len(d)}, "
                  f"sign test p {sign_test(lower, higher):.2g}")


if __name__ == "__main__":
    main()
