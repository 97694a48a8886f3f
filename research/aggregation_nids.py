"""Where the aggregation nodes take their topological NIDs: with their
leaf (as they were numbered), or after every host (the product), and
Nmodc's wrap gaps over the leaves' groups or over their up cables.

A leaf of 17 hosts and its aggregation node over 9 spines with 2 cables
each: numbered with the leaf, the aggregation node takes one of the 18
slots of the leaf's modulus and one up cable carries no host's traffic.

Usage (from the repository root)::

    .venv/bin/python research/aggregation_nids.py --orders 30 ndr-topograph-like-540 \\
        hdr-cs8500-720 hdr-cs8500-core-island-900 NVIDIA-topograph-example.out

Prints, per variant, SP and shift HSD over the compute hosts in GUID and
host-name order, and the mean of both over ``--orders`` random host orders
(the GUID order is one random-like order: its SP moves by one from order
to order), Nmodc on one VL.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import site_compare  # noqa: E402

from smroute.analysis import patterns as P  # noqa: E402
from smroute.analysis.congestion import evaluate  # noqa: E402
from smroute.analysis.paths import pair_paths, routing_view  # noqa: E402
from smroute.fabric.generate.catalogue import CATALOGUE, build_shape  # noqa: E402
from smroute.fabric.ibnetdiscover.parse import read_fabric  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.routing import dmodc  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.routing.nmodc import wrap  # noqa: E402
from smroute.routing.topology import SwitchGraph  # noqa: E402

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "fabrics" / "real"
NIDS, GAPS = dmodc.topological_nids, wrap.wrap_gaps


def _with_leaf(g: SwitchGraph, c: np.ndarray) -> np.ndarray:
    return NIDS(dataclasses.replace(g, ep_agg=np.zeros_like(g.ep_agg)), c)


def _no_gaps(g: SwitchGraph, t: np.ndarray) -> np.ndarray:
    return t


VARIANTS: dict[str, tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]] = {
    "with their leaf, no gaps (before)": (_with_leaf, _no_gaps),
    "last, no gaps": (NIDS, _no_gaps),
    "last, gaps over up cables (now)": (NIDS, GAPS),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fabrics", nargs="+", help="catalogue shape names or real capture names")
    ap.add_argument("--orders", type=int, default=30, help="random host orders (default 30)")
    args = ap.parse_args()
    for name in args.fabrics:
        f = build_shape(name) if name in CATALOGUE else read_fabric(REAL / name)
        roles = fabric_roles(f)
        print(name)
        for label, (nids, gaps) in VARIANTS.items():
            dmodc.topological_nids, wrap.wrap_gaps = nids, gaps  # type: ignore[assignment]
            try:
                r = route(f, workers=1, labels=False, max_vls=1, algorithm="nmodc")
            finally:
                dmodc.topological_nids, wrap.wrap_gaps = NIDS, GAPS  # type: ignore[assignment]
            view = routing_view(f, r.tables)
            paths = pair_paths(view)
            orders = site_compare.host_orders(f, roles, view.ep_node, view.ep_guid)["compute"]
            out = []
            for on, o in orders.items():
                m = evaluate(view, paths, P.cps("shift", len(o)), o)
                out.append(f"{on} SP {m.risk_max} HSD {m.hsd_avg:.3f}")
            rng = np.random.default_rng(7)
            rand = [evaluate(view, paths, P.cps("shift", len(orders["guid"])),
                             rng.permutation(orders["guid"])) for _ in range(args.orders)]
            out.append(f"random orders: SP {np.mean([m.risk_max for m in rand]):.2f} "
                       f"HSD {np.mean([m.hsd_avg for m in rand]):.3f}")
            print(f"  {label:36s} " + " | ".join(out), flush=True)


if __name__ == "__main__":
    main()
