#!/usr/bin/env python3
"""Leaves whose up cables are uneven by shortcuts (an investigation, not the
product): what spreading their load would give.

Sites built of directors whose line switches the leaves reach over uneven
bundles (a leaf cabled to 5-9 line switches of three directors, 1 to 6
cables to each, as CU Boulder's Janus) give two leaves that share a line
switch a two-hop route through it, and every other pair a route over the
directors' spines.  Routing through closer groups only, a leaf sends every
destination of the leaves one line switch reaches directly up that line
switch's cables, whatever their count: a single cable carries several
times the leaf's fair share of destinations (OpenSM's engines that route
over shortest paths do the same).

The pass tried here (:func:`spread_up_cables`): a leaf with a **shortcut**
(:func:`shortcut_leaves`: an up-neighbour that reaches some target leaf
directly while another of its up-neighbours reaches it only through a
higher rank) moves the destinations beyond each up cable's fair share (every
destination LID off the leaf over its up cables, rounded up), highest NID
first, each to the least-loaded of its up cables below the share whose
switch has an up*/down* path to the destination.  The route then climbs to
that switch and follows its entries, which go through closer groups: it
stays up*/down* (free of credit loops on one VL with every other route),
delivered, and at most two hops longer.  Nothing moves where no cable is
beyond its share.  ``--interleave`` instead deals every destination off the
leaf over all its up cables (interleaved across groups) by NID: the other
end of the trade.

Per fabric: Nmodc's tables and the pass's (applied to the final tables, so
meaningful in mode ``tree`` only), with the catalogue bench's metrics over
compute hosts (``bench/site_compare.table_metrics``: needed pairs left,
credit loops, SP / A2A / RP / shift HSD in GUID order, SP and HSD in host
name order), the time of both functions.

    .venv/bin/python research/leaf_shortcuts.py FABRIC [FABRIC ...] [--interleave]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from site_compare import table_metrics  # noqa: E402

from smroute.cli.inputs import load_fabric  # noqa: E402
from smroute.routing.dmodc import INF, Destinations  # noqa: E402
from smroute.routing.engine import route  # noqa: E402
from smroute.routing.runs import runs  # noqa: E402
from smroute.routing.topology import SwitchGraph  # noqa: E402


def _down_leaves(g: SwitchGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(upper, leaf)`` ``(K,)`` int64 each: every cable group from a switch
    above the leaves down to a leaf."""
    k = np.flatnonzero(g.is_leaf[g.grp_remote] & (g.rank[g.grp_switch] > 0))
    return g.grp_switch[k], g.grp_remote[k]


def shortcut_leaves(g: SwitchGraph, c: np.ndarray) -> np.ndarray:
    """``(L,)`` int64, ascending: the leaves with a shortcut (module doc):
    an up-neighbour adjacent to a target leaf, another one not adjacent to
    it with an up*/down* path to it (``c`` ``(S, S)``, encoded costs)."""
    lo, hi = g.up_pairs()
    keep = g.is_leaf[lo]
    lo, hi = lo[keep], hi[keep]
    up, leaf = _down_leaves(g)
    if not len(lo) or not len(up):
        return np.zeros(0, dtype=np.int64)
    # a leaf whose up-neighbours all reach the same leaves has none: a random
    # 64-bit sum per set of leaves below tells the sets apart
    weight = np.random.default_rng(0).integers(1, 1 << 62, g.n_switches, dtype=np.int64)
    below = np.zeros(g.n_switches, dtype=np.int64)
    np.add.at(below, up, weight[leaf])
    h = below[hi]
    first = np.full(g.n_switches, -1, dtype=np.int64)
    first[lo[::-1]] = h[::-1]
    mixed = np.zeros(g.n_switches, dtype=bool)
    mixed[lo[h != first[lo]]] = True
    sel = mixed[lo]
    lo, hi = lo[sel], hi[sel]
    if not len(lo):
        return np.zeros(0, dtype=np.int64)
    # (leaf, up-neighbour, target) for every target some up-neighbour reaches
    o = np.argsort(up, kind="stable")
    up, leaf = up[o], leaf[o]
    start = np.searchsorted(up, hi)
    count = np.searchsorted(up, hi, side="right") - start
    which, at = runs(start, count)
    s, t = lo[which], leaf[at]
    key = np.unique(s * g.n_switches + t)
    s, t = key // g.n_switches, key % g.n_switches
    s, t = s[s != t], t[s != t]
    # each such pair against every up-neighbour of its leaf
    o2 = np.argsort(lo, kind="stable")
    lo, hi = lo[o2], hi[o2]
    start = np.searchsorted(lo, s)
    which, at = runs(start, np.searchsorted(lo, s, side="right") - start)
    u, tt = hi[at], t[which]
    adjacent = np.isin(u * g.n_switches + tt, up * g.n_switches + leaf)
    longer = ~adjacent & (c[u, tt] < INF)
    return np.unique(s[which[longer]])


def _up_cables(g: SwitchGraph, s: int) -> tuple[np.ndarray, ...]:
    """``(cable, upper, group, place)`` ``(K,)`` each, group after group: the
    up cables of switch ``s`` (ports), the switch each leads to, its group's
    index among ``s``'s up groups and its place in the group."""
    ks = np.flatnonzero((g.grp_switch == s) & (g.rank[g.grp_remote] > g.rank[s]))
    which, at = runs(g.grp_port_first[ks], g.grp_port_count[ks])
    return g.grp_ports[at], g.grp_remote[ks][which], which, at - g.grp_port_first[ks][which]


def spread_up_cables(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                     leaves: np.ndarray) -> int:
    """Move the entries of ``leaves`` (:func:`shortcut_leaves`) beyond their
    up cables' fair share, in place in ``ports`` ``(S, W)`` (module doc);
    returns how many moved."""
    moved = 0
    for s in leaves.tolist():
        cable, upper, _, _ = _up_cables(g, s)
        n = len(cable)
        off = np.flatnonzero((dest.target != s) & (c[s, dest.target] < INF))
        if n < 2 or not len(off):
            continue
        lids = dest.lid[off]
        place = np.full(256, -1, dtype=np.int64)
        place[cable] = np.arange(n)
        on = place[ports[s, lids]]
        load = np.bincount(on[on >= 0], minlength=n)
        share = -(-len(off) // n)
        if (load <= share).all():
            continue
        reach = c[upper][:, dest.target[off]] < INF  # (cables, destinations)
        tie = np.arange(n) / (2 * n)
        for i in np.argsort(-dest.nid[off], kind="stable").tolist():
            j = on[i]
            if j < 0 or load[j] <= share:
                continue
            alt = np.flatnonzero(reach[:, i] & (load < share))
            if not len(alt):
                continue
            a = int(alt[np.argmin(load[alt] + tie[alt])])
            load[j] -= 1
            load[a] += 1
            on[i] = a
            ports[s, lids[i]] = cable[a]
            moved += 1
    return moved


def interleaved(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray) -> None:
    """Every leaf deals every destination off it over all its up cables
    (one cable of each group in turn) by NID, where the cable's switch has
    an up*/down* path to it (else the entry stays)."""
    for s in np.flatnonzero(g.is_leaf).tolist():
        cable, upper, group, place = _up_cables(g, s)
        o = np.lexsort((group, place))
        cable, upper = cable[o], upper[o]
        off = np.flatnonzero(dest.target != s)
        if not len(cable) or not len(off):
            continue
        pick = dest.nid[off] % len(cable)
        ok = c[upper[pick], dest.target[off]] < INF
        ports[s, dest.lid[off[ok]]] = cable[pick[ok]]


def metrics(f, r, ports: np.ndarray) -> str:  # type: ignore[no-untyped-def]
    m = table_metrics(f, dataclasses.replace(r.tables, ports=ports), r.roles, None,
                      seed=1, rp_samples=300)
    s = m["sets"]["compute"]
    return (f"left {m['missing_needed']}, loop-free {m['credit_loop_free']}; GUID SP "
            f"{s['guid']['sp']} A2A {s['a2a']} RP {s['guid']['rp']} HSD {s['guid']['hsd']}; "
            f"name SP {s['name']['sp']} HSD {s['name']['hsd']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fabrics", nargs="+")
    ap.add_argument("--interleave", action="store_true", help="also the interleaved deal")
    args = ap.parse_args()
    for fn in args.fabrics:
        f = load_fabric(fn)
        r = route(f, workers=1)
        g, c = r.graph, r.costs
        t0 = time.perf_counter()
        leaves = shortcut_leaves(g, c)
        t1 = time.perf_counter()
        ports = r.tables.ports.copy()
        moved = spread_up_cables(g, c, r.dest, ports, leaves)
        t2 = time.perf_counter()
        print(f"{Path(fn).name}: mode {r.mode}; {len(leaves)} of {int(g.is_leaf.sum())} leaves "
              f"with a shortcut ({1e3 * (t1 - t0):.1f} ms), {moved} entries moved "
              f"({1e3 * (t2 - t1):.0f} ms)", flush=True)
        print(f"  nmodc:  {metrics(f, r, r.tables.ports)}", flush=True)
        if moved:
            print(f"  spread: {metrics(f, r, ports)}", flush=True)
        if args.interleave:
            ports = r.tables.ports.copy()
            interleaved(g, c, r.dest, ports)
            print(f"  interleaved: {metrics(f, r, ports)}", flush=True)


if __name__ == "__main__":
    main()
