#!/usr/bin/env python3
"""Why Nmodc's topological HSD is worse than Dmodc's on a tree that lost
switches, and what taking Dmodc's entries costs (an investigation, not the
study).

Re-plans throws of a study (same seed and protocol:
:func:`smroute.study.degrade.plan_throw`), routes each with Dmodc and Nmodc
(``--vls`` as the study) and measures, with the hosts in Dmodc's
topological order, the study's metrics of:

* ``dmodc``, ``nmodc``: the engines' tables;
* ``intra``: Nmodc's tables, with the leaves that lost an up-neighbour
  (fewer upper switches than the most a leaf has) taking Dmodc's entries
  towards the hosts under their own upper switches (their pod: the upper
  switch routes those down, no upper digit is consumed; since
  :mod:`smroute.routing.nmodc.pod_routes`, Nmodc's own tables wherever the
  pod's leaves lost the same upper switches and nothing else);
* ``target``: Nmodc's tables, with every leaf taking Dmodc's entries towards
  the hosts of the leaves that lost an up-neighbour (Dmodc's
  ``x mod #C`` over the surviving upper switches for every destination of a
  damaged pod, from every source).

Both hybrids are valid routings (a leaf entry of Dmodc leads closer; the
upper switches' rows are Nmodc's, which route every destination on), and
the metrics count undelivered pairs.  Per throw: HSD of the topological
CPS (``topo``), random-order HSD (``rnd``), A2A, RP median, SP; then per
removal band and metric the two-sided sign test of each table set against
Dmodc (ties dropped).  ``--levels``: per class of switch-to-switch link (the
levels of its two switches, 0 for the leaves; ``0>1d`` the up-links of the
leaves that lost an up-neighbour), the mean over the topological CPS of
the per-stage largest load on that class.

    .venv/bin/python research/study_hsd_topo_trade.py --throws 0,1,3,4,5,7,10
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.analysis import patterns as P  # noqa: E402
from smroute.analysis.compare import CompareConfig, compare_tables  # noqa: E402
from smroute.analysis.congestion import link_loads  # noqa: E402
from smroute.analysis.paths import pair_paths  # noqa: E402
from smroute.analysis.view import RoutingView, routing_view  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.tables.lft import ForwardingTables  # noqa: E402

TREES = {"pgft1728": "3;12,12,12;1,12,12;1,1,1", "pgft648": "2;18,36;1,18;1,1"}
#: the study's removal bands (equipment removed)
BANDS = ((0, 0), (1, 3), (4, 15), (16, 63), (64, 1 << 30))
METRICS = ("hsd_topo", "hsd_random", "a2a", "rp", "sp")
SHORT = {"hsd_topo": "topo", "hsd_random": "rnd", "a2a": "a2a", "rp": "rp", "sp": "sp"}


def sign_p(worse: int, better: int) -> float:
    """Two-sided sign test: P of a split at least as uneven as ``worse`` /
    ``better`` (ties already dropped) under a fair coin."""
    n = worse + better
    if n == 0:
        return 1.0
    k = min(worse, better)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def leaf_facts(view: RoutingView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pod (Lv,), damaged (Lv,) bool, upper (S, 256) bool)``: each leaf's
    pod (leaves joined through shared upper switches, labelled by the
    smallest member), whether it has fewer upper switches than the most a
    leaf has, and which switch ports lead to a higher level."""
    nxt = view.next_sw.reshape(-1, 256)
    lvl = view.sw_level
    upper = (nxt >= 0) & (lvl[np.maximum(nxt, 0)] > lvl[:, None])
    ups = [np.unique(nxt[leaf][upper[leaf]]) for leaf in view.leaves]
    n_up = np.array([len(u) for u in ups])
    label = np.arange(len(view.leaves))

    def find(i: int) -> int:
        while label[i] != i:
            i = int(label[i])
        return i

    owner: dict[int, int] = {}
    for i, u in enumerate(ups):
        for s in u.tolist():
            if s in owner:
                a, b = find(i), find(owner[s])
                label[max(a, b)] = min(a, b)
            else:
                owner[s] = i
    pod = np.array([find(i) for i in range(len(ups))])
    return pod, n_up < n_up.max(initial=0), upper


def hybrids(fabric: Fabric, dmodc: ForwardingTables, nmodc: ForwardingTables
            ) -> dict[str, ForwardingTables]:
    """The hybrid table sets of the module doc (``intra``, ``target``)."""
    view = routing_view(fabric, dmodc)
    pod, damaged, _ = leaf_facts(view)
    leaf_row = np.searchsorted(view.leaves, view.ep_leaf)
    ep_pod, ep_damaged = pod[leaf_row], damaged[leaf_row]
    rows = view.table_row[view.leaves]
    out = {}
    for name in ("intra", "target"):
        ports = nmodc.ports.copy()
        for i, row in enumerate(rows.tolist()):
            if name == "intra":
                if not damaged[i]:
                    continue
                sel = (ep_pod == pod[i]) & (leaf_row != i)
            else:
                sel = ep_damaged & (leaf_row != i)
            lids = view.ep_lid[sel]
            ports[row, lids] = dmodc.ports[row, lids]
        out[name] = dataclasses.replace(nmodc, ports=ports)
    return out


def level_loads(fabric: Fabric, tables: ForwardingTables, order: np.ndarray,
                ref: RoutingView) -> dict[str, float]:
    """``--levels``: per link class, the mean over the topological CPS of
    the per-stage largest load on that class (module doc)."""
    view = routing_view(fabric, tables)
    paths = pair_paths(view)
    _, damaged, _ = leaf_facts(ref)
    sw = ref.link_switch[:ref.n_core].astype(np.int64)
    nxt = ref.next_sw[sw * 256 + ref.link_port[:ref.n_core].astype(np.int64)]
    a, b = ref.sw_level[sw], ref.sw_level[np.maximum(nxt, 0)]
    dam_sw = np.zeros(ref.n_switches, dtype=bool)
    dam_sw[ref.leaves[damaged]] = True
    classes = {f"{x}>{y}": (a == x) & (b == y) & (nxt >= 0)
               for x, y in sorted(set(zip(a.tolist(), b.tolist(), strict=True)))}
    classes["0>1d"] = classes.get("0>1", np.zeros(len(sw), bool)) & dam_sw[sw]
    per: dict[str, list[float]] = {c: [] for c in classes}
    n = len(order)
    for c in P.CPS:
        pat = P.cps(c, n)
        tops: dict[str, list[int]] = {k: [] for k in classes}
        for k in range(pat.n_stages):
            src, dst = pat[k]
            loads, _ = link_loads(view, paths, order[src], order[dst])
            if not loads.any():
                continue
            core = loads[:ref.n_core]
            for name, m in classes.items():
                tops[name].append(int(core[m].max(initial=0)))
        for name in classes:
            per[name].append(float(np.mean(tops[name])) if tops[name] else 0.0)
    return {name: float(np.mean(v)) for name, v in per.items()}


def band_of(removed: int) -> str:
    for lo, hi in BANDS:
        if lo <= removed <= hi:
            return f"{lo}-{hi}" if hi < 1 << 30 else f"{lo}+"
    return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", choices=sorted(TREES), default="pgft1728")
    ap.add_argument("--mode", choices=("link", "switch"), default="switch")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--throws", default="0,1,3,4,5,7,10",
                    help="throw indices, comma-separated")
    ap.add_argument("--vls", type=int, default=4, help="data VLs nmodc may use (as the study)")
    ap.add_argument("--random-orders", type=int, default=20)
    ap.add_argument("--rp-samples", type=int, default=200)
    ap.add_argument("--levels", action="store_true", help="per link class loads (module doc)")
    args = ap.parse_args()
    full = parse_pgft(TREES[args.fabric]).build()
    names = ("dmodc", "nmodc", "intra", "target")
    rows: list[tuple[int, int, dict[str, dict[str, float]]]] = []
    for i in (int(t) for t in args.throws.split(",")):
        th = plan_throw(full, args.mode, args.seed, i)
        fab = th.fabric
        res = {a: route(fab, algorithm=a, workers=1, labels=False, max_vls=args.vls)
               for a in ("dmodc", "nmodc")}
        tabs = {a: r.tables for a, r in res.items()}
        tabs.update(hybrids(fab, tabs["dmodc"], tabs["nmodc"]))
        view = routing_view(fab, tabs["dmodc"])
        order = P.topological_order_from(view, res["dmodc"].graph.ep_row, res["dmodc"].nids)
        cfg = CompareConfig(rp_samples=args.rp_samples, random_orders=args.random_orders)
        ms = compare_tables(fab, tabs, order, np.random.default_rng([args.seed, i]), cfg)
        vals = {m.name: dict(m.values) for m in ms}
        lost = {m.name: sum(m.unroutable.values()) for m in ms}
        rows.append((i, th.removed, vals))
        print(f"throw {i} ({th.removed} removed) " + " | ".join(
            f"{n} " + " ".join(f"{SHORT[k]} {vals[n][k]:.3f}" for k in METRICS)
            + (f" undelivered {lost[n]}" if lost[n] else "") for n in names), flush=True)
        if args.levels:
            for n in names:
                lv = level_loads(fab, tabs[n], order, view)
                print(f"    {n:7s} " + " ".join(f"{c} {v:.3f}" for c, v in lv.items()))
    print("\nper band, against dmodc: worse/better (p of the sign test), sum")
    for band in sorted({band_of(r) for _, r, _ in rows}):
        sel = [v for _, r, v in rows if band_of(r) == band]
        print(f"band {band} ({len(sel)} throws)")
        for n in names[1:]:
            cells = []
            for k in METRICS:
                w = sum(v[n][k] > v["dmodc"][k] for v in sel)
                b = sum(v[n][k] < v["dmodc"][k] for v in sel)
                cells.append(f"{SHORT[k]} {w}/{b} (p {sign_p(w, b):.3g}) "
                             f"{sum(v[n][k] for v in sel):.2f}")
            print(f"  {n:7s} " + "; ".join(cells))
        print("  dmodc   " + "; ".join(f"{SHORT[k]} {sum(v['dmodc'][k] for v in sel):.2f}"
                                       for k in METRICS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
