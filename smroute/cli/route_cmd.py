"""``smroute route FABRIC``: compute forwarding tables and write them out.

``FABRIC`` is an ibnetdiscover topology file.  The tables are written to
``--out`` (a regular file, replaced atomically, or ``-`` for standard output,
the summary then going to stderr: :mod:`smroute.cli.outputs`) in one of the
formats of :mod:`smroute.tables.formats`: ``opensm``
(OpenSM file-engine input, ``opensm -R file -U FILE``), ``fdbs``
(``opensm.fdbs`` plus ``opensm-subnet.lst`` beside it, for
``ibdmchk -s opensm-subnet.lst -f opensm.fdbs -m /dev/null``) or ``json``.  Unless
``--no-validate``, every (switch, LID) route is walked and the result is part
of the summary printed on stdout; each phase also prints a progress line on
stderr.

``--vls N`` (N >= 2, with ``--lanes-out FILE``) lets a tree whose routes
cannot all be up*/down* take detours over virtual lanes (mode
``tree+detours``) instead of routing everything up*/down* from a root: the
SLs and SL-to-VL tables go to ``FILE`` (:mod:`smroute.routing.lanesfile`),
the channel-dependency check per VL is part of the summary.  OpenSM's file
engine cannot program them: only a subnet manager that does (smroute's
OpenSM plugin) may load such tables.

Exit status: 0 routed and valid (or not validated), 1 routed but invalid
(the tables are written anyway), 2 bad input, 3 the fabric cannot be routed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from smroute.cli.inputs import (
    add_role_options,
    add_strict_option,
    add_workers_option,
    int_range,
    load_fabric,
    load_overrides,
)
from smroute.cli.outputs import STDOUT, check_output, is_stdout, write_output
from smroute.cli.progress import Progress
from smroute.errors import InputError

__all__ = ["register", "cmd_route", "hop_table", "Progress"]

_FORMATS = ("opensm", "fdbs", "json")


def register(subparsers: Any) -> None:
    """Add the ``route`` command to ``subparsers``."""
    from smroute.routing import api

    p = subparsers.add_parser(
        "route",
        help="route an ibnetdiscover fabric and write its forwarding tables",
        description="Compute linear forwarding tables for every switch and LID of an "
        "ibnetdiscover topology, validate them by walking every route, write them and "
        "print a summary. Exit status: 0 valid, 1 routed but invalid, 2 bad input, "
        "3 the fabric cannot be routed.",
    )
    p.add_argument("fabric", metavar="FABRIC", help="ibnetdiscover topology file")
    add_strict_option(p)
    add_role_options(p)
    p.add_argument("--algorithm", choices=api.names(lab=True), default=api.DEFAULT,
                   help=f"routing algorithm (default {api.DEFAULT})")
    p.add_argument("--lmc", type=int_range(0, 7), default=None, metavar="N",
                   help="route 2^N LIDs per end-port, 0..7 (default: each port's LMC in FABRIC)")
    add_workers_option(p, help="worker processes for route computation",
                       default_text="default: in-process up to 32M switch-to-LID entries, "
                       "else one per CPU")
    p.add_argument("--out", required=True, metavar="FILE|-",
                   help="output file (a regular file, replaced atomically; its directory must "
                   "exist), or - for standard output (the summary then goes to stderr)")
    p.add_argument("--format", choices=_FORMATS, default="opensm",
                   help="output format (default opensm: OpenSM file-engine input; fdbs also "
                   "writes opensm-subnet.lst beside FILE)")
    p.add_argument("--no-port-guids", action="store_true",
                   help="opensm format: leave the per-LID port GUID comments out (about 6x "
                   "smaller; OpenSM can then not remap LIDs that moved)")
    p.add_argument("--vls", type=int_range(1, 15), default=1, metavar="N",
                   help="data VLs the subnet manager programs, 1..15 (default 1); 2 or more "
                   "lets pairs without an up*/down* path take detours over VLs (needs "
                   "--lanes-out; only a subnet manager that sets SLs and SL-to-VL tables, "
                   "such as smroute's OpenSM plugin, can use them, not OpenSM's file engine)")
    p.add_argument("--lanes-out", metavar="FILE",
                   help="with --vls N >= 2: write the SLs and SL-to-VL tables there "
                   "(smroute-lanes text format, replaced atomically)")
    p.add_argument("--route-all-ca-pairs", action="store_true",
                   help="every CA pair needs a route (default: aggregation nodes need hosts "
                   "and the aggregation nodes of adjacent switches only; their other pairs "
                   "are routed where it costs nothing, else counted)")
    p.add_argument("--no-validate", action="store_true", help="skip the validation walk")
    p.add_argument("--max-failures", type=int_range(0), default=20, metavar="N",
                   help="list at most N unroutable pairs by name (default 20)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_route)


def hop_table(result: Any, walked: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Per-(switch, LID) hop counts of ``result``'s tables, as ``opensm.fdbs``
    states them: links traversed to the destination port (0 for the switch's
    own LID, 1 to a CA on the switch).  Shape ``(S, W)`` uint8, 255 where the
    walk does not deliver or the switch is not routed.  ``walked``: the
    routed switches' walk if already done (see :func:`~smroute.routing.validate.validate`)."""
    from smroute.routing.validate import OK, walk

    g, dest, ports = result.walk_graph, result.dest, result.tables.ports
    out = np.full(ports.shape, 255, dtype=np.uint8)
    sources = np.flatnonzero(g.rank >= 0)
    if len(sources) == 0 or len(dest.lid) == 0:
        return out
    status, hops = walked if walked is not None else walk(g, ports, dest, sources,
                                                          **_detour_walk(result))
    h = hops.astype(np.int64) + (~dest.is_switch).astype(np.int64)[None, :]
    h = np.where((status == OK) & (h < 255), h, 255).astype(np.uint8)
    out[sources[:, None], dest.lid[None, :]] = h
    return out


def _detour_walk(result: Any) -> dict[str, Any]:
    """The :func:`~smroute.routing.validate.walk` options of a routing with
    detours or mode ``tree+orient`` (LIDs that may turn; longer walks), else none."""
    turns, max_hops = result.walk_turns()
    return {} if turns is None else {"turns": turns, "max_hops": max_hops}


def _fmt_s(x: float) -> str:
    return f"{x:.3f} s"


def cmd_route(args: argparse.Namespace) -> int:
    """Route ``args.fabric``, write ``args.out``, print the summary; exit status
    0 valid, 1 invalid (module doc)."""
    from smroute.fabric.model.base import NodeType
    from smroute.routing.engine import route, validate_result
    from smroute.routing.validate import walk
    from smroute.routing.workers import workers_for
    from smroute.tables.formats import table_files

    to_stdout = is_stdout(args.out)
    if to_stdout and args.format == "fdbs":
        raise InputError("--format fdbs writes two files (opensm.fdbs and opensm-subnet.lst "
                         "beside it); give --out a file name, not -")
    if args.vls >= 2 and not args.lanes_out:
        raise InputError("--vls 2 or more routes some pairs over virtual lanes: give "
                         "--lanes-out FILE for their SLs and SL-to-VL tables")
    if args.lanes_out and args.vls < 2:
        raise InputError("--lanes-out needs --vls 2 or more (one VL takes no detour)")
    if args.lanes_out:
        if is_stdout(args.lanes_out):
            raise InputError("--lanes-out: give a file name, not -")
        check_output(args.lanes_out, "--lanes-out")
    if not to_stdout:  # fail now, not after the routing
        check_output(args.out)
        if args.format == "fdbs":
            check_output(str(Path(args.out).with_name("opensm-subnet.lst")), "--out (beside)")

    prog = Progress(sys.stderr, enabled=not args.quiet)
    t = prog.start(f"reading {args.fabric}")
    fabric = load_fabric(args.fabric, strict=args.strict)
    n_sw, n_ca = len(fabric.switches), len(fabric.cas)
    prog.done("parse", t, f"{n_sw} switches, {n_ca} CAs, {fabric.n_links} links")

    t = prog.start(f"routing with {args.algorithm}")
    workers = workers_for(n_sw, len(fabric.lid_to_port) << (args.lmc or 0), args.workers)
    result = route(fabric, algorithm=args.algorithm, lmc=args.lmc, workers=workers,
                   overrides=load_overrides(args), max_vls=args.vls,
                   all_ca_pairs=args.route_all_ca_pairs, progress=prog.fraction)
    prog.done("route", t, ", ".join(f"{k} {v:.3f} s" for k, v in result.timings.items()))
    tables = result.tables

    validation = None
    walked = None  # one walk of every route serves the validation and the fdbs hops
    if not args.no_validate:
        t = prog.start("validating (walking every switch-to-LID route)")
        g = result.walk_graph
        if args.format == "fdbs" and len(result.dest.lid):
            walked = walk(g, tables.ports, result.dest, np.flatnonzero(g.rank >= 0),
                          **_detour_walk(result))
        validation = validate_result(result, max_failures=args.max_failures, walked=walked)
        prog.done("validate", t, "valid" if validation.ok else "INVALID")

    hops = None
    if args.format == "fdbs":
        t = prog.start("computing hop counts for opensm.fdbs")
        hops = hop_table(result, walked)
        prog.done("hops", t)

    deadlock = None
    # routes that turn on purpose (detours over VLs, or mode tree+orient): the
    # channel dependencies of the tables as written, checked again here
    if (result.lanes is not None or result.oriented is not None) and validation is not None:
        from smroute.routing.deadlock import check_credit_loops

        t = prog.start("checking channel dependencies per VL")
        deadlock = check_credit_loops(fabric, tables, result.lanes)
        prog.done("deadlock", t, "no credit loop" if deadlock.ok else "CREDIT LOOP")

    written: list[str] = []
    # never publish an invalid table set
    if (validation is None or validation.ok) and (deadlock is None or deadlock.ok):
        t = prog.start(f"writing {args.out} ({args.format})")
        if args.no_port_guids:  # the labels served the validation; not in the file
            tables = replace(tables, lid_guid=None, lid_kind=None, lid_desc=None, _index={})
        for path, chunks in table_files(tables, args.out, args.format, fabric=fabric,
                                        hops=hops):
            write_output(STDOUT if to_stdout else str(path), chunks)
            written.append("standard output" if to_stdout else str(path))
        prog.done("write", t)
        if args.lanes_out:
            written.append(_write_lanes(args.lanes_out, result, prog))

    routed_lids = int(len(result.dest.lid))
    n_ca_ports = int((~result.dest.is_switch).sum())
    n_routers = int((fabric.node_type == NodeType.ROUTER).sum())
    lines = [
        f"fabric:     {args.fabric}: {n_sw} switches, {n_ca} CAs"
        + (f", {n_routers} routers" if n_routers else "") + f", {fabric.n_links} links",
        f"routing:    {args.algorithm}, {routed_lids} destination LIDs "
        f"({n_ca_ports} end-port LIDs, {routed_lids - n_ca_ports} switch LIDs), "
        f"max LID {tables.max_lid}, {tables.n_switches} switches x {tables.max_lid + 1} "
        f"LFT entries",
        f"mode:       {result.mode}" + (f" ({result.mode_reason})" if result.mode_reason else ""),
        "time:       " + ", ".join(
            f"{k} {_fmt_s(v)}" for k, v in [
                ("parse", prog.timings["parse"]), *result.timings.items(),
                *((k, prog.timings[k]) for k in ("validate", "hops", "write", "deadlock")
                  if k in prog.timings),
            ]
        ) + f"; total {_fmt_s(prog.elapsed())}",
    ]
    if validation is None:
        lines.append("validation: skipped (--no-validate)")
    else:
        lines.append(f"validation: {validation.summary()}")
        if not validation.ok:
            shown = len(validation.failures)
            failing = validation.pairs - validation.delivered
            lines.append(f"unroutable (first {shown} of {failing}):" if shown < failing
                         else "unroutable:")
            lines.extend(f"  {f}" for f in validation.failures)
    if result.lanes is not None:
        ln = result.lanes
        lines.append(f"lanes:      {ln.n_vls} VLs, {ln.n_sls} SLs: {len(ln.detour_lids)} LIDs "
                     f"with detours, {len(ln.escape_lids)} on the escape SL "
                     f"{ln.escape_sl}; only a subnet manager that programs SLs and VLs "
                     "(smroute's OpenSM plugin) can use these tables, not OpenSM's file engine")
    if deadlock is not None:
        lines.append(f"deadlock:   {deadlock.summary()}")
    lines.append("output:     " + (", ".join(written) if written else
                                 f"not written ({args.out}): the tables are invalid"
                                 if deadlock is None or deadlock.ok else
                                 f"not written ({args.out}): a credit loop"))
    if not written and args.vls == 1 and result.mode.endswith("+orient"):
        lines.append("hint:       on one VL no orientation serves those destinations free of "
                     "credit loops; detours over VLs may (--vls 2 --lanes-out FILE: tables "
                     "for smroute's OpenSM plugin, which programs SLs and VLs)")
    if to_stdout:
        sys.stderr.write("\n".join(lines) + "\n")
    else:
        write_output(STDOUT, "\n".join(lines) + "\n")
    return 0 if (validation is None or validation.ok) and (deadlock is None or deadlock.ok) else 1


def _write_lanes(path: str, result: Any, prog: Progress) -> str:
    """Write ``result``'s lanes file (no detours: every path SL 0, VL 0)."""
    from smroute.routing.lanesfile import MAGIC, format_lanes

    t = prog.start(f"writing {path} (SLs and SL-to-VL tables)")
    g = result.graph
    text = ("".join(format_lanes(result.lanes, g.sw_guid, g.component))
            if result.lanes is not None else f"{MAGIC}\n# no detours: every path SL 0, VL 0\n"
            "vls 1\nsls 1\nescape_sl 0\nend 0 0\n")
    write_output(path, text, "--lanes-out")
    prog.done("lanes", t)
    return path
