"""Random traffic on trees that lost a parallel cable: where one up group of
a leaf has one cable fewer than the others, Dmodc's and Nmodc's tables still
give that group the same share of destinations, so its remaining cable
carries twice the destinations of any other (the NVIDIA example: 59 against
about 29).  Random host orders meet it: there OpenSM's nue and dfsssp
(which weigh every channel) are lower.

This script tries the smallest change that spreads them (a pass over the
final tables, not in the product): a leaf deals each up group's
destinations over the group's cables in NID order as if it had all of them,
and moves the ones dealt to a missing cable to the least-loaded cable of a
group that leads closer.  ``--max-missing``: only leaves missing at most
that many cables.  It prints A2A, SP and shift HSD in GUID and host-name
order, and the means over ``--orders`` random host orders, before and after.

Usage (from the repository root)::

    .venv/bin/python research/lost_cables.py NVIDIA-topograph-example.out
    .venv/bin/python research/lost_cables.py --cut 15 ndr-topograph-like-540
    .venv/bin/python research/lost_cables.py --pgft '2;16,16;1,8;1,2' --throw link:20
"""

from __future__ import annotations

import argparse
import dataclasses
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
from smroute.fabric.model.base import NodeType  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.routing.dmodc import hop_counts  # noqa: E402
from smroute.routing.engine import RoutingResult, route  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.tables.lft import ForwardingTables  # noqa: E402

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "fabrics" / "real"


def lost_cable_pass(r: RoutingResult, max_missing: int) -> tuple[np.ndarray, int]:
    """The tables' ports with the leaves' lost-cable destinations moved
    (module doc), and how many moved."""
    g, dest = r.graph, r.dest
    ports = r.tables.ports.copy()
    hop = hop_counts(r.costs).astype(np.int64)
    eps = np.flatnonzero(~dest.is_switch)
    order = eps[np.argsort(dest.nid[eps], kind="stable")]
    lids, tgt = dest.lid[order], dest.target[order]
    moved = 0
    for s in g.leaves.tolist():
        gids = np.arange(g.grp_first[s], g.grp_first[s] + g.grp_count[s])
        up = gids[g.rank[g.grp_remote[gids]] > g.rank[s]]
        cnt = g.grp_port_count[up]
        if len(up) < 2 or (cnt == cnt.max()).all() or cnt.max() * len(up) - cnt.sum() > max_missing:
            continue
        cables = {int(k): g.grp_ports[g.grp_port_first[k]:g.grp_port_first[k] + g.grp_port_count[k]]
                  for k in up}
        group_of = {int(p): k for k, ps in cables.items() for p in ps.tolist()}
        now = ports[s, lids].astype(np.int64)
        in_grp = np.array([group_of.get(int(p), -1) for p in now])
        load = dict.fromkeys(group_of, 0)
        lost = []
        for k, ps in cables.items():
            for i, j in enumerate(np.flatnonzero(in_grp == k).tolist()):
                if i % int(cnt.max()) < len(ps):
                    p = int(ps[i % int(cnt.max())])
                    ports[s, lids[j]] = p
                    load[p] += 1
                else:
                    lost.append(j)
        for j in lost:
            closer = [k for k in cables if hop[g.grp_remote[k], tgt[j]] == hop[s, tgt[j]] - 1]
            best = min((int(p) for k in closer for p in cables[k].tolist()),
                       key=lambda p: (load[p], p))
            ports[s, lids[j]] = best
            load[best] += 1
            moved += 1
    return ports, moved


def figures(f: Fabric, tables: ForwardingTables, orders: int) -> str:
    roles = fabric_roles(f)
    view = routing_view(f, tables)
    paths = pair_paths(view)
    named = site_compare.host_orders(f, roles, view.ep_node, view.ep_guid)["compute"]
    out = [f"A2A {a2a_risk(view, paths, named['guid']).value}"]
    for on, o in named.items():
        m = evaluate(view, paths, P.cps("shift", len(o)), o)
        out.append(f"{on} SP {m.risk_max} HSD {m.hsd_avg:.3f}")
    rng = np.random.default_rng(11)
    rand = [evaluate(view, paths, P.cps("shift", len(named["guid"])),
                     rng.permutation(named["guid"])) for _ in range(orders)]
    out.append(f"random orders SP {np.mean([m.risk_max for m in rand]):.2f} "
               f"HSD {np.mean([m.hsd_avg for m in rand]):.3f}")
    return " | ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fabric", nargs="?", help="catalogue shape or real capture name")
    ap.add_argument("--pgft", help="a PGFT spec instead (e.g. '2;16,16;1,8;1,2')")
    ap.add_argument("--throw", default="link:5", help="with --pgft: KIND:INDEX of seed 2026")
    ap.add_argument("--cut", type=int, default=0, help="switch-to-switch cables cut (seed 1)")
    ap.add_argument("--max-missing", type=int, default=1 << 30)
    ap.add_argument("--orders", type=int, default=30)
    args = ap.parse_args()
    if args.pgft:
        kind, idx = args.throw.split(":")
        f = plan_throw(parse_pgft(args.pgft).build(), kind, 2026, int(idx)).fabric
    else:
        name = args.fabric
        f = build_shape(name) if name in CATALOGUE else read_fabric(REAL / name)
    if args.cut:
        sw = f.node_type == NodeType.SWITCH
        inter = np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])
        f = f.with_removed(links=np.random.default_rng(1).choice(inter, args.cut, replace=False))
    r = route(f, workers=1, labels=False, max_vls=1)
    ports, moved = lost_cable_pass(r, args.max_missing)
    print(f"default   {figures(f, r.tables, args.orders)}")
    print(f"pass      {figures(f, dataclasses.replace(r.tables, ports=ports), args.orders)}"
          f"  ({moved} entries moved)")


if __name__ == "__main__":
    main()
