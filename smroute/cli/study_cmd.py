"""``smroute study``: the degradation study against OpenSM's engines.

``smroute study degrade --pgft 2;18,36;1,18;1,1 --mode switch --throws 30
--seed 1 --out DIR`` runs the throws (resuming from ``DIR/study.csv``),
prints a progress line per finished throw and a bar on stderr (``-q``: none;
:mod:`smroute.cli.progress`) and a summary table at
the end, then writes the plots into ``DIR``.  ``smroute study plot CSV --out
DIR`` redraws the plots from a CSV; ``smroute study report CSV..`` prints
markdown tables (median / worst per degradation band and engine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from smroute.cli.progress import Progress
from smroute.errors import InputError
from smroute.lab.sidebyside import DEFAULT_ENGINES, ENGINES
from smroute.study.degrade import MODES, parse_pgft
from smroute.study.plots import plot_all
from smroute.study.results import (
    compact_table,
    csv_path,
    markdown_report,
    read_rows,
    summary_lines,
)
from smroute.study.runner import Progress as ThrowProgress
from smroute.study.runner import plan_tasks, run_study

MAX_THROWS = 100_000


def register(subparsers: Any) -> None:
    """Add the ``study`` command (``degrade``, ``plot``, ``report``) to ``subparsers``."""
    p = subparsers.add_parser(
        "study", help="degradation study: Dmodc against OpenSM's engines",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="study_command", metavar="STUDY_COMMAND", required=True)

    d = sub.add_parser("degrade", help="run throws of random degradation, write CSV and plots")
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument("--fabric", metavar="FILE", help="complete fabric (ibnetdiscover file)")
    src.add_argument("--pgft", metavar="TUPLE", help="generate PGFT h;m..;w..;p.. "
                     "(e.g. 2;18,36;1,18;1,1)")
    d.add_argument("--label", help="fabric name in the CSV (default: from the source)")
    d.add_argument("--mode", default="switch",
                   help="switch, link or both comma-separated (default: switch)")
    d.add_argument("--throws", type=int, default=30, help="throws per mode (default: 30)")
    d.add_argument("--seed", type=int, default=1, help="study seed (default: 1)")
    d.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help=f"comma-separated, from {','.join(ENGINES)} (default: "
                        f"{','.join(DEFAULT_ENGINES)})")
    d.add_argument("--workers", type=int, default=2, help="local processes (default: 2)")
    d.add_argument("--scheduler", metavar="ADDR",
                   help="Dask scheduler address (tcp://host:port) instead of local processes")
    d.add_argument("--rp-samples", type=int, default=1000,
                   help="random permutations for RP (default: 1000)")
    d.add_argument("--random-orders", type=int, default=3,
                   help="random node orders the CPS HSD is averaged over (default: 3)")
    d.add_argument("--opensm-timeout", type=float, default=600.0,
                   help="seconds per OpenSM run before it counts as timed out (default: 600)")
    d.add_argument("--workdir", help="scratch directory, created where each throw runs "
                   "(default: a temporary one)")
    d.add_argument("--keep-work", action="store_true", help="keep each throw's OpenSM files")
    d.add_argument("--no-plots", action="store_true", help="do not draw the plots")
    d.add_argument("--quiet", "-q", action="store_true",
                   help="no progress (a line per throw and a bar) on stderr")
    d.add_argument("--out", required=True, metavar="DIR", help="output directory")
    d.set_defaults(func=_degrade)

    pl = sub.add_parser("plot", help="draw the plots of a study CSV")
    pl.add_argument("csv", metavar="CSV")
    pl.add_argument("--out", required=True, metavar="DIR")
    pl.set_defaults(func=_plot)

    rp = sub.add_parser("report", help="markdown tables (median / worst per degradation band)")
    rp.add_argument("csv", metavar="CSV", nargs="+")
    rp.add_argument("--compact", action="store_true",
                    help="one table per fabric and mode (SP, A2A, RP, HSD per band)")
    rp.set_defaults(func=_report)


def _throw_line(p: ThrowProgress) -> str:
    t = p.task
    rows = {str(r["engine"]): r for r in p.rows}
    parts = []
    for e in t.engines:
        r = rows.get(e, {})
        if r.get("status") == "ok":
            parts.append(f"{e} a2a={r.get('a2a', 0):g} rp={r.get('rp', 0):g} "
                         f"sp={r.get('sp', 0):g}")
        else:
            parts.append(f"{e} {r.get('status', '?')}")
    removed = p.rows[0].get("removed", "?") if p.rows else "?"
    return (f"[{p.done}/{p.todo} {p.seconds:.0f}s] {t.label} {t.mode} throw {t.index}: "
            f"removed {removed}; " + "; ".join(parts))


def _degrade(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"--mode: expected {' or '.join(MODES)} (comma-separated), "
                         f"got {args.mode!r}")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ENGINES]
    if bad or not engines or len(set(engines)) != len(engines):
        raise InputError(f"--engines: expected distinct names from {','.join(ENGINES)}, "
                         f"got {args.engines!r}")
    if not 1 <= args.throws <= MAX_THROWS:
        raise InputError(f"--throws: expected 1..{MAX_THROWS}, got {args.throws}")
    if args.workers < 1:
        raise InputError(f"--workers: expected >= 1, got {args.workers}")
    if args.rp_samples < 1 or args.random_orders < 0:
        raise InputError("--rp-samples must be >= 1 and --random-orders >= 0")
    if args.pgft is not None:
        spec = parse_pgft(args.pgft)
        source, label = f"pgft:{args.pgft}", args.label or spec.label
    else:
        path = Path(args.fabric)
        if not path.is_file():
            raise InputError("no such file", source=args.fabric)
        source, label = f"file:{path.resolve()}", args.label or path.stem
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = None
    if args.workdir:
        workroot = str(Path(args.workdir).resolve())
        os.makedirs(workroot, exist_ok=True)
    else:
        scratch = tempfile.TemporaryDirectory(prefix="smroute-study-")
        workroot = scratch.name
    try:
        tasks = plan_tasks(source, label, modes, args.throws, args.seed, engines, workroot,
                           rp_samples=args.rp_samples, random_orders=args.random_orders,
                           opensm_timeout=args.opensm_timeout, keep_work=args.keep_work)
        with Progress(sys.stderr, enabled=not args.quiet) as prog:

            def on_throw(p: ThrowProgress) -> None:  # a line per throw above the bar
                prog.write(_throw_line(p))
                prog.fraction("throws", p.done, p.todo)

            rows = run_study(tasks, csv_path(out), workers=args.workers,
                             scheduler=args.scheduler, on_throw=on_throw)
    finally:
        if scratch is not None:
            scratch.cleanup()
    for line in summary_lines(rows):
        print(line)
    print(f"CSV: {csv_path(out)}")
    if not args.no_plots:
        for p in plot_all(rows, out):
            print(f"plot: {p}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    rows = read_rows(args.csv)
    for p in plot_all(rows, args.out):
        print(f"plot: {p}")
    return 0


def _report(args: argparse.Namespace) -> int:
    rows = [r for path in args.csv for r in read_rows(path)]
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    if not args.compact:
        print("\n".join(markdown_report(rows, engines)))
        return 0
    for fab, mode in sorted({(str(r["fabric"]), str(r["mode"])) for r in rows}):
        throws = len({r["throw"] for r in rows if r["fabric"] == fab and r["mode"] == mode})
        print(f"\n{fab}, {mode} degradation, {throws} throws:\n")
        print("\n".join(compact_table(rows, fab, mode, engines)))
    return 0
