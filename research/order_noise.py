"""How much of a one-unit SP difference in port-GUID order is the order.

Port GUIDs are handed out by the factory, not by the cabling, so the
port-GUID order of the hosts is one random-like order: its SP (the largest
link load over the shifts) is one draw. This script boots the fabric in
ibsim, runs OpenSM's engines (the real OpenSM), routes smroute's default on
the fabric ibnetdiscover found, and measures, over the compute hosts, SP and
shift HSD in GUID order, in host-name order and in ``--orders`` random
orders (the same orders for every engine), with the two-sided sign test of
smroute against each engine over the random orders (ties dropped).

Usage (from the repository root)::

    .venv/bin/python research/order_noise.py --orders 60 --engines updn dnup nue dfsssp \\
        --work /tmp/order-noise edr-cs7520-200 hdr-cs8500-720 ndr-dgx-h100-4su
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import site_compare  # noqa: E402

from smroute.analysis import patterns as P  # noqa: E402
from smroute.analysis.congestion import evaluate  # noqa: E402
from smroute.analysis.paths import pair_paths, routing_view  # noqa: E402
from smroute.fabric.generate.catalogue import CATALOGUE, build_shape  # noqa: E402
from smroute.fabric.ibnetdiscover.parse import read_fabric  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.lab.sidebyside import simulate  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.study.signtest import sign_test  # noqa: E402
from smroute.tables.lft import ForwardingTables  # noqa: E402

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "fabrics" / "real"


def measure(f: Fabric, tables: ForwardingTables, orders: list[np.ndarray]
            ) -> tuple[np.ndarray, np.ndarray]:
    """SP ``(K,)`` and shift HSD ``(K,)`` of ``tables`` in each order."""
    view = routing_view(f, tables)
    paths = pair_paths(view)
    sp, hsd = [], []
    for o in orders:
        m = evaluate(view, paths, P.cps("shift", len(o)), o)
        sp.append(m.risk_max)
        hsd.append(m.hsd_avg)
    return np.asarray(sp), np.asarray(hsd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fabrics", nargs="+",
                    help="catalogue shape names, real capture names or capture paths")
    ap.add_argument("--orders", type=int, default=60, help="random host orders (default 60)")
    ap.add_argument("--engines", nargs="+", default=["updn", "dnup", "nue", "dfsssp"])
    ap.add_argument("--vls", type=int, default=8, help="smroute's VLs (the plugin's: 8)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/order-noise"))
    args = ap.parse_args()
    for name in args.fabrics:
        capture = None if name in CATALOGUE else Path(name) if "/" in name else REAL / name
        fabric = build_shape(name) if capture is None else read_fabric(capture)
        sim = simulate(fabric, args.work / Path(name).name, args.engines, capture=capture)
        f = sim.fabric
        roles = fabric_roles(f)
        ours = route(f, workers=1, labels=False, max_vls=args.vls).tables
        view = routing_view(f, ours)
        named = site_compare.host_orders(f, roles, view.ep_node, view.ep_guid)["compute"]
        rng = np.random.default_rng(11)
        orders = [named["guid"], named["name"]]
        orders += [rng.permutation(named["guid"]) for _ in range(args.orders)]
        tables = {"smroute": ours}
        tables.update({e: r.tables for e, r in sim.runs.items() if r.tables is not None})
        figures = {e: measure(f, t, orders) for e, t in tables.items()}
        sp0, hsd0 = figures["smroute"]
        print(f"{name}: {len(named['guid'])} compute hosts, {args.orders} random orders")
        print("  engine    SP guid SP name | random orders: SP mean (sd)  HSD mean | SP sign test "
              "(smroute worse/better, p)")
        for e, (sp, hsd) in figures.items():
            r = slice(2, None)
            worse = int((sp0[r] > sp[r]).sum())
            better = int((sp0[r] < sp[r]).sum())
            test = "" if e == "smroute" else f"{worse}/{better}, p {sign_test(worse, better):.2g}"
            print(f"  {e:9s} {sp[0]:7d} {sp[1]:7d} | {sp[r].mean():6.2f} ({sp[r].std():.2f}) "
                  f"{hsd[r].mean():9.3f} | {test}", flush=True)


if __name__ == "__main__":
    main()
