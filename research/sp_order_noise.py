#!/usr/bin/env python3
"""How much of a shift-permutation miss in port-GUID order is the order?

SP is the largest link load over the ``N - 1`` shifts of one host order.
Where host GUIDs are not in cabling order (real HCAs; the unseen sweep's
GUID seeds), port-GUID order is one arbitrary order, so an engine's SP in it
is one draw.  For each fabric given, this boots ibsim, runs OpenSM's engines
(``--engines``) and smroute's default (one VL and ``--vls``), and measures
every table set's SP in port-GUID order and over ``--orders`` random host
orders (the same orders for every engine): the mean, the share of orders
where smroute is above / equal / below each rival, and the two-sided sign
test (ties dropped).  Compute hosts only, as the catalogue bench.

    PYTHONPATH=. .venv/bin/python research/sp_order_noise.py DIR/v004.topo ... \\
        [--orders 200] [--engines updn dnup minhop dfsssp nue]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from math import comb
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from site_compare import host_orders  # noqa: E402

from smroute.analysis import patterns as P  # noqa: E402
from smroute.analysis.congestion import evaluate  # noqa: E402
from smroute.analysis.paths import pair_paths, routing_view  # noqa: E402
from smroute.cli.inputs import load_fabric  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.lab.sidebyside import simulate  # noqa: E402
from smroute.routing.engine import route  # noqa: E402


def sign_p(worse: int, better: int) -> float:
    """Two-sided sign test, ties dropped."""
    n = worse + better
    if not n:
        return 1.0
    k = min(worse, better)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def sp_values(f, tables, orders: list[np.ndarray]) -> np.ndarray:
    view = routing_view(f, tables)
    paths = pair_paths(view)
    n = len(orders[0])
    return np.array([evaluate(view, paths, P.cps("shift", n), o).risk_max for o in orders])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fabrics", nargs="+", type=Path)
    ap.add_argument("--orders", type=int, default=200)
    ap.add_argument("--vls", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engines", nargs="+", default=["updn", "dnup", "minhop", "dfsssp", "nue"])
    args = ap.parse_args()
    print("| fabric | engine | SP guid | SP mean over orders "
          "| smroute 1 VL above / equal / below, p | smroute VLs above / equal / below, p |")
    print("|---|---|---|---|---|---|")
    for path in args.fabrics:
        fab = load_fabric(str(path))
        with tempfile.TemporaryDirectory() as work:
            sim = simulate(fab, work, args.engines, timeout=600)
        disc = sim.fabric
        roles = fabric_roles(disc)
        tables = {e: r.tables for e, r in sim.runs.items() if r.tables is not None}
        tables["smroute"] = route(disc, workers=1, labels=False).tables
        tables["smroute-vls"] = route(disc, workers=1, labels=False, max_vls=args.vls).tables
        view = routing_view(disc, tables["smroute"])
        guid = host_orders(disc, roles, view.ep_node, view.ep_guid)["compute"]["guid"]
        rng = np.random.default_rng(args.seed)
        orders = [guid] + [rng.permutation(guid) for _ in range(args.orders)]
        sp = {e: sp_values(disc, t, orders) for e, t in tables.items()}
        for e in tables:
            cells = []
            for ours in ("smroute", "smroute-vls"):
                d = sp[ours][1:] - sp[e][1:]
                w, t, b = int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum())
                cells.append(f"{w} / {t} / {b}, p {sign_p(w, b):.2g}")
            print(f"| {path.name} | {e} | {sp[e][0]} | {sp[e][1:].mean():.2f} | {cells[0]} | "
                  f"{cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
