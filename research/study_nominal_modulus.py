#!/usr/bin/env python3
"""Experiment behind the docs' explanation (the study page) of Dmodc's A2A on link-degraded
3-level trees (an investigation, not a routing engine).

On PGFT(3;12,12,12;1,12,12;1,1,1) a leaf that lost one of its 12 up-links
picks the L2 switch for destination NID ``t`` as ``t mod 11`` while its
intact neighbours use ``t mod 12``, so each damaged leaf pushes a different
set of destinations through the pod's L2 up-links and their A2A congestion
risk (distinct destinations) adds up.  This script re-routes the degraded
fabric of a study throw with Dmodc, then rewrites only the up-going entries
of the damaged leaves with the *nominal* modulus (``t mod 12``, the L2 with
that index in the pod) wherever that L2 switch still routes the destination,
and compares A2A and SP (and unrouted pairs) before and after.

    .venv/bin/python research/study_nominal_modulus.py 0 16 30 5   # link throws, seed 2026
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.analysis import patterns as P  # noqa: E402
from smroute.analysis.congestion import a2a_risk, sp_risk  # noqa: E402
from smroute.analysis.paths import pair_paths, routing_view  # noqa: E402
from smroute.fabric.generate.trees import parse_tuple  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.tables.lft import NO_ROUTE, ForwardingTables  # noqa: E402

TREE = "3;12,12,12;1,12,12;1,1,1"
NOMINAL = 12  # up-links of a leaf in the complete tree


def _metrics(fab: Fabric, tab: ForwardingTables, order: np.ndarray) -> tuple[int, int, int]:
    v = routing_view(fab, tab)
    pp = pair_paths(v)
    return a2a_risk(v, pp, order).value, sp_risk(v, pp, order).risk_max, pp.unroutable_pairs


def nominal_leaves(fab: Fabric, t: ForwardingTables, lid_nid: dict[int, int]
                   ) -> tuple[ForwardingTables, int]:
    """Tables with the damaged leaves' up-going entries chosen by ``t mod 12``."""
    ports = t.ports.copy()
    row_of = {int(g): i for i, g in enumerate(t.switch_guid.tolist())}
    changed = 0
    for row, desc in enumerate(t.switch_desc):
        tp = parse_tuple(desc)
        if tp is None or tp[0] != 1:
            continue
        node = int(np.flatnonzero(fab.node_guid == t.switch_guid[row])[0])
        up: dict[int, tuple[int, int]] = {}  # L2 index in the pod -> (port, L2 table row)
        for p in range(1, int(fab.num_ports[node]) + 1):
            peer = int(fab.port_peer[int(fab.port_start[node]) + p])
            if peer < 0:
                continue
            pn = int(fab.port_node[peer])
            pt = parse_tuple(fab.node_desc[pn])
            if pt is not None and pt[0] == 2:
                up[pt[1][1]] = (p, row_of[int(fab.node_guid[pn])])
        if len(up) == NOMINAL:
            continue
        up_ports = {q for q, _ in up.values()}
        for lid, nid in lid_nid.items():
            if int(ports[row, lid]) not in up_ports:
                continue  # local or unrouted destination
            i = nid % NOMINAL
            if i in up and t.ports[up[i][1], lid] != NO_ROUTE:
                ports[row, lid] = up[i][0]
                changed += 1
    return ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports), changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("throws", type=int, nargs="+")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--mode", default="link", choices=("link", "switch"))
    args = ap.parse_args()
    full = parse_pgft(TREE).build()
    print("throw removed  A2A before -> after  SP before -> after  unrouted after  entries changed")
    for i in args.throws:
        th = plan_throw(full, args.mode, args.seed, i)
        res = route(th.fabric, workers=1, labels=False)
        view = routing_view(th.fabric, res.tables)
        order = P.topological_order(view, res)
        before = _metrics(th.fabric, res.tables, order)
        lid_nid = dict(zip(res.dest.lid.tolist(), res.dest.nid.tolist(), strict=True))
        t2, changed = nominal_leaves(th.fabric, res.tables, lid_nid)
        after = _metrics(th.fabric, t2, order)
        print(f"{i:5d} {th.removed:7d}  {before[0]:10d} -> {after[0]:<5d}  {before[1]:9d} -> "
              f"{after[1]:<5d}  {after[2]:14d}  {changed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
