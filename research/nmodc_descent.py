"""Nmodc's way down on fabrics whose switches reach a target through
several closer groups below (pods under directors): Dmodc, Nmodc with the
low digit alone (``C[t mod #C]``), and Nmodc with its descent
(``smroute/routing/nmodc/descent.py``: where the low digit sends every
arrival of a target down one link, each takes its own up-route's child).

Where director line ASICs take the spines' cables round-robin, the spines
of every eighth column share a line ASIC; the destinations that arrive
there have strided columns, ``t mod #C`` is the same for all of them and
one down-link carries every arrival.

Usage (from the repository root)::

    .venv/bin/python research/nmodc_descent.py ndr-pods-qm9790-5900 \
        hdr-pods-4xcs8500-2500 Mellanox-ufm_sdk_3.0-selene.storage.txt

Prints SP, shift HSD and RP (median of 200 random permutations) over the
compute hosts in GUID and host-name order, and A2A, one VL.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import site_compare  # noqa: E402

from smroute.analysis import patterns as P  # noqa: E402
from smroute.analysis.congestion import a2a_risk, evaluate  # noqa: E402
from smroute.analysis.paths import pair_paths, routing_view  # noqa: E402
from smroute.fabric.generate.catalogue import CATALOGUE, build_shape  # noqa: E402
from smroute.fabric.ibnetdiscover.parse import read_fabric  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fabric.roles import FabricRoles, fabric_roles  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.routing.nmodc import engine as nmodc_engine  # noqa: E402
from smroute.tables.lft import ForwardingTables  # noqa: E402

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "fabrics" / "real"


def metrics(f: Fabric, roles: FabricRoles, tables: ForwardingTables) -> str:
    view = routing_view(f, tables)
    paths = pair_paths(view)
    orders = site_compare.host_orders(f, roles, view.ep_node, view.ep_guid)["compute"]
    out = []
    for name, o in orders.items():
        n = len(o)
        sp = evaluate(view, paths, P.cps("shift", n), o)
        rp = evaluate(view, paths, P.random_permutations(n, np.random.default_rng(1), 200), o)
        out.append(f"{name}: SP {sp.risk_max} HSD {sp.hsd_avg:.3f} RP {rp.risk_median:g}")
    a2a = a2a_risk(view, paths, orders["guid"]).value
    return f"A2A {a2a} | " + " | ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fabrics", nargs="+", help="catalogue shape names or real capture names")
    args = ap.parse_args()
    for name in args.fabrics:
        f = build_shape(name) if name in CATALOGUE else read_fabric(REAL / name)
        roles = fabric_roles(f)
        d = route(f, workers=1, labels=False, max_vls=1, algorithm="dmodc")
        n = route(f, workers=1, labels=False, max_vls=1, algorithm="nmodc")
        keep = nmodc_engine.descent_keys
        nmodc_engine.descent_keys = lambda *a: np.zeros(0, dtype=np.int64)  # type: ignore
        try:
            low = route(f, workers=1, labels=False, max_vls=1, algorithm="nmodc")
        finally:
            nmodc_engine.descent_keys = keep
        changed = int((low.tables.ports != n.tables.ports).sum())
        print(f"{name} ({n.mode})")
        print(f"  dmodc                 {metrics(f, roles, d.tables)}")
        print(f"  nmodc, low digit only {metrics(f, roles, low.tables)}")
        print(f"  nmodc                 {metrics(f, roles, n.tables)}  ({changed} entries differ)",
              flush=True)


if __name__ == "__main__":
    main()
