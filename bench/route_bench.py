"""Benchmark: Dmodc routing time on large PGFTs (ingest excluded).

Prints the machine, the fabric sizes, the median of several runs per phase,
peak memory, and the ratio against OpenSM's measured routing time.

    .venv/bin/python bench/route_bench.py [--runs 5] [--workers 2] [--big]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time

import numpy as np

from smroute.fabric.generate import pgft
from smroute.routing.engine import route
from smroute.routing.pool import RoutePool

#: OpenSM 3.3.23 routing phase on the 11,664-host PGFT (DESIGN.md, measured on ibsim).
OPENSM_FTREE_11664_S = 14.0

SHAPES = {
    "11664": (3, (18, 18, 36), (1, 18, 18), (1, 1, 1)),
    "40960": (3, (32, 32, 40), (1, 32, 32), (1, 1, 1)),
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    py = platform.python_version()
    return f"{cpu}, {os.cpu_count()} cores, Python {py}, numpy {np.__version__}"


def bench(name: str, runs: int, workers: int) -> None:
    h, m, w, p = SHAPES[name]
    fabric = pgft(h, m, w, p)
    with RoutePool(workers) as pool:
        route(fabric, pool=pool, labels=False)  # warm-up
        results = [route(fabric, pool=pool, labels=False) for _ in range(runs)]
    last = results[-1]
    tables = last.tables
    totals = [r.total_seconds for r in results]
    med = statistics.median(totals)
    phases = {k: statistics.median(r.timings[k] for r in results) for k in last.timings}
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"PGFT(3;{','.join(map(str, m))};{','.join(map(str, w))};{','.join(map(str, p))}): "
          f"{len(fabric.cas)} hosts, {len(fabric.switches)} switches, "
          f"{len(last.dest.lid)} LIDs, table {tables.nbytes() / 2**20:.1f} MiB")
    print(f"  route, {workers} workers, median of {runs}: {med:.3f} s  "
          f"(min {min(totals):.3f}, max {max(totals):.3f})")
    print("  phases (median): " + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()))
    print(f"  parent peak RSS {peak_mb:.0f} MiB (table {tables.nbytes() / 2**20:.0f} MiB)")
    if name == "11664":
        print(f"  OpenSM ftree routing phase on this tree: {OPENSM_FTREE_11664_S:.0f} s "
              f"-> Dmodc is {OPENSM_FTREE_11664_S / med:.0f}x faster")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--big", action="store_true", help="also the 40,960-host tree")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    t = time.perf_counter()
    bench("11664", args.runs, args.workers)
    if args.big:
        bench("40960", args.runs, args.workers)
    print(f"(benchmark wall time {time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
