"""Benchmark: Dmodc routing time on large PGFTs (ingest excluded).

Prints the machine, the fabric sizes, the median of several runs per phase,
peak memory, and the ratio against OpenSM's measured routing time.

    .venv/bin/python bench/route_bench.py [--runs 5] [--workers 2] [--big] [--agg]
        [--parallel] [--pgft SPEC] [--algorithm dmodc,nmodc] [--remove-links N]
        [--remove-switches N]
        [--seed S] [--validate] [--before DIR]

``--before DIR``: a checkout of the code before (e.g. ``git archive main | tar
-x -C DIR``; its ``build/`` holds what its ``scripts/setup.sh`` built, if
anything): each fabric is routed by one warm process per checkout
(``benchinfo.WarmRouter``) in alternating runs, and the medians of both
(wall, and the CPU seconds of the process and its workers), the median of
the runs' ratios and the load average are printed; on the 11,664-host tree
also against OpenSM ftree's routing phase.  Without ``--algorithm`` each
checkout routes with its own default.

``--algorithm``: one or several routing algorithms (comma-separated), timed
on the same fabric and pool in alternating runs; the ratio to the first
(the median of the runs' ratios) is printed.
``--remove-links`` / ``--remove-switches``: time a degraded tree (N random
switch-to-switch links, or N random switches, removed, seeded; switches
first).
``--validate``: also time the validation walk of one result per algorithm
(every switch to every LID, as ``smroute route``, the daemon and the
OpenSM plugin run it before tables leave smroute), median of up to 3 runs.

``--agg`` puts a SHARP aggregation node on every switch (what real Quantum
fabrics carry: 11,664 hosts + 1,620 aggregation nodes on the 11,664-host tree).
``--pgft SPEC`` (repeatable) times that PGFT instead of the 11,664-host tree
(e.g. ``3;18,18,18;1,18,18;1,1,1``: a complete tree of another size).
``--parallel`` times the 11,664 hosts with parallel cables instead:
PGFT(3;18,18,36;1,9,18;1,2,1), two cables from each leaf to each of its 9
L2 switches.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from benchinfo import WarmRouter, alternate, checkouts, ftree_seconds, load, machine, report

from smroute.errors import InputError
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.interrupts import sigterm_interrupts
from smroute.routing.api import DEFAULT, names
from smroute.routing.engine import route, validate_result
from smroute.routing.pool import RoutePool
from smroute.study.degrade import parse_pgft

ROOT = Path(__file__).resolve().parents[1]

SHAPES = {
    "11664": (3, (18, 18, 36), (1, 18, 18), (1, 1, 1)),
    "40960": (3, (32, 32, 40), (1, 32, 32), (1, 1, 1)),
    # the 11,664 hosts with two cables from each leaf to each of 9 L2 switches
    "11664-parallel": (3, (18, 18, 36), (1, 9, 18), (1, 2, 1)),
}


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def job_memory_mib(pool: RoutePool, fabric, pids: list[int],
                   algorithm: str = "dmodc") -> tuple[float, float]:
    """``(added, held)`` MiB: the peak memory a routing job adds, summed over
    the parent and the workers (each process's peak RSS is reset,
    ``/proc/PID/clear_refs`` 5, before the job, and peak - resident before
    is summed; shared table pages touched by several processes are counted
    once per process, an upper bound), and what the workers hold resident
    between jobs (they keep a job's freed memory for the next,
    :func:`smroute.routing.pool._keep_heap`)."""
    base = {}
    for pid in pids:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        base[pid] = _status_kib(pid, "VmRSS")
    route(fabric, algorithm=algorithm, pool=pool, labels=False)
    added = sum(max(0, _status_kib(pid, "VmHWM") - base[pid]) for pid in pids) / 1024
    return added, sum(base[pid] for pid in pids[1:]) / 1024


def bench(name: str, runs: int, workers: int, agg: bool = False,
          algorithms: tuple[str, ...] = ("dmodc",), remove_links: int = 0,
          seed: int = 1, validate: bool = False, remove_switches: int = 0) -> None:
    """Time every algorithm of ``algorithms`` on one fabric, each in a pool
    of its own (a daemon routes with one algorithm: its workers are warmed
    by that algorithm alone).  The runs alternate between the algorithms
    (in turn, the order reversed every other run), so a busy spell of the
    machine slows all alike, and the ratio to the first algorithm is the
    median of the runs' ratios."""
    h, m, w, p = SHAPES[name]
    fabric = pgft(h, m, w, p)
    n_hosts = len(fabric.cas)
    if agg:
        fabric = with_aggregation_nodes(fabric)
    if remove_links or remove_switches:
        fabric, _ = degrade(fabric, np.random.default_rng(seed), switches=remove_switches,
                            links=remove_links)
        print(f"degraded: {remove_switches} random switches and {remove_links} random "
              f"switch-to-switch links removed (seed {seed})")
    timings: dict[str, list[dict[str, float]]] = {alg: [] for alg in algorithms}
    sizes: dict[str, tuple[int, float]] = {}
    job_mib: dict[str, tuple[float, float] | None] = {}
    walks: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        pools = {alg: stack.enter_context(RoutePool(workers)) for alg in algorithms}
        for alg in algorithms:
            route(fabric, algorithm=alg, pool=pools[alg], labels=False)  # warm-up
        for i in range(runs):
            for alg in algorithms if i % 2 == 0 else algorithms[::-1]:
                res = route(fabric, algorithm=alg, pool=pools[alg], labels=False)
                timings[alg].append(res.timings)
                sizes[alg] = (len(res.dest.lid), res.tables.nbytes() / 2**20)
                if validate and i == runs - 1:
                    walks[alg] = _walk_seconds(res, min(runs, 3))
                del res  # release this table's shared mapping before the next run
        for alg in algorithms:
            pids = [os.getpid()] + list(pools[alg].worker_pids())
            try:
                job_mib[alg] = job_memory_mib(pools[alg], fabric, pids, alg)
            except OSError:
                job_mib[alg] = None
    totals = {alg: [sum(t.values()) for t in ts] for alg, ts in timings.items()}
    for alg in algorithms:
        _report(name, fabric, n_hosts, runs, workers, agg, alg, (h, m, w, p),
                bool(remove_links or remove_switches), timings[alg], sizes[alg], job_mib[alg])
        if len(algorithms) > 1:
            ratio = statistics.median(a / b for a, b in zip(totals[alg], totals[algorithms[0]],
                                                            strict=True))
            print(f"  {alg} / {algorithms[0]}: {ratio:.2f}x (median of the {runs} runs' ratios)")
        if alg in walks:
            print(f"  {alg} validation walk: {walks[alg]}")


def _walk_seconds(res, runs: int) -> str:
    """The validation walk of ``res`` timed ``runs`` times: median, its size and verdict."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        v = validate_result(res)
        times.append(time.perf_counter() - t0)
    return (f"median of {runs} {statistics.median(times):.3f} s (min {min(times):.3f}) "
            f"for {v.pairs:,} switch-to-LID walks, {'valid' if v.ok else 'INVALID'}")


def _report(name: str, fabric, n_hosts: int, runs: int, workers: int, agg: bool, alg: str,
            shape: tuple, degraded: bool, timings: list[dict[str, float]],
            size: tuple[int, float], job_mib: tuple[float, float] | None) -> None:
    h, m, w, p = shape
    n_lids, table_mib = size
    totals = [sum(t.values()) for t in timings]
    med = statistics.median(totals)
    phases = {k: statistics.median(t[k] for t in timings) for k in timings[0]}
    j = ",".join
    print(f"{alg}: PGFT({h};{j(map(str, m))};{j(map(str, w))};{j(map(str, p))}): "
          f"{n_hosts} hosts, {len(fabric.switches)} switches, "
          + (f"{len(fabric.cas) - n_hosts} aggregation nodes, " if agg else "")
          + f"{n_lids} LIDs, table {table_mib:.1f} MiB")
    print(f"  route, {workers} workers, median of {runs}: {med:.3f} s  "
          f"(min {min(totals):.3f}, max {max(totals):.3f})")
    print("  phases (median): " + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()))
    if job_mib is not None:
        added, held = job_mib
        print(f"  memory added by one routing job (parent + workers, peak): {added:.0f} MiB "
              f"= {added / table_mib:.2f} x the table; the {workers} workers hold "
              f"{held:.0f} MiB between jobs")
    if name == "11664" and not agg and not degraded:
        ftree, where = ftree_seconds()
        print(f"  OpenSM ftree routing phase on this tree: {ftree:.1f} s ({where}) "
              f"-> {alg} is {ftree / med:.0f}x faster")


def bench_before(name: str, before: Path, runs: int, workers: int, agg: bool,
                 algorithms: tuple[str, ...], remove_links: int, seed: int,
                 validate: bool, remove_switches: int = 0) -> None:
    """Each algorithm (or each checkout's default) on one fabric, this
    checkout beside ``before``, in alternating runs of warm processes."""
    h, m, w, p = SHAPES[name]
    codes = checkouts(ROOT, before, "route_bench.py")
    j = ",".join
    fabric = (f"PGFT({h};{j(map(str, m))};{j(map(str, w))};{j(map(str, p))})"
              + (", an aggregation node per switch" if agg else "")
              + (f", {remove_switches} random switches and {remove_links} random links "
                 f"removed (seed {seed})" if remove_links or remove_switches else ""))
    for alg in algorithms or ("",):
        cfg = {"shape": [h, list(m), list(w), list(p)], "workers": workers, "algorithm": alg,
               "agg": agg, "remove_links": remove_links, "remove_switches": remove_switches,
               "seed": seed, "validate": validate}
        with WarmRouter(codes, cfg) as warm:
            got = alternate(codes, runs, warm.one)
        first = got["now"][0]
        keys = ["route", "cpu", *[k for k in first if k not in ("route", "cpu", "walk",
                                                                  "walk_cpu")],
                *(["walk", "walk_cpu"] if validate else [])]
        report(f"{alg or 'the default algorithm'}: {fabric}, warm pool of {workers} workers",
               got, keys, f"route(fabric, pool=RoutePool({workers}), labels=False"
               + (f", algorithm={alg!r})" if alg else ")")
               + (" then validate_result" if validate else ""))
        if name == "11664" and not agg and not remove_links and not remove_switches:
            ftree, where = ftree_seconds()
            print(f"  OpenSM ftree routing phase on this tree: {ftree:.1f} s ({where}); "
                  + ", ".join(f"{lab} {ftree / statistics.median(r['route'] for r in rs):.0f}x "
                              "faster" for lab, rs in got.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--big", action="store_true", help="also the 40,960-host tree")
    ap.add_argument("--agg", action="store_true",
                    help="an aggregation node on every switch (SHARP, as on Quantum switches)")
    ap.add_argument("--parallel", action="store_true",
                    help="the 11,664 hosts with two cables per leaf-L2 link, 9 L2 per pod")
    ap.add_argument("--pgft", action="append", metavar="SPEC",
                    help="time this PGFT instead of the 11,664-host tree (h;m1,..;w1,..;p1,.., "
                         "e.g. 3;18,18,18;1,18,18;1,1,1; repeatable)")
    ap.add_argument("--algorithm", default="",
                    help=f"comma-separated, of {', '.join(names(lab=True))} (default: the "
                    f"default, {DEFAULT}; with --before each checkout's own)")
    ap.add_argument("--remove-links", type=int, default=0, metavar="N",
                    help="remove N random switch-to-switch links first")
    ap.add_argument("--remove-switches", type=int, default=0, metavar="N",
                    help="remove N random switches first")
    ap.add_argument("--seed", type=int, default=1,
                    help="seed of --remove-links and --remove-switches")
    ap.add_argument("--validate", action="store_true",
                    help="also time the validation walk of one result per algorithm")
    ap.add_argument("--before", metavar="DIR", type=Path,
                    help="a checkout of the code before, run beside this one")
    args = ap.parse_args()
    algs = tuple(a.strip() for a in args.algorithm.split(",") if a.strip())
    bad = [a for a in algs if a not in names(lab=True)]
    if bad:
        sys.exit(f"route_bench.py: --algorithm: expected some of {', '.join(names(lab=True))}, "
                 f"got {args.algorithm!r}")
    shapes = ["11664-parallel" if args.parallel else "11664"] + (["40960"] if args.big else [])
    if args.pgft:
        try:
            specs = [parse_pgft(text) for text in args.pgft]
        except InputError as err:
            sys.exit(f"route_bench.py: {err}")
        shapes = [s.label for s in specs]
        SHAPES.update((s.label, (s.h, s.m, s.w, s.p)) for s in specs)
    print(f"machine: {machine()}")
    print(f"load average at start: {load()}")
    t = time.perf_counter()
    if args.before is not None:
        for name in shapes:
            bench_before(name, args.before, args.runs, args.workers, args.agg, algs,
                         args.remove_links, args.seed, args.validate, args.remove_switches)
        print(f"\nload average at end: {load()}; benchmark wall time "
              f"{time.perf_counter() - t:.1f} s")
        return
    algs = algs or (DEFAULT,)
    for name in shapes:
        bench(name, args.runs, args.workers, args.agg, algs, args.remove_links, args.seed,
              args.validate, args.remove_switches)
    print(f"(load average at end: {load()}; benchmark wall time {time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    with sigterm_interrupts():
        main()
