"""Benchmark: writing (and reading back) the forwarding tables of the
11,664-host PGFT(3;18,18,36;1,18,18;1,1,1) in each output format.

Routes the tree once, then for every case runs ``--runs`` fresh child
processes; each loads the tables, resets its peak-RSS mark
(``/proc/self/clear_refs``), times one ``write_tables`` (or ``read_tables``)
and reports the time, the peak memory it added (``VmHWM`` minus the resident
size before; ``ru_maxrss`` where ``/proc`` cannot be reset) and the file size.
Prints the machine and the median of the runs per case.

    .venv/bin/python bench/output_bench.py [--runs 5] [--cases json,opensm,...] [--dir DIR]

Cases: ``json``, ``opensm`` (with the per-LID port GUID comments, what
``smroute route --format opensm`` writes), ``opensm-no-guids`` (``--no-port-guids``),
``json-read`` (``read_tables`` of the JSON file).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchinfo import machine

SHAPE = (3, (18, 18, 36), (1, 18, 18), (1, 1, 1))
CASES = ("json", "opensm", "opensm-no-guids", "json-read")


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def child(case: str, tables_pkl: str, out: str) -> None:
    """One timed run in this (fresh) process; prints a JSON line."""
    from smroute.tables.formats import read_tables, write_tables

    with open(tables_pkl, "rb") as fh:
        t = pickle.load(fh)
    if case == "opensm-no-guids":
        t = dataclasses.replace(t, lid_guid=None, lid_kind=None, lid_desc=None, _index={})
    fmt = "opensm" if case.startswith("opensm") else "json"
    try:  # peak RSS from here on (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        base, how = _status_kib("VmRSS"), "VmHWM"
    except OSError:
        base, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "ru_maxrss"
    t0 = time.perf_counter()
    if case == "json-read":
        got = read_tables(out)
        assert got.ports.shape[0] == t.ports.shape[0]
    else:
        write_tables(t, out, fmt)
    seconds = time.perf_counter() - t0
    peak = _status_kib("VmHWM") if how == "VmHWM" else (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    print(json.dumps({"seconds": seconds, "added_mib": max(0, peak - base) / 1024,
                      "bytes": os.path.getsize(out), "how": how}))


def run_case(case: str, tables_pkl: Path, workdir: Path, runs: int) -> dict[str, float]:
    out = workdir / ("tables.json" if case.startswith("json") else f"{case}.dump")
    res = []
    for _ in range(runs):
        p = subprocess.run([sys.executable, __file__, "--child", case, str(tables_pkl), str(out)],
                           check=True, capture_output=True, text=True)
        res.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in res),
        "min": min(r["seconds"] for r in res),
        "added_mib": statistics.median(r["added_mib"] for r in res),
        "mb": res[-1]["bytes"] / 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", help="where the files are written (default: a temporary one)")
    ap.add_argument("--child", nargs=3, metavar=("CASE", "TABLES", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown cases {bad}; expected some of {','.join(CASES)}")
    if "json-read" in cases and "json" not in cases:
        cases.insert(0, "json")  # json-read reads what json wrote

    from smroute.fabric.generate.trees import pgft
    from smroute.routing.engine import route

    h, m, w, p = SHAPE
    fabric = pgft(h, m, w, p)
    tables = route(fabric, workers=args.workers).tables
    table_mib = tables.nbytes() / 2**20
    print(f"machine: {machine()}")
    print(f"PGFT({h};{','.join(map(str, m))};{','.join(map(str, w))};{','.join(map(str, p))}): "
          f"{len(fabric.cas)} hosts, {tables.n_switches} switches x {tables.max_lid + 1} LIDs, "
          f"table {table_mib:.1f} MiB; median of {args.runs} runs, one fresh process each")
    with tempfile.TemporaryDirectory(prefix="smroute-output-bench-", dir=args.dir) as tmp:
        work = Path(tmp)
        pkl = work / "tables.pkl"
        with open(pkl, "wb") as fh:
            pickle.dump(tables, fh)
        del tables
        print(f"{'case':<18} {'time (s)':>9} {'min (s)':>8} {'memory added':>13} "
              f"{'x table':>8} {'file (MB)':>10}")
        for case in cases:
            r = run_case(case, pkl, work, args.runs)
            print(f"{case:<18} {r['seconds']:>9.2f} {r['min']:>8.2f} "
                  f"{r['added_mib']:>9.1f} MiB {r['added_mib'] / table_mib:>8.2f} "
                  f"{r['mb']:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
