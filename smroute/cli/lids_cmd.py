"""``smroute lids``: choose, for a job, which LID of each destination every
source rank should use (LMC hot-spot avoidance, :mod:`smroute.lids.select`).

The fabric (ibnetdiscover text, with the LIDs and LMC the subnet manager
assigned) is routed with the default engine (Nmodc) using ``--lmc`` (default: the LMC of the job's
ports); the job file lists one host per line in rank order (node description
or ``0x`` GUID).  Output formats, all with DLIDs in decimal:

``table`` (default)
    ``#`` comment lines (fabric, pattern, LMC, HSD, the host of each rank),
    then one line per source rank: ``RANK DLID_0 DLID_1 ... DLID_{n-1}``
    (``DLID_d`` = the LID rank ``RANK`` sends to rank ``d`` on; 0 for itself).
    ``numpy.loadtxt(FILE, dtype=int)`` gives an ``(n, n + 1)`` array.
``csv``
    Header ``src_rank,dlid_0,...,dlid_{n-1}``, then the same rows.
``json``
    ``{"fabric", "pattern", "lmc", "n_ranks", "hosts", "dlids": [[...]],
    "hsd": {"avg", "max", "base_avg", "base_max"}, "stages": [...]}``.

``--per-stage`` adds each stage's HSD with the chosen LIDs and with base LIDs
(comment lines in ``table``, ``stages`` in JSON; ``csv`` prints them on
stderr).  The summary (HSD with selection vs base LIDs) goes to stderr when
the output goes to stdout, else to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.errors import InputError

__all__ = ["register", "cmd_lids", "format_selection"]

_FORMATS = ("table", "csv", "json")


def register(subparsers: Any) -> None:
    """Add the ``lids`` command to ``subparsers``."""
    from smroute.cli.inputs import SEED, add_strict_option, add_workers_option, int_range

    p = subparsers.add_parser(
        "lids",
        help="choose per (source, destination) rank the DLID that avoids hot spots (LMC)",
        description="Route FABRIC with the default engine (Nmodc) and LMC, then choose for "
        "every pair of ranks of the job which of the destination's 2^LMC LIDs to use so "
        "that in every stage of the pattern as few flows as possible share a link. Prints "
        "a DLID table an MPI library or launcher can load, and the hot-spot degree (HSD) "
        "against base LIDs. On a fabric whose job ports have LMC 0 there is nothing to "
        "choose: the table holds the base LIDs and a warning says so (exit 0); --lmc above "
        "the ports' LMC is an error (exit 2).",
    )
    p.add_argument("--fabric", required=True, metavar="F", help="ibnetdiscover topology file")
    add_strict_option(p)
    p.add_argument("--job", required=True, metavar="HOSTS",
                   help="host list, one per line in rank order (node description or 0x-GUID)")
    p.add_argument("--pattern", default="shift", metavar="NAME",
                   help="shift (all-to-all's shift stages, default) or a collective: ring, "
                   "binomial, dissemination, tournament, recursive-doubling, recursive-halving")
    p.add_argument("--lmc", type=int_range(0, 7), default=None, metavar="N",
                   help="use 2^N LIDs per port, 0..7 (default: the LMC of the job's ports in F)")
    p.add_argument("--out", default="-", metavar="FILE|-",
                   help="write here (a regular file, replaced atomically); - for stdout "
                   "(default)")
    p.add_argument("--format", choices=_FORMATS, default="table", help="output format")
    p.add_argument("--per-stage", action="store_true", help="also give the HSD of every stage")
    p.add_argument("--seed", type=SEED, default=0,
                   help="tie-breaking seed, 0..2^63-1 (default 0)")
    add_workers_option(p, help="routing worker processes",
                       default_text="default: in-process up to 32M switch-to-LID entries, "
                       "else one per CPU")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_lids)


def format_selection(sel: Any, hosts: list[str], fmt: str, *, per_stage: bool,
                     fabric: str) -> str:
    """Render a :class:`~smroute.lids.select.LidSelection` (see module doc)."""
    dl = sel.dlids
    n = sel.n
    if fmt == "json":
        doc: dict[str, object] = {
            "fabric": fabric, "pattern": sel.pattern, "lmc": sel.lmc, "n_ranks": n,
            "hosts": hosts, "dlids": dl.tolist(),
            "hsd": {"avg": sel.hsd_avg, "max": sel.hsd_max,
                    "base_avg": sel.hsd_base_avg, "base_max": sel.hsd_base_max},
        }
        if per_stage:
            doc["stages"] = [
                {"index": i, "label": _stage_label(sel, i),
                 "hsd": int(sel.hsd[i]), "hsd_base": int(sel.hsd_base[i])}
                for i in range(len(sel.hsd))]
        return json.dumps(doc) + "\n"
    rows = np.concatenate([np.arange(n, dtype=np.int64)[:, None], dl], axis=1)
    sep = "," if fmt == "csv" else " "
    body = "\n".join(sep.join(map(str, r)) for r in rows.tolist())
    if fmt == "csv":
        head = "src_rank," + ",".join(f"dlid_{d}" for d in range(n))
        return head + "\n" + body + "\n"
    out = [
        f"# smroute lids: fabric {fabric}, pattern {sel.pattern}, LMC {sel.lmc}, {n} ranks",
        f"# {summary(sel)}",
        "# row: SRC_RANK then the DLID to use for destination ranks 0..n-1 (0 = itself)",
    ]
    out += [f"# rank {i}: {h}" for i, h in enumerate(hosts)]
    if per_stage:
        out += [f"# stage {_stage_label(sel, i)}: HSD {int(sel.hsd[i])} "
                f"(base LIDs {int(sel.hsd_base[i])})" for i in range(len(sel.hsd))]
    return "\n".join(out) + "\n" + body + "\n"


def _stage_label(sel: Any, i: int) -> str:
    """The pattern's label of stage ``i`` (its index if the pattern has none)."""
    return str(sel.labels[i]) if sel.labels else str(i)


def summary(sel: Any) -> str:
    """One line: HSD over the stages with the selected and with base LIDs."""
    bad = int(sel.unroutable.sum())
    return (f"HSD over {len(sel.hsd)} stages: selected LIDs avg {sel.hsd_avg:.3f} max "
            f"{sel.hsd_max}; base LIDs avg {sel.hsd_base_avg:.3f} max {sel.hsd_base_max}"
            + (f"; {bad} flows unroutable" if bad else ""))


def cmd_lids(args: argparse.Namespace) -> int:
    """Select the LIDs of ``args.job`` on ``args.fabric``; write them (module doc)."""
    from smroute.analysis.paths import routing_view
    from smroute.analysis.patterns import cps, read_job, resolve_job
    from smroute.cli.inputs import load_fabric
    from smroute.cli.progress import Progress
    from smroute.lids.select import job_lmc, select_lids
    from smroute.routing.api import DEFAULT
    from smroute.routing.engine import route
    from smroute.routing.workers import workers_for

    if not is_stdout(args.out):
        check_output(args.out)  # fail now, not after the routing
    prog = Progress(sys.stderr, enabled=not args.quiet)
    t = prog.start(f"reading {args.fabric} and {args.job}")
    entries = read_job(args.job)
    fabric = load_fabric(args.fabric, strict=args.strict)
    # resolve hosts on the fabric before routing (errors first, cheaply)
    from smroute.tables.lft import ForwardingTables

    empty = ForwardingTables(switch_guid=np.zeros(0, np.uint64), switch_lid=np.zeros(0, np.int64),
                             switch_desc=(), ports=np.zeros((0, 1), np.uint8))
    view0 = routing_view(fabric, empty)
    ranks = resolve_job(view0, entries, args.job)
    pattern = cps(args.pattern, len(ranks))
    have = job_lmc(view0, ranks)
    lmc = have if args.lmc is None else args.lmc
    if lmc > have:
        raise InputError(f"LMC mismatch: --lmc {lmc} but the job's ports have LMC {have} in "
                         f"{args.fabric} (the subnet manager gave them 2^{have} LIDs)")
    prog.done("read", t, f"{len(ranks)} ranks, LMC {lmc}")
    if lmc == 0 and args.lmc is None:  # nothing to choose: said, even with -q
        print(f"smroute: warning: {args.fabric}: the job's ports have LMC 0 (one LID each): "
              "there is no LID to choose, every DLID is the base LID; give the ports "
              "2^LMC LIDs in the subnet manager (OpenSM's lmc) to avoid hot spots",
              file=sys.stderr)
    t = prog.start(f"routing with {DEFAULT}")
    workers = workers_for(len(fabric.switches), len(fabric.lid_to_port) << (args.lmc or 0),
                          args.workers)
    result = route(fabric, lmc=args.lmc, workers=workers)
    view = routing_view(fabric, result.tables)
    prog.done("route", t)
    t = prog.start(f"selecting LIDs ({args.pattern}, {pattern.n_stages} stages)")
    sel = select_lids(view, ranks, pattern, rng=np.random.default_rng(args.seed), lmc=lmc)
    prog.done("select", t)
    text = format_selection(sel, [h for _, h in entries], args.format,
                            per_stage=args.per_stage, fabric=args.fabric)
    to_stdout = write_output(args.out, text)
    print(summary(sel), file=sys.stderr if to_stdout else sys.stdout)
    if args.per_stage and args.format == "csv":
        for i in range(len(sel.hsd)):
            print(f"stage {_stage_label(sel, i)}: HSD {int(sel.hsd[i])} "
                  f"(base {int(sel.hsd_base[i])})", file=sys.stderr)
    return 0
