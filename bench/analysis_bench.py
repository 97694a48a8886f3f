"""Benchmark: congestion analysis of Dmodc tables on the 11,664-host PGFT.

SP = all 11,663 shift permutations of the topological order, i.e. 136 M flows;
the budget is 60 s.  Times the routing view, the (leaf, LID) pair paths and
SP (median of ``--runs``), optionally SP under a random order, A2A and RP
(1,000 permutations); prints the machine, its load, sizes and peak memory.
``--zahavi`` also prints the Table 3 comparison (random-order average HSD).

    .venv/bin/python bench/analysis_bench.py [--runs 3] [--all] [--zahavi]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import numpy as np
from benchinfo import machine

from smroute.analysis import patterns as P
from smroute.analysis.congestion import (
    a2a_risk,
    evaluate,
    hsd_random_orders,
    rp_risk,
    sp_risk,
)
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route

SP_BUDGET_S = 60.0
BIG = (3, (18, 18, 36), (1, 18, 18), (1, 1, 1))
T = TypeVar("T")

#: Zahavi Table 3 rows (tuple as printed, RLFT with the same size/K where the
#: printed tuple is not one, end-ports used, random-ranking avg HSD Shift/RecDbl).
ZAHAVI = [
    ("2;12,12;1,12;1,2", (2, (12, 12), (1, 6), (1, 2)), 144, 3.75, 2.9),
    ("2;12,12;1,12;1,2", (2, (12, 12), (1, 6), (1, 2)), 120, 3.50, 2.8),
    ("2;16,16;1,16;1,2", (2, (18, 18), (1, 9), (1, 2)), 324, 4.32, 3.25),
    ("2;16,16;1,16;1,2", (2, (18, 18), (1, 9), (1, 2)), 288, 4.28, 3.7),
    ("3;12,12,12;1,12,12;1,1,2", (3, (12, 12, 12), (1, 12, 6), (1, 1, 2)), 1728, 5.24, 4.26),
    ("3;12,12,12;1,12,12;1,1,2", (3, (12, 12, 12), (1, 12, 6), (1, 1, 2)), 1584, 1.98, 4.47),
    ("3;18,18,6;1,18,6;1,1,3", (3, (18, 18, 6), (1, 18, 3), (1, 1, 6)), 1944, 5.41, 4.26),
    ("3;18,18,6;1,18,6;1,1,3", (3, (18, 18, 6), (1, 18, 3), (1, 1, 6)), 1296, 5.22, 4.06),
]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def bench(runs: int, extra: bool) -> None:
    h, m, w, p = BIG
    fabric = pgft(h, m, w, p)
    res = route(fabric, workers=2, labels=False)
    print(f"PGFT(3;{','.join(map(str, m))};{','.join(map(str, w))};{','.join(map(str, p))}): "
          f"{len(fabric.cas)} hosts, {len(fabric.switches)} switches "
          f"(routing excluded: {res.total_seconds:.2f} s)")
    t_view, t_pairs, t_sp = [], [], []
    sp = None
    for _ in range(runs):
        view, dt = timed(lambda: routing_view(fabric, res.tables))
        t_view.append(dt)
        pp, dt = timed(partial(pair_paths, view))
        t_pairs.append(dt)
        order = P.topological_order(view, res)
        sp, dt = timed(partial(sp_risk, view, pp, order))
        t_sp.append(dt)
        del pp
    assert sp is not None
    view = routing_view(fabric, res.tables)
    pp = pair_paths(view)
    order = P.topological_order(view, res)
    n = len(order)
    print(f"  {view.n_endports} end-ports, {view.n_leaves} leaves, {view.n_links} directed "
          f"links ({view.n_core} switch-switch); pair table {pp.links.shape} int32 = "
          f"{pp.links.nbytes / 2**20:.0f} MiB")
    print(f"  SP: {sp.n_stages} shifts x {n} flows = {sp.n_stages * n / 1e6:.0f} M flows, "
          f"risk max {sp.risk_max}, HSD avg {sp.hsd_avg:.2f}, unroutable {sp.total_unroutable}")
    med = {k: statistics.median(v) for k, v in
           (("view", t_view), ("pairs", t_pairs), ("sp", t_sp))}
    total = sum(med.values())
    print(f"  median of {runs}: view {med['view']:.2f} s + pair paths {med['pairs']:.2f} s "
          f"+ SP {med['sp']:.2f} s (min {min(t_sp):.2f}, max {max(t_sp):.2f}) "
          f"= {total:.2f} s  -> {'PASS' if total < SP_BUDGET_S else 'FAIL'} "
          f"(budget {SP_BUDGET_S:.0f} s)")
    print(f"  {load()}")
    if extra:
        rng = np.random.default_rng(0)
        rnd = rng.permutation(order)
        r, dt = timed(lambda: sp_risk(view, pp, rnd))
        print(f"  SP, random order: {dt:.2f} s, risk max {r.risk_max}, HSD avg {r.hsd_avg:.2f}")
        a, dt = timed(lambda: a2a_risk(view, pp))
        print(f"  A2A: {dt:.2f} s, risk {a.value} ({view.describe_link(a.link)})")
        q, dt = timed(lambda: rp_risk(view, pp, order, rng, samples=1000))
        print(f"  RP (1000): {dt:.2f} s, median risk {q.risk_median}")
        print(f"  {load()}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS {peak:.0f} MiB")


def zahavi(orders: int) -> None:
    print(f"Zahavi Table 3: average HSD, Dmodc tables, {orders} random orders "
          "(first N end-ports of the topological order), [min, max] over orders")
    rng = np.random.default_rng(2010)
    cache: dict[tuple, tuple] = {}
    for printed, spec, n, z_shift, z_rd in ZAHAVI:
        if spec not in cache:
            f = pgft(*spec)
            r = route(f, workers=1, labels=False)
            v = routing_view(f, r.tables)
            cache[spec] = (v, pair_paths(v), r)
        v, pp, r = cache[spec]
        o = P.topological_order(v, r)[:n]
        topo = max(evaluate(v, pp, P.cps(c, n), o).hsd_max for c in P.UNIDIRECTIONAL)
        tree = evaluate(v, pp, P.recursive_doubling_tree(n, spec[1]), o).hsd_max
        sh = hsd_random_orders(v, pp, P.shifts(n), rng, orders=orders, participants=o)
        rd = hsd_random_orders(v, pp, P.recursive_doubling(n), rng, orders=orders,
                               participants=o)
        name = "PGFT({};{};{};{})".format(
            spec[0], *(",".join(map(str, x)) for x in spec[1:]))
        print(f"  {name:28s} (printed {printed:25s}) N={n:5d}: topological unidir. CPS HSD "
              f"{topo}, tree RecDbl {tree}; random Shift {sh.mean:.2f} [{sh.min:.2f}, "
              f"{sh.max:.2f}] (Zahavi {z_shift}), RecDbl {rd.mean:.2f} [{rd.min:.2f}, "
              f"{rd.max:.2f}] (Zahavi {z_rd})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="also random-order SP, A2A, RP")
    ap.add_argument("--zahavi", action="store_true", help="Table 3 comparison")
    ap.add_argument("--orders", type=int, default=25, help="random orders for --zahavi")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"  {load()} (shared machine: other jobs may be running)")
    bench(args.runs, args.all)
    if args.zahavi:
        zahavi(args.orders)


if __name__ == "__main__":
    main()
