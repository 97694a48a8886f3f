#!/usr/bin/env python3
"""How much of the study's random-order HSD verdicts is sampling noise (an
investigation, not the study; the study itself refines its unresolved
random-order HSD comparisons with ``smroute study degrade --orders N``,
:mod:`smroute.study.precision`, and keeps each row's standard error).

The study averages each throw's random-order HSD over 20 random orders of
the hosts.  This reruns the throws of some removal bands exactly as the
study runs them (:func:`smroute.study.runner.run_throw`: the same degraded
fabric, OpenSM's LIDs, host order, metrics generator and VLs), with Nmodc,
Dmodc and the OpenSM engines given, over ``--random-orders`` orders (the
study's 20 are the first of them).  The metrics that do not depend on the
orders (A2A, RP, SP, HSD-topo) must reproduce the CSV's rows, else the
script says so.  Prints per band the random-order HSD verdict of Nmodc
against the best of the engines rerun
(:func:`smroute.study.results.verdict_table`), from the CSV's 20 orders and
from the rerun, on the same throws and engines.

    .venv/bin/python research/study_hsd_precision.py --fabric pgft648 --mode link \\
        --bands 0,1-3,4-15 --random-orders 1000 --workers 2
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.study.executors import run_unordered  # noqa: E402
from smroute.study.results import (  # noqa: E402
    Row,
    as_stored,
    band_of,
    read_rows,
    reproduces,
    verdict_table,
    write_rows,
)
from smroute.study.runner import ThrowTask, run_throw  # noqa: E402

#: The metrics that do not depend on the random orders: the rerun must give the CSV's.
FIXED = ("a2a", "rp", "sp", "hsd_topo")


def _hsd(r: Row) -> str:
    """A row's random-order HSD as the CSV stores it (``-``: none)."""
    v = r.get("hsd_random")
    return f"{as_stored(v):g}" if isinstance(v, float) and not math.isnan(v) else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", default="pgft648",
                    help="the study's directory under docs/study (its CSV names the PGFT)")
    ap.add_argument("--csv", help="a study CSV instead of docs/study/<fabric>/study.csv")
    ap.add_argument("--mode", choices=("link", "switch"), default="link")
    ap.add_argument("--bands", default="0,1-3,4-15", help="removal bands, e.g. 0,1-3")
    ap.add_argument("--engines", default="nmodc,nue,dnup,dfsssp,sssp",
                    help="Nmodc and the OpenSM engines to rerun (Dmodc always)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--vls", type=int, default=4, help="data VLs nmodc may use (the study's)")
    ap.add_argument("--random-orders", type=int, default=1000)
    ap.add_argument("--rp-samples", type=int, default=1000, help="(the study's)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", help="write the rerun's rows as a study CSV here")
    args = ap.parse_args()
    path = Path(args.csv) if args.csv else ROOT / "docs/study" / args.fabric / "study.csv"
    bands = args.bands.split(",")
    cached = [r for r in read_rows(path) if r["mode"] == args.mode and r["seed"] == args.seed
              and band_of(int(str(r["removed"]))) in bands]
    if not cached:
        ap.error(f"{path}: no {args.mode} throws with seed {args.seed} in bands {args.bands}")
    label = str(cached[0]["fabric"])
    engines = tuple(dict.fromkeys(["dmodc", *args.engines.split(",")]))
    throws = sorted({int(str(r["throw"])) for r in cached})
    by = {(int(str(r["throw"])), str(r["engine"])): r for r in cached}
    new: list[Row] = []
    differ = 0
    with tempfile.TemporaryDirectory(prefix="smroute-hsd-precision-") as work:
        tasks = [ThrowTask(f"pgft:{label}", label, args.mode, args.seed, i, engines, work,
                           rp_samples=args.rp_samples, random_orders=args.random_orders,
                           vls=args.vls) for i in throws]
        for task, rows, err in run_unordered(run_throw, tasks, workers=args.workers):
            if rows is None:
                print(f"throw {task.index}: {err}", file=sys.stderr)
                continue
            for r in rows:
                was = by.get((task.index, str(r["engine"])))
                differ += was is not None and not reproduces(r, was, FIXED)
            new += rows
            print(f"throw {task.index}: " + " ".join(
                f"{r['engine']} {_hsd(by[(task.index, str(r['engine']))])} -> {_hsd(r)}"
                for r in rows if (task.index, str(r["engine"])) in by),
                file=sys.stderr, flush=True)
    if differ:
        print(f"warning: {differ} rows differ from the CSV's in {', '.join(FIXED)}: not the "
              "study's protocol", file=sys.stderr)
    rivals = [e for e in engines if e not in ("dmodc", "nmodc")]
    done = {int(str(r["throw"])) for r in new}
    same = [r for r in cached if int(str(r["throw"])) in done and r["engine"] in engines]
    for title, part in (("the CSV's orders", same), (f"{args.random_orders} orders", new)):
        print(f"{label} {args.mode}, {len(done)} throws, random-order HSD over {title}: "
              f"Nmodc against the best of {', '.join(rivals)}")
        for cells in verdict_table(part, label, args.mode, "nmodc", rivals, ("hsd_random",)):
            print("  " + "  ".join(cells))
    if args.out:
        write_rows(args.out, new)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
