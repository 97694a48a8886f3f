#!/usr/bin/env python3
"""Development comparison of a changed Nmodc with the cached degradation
study (an investigation, not the study).

Reruns smroute's engines on throws of a study CSV exactly as the study runs
them (:func:`smroute.study.runner.run_throw` with ``dmodc`` and ``nmodc``:
the same degraded fabric, LIDs, host order, metrics generator, VLs and
random orders); OpenSM's engines are not rerun, their rows are the CSV's.
Dmodc must reproduce its cached rows (else the protocol differs and the
script says so).  Prints per removal band and metric the new Nmodc's
verdict against the best OpenSM engine
(:func:`smroute.study.results.verdict_table`: medians, paired
worse/equal/better, sign test) and against the CSV's own Nmodc rows
(``nmodc-csv``: what the change moved).  ``--out`` writes the CSV with the
new rows in place of the cached ones (``smroute study report`` reads it).

    .venv/bin/python research/study_nmodc_dev.py --fabric pgft1728 --mode switch --workers 2
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.lab.sidebyside import OPENSM_ENGINES  # noqa: E402
from smroute.study.executors import run_unordered  # noqa: E402
from smroute.study.results import (  # noqa: E402
    METRICS,
    Row,
    as_stored,
    read_rows,
    reproduces,
    verdict_table,
    write_rows,
)
from smroute.study.runner import ThrowTask, run_throw  # noqa: E402

#: The name the CSV's own Nmodc rows get beside the new ones.
CACHED = "nmodc-csv"
#: The metrics of the verdict tables.
MAIN = ("sp", "a2a", "rp", "hsd_topo", "hsd_random")


def _throws(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def merged(cached: Sequence[Row], new: Sequence[Row]) -> tuple[list[Row], list[int]]:
    """The cached rows with ``new`` (rows of ``dmodc`` and ``nmodc``) in
    place of their throws' cached Nmodc rows, which stay as engine
    :data:`CACHED`; and the throws whose new Dmodc row differs from its
    cached row in a metric (none: the study's protocol)."""
    def key(r: Row) -> tuple[object, ...]:
        return r["fabric"], r["mode"], r["seed"], r["throw"]

    by = {(key(r), r["engine"]): r for r in cached}
    rerun = {key(r) for r in new}
    out = [dict(r, engine=CACHED) if r["engine"] == "nmodc" and key(r) in rerun else r
           for r in cached if not (r["engine"] == "dmodc" and key(r) in rerun)]
    differ: list[int] = []
    for r in new:
        r = {k: as_stored(v) if isinstance(v, float) and not math.isnan(v) else v
             for k, v in r.items()}
        old = by.get((key(r), r["engine"]))
        if r["engine"] == "dmodc" and old is not None and not reproduces(
                r, old, [m for m in METRICS if m in old]):
            differ.append(int(str(r["throw"])))
        out.append(r)
    return out, differ


def _print_table(table: list[list[str]]) -> None:
    """``table`` aligned, without the cells that have no rival (verdict ``-``:
    no throw of the band rerun); a band where Nmodc completed no throw stays
    (``miss``)."""
    table = [r for r in table if r[-1] != "-"]
    width = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", default="pgft1728",
                    help="the study's directory under docs/study (its CSV names the PGFT)")
    ap.add_argument("--csv", help="a study CSV instead of docs/study/<fabric>/study.csv")
    ap.add_argument("--mode", choices=("link", "switch"), default="link")
    ap.add_argument("--throws", help="e.g. 0-59 or 1,4,7 (default: every throw of the CSV)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--vls", type=int, default=4, help="data VLs nmodc may use (the study's)")
    ap.add_argument("--random-orders", type=int, default=20, help="(the study's)")
    ap.add_argument("--rp-samples", type=int, default=1000, help="(the study's)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", help="write the merged rows as a study CSV here")
    args = ap.parse_args()
    path = Path(args.csv) if args.csv else ROOT / "docs/study" / args.fabric / "study.csv"
    cached = read_rows(path)
    mine = [r for r in cached if r["mode"] == args.mode and r["seed"] == args.seed]
    if not mine:
        ap.error(f"{path}: no {args.mode} throws with seed {args.seed}")
    label = str(mine[0]["fabric"])
    throws = (_throws(args.throws) if args.throws
              else sorted({int(str(r["throw"])) for r in mine}))
    source = f"pgft:{label}"  # (load_fabric parses the label)
    with tempfile.TemporaryDirectory(prefix="smroute-nmodc-dev-") as work:
        tasks = [ThrowTask(source, label, args.mode, args.seed, i, ("dmodc", "nmodc"), work,
                           rp_samples=args.rp_samples, random_orders=args.random_orders,
                           vls=args.vls) for i in throws]
        new: list[Row] = []
        for task, rows, err in run_unordered(run_throw, tasks, workers=args.workers):
            if rows is None:
                print(f"throw {task.index}: {err}", file=sys.stderr)
                continue
            new += rows
            n = next(r for r in rows if r["engine"] == "nmodc")
            print(f"throw {task.index} ({n['removed']} removed): "
                  + " ".join(f"{m} {float(str(n.get(m))):.4g}" for m in MAIN),
                  file=sys.stderr, flush=True)
    rows, differ = merged(cached, new)
    if differ:
        print(f"warning: {len(differ)} Dmodc rows differ from the CSV's (throws "
              f"{', '.join(map(str, sorted(differ)))}): not the study's protocol (other code, "
              "seed, VLs or random orders?)", file=sys.stderr)
    rivals = [e for e in OPENSM_ENGINES if any(r["engine"] == e for r in rows)]
    print(f"{label} {args.mode}, {len(throws)} throws rerun: Nmodc against the best OpenSM "
          "engine")
    _print_table(verdict_table(rows, label, args.mode, "nmodc", rivals))
    print(f"Nmodc against the CSV's Nmodc ({CACHED}) on the throws rerun")
    again = {r["throw"] for r in new}
    _print_table(verdict_table([r for r in rows if r["throw"] in again], label, args.mode,
                               "nmodc", [CACHED]))
    if args.out:
        write_rows(args.out, rows)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
