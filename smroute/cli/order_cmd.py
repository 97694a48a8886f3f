"""``smroute order``: the MPI rank order of a job's hosts that makes the
routing's shift permutations contention-free where the fabric allows it.

The fabric (ibnetdiscover text) is routed (``--algorithm``, the default
engine, Nmodc, unless named); the job's hosts are then sorted by the routing's topological NIDs
(:mod:`smroute.analysis.order`).  The job file lists one host per line: a node
description, a node or port GUID (``0x...``), or a host name (the ``HOST`` of
CAs described ``"HOST DEVICE"``, e.g. ``node7 mlx5_0``; a host with several
HCAs is listed once and placed by its first HCA).  ``#`` starts a comment.

The order is checked before it is written: the hot-spot degree of the shift
CPS (average over stages of the most flows on one link) under the new order
is compared with the input order's, following the tables; if the new order
would be worse the input order is kept and the summary says so.

Output (``--out FILE``, default ``-`` = stdout; written atomically):

``hostfile`` (default)
    One host per line in rank order, no comments: for Open MPI ``mpirun
    --hostfile FILE --map-by ppr:N:node`` or MPICH ``mpiexec -f FILE -ppn N``.
``slurm``
    ``SLURM_HOSTFILE`` for Slurm's arbitrary distribution: one line per task
    (each host ``--tasks-per-host`` times in a row): ``SLURM_HOSTFILE=FILE
    srun --distribution=arbitrary -n TASKS``.

A host is written as its host name when its CA is described ``"HOST
DEVICE"``, else as the job line names it.  The one-line summary, and the
HSD of every CPS before and after with ``--report``, go to stderr when the
order goes to stdout, else to stdout.

Exit status: 0 written; 1 written, but the tables do not deliver some flows
between the job's hosts (counted in the summary); 2 bad input (the job
file's line is named); 3 the fabric cannot be routed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from smroute.cli.outputs import check_output, is_stdout, write_output

__all__ = ["register", "cmd_order", "format_order", "format_report"]

_FORMATS = ("hostfile", "slurm")
#: Tasks per host at most (lines a SLURM_HOSTFILE repeats per host).
MAX_TASKS_PER_HOST = 100_000


def register(subparsers: Any) -> None:
    """Add the ``order`` command to ``subparsers``."""
    from smroute.cli.inputs import add_role_options, add_strict_option, int_range
    from smroute.routing import api

    p = subparsers.add_parser(
        "order",
        help="MPI rank order of a job's hosts: the routing's topological order (hostfile)",
        description="Route FABRIC, then print the job's hosts in the routing's topological "
        "NID order, which makes shift permutations (and the other unidirectional collective "
        "sequences) contention-free where the fabric allows it, as a hostfile for mpirun or "
        "a SLURM_HOSTFILE. The order is never worse than the input order in the shift "
        "sequence's hot-spot degree: if it would be, the input order is kept.",
    )
    p.add_argument("--fabric", required=True, metavar="F", help="ibnetdiscover topology file")
    add_strict_option(p)
    p.add_argument("--job", required=True, metavar="HOSTS",
                   help="host list, one per line (node description, 0x-GUID or host name)")
    p.add_argument("--report", action="store_true",
                   help="print the HSD of every collective sequence before and after")
    p.add_argument("--format", choices=_FORMATS, default="hostfile", help="output format")
    p.add_argument("--tasks-per-host", type=int_range(1, MAX_TASKS_PER_HOST), default=1,
                   metavar="N", help=f"slurm format: lines (tasks) per host, "
                   f"1..{MAX_TASKS_PER_HOST:,} (default 1)")
    p.add_argument("--out", default="-", metavar="FILE|-",
                   help="write here (a regular file, replaced atomically); - for stdout "
                   "(default)")
    p.add_argument("--algorithm", choices=api.names(), default=api.DEFAULT,
                   help=f"the routing whose order to use (default {api.DEFAULT})")
    add_role_options(p)
    p.set_defaults(func=cmd_order)


def format_order(names: list[str], fmt: str, tasks_per_host: int = 1) -> str:
    """The hosts ``names`` (rank order) as a hostfile or a SLURM_HOSTFILE."""
    k = tasks_per_host if fmt == "slurm" else 1
    return "".join(f"{h}\n" * k for h in names)


def format_report(choice: Any) -> str:
    """The HSD of every CPS evaluated, input order against the chosen one."""
    from smroute.analysis.order import MAIN_CPS

    n = len(choice.ports)
    rows = [f"HSD per collective sequence, {n} hosts (average over stages of the most "
            "flows on one link; max = worst stage)",
            f"  {'CPS':<20} {'stages':>6}  {'input avg':>9} {'max':>4}  "
            f"{'ordered avg':>11} {'max':>4}"]
    for name, b in choice.before.items():
        a = choice.after[name]
        mark = "  <- main metric" if name == MAIN_CPS else ""
        rows.append(f"  {name:<20} {b.n_stages:>6}  {b.hsd_avg:>9.3f} {b.hsd_max:>4}  "
                    f"{a.hsd_avg:>11.3f} {a.hsd_max:>4}{mark}")
    if choice.kept_input:
        t = choice.topo[MAIN_CPS]
        rows.append(f"  (topological order, not used: {MAIN_CPS} avg {t.hsd_avg:.3f} "
                    f"max {t.hsd_max})")
    return "\n".join(rows) + "\n"


def _summary(choice: Any, algorithm: str) -> str:
    bad = choice.unroutable
    return (f"order ({algorithm}): {choice.reason}"
            + (f"; {bad} flows between the job's hosts are not delivered by the tables"
               if bad else ""))


def cmd_order(args: argparse.Namespace) -> int:
    """Order ``args.job`` on ``args.fabric``; write it (module doc)."""
    import numpy as np

    from smroute.analysis.order import endport_nids, host_label, rank_order, resolve_hosts
    from smroute.analysis.paths import routing_view
    from smroute.analysis.patterns import read_job
    from smroute.cli.inputs import load_fabric, load_overrides
    from smroute.routing.engine import route
    from smroute.tables.lft import ForwardingTables

    if not is_stdout(args.out):
        check_output(args.out)  # fail now, not after the routing
    entries = read_job(args.job)
    overrides = load_overrides(args)
    fabric = load_fabric(args.fabric, strict=args.strict)
    # resolve the hosts before routing (errors first, cheaply)
    empty = ForwardingTables(switch_guid=np.zeros(0, np.uint64), switch_lid=np.zeros(0, np.int64),
                             switch_desc=(), ports=np.zeros((0, 1), np.uint8))
    ports = resolve_hosts(routing_view(fabric, empty), entries, args.job)
    result = route(fabric, algorithm=args.algorithm, lmc=0, workers=1, labels=False,
                   overrides=overrides)
    view = routing_view(fabric, result.tables)
    choice = rank_order(view, ports, endport_nids(view, result.graph.ep_row, result.nids),
                        report=args.report)
    names = [host_label(view, int(ports[i]), entries[i][1]) for i in choice.order.tolist()]
    text = format_order(names, args.format, args.tasks_per_host)
    info: TextIO = sys.stderr if write_output(args.out, text) else sys.stdout
    print(_summary(choice, args.algorithm), file=info)
    if args.report and choice.before:
        info.write(format_report(choice))
    return 1 if choice.unroutable else 0
