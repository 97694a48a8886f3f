"""``smroute study``: the degradation study against OpenSM's engines.

``smroute study degrade --pgft 2;18,36;1,18;1,1 --mode switch --throws 30
--seed 1 --out DIR`` runs the throws (resuming from ``DIR/study.csv``),
prints a progress line per finished throw and a bar on stderr (``-q``: none;
:mod:`smroute.cli.progress`) and a summary table at
the end, then writes the plots into ``DIR``.  ``smroute study plot CSV --out
DIR`` redraws the plots from a CSV; ``smroute study report CSV..`` prints
markdown tables (median / worst per degradation band and engine).

Every input is checked before the first throw starts (exit 2 with the
reason): the options' ranges, the PGFT tuple (and that it builds), the fabric
file (parsed), the output directory (created if missing, inside an existing
directory; an existing file there is an error) and a study CSV already in it.
A resumed study runs again every throw with a row that is not ``ok``
(``--keep-failed``: only those that broke, status ``error``); a throw
whose rows lack some engines (``--engines`` grew, e.g. by ``nmodc`` or
``nue``) runs those alone beside the cached rows (OpenSM's under ibsim),
on the fabric the throw planned,
once Dmodc's row of that run reproduces the cached one (else the throw
runs again in full on the next resume).  Exit status:
0 every planned throw has its rows, 1 some throws broke (status ``error``;
run the command again to retry them), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from smroute.cli.inputs import SEED, add_workers_option, float_range, int_range
from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.cli.progress import Progress
from smroute.errors import InputError, SmrouteError
from smroute.lab.sidebyside import DEFAULT_ENGINES, ENGINES
from smroute.routing import api
from smroute.study.degrade import MODES, parse_pgft
from smroute.study.plots import plot_all
from smroute.study.precision import precision_tasks, run_precision
from smroute.study.results import (
    BANDS,
    KEY,
    RETRY_STATUSES,
    compact_table,
    csv_path,
    markdown_report,
    read_rows,
    summary_lines,
    write_rows,
)
from smroute.study.runner import Progress as ThrowProgress
from smroute.study.runner import plan_tasks, run_study
from smroute.study.signtest import sign_markdown
from smroute.text import excerpt

MAX_THROWS = 100_000
#: Bounds of --rp-samples and --random-orders (each one a full evaluation per throw).
MAX_SAMPLES = 1_000_000
MAX_ORDERS = 10_000
BAND_LABELS = [label for label, _, _ in BANDS]


def register(subparsers: Any) -> None:
    """Add the ``study`` command (``degrade``, ``plot``, ``report``) to ``subparsers``."""
    p = subparsers.add_parser(
        "study", help="degradation study: smroute's engines against OpenSM's",
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
    d.add_argument("--throws", type=int_range(1, MAX_THROWS), default=30,
                   help=f"throws per mode, 1..{MAX_THROWS:,} (default: 30)")
    d.add_argument("--seed", type=SEED, default=1, help="study seed, 0..2^63-1 (default: 1)")
    d.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help=f"comma-separated, from {','.join(ENGINES)} (default: "
                        f"{','.join(DEFAULT_ENGINES)})")
    d.add_argument("--vls", type=int_range(1, 15), default=1,
                   help="data VLs nmodc may use, 1..15: 2 or more routes the pairs a damaged "
                   "tree leaves without an up*/down* path with detours over virtual lanes, as "
                   "the OpenSM plugin can program them (default: 1; Dmodc stays the paper's)")
    add_workers_option(d, default=2, help="local processes")
    d.add_argument("--scheduler", metavar="ADDR",
                   help="Dask scheduler address (tcp://host:port) instead of local processes")
    d.add_argument("--rp-samples", type=int_range(1, MAX_SAMPLES), default=1000,
                   help=f"random permutations for RP, 1..{MAX_SAMPLES:,} (default: 1000)")
    d.add_argument("--random-orders", type=int_range(0, MAX_ORDERS), default=3,
                   help="random node orders the CPS HSD is averaged over, "
                   f"0..{MAX_ORDERS:,} (default: 3)")
    d.add_argument("--orders", type=int_range(0, MAX_ORDERS), default=0, metavar="N",
                   help="then average the random-order HSD over N random orders (the study's "
                   "first) on the throws of the bands where its comparison of the reference "
                   "engine with a rival is unresolved (its standard error unknown or not below "
                   "the mean difference), for those engines only; resumable (default: 0, none)")
    d.add_argument("--orders-bands", metavar="BANDS", default="",
                   help=f"only these removal bands for --orders, from {','.join(BAND_LABELS)} "
                   "(default: all)")
    d.add_argument("--reference", metavar="ENGINE", default=api.DEFAULT,
                   help=f"the engine --orders pairs the others with (default: {api.DEFAULT})")
    d.add_argument("--opensm-timeout", type=float_range(0, above=True), default=600.0,
                   help="seconds per OpenSM run before it counts as timed out (default: 600)")
    d.add_argument("--keep-failed", action="store_true",
                   help="on resume, keep the rows of engines that failed or timed out instead "
                   "of running their throws again (throws that broke are always retried)")
    d.add_argument("--rerun", metavar="ENGINES", default="",
                   help="comma-separated engines whose rows in the CSV are dropped first, so "
                   "they run again alone beside the other engines' cached rows, e.g. after "
                   "changing nmodc)")
    d.add_argument("--workdir", help="scratch directory, created where each throw runs "
                   "(default: a temporary one)")
    d.add_argument("--keep-work", action="store_true", help="keep each throw's OpenSM files")
    d.add_argument("--no-plots", action="store_true", help="do not draw the plots")
    d.add_argument("--quiet", "-q", action="store_true",
                   help="no progress (a line per throw and a bar) on stderr")
    d.add_argument("--out", required=True, metavar="DIR",
                   help="output directory (created if missing, in an existing directory; "
                   "DIR/study.csv is resumed)")
    d.set_defaults(func=_degrade)

    pl = sub.add_parser("plot", help="draw the plots of a study CSV")
    pl.add_argument("csv", metavar="CSV")
    pl.add_argument("--out", required=True, metavar="DIR",
                    help="directory for the plots (created if missing, in an existing directory)")
    pl.set_defaults(func=_plot)

    rp = sub.add_parser("report", help="markdown tables (median / worst per degradation band)")
    rp.add_argument("csv", metavar="CSV", nargs="+")
    rp.add_argument("--reference", metavar="ENGINE", default=api.DEFAULT,
                    help="the engine the sign-test section judges against every other "
                    f"(default: {api.DEFAULT})")
    rp.add_argument("--compact", action="store_true",
                    help="one table per fabric and mode (SP, A2A, RP, HSD per band)")
    rp.add_argument("--out", metavar="FILE|-", default="-",
                    help="write the full report here (replaced atomically; default -: stdout); "
                         "docs/study/report.md is this output")
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


def _out_dir(path: str) -> Path:
    """The results directory ``path``: an existing directory, or created
    inside an existing one; :class:`InputError` (exit 2) saying what is
    expected otherwise."""
    out = Path(path)
    if out.is_dir():
        return out
    if out.exists() or out.is_symlink():
        raise InputError("--out: exists and is not a directory; expected a results "
                         "directory (give a new name, or an existing directory)", source=path)
    if not out.parent.is_dir():
        raise InputError(f"--out: directory {out.parent} does not exist (smroute creates "
                         "only the results directory itself)", source=path)
    try:
        out.mkdir()
    except OSError as err:
        raise InputError(f"--out: cannot create the directory: {err.strerror or err}",
                         source=path) from None
    return out


def _study_source(args: argparse.Namespace) -> tuple[str, str]:
    """``(source, label)`` of the study's fabric, checked by building or
    parsing it here, before any throw (:class:`InputError` with the reason)."""
    from smroute.cli.generate_cmd import MAX_NODES

    if args.pgft is not None:
        spec = parse_pgft(args.pgft)
        if spec.nodes > MAX_NODES:
            raise InputError(f"{spec.label} has {spec.nodes:,} nodes, more than the "
                             f"{MAX_NODES:,} a study builds", source="--pgft")
        try:
            spec.build()
        except SmrouteError as err:
            raise InputError(f"{spec.label} cannot be built: {err}", source="--pgft") from None
        return f"pgft:{args.pgft}", args.label or spec.label
    from smroute.cli.inputs import guarded
    from smroute.fabric.ibnetdiscover.parse import read_topology, require_switches

    require_switches(guarded(read_topology, args.fabric), args.fabric)  # what a throw reads
    path = Path(args.fabric)
    return f"file:{path.resolve()}", args.label or path.stem


def _names(text: str) -> list[str]:
    """The names of a comma-separated option, blanks dropped."""
    return [n.strip() for n in text.split(",") if n.strip()]


def _degrade(args: argparse.Namespace) -> int:
    modes = _names(args.mode)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"--mode: expected {' or '.join(MODES)} (comma-separated), "
                         f"got {excerpt(args.mode)}")
    engines = _names(args.engines)
    bad = [e for e in engines if e not in ENGINES]
    if bad or not engines or len(set(engines)) != len(engines):
        raise InputError(f"--engines: expected distinct names from {','.join(ENGINES)}, "
                         f"got {excerpt(args.engines)}")
    if args.workdir and Path(args.workdir).exists() and not Path(args.workdir).is_dir():
        raise InputError("--workdir: exists and is not a directory", source=args.workdir)
    source, label = _study_source(args)
    out = _out_dir(args.out)
    rerun = _names(args.rerun)
    if any(e not in engines for e in rerun):
        raise InputError(f"--rerun: expected engines of --engines, got {excerpt(args.rerun)}")
    bands = _names(args.orders_bands)
    if any(b not in BAND_LABELS for b in bands):
        raise InputError(f"--orders-bands: expected bands from {','.join(BAND_LABELS)}, "
                         f"got {excerpt(args.orders_bands)}")
    if args.orders and args.reference not in engines:
        raise InputError(f"--reference: expected an engine of --engines, got "
                         f"{excerpt(args.reference)}")
    if csv_path(out).exists():
        old = read_rows(csv_path(out))  # a study to resume: readable, or an error now
        if rerun:
            write_rows(csv_path(out), [r for r in old if r["engine"] not in rerun])
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
                           opensm_timeout=args.opensm_timeout, keep_work=args.keep_work,
                           vls=args.vls)
        with Progress(sys.stderr, enabled=not args.quiet) as prog:

            def on_throw(p: ThrowProgress) -> None:  # a line per throw above the bar
                prog.write(_throw_line(p))
                prog.fraction("throws", p.done, p.todo)

            rows = run_study(tasks, csv_path(out), workers=args.workers,
                             scheduler=args.scheduler, on_throw=on_throw,
                             retry=("error",) if args.keep_failed else RETRY_STATUSES)
            if args.orders:
                _precision(args, tasks, rows, out, bands or None, prog)
                rows = read_rows(csv_path(out))
    finally:
        if scratch is not None:
            scratch.cleanup()
    for line in summary_lines(rows):
        print(line)
    print(f"CSV: {csv_path(out)}")
    if not args.no_plots:
        _plots(rows, out)
    planned = {t.key for t in tasks}
    broke = {tuple(r[k] for k in KEY) for r in rows if r.get("status") == "error"} & planned
    if broke:
        print(f"smroute: {len(broke)} of {len(planned)} throws broke (status error, reason in "
              "the CSV's error column); run the same command again to retry them",
              file=sys.stderr)
        return 1
    return 0


def _precision(args: argparse.Namespace, tasks: list[Any], rows: list[Any], out: Path,
               bands: list[str] | None, prog: Progress) -> None:
    """The ``--orders`` pass over each mode's unresolved bands."""
    todo = [t for mode in dict.fromkeys(t.mode for t in tasks)
            for t in precision_tasks(rows, next(t for t in tasks if t.mode == mode),
                                     args.orders, args.reference, bands)]
    prog.write(f"random-order HSD over {args.orders} orders: {len(todo)} throws to rerun")

    def on_throw(done: int, total: int, task: Any, note: str) -> None:
        prog.write(f"[{done}/{total}] {task.label} {task.mode} throw {task.index}: {note}")
        prog.fraction("throws", done, total)

    res = run_precision(todo, csv_path(out), workers=args.workers, scheduler=args.scheduler,
                        on_throw=on_throw)
    if res.differ:
        print(f"smroute: {res.differ} rerun rows did not reproduce their cached A2A, RP, SP "
              "or HSD-topo and were left as they were", file=sys.stderr)


def _plots(rows: list[Any], out: Path) -> None:
    try:
        for p in plot_all(rows, out):
            print(f"plot: {p}")
    except OSError as err:
        raise InputError(f"cannot write a plot: {err.strerror or err}",
                         source=err.filename or str(out)) from None


def _plot(args: argparse.Namespace) -> int:
    rows = read_rows(args.csv)
    _plots(rows, _out_dir(args.out))
    return 0


#: What the full report says before its tables.
REPORT_NOTE = (
    "Cells are median / worst over the throws where the engine routed every pair; failed "
    "(OpenSM fell back to another engine) and incomplete (some pairs left without a route) "
    "throws are counted, not included. Nmodc (the default) takes detours over virtual lanes "
    "where the study ran with `--vls` 2 or more and a damaged tree leaves pairs without an "
    "up*/down* path; Dmodc, the paper's, routes on one VL and orients only the destinations "
    "it must (column `routing_mode` of the CSV). How the throws are made and measured: "
    "the docs' page on the degradation study.")


def _report(args: argparse.Namespace) -> int:
    if args.compact and not is_stdout(args.out):
        raise InputError("--out writes the full report; --compact prints to stdout")
    if not is_stdout(args.out):
        check_output(args.out)
    rows = [r for path in args.csv for r in read_rows(path)]
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    if not args.compact:
        command = " ".join(["smroute study report", *args.csv]
                           + ([] if is_stdout(args.out) else ["--out", args.out]))
        lines = ["# Degradation study: full report", "",
                 f"Generated by `{command}` from the CSVs. {REPORT_NOTE}", "",
                 *markdown_report(rows, engines), *sign_markdown(rows, engines, args.reference)]
        write_output(args.out, "\n".join(lines) + "\n")
        return 0
    for fab, mode in sorted({(str(r["fabric"]), str(r["mode"])) for r in rows}):
        throws = len({r["throw"] for r in rows if r["fabric"] == fab and r["mode"] == mode})
        print(f"\n{fab}, {mode} degradation, {throws} throws:\n")
        print("\n".join(compact_table(rows, fab, mode, engines)))
    return 0
