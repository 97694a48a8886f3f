"""Benchmark and evaluation of LMC LID selection.

For each fabric: the real ibsim simulates it, the real OpenSM 3.3.23 routes it
with ``minhop`` and ``updn`` using the given LMC (it assigns the LIDs; tables
read from its ``opensm-lfts.dump``), the real ``ibnetdiscover`` gives the
fabric with those LIDs, and Dmodc routes that same discovered fabric with the
same LMC.  Then, for random job allocations (a random subset of the hosts in
a random rank order, one seed each), the HSD of every shift stage (all-to-all)
is computed with base LIDs only and with LID selection, for each table set.
Reported per engine: the average over allocations of the average HSD over
stages, the worst HSD of any stage of any allocation, and the share of
allocations with HSD 1 in every stage.

Then the time of one selection (1,000 hosts, shift, on the 11,664-host tree
with LMC 2) in process, and of the ``SelectLids`` RPC against a real
``smroute serve`` process (``--rpc``).

    .venv/bin/python bench/lids_bench.py                 # Naruse's cluster + 648-host tree
    .venv/bin/python bench/lids_bench.py --big --rpc     # + 1,000 of the 11,664-host tree, RPC
    .venv/bin/python bench/lids_bench.py --strides       # NID stride ablation (Dmodc only)
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from benchinfo import machine

from smroute.analysis.paths import RoutingView, routing_view
from smroute.analysis.patterns import shifts
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import kary_ntree, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.interrupts import sigterm_interrupts
from smroute.lab.sidebyside import run_opensm_engines
from smroute.lids.select import select_lids
from smroute.routing.engine import route
from smroute.tables.lft import ForwardingTables

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[int], Fabric]  # LMC -> the fabric with LIDs aligned for it
    lmc: int
    n: int
    seeds: int
    tops: str
    opensm: bool = True


def cases(big: bool, seeds_small: int, seeds_mid: int, seeds_big: int) -> list[Case]:
    out = [
        Case("Naruse's 6-ary-2-tree, 16 of 30 hosts",
             functools.partial(kary_ntree, 6, 2, hosts_per_leaf=5), 3, 16, seeds_small,
             "6 tops, 8 LIDs"),
        Case("PGFT(2;18,36;1,18;1,1), 256 of 648 hosts",
             functools.partial(pgft, 2, (18, 36), (1, 18), (1, 1)), 5, 256, seeds_mid,
             "18 tops, 32 LIDs"),
        Case("PGFT(3;8,8,16;1,8,8;1,1,1), 300 of 1,024 hosts",
             functools.partial(pgft, 3, (8, 8, 16), (1, 8, 8), (1, 1, 1)), 3, 300, seeds_mid,
             "64 tops, 8 LIDs"),
    ]
    if big:
        # OpenSM's dump of this fabric with LMC 2 is 5.6 GB (78M LFT lines): not
        # parsed here; Dmodc only, on the generated fabric (same LIDs layout)
        out.append(Case("PGFT(3;18,18,36;1,18,18;1,1,1), 1,000 of 11,664 hosts",
                        functools.partial(pgft, 3, (18, 18, 36), (1, 18, 18), (1, 1, 1)),
                        2, 1000, seeds_big, "324 tops, 4 LIDs", opensm=False))
    return out


def opensm_and_discover(f: Fabric, lmc: int, engines: list[str], wd: Path
                        ) -> tuple[Fabric, dict[str, ForwardingTables], dict[str, float]]:
    """Real ibsim + OpenSM (each engine, same LMC) + ibnetdiscover."""
    disc, runs = run_opensm_engines(f, wd, engines, lmc=lmc, timeout=3600, linear_cap=49152)
    tables: dict[str, ForwardingTables] = {}
    secs: dict[str, float] = {}
    for e, run in runs.items():
        if run.tables is None:
            raise SystemExit(f"OpenSM {e}: {run.status}: {run.error}")
        tables[e] = run.tables
        secs[e] = run.routing_seconds or float("nan")
    return disc, tables, secs


def evaluate_case(c: Case, views: dict[str, RoutingView], n_ep: int) -> dict[str, list[float]]:
    """Per engine: [base avg, base worst, sel avg, sel worst, base all-1 %, sel all-1 %,
    wall s, CPU s] (times: medians over allocations)."""
    acc: dict[str, list[list[float]]] = {e: [] for e in views}
    for seed in range(c.seeds):
        ranks = np.random.default_rng(seed).choice(n_ep, c.n, replace=False)
        for e, v in views.items():
            t0, c0 = time.perf_counter(), time.process_time()
            sel = select_lids(v, ranks, shifts(c.n), rng=np.random.default_rng(seed), lmc=c.lmc)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            assert sel.unroutable.sum() == 0, (e, seed)
            acc[e].append([sel.hsd_base_avg, sel.hsd_base_max, sel.hsd_avg, sel.hsd_max,
                           float(sel.hsd_base_max == 1), float(sel.hsd_max == 1), dt, dc])
    out = {}
    for e, rows in acc.items():
        a = np.array(rows)
        out[e] = [a[:, 0].mean(), a[:, 1].max(), a[:, 2].mean(), a[:, 3].max(),
                  100 * a[:, 4].mean(), 100 * a[:, 5].mean(), float(np.median(a[:, 6])),
                  float(np.median(a[:, 7]))]
    return out


def run_eval(args: argparse.Namespace) -> None:
    engines = [] if args.skip_opensm else ["minhop", "updn"]
    print("| fabric (allocation) | LIDs | tables | base LIDs: avg HSD | worst | all-1 | "
          "LID selection: avg HSD | worst | all-1 | selection wall / CPU s (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in cases(args.big, args.seeds, args.seeds_mid, args.seeds_big):
        with tempfile.TemporaryDirectory(prefix="lids-bench-", dir=args.tmp) as wd:
            if engines and c.opensm:
                disc, tabs, secs = opensm_and_discover(c.make(lmc=0), c.lmc, engines, Path(wd))
            else:
                disc, tabs, secs = c.make(lmc=c.lmc), {}, {}
        res = route(disc, workers=1, labels=False)
        views = {"Dmodc": routing_view(disc, res.tables)}
        for e, t in tabs.items():
            views[f"OpenSM {e}"] = routing_view(disc, t)
        out = evaluate_case(c, views, views["Dmodc"].n_endports)
        for e, r in out.items():
            osm = f" (OpenSM routing {secs[e.split()[-1]]:.1f} s)" if e.startswith("OpenSM") \
                else ""
            print(f"| {c.name}, {c.seeds} allocations | {c.tops} | {e}{osm} | {r[0]:.3f} | "
                  f"{r[1]:.0f} | {r[4]:.0f}% | **{r[2]:.3f}** | {r[3]:.0f} | {r[5]:.0f}% | "
                  f"{r[6]:.2f} / {r[7]:.2f} |", flush=True)


def run_strides(args: argparse.Namespace) -> None:
    """Dmodc LMC NID stride ablation: offset i routes with NID t + i * stride."""
    from smroute.routing import api, dmodc
    from smroute.routing.pool import RoutePool
    from smroute.routing.topology import switch_graph

    print("\n| fabric | LIDs | NID stride | base avg HSD | selection avg HSD | worst |")
    print("|---|---|---|---|---|---|")
    for c in cases(args.big, args.seeds, args.seeds_mid, args.seeds_big)[1:]:
        f = c.make(lmc=c.lmc)
        g = switch_graph(f)
        cst, pi = dmodc.costs_and_dividers(g)
        t = dmodc.topological_nids(g, cst)
        n_up = int(g.n_up[g.leaves[0]])
        for stride in (1, n_up, n_up + 1):
            dest = dmodc.destinations(g, t, lmc=c.lmc, nid_stride=stride)
            with RoutePool(1) as pool:
                ports = pool.run(api.engine(api.DEFAULT), api.Prepared(g, cst, pi, t, dest))
            tab = ForwardingTables(switch_guid=g.sw_guid, switch_lid=g.sw_lid,
                                   switch_desc=("",) * g.n_switches, ports=ports)
            v = routing_view(f, tab)
            r = evaluate_case(Case(c.name, c.make, c.lmc, c.n, min(c.seeds, 5), c.tops),
                              {"d": v}, v.n_endports)["d"]
            print(f"| {c.name} | {c.tops} | {stride}{' (Dmodc)' if stride == 1 else ''} | "
                  f"{r[0]:.3f} | {r[2]:.3f} | {r[3]:.0f} |", flush=True)


def run_timing(args: argparse.Namespace) -> None:
    f = pgft(3, (18, 18, 36), (1, 18, 18), (1, 1, 1), lmc=2)
    res = route(f, workers=1, labels=False)
    t0 = time.perf_counter()
    v = routing_view(f, res.tables)
    tv = time.perf_counter() - t0
    times, cpu, last = [], [], None
    for seed in range(args.runs):
        ranks = np.random.default_rng(100 + seed).choice(v.n_endports, 1000, replace=False)
        t0, c0 = time.perf_counter(), time.process_time()
        last = select_lids(v, ranks, shifts(1000), rng=np.random.default_rng(seed))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert last is not None
    print(f"\nselect_lids, 1,000 of 11,664 hosts, shift (999 stages), LMC 2, in process: "
          f"median {statistics.median(times):.2f} s wall, {statistics.median(cpu):.2f} s CPU "
          f"of {args.runs} (wall min {min(times):.2f}, max {max(times):.2f}); routing view "
          f"built once per epoch: {tv:.2f} s; last run HSD {last.hsd_base_avg:.3f} -> "
          f"{last.hsd_avg:.3f}; load average now {os.getloadavg()[0]:.1f}", flush=True)
    if args.rpc:
        run_rpc(args, f)


def run_rpc(args: argparse.Namespace, f: Fabric) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from service_daemon import start_daemon  # the tests' helper: a real smroute serve

    from smroute.service.rpc.client import SmrouteClient, pb

    with tempfile.TemporaryDirectory(prefix="lids-rpc-", dir=args.tmp) as wd:
        topo = Path(wd) / "pgft-11664-lmc2.topo"
        write_topology(f, topo)
        d = start_daemon(Path(wd) / "d", "--lmc", "2", fabric=str(topo), workers=1,
                         timeout=600)
        try:
            c = SmrouteClient(d.address, timeout=600)
            v = routing_view(f, route(f, workers=1, labels=False).tables)
            times = []
            for seed in range(args.runs + 1):
                ranks = np.random.default_rng(200 + seed).choice(v.n_endports, 1000,
                                                                 replace=False)
                hosts = [f"{int(g):#x}" for g in v.ep_guid[ranks].tolist()]
                t0 = time.perf_counter()
                r = c.stub.SelectLids(pb.SelectLidsRequest(hosts=hosts), timeout=600)
                times.append(time.perf_counter() - t0)
                assert r.n_ranks == 1000 and len(r.dlids) == 1000 * 1000
            c.close()
        finally:
            d.stop()
    later = times[1:]
    print(f"SelectLids RPC (real smroute serve, loopback), 1,000 of 11,664 hosts, shift: "
          f"median {statistics.median(later):.2f} s of {len(later)} (min {min(later):.2f}, "
          f"max {max(later):.2f}); first call on a new epoch {times[0]:.2f} s (builds the "
          f"routing view); last HSD {r.hsd_base_avg:.3f} -> {r.hsd_avg:.3f}; load average "
          f"now {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="allocations, Naruse's cluster")
    ap.add_argument("--seeds-mid", type=int, default=20, help="allocations, mid-size trees")
    ap.add_argument("--seeds-big", type=int, default=3, help="allocations, 11,664-host tree")
    ap.add_argument("--big", action="store_true", help="also 1,000 of the 11,664-host tree")
    ap.add_argument("--skip-opensm", action="store_true", help="Dmodc only (no ibsim/OpenSM)")
    ap.add_argument("--strides", action="store_true", help="NID stride ablation")
    ap.add_argument("--no-eval", action="store_true", help="skip the HSD table")
    ap.add_argument("--timing", action="store_true", help="time select_lids (11,664 hosts)")
    ap.add_argument("--rpc", action="store_true", help="with --timing: time the RPC too")
    ap.add_argument("--runs", type=int, default=5, help="timing runs (median)")
    ap.add_argument("--tmp", default=None, help="scratch directory")
    args = ap.parse_args()
    if args.tmp is not None:
        os.makedirs(args.tmp, exist_ok=True)
    print(f"Machine: {machine()}", flush=True)
    if not args.no_eval:
        run_eval(args)
    if args.strides:
        run_strides(args)
    if args.timing or args.rpc:
        run_timing(args)


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
