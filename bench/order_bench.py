"""Benchmark of ``smroute order`` (MPI rank order) on the 11,664-host
PGFT(3;18,18,36;1,18,18;1,1,1).

The fabric is routed once with Dmodc (``route(fabric, workers=1)``); each
job is a set of hosts in a random input order (seeded); the order is chosen
by :func:`smroute.analysis.order.rank_order` exactly as the command does, and
the hot-spot degree (HSD: most flows on one link per stage, averaged over the
stages; the worst stage in parentheses) of every collective permutation
sequence is printed before (input order) and after (our order).

Jobs: whole leaf switches -- the first 4 and the first 36 leaves (one pod's
worth and two whole pods), and 4 / 36 leaves drawn at random -- and random
1,000-host jobs (``--seeds`` of them, figures averaged over the seeds, worst
stage over all).  ``--full`` adds all 11,664 hosts (two full shift
sequences: about 10 s more); ``--cli`` times the command end to end (reading
the ibnetdiscover text included) on one 1,000-host job.

    .venv/bin/python bench/order_bench.py                # the docs table (Slurm and MPI rank order)
    .venv/bin/python bench/order_bench.py --full --cli
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from benchinfo import machine

from smroute.analysis.order import MAIN_CPS, RankOrder, endport_nids, rank_order
from smroute.analysis.paths import RoutingView, routing_view
from smroute.analysis.patterns import CPS
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route

SPEC = (3, (18, 18, 36), (1, 18, 18), (1, 1, 1))


@dataclass
class Job:
    name: str
    choices: list[RankOrder]
    seconds: list[float]


def leaves_job(v: RoutingView, leaf_rows: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.isin(v.ep_leaf_row, leaf_rows)).astype(np.int64)


def run_jobs(v: RoutingView, nid: np.ndarray, seeds: int, full: bool) -> list[Job]:
    rng = np.random.default_rng(2026)
    sets: list[tuple[str, list[np.ndarray]]] = [
        ("4 leaves (72 hosts)", [leaves_job(v, np.arange(4))]),
        ("36 leaves (648 hosts)", [leaves_job(v, np.arange(36))]),
        ("4 random leaves", [leaves_job(v, rng.choice(v.n_leaves, 4, replace=False))]),
        ("36 random leaves", [leaves_job(v, rng.choice(v.n_leaves, 36, replace=False))]),
        (f"1,000 random hosts ({seeds} jobs)",
         [rng.choice(v.n_endports, 1000, replace=False).astype(np.int64)
          for _ in range(seeds)]),
    ]
    if full:
        sets.append(("all 11,664 hosts", [np.arange(v.n_endports, dtype=np.int64)]))
    jobs = []
    for name, port_sets in sets:
        job = Job(name, [], [])
        for ports in port_sets:
            inp = rng.permutation(ports)  # the random input order
            t = time.perf_counter()
            choice = rank_order(v, inp, nid, report=True)
            job.seconds.append(time.perf_counter() - t)
            job.choices.append(choice)
        jobs.append(job)
        print(f"  {name}: {statistics.median(job.seconds):.2f} s per job (both orders, "
              f"all 7 CPS); {sum(c.kept_input for c in job.choices)} kept the input order",
              file=sys.stderr)
    return jobs


def cell(choices: list[RankOrder], name: str) -> str:
    b = [c.before[name] for c in choices]
    a = [c.after[name] for c in choices]
    ba = statistics.mean(m.hsd_avg for m in b)
    aa = statistics.mean(m.hsd_avg for m in a)
    bm, am = max(m.hsd_max for m in b), max(m.hsd_max for m in a)
    return f"{ba:.2f} ({bm}) → **{aa:.2f}** ({am})"


def table(jobs: list[Job]) -> str:
    head = "| CPS | " + " | ".join(j.name for j in jobs) + " |"
    rows = [head, "|---" * (len(jobs) + 1) + "|"]
    for name in CPS:
        label = f"{name} (main)" if name == MAIN_CPS else name
        rows.append(f"| {label} | " + " | ".join(cell(j.choices, name) for j in jobs) + " |")
    rows.append("| time per job (s) | " + " | ".join(
        f"{statistics.median(j.seconds):.2f}" for j in jobs) + " |")
    return "\n".join(rows)


def time_cli(f: object, v: RoutingView) -> float:
    from smroute.cli.main import main
    from smroute.fabric.export.writers import write_topology

    with tempfile.TemporaryDirectory() as d:
        topo = Path(d) / "big.topo"
        write_topology(f, topo)  # type: ignore[arg-type]
        rng = np.random.default_rng(1)
        eps = rng.choice(v.n_endports, 1000, replace=False)
        names = [v.fabric.node_desc[int(v.ep_node[e])] for e in eps]
        job = Path(d) / "job.txt"
        job.write_text("\n".join(names) + "\n")
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = main(["order", "--fabric", str(topo), "--job", str(job), "--report",
                       "--out", str(Path(d) / "hosts")])
        dt = time.perf_counter() - t
        assert rc == 0, rc
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="random 1,000-host jobs (default 5)")
    ap.add_argument("--full", action="store_true", help="also all 11,664 hosts")
    ap.add_argument("--cli", action="store_true", help="time the command end to end")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    t = time.perf_counter()
    f = pgft(*SPEC)
    r = route(f, workers=1, lmc=0)
    v = routing_view(f, r.tables)
    nid = endport_nids(v, r.graph.ep_row, r.nids)
    print(f"PGFT(3;18,18,36;1,18,18;1,1,1): {v.n_endports} hosts, generated, routed "
          f"(Dmodc, 1 worker) and viewed in {time.perf_counter() - t:.2f} s")
    jobs = run_jobs(v, nid, args.seeds, args.full)
    print("\nHSD average over stages (worst stage): random input order → our order\n")
    print(table(jobs))
    kept = sum(c.kept_input for j in jobs for c in j.choices)
    print(f"\njobs where the input order was kept (topological order worse): {kept}")
    if args.cli:
        print(f"`smroute order --report` end to end, 1,000 hosts (reading the 11,664-host "
              f"ibnetdiscover file included): {time_cli(f, v):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
