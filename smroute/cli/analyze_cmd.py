"""``smroute analyze TABLES --fabric FILE --pattern P``: routing quality of a table set.

``TABLES`` is any table file :func:`smroute.tables.formats.read_tables` reads
(ours, or OpenSM's ``opensm-lfts.dump``); ``--fabric`` the ibnetdiscover
topology they route.  The flows of the pattern are followed through the
tables (:mod:`smroute.analysis`):

* ``a2a``: all-to-all congestion risk (max over links of min(#sources,
  #destinations));
* ``rp``: the median over ``--samples`` random permutations of each
  permutation's maximum congestion risk;
* ``sp``: every shift permutation; the maximum congestion risk;
* ``cps:NAME``: one of Zahavi's collective permutation sequences; the hot-spot
  degree (most flows on one link) per stage, average and maximum.

``--order`` places the participants: ``topo`` (Dmodc's topological NIDs of
the fabric), ``random`` (seeded; for ``cps`` averaged over ``--orders``
orders) or a file listing hosts one per line in rank order (node description,
node GUID or port GUID; ``#`` starts a comment) -- a job allocation.

The tables are checked against the fabric first: a switch that is no switch
of ``--fabric``, a LID above its highest or a port a switch lacks is an error
(exit 2), not a result (:mod:`smroute.tables.match`); a table file cut short
is an error naming its line.  The result goes to ``--out`` (default ``-``,
standard output; :mod:`smroute.cli.outputs`).

Exit status: 0 every flow delivered, 1 some flows hit a dead end or a loop
(reported), 2 bad input.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from typing import Any

import numpy as np

from smroute.errors import InputError

__all__ = ["register", "cmd_analyze", "parse_pattern"]

_SIMPLE = ("a2a", "rp", "sp")
#: Bounds of --samples and --orders (each sample or order is a full evaluation).
MAX_SAMPLES = 1_000_000
MAX_ORDERS = 10_000


def register(subparsers: Any) -> None:
    """Add the ``analyze`` command to ``subparsers``."""
    from smroute.analysis.patterns import CPS
    from smroute.cli.inputs import SEED, add_strict_option, int_range

    p = subparsers.add_parser(
        "analyze",
        help="congestion risk / hot-spot degree of forwarding tables under a traffic pattern",
        description="Follow a traffic pattern through forwarding tables (ours or OpenSM's) "
        "and report Dmodc's congestion risk (a2a, rp, sp) or Zahavi's hot-spot degree per "
        f"stage (cps:NAME with NAME one of {', '.join(CPS)}). Exit status: 0 every flow "
        "delivered, 1 some flows undeliverable, 2 bad input.",
    )
    p.add_argument("tables", metavar="TABLES",
                   help="forwarding tables (opensm-lfts.dump / file-engine input, "
                   "ibroute/dump_fts output, opensm.fdbs, smroute JSON)")
    p.add_argument("--fabric", required=True, metavar="FILE",
                   help="the ibnetdiscover topology the tables route")
    add_strict_option(p)
    p.add_argument("--pattern", required=True, type=parse_pattern, metavar="P",
                   help="a2a | rp | sp | cps:NAME")
    p.add_argument("--order", default="topo", metavar="ORDER",
                   help="topo (default), random, or a host-list FILE in rank order")
    p.add_argument("--seed", type=SEED, default=0, help="random seed, 0..2^63-1 (default 0)")
    p.add_argument("--samples", type=int_range(1, MAX_SAMPLES), default=1000, metavar="N",
                   help=f"random permutations for rp, 1..{MAX_SAMPLES:,} (default 1000)")
    p.add_argument("--orders", type=int_range(1, MAX_ORDERS), default=10, metavar="R",
                   help=f"random orders averaged for cps with --order random, 1..{MAX_ORDERS:,} "
                   "(default 10)")
    p.add_argument("--per-stage", action="store_true",
                   help="list every stage (sp, rp, cps)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", default="-", metavar="FILE|-",
                   help="write the result here (a regular file, replaced atomically); - for "
                   "stdout (default)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    from smroute.analysis.plot import plot_path

    p.add_argument("--plot", type=plot_path, metavar="FILE",
                   help="draw flows per port by level, up and down, with the hot spots "
                   "named, into FILE.png or FILE.svg (smroute/analysis/plot.py)")
    p.set_defaults(func=cmd_analyze)


def parse_pattern(text: str) -> str:
    """``a2a``, ``rp``, ``sp`` or ``cps:NAME``; argparse type (raises
    ``argparse.ArgumentTypeError``)."""
    from smroute.analysis.patterns import CPS
    from smroute.text import excerpt

    t = text.strip().lower()
    if t in _SIMPLE:
        return t
    if t.startswith("cps:") and t[4:] in CPS:
        return t
    raise argparse.ArgumentTypeError(
        f"unknown pattern {excerpt(text)}; expected a2a, rp, sp or cps:NAME with NAME one of "
        f"{', '.join(CPS)}")


def _topo_order(view: Any, fabric: Any) -> np.ndarray:
    from smroute.analysis.patterns import topological_order_from
    from smroute.routing.dmodc import costs_and_dividers, topological_nids
    from smroute.routing.topology import switch_graph

    g = switch_graph(fabric)
    costs, _ = costs_and_dividers(g)
    return topological_order_from(view, g.ep_row, topological_nids(g, costs))


def cmd_analyze(args: argparse.Namespace) -> int:
    """Analyze ``args.tables`` on ``args.fabric``; 0 if every flow is delivered."""
    from smroute.analysis import congestion as cg
    from smroute.analysis.paths import pair_paths, routing_view
    from smroute.analysis.patterns import cps, read_job, resolve_job
    from smroute.cli.inputs import load_fabric, load_tables
    from smroute.cli.outputs import check_output, is_stdout
    from smroute.cli.progress import Progress

    for path, option in ((args.out, "--out"), (args.plot, "--plot")):
        if path is not None and not is_stdout(path):
            check_output(path, option)  # fail now, not after the analysis
    prog = Progress(sys.stderr, enabled=not args.quiet)
    t = prog.start(f"reading {args.fabric} and {args.tables}")
    fabric = load_fabric(args.fabric, strict=args.strict)
    tables = load_tables(args.tables, fabric, args.fabric)
    view = routing_view(fabric, tables)
    prog.done("read", t, f"{view.n_endports} end-ports, {view.n_switches} switches")
    if view.n_endports < 2:
        raise InputError("the fabric has fewer than two end-ports to analyze",
                         source=args.fabric)
    t = prog.start("tracing every (leaf, destination) path")
    paths = pair_paths(view)
    prog.done("paths", t, f"{paths.unroutable_pairs} undeliverable pairs")

    rng = np.random.default_rng(args.seed)
    if args.order == "topo":
        order = _topo_order(view, fabric)
    elif args.order == "random":
        order = rng.permutation(view.n_endports).astype(np.int64)
    else:
        order = resolve_job(view, read_job(args.order), args.order)

    def bar(done: int, total: int) -> None:
        prog.fraction("stages", done, total)

    pattern: str = args.pattern
    result: dict[str, Any] = {
        "tables": args.tables, "fabric": args.fabric, "pattern": pattern,
        "order": args.order, "participants": int(len(order)), "seed": args.seed,
    }
    stages: Any = None
    plot_rng = copy.deepcopy(rng)  # --plot draws what the analysis drew
    t = prog.start(f"evaluating {pattern} over {len(order)} participants")
    if pattern == "a2a":
        a2a = cg.a2a_risk(view, paths, order)
        result.update(congestion_risk=int(a2a.value), flows=int(a2a.flows),
                      unroutable=int(a2a.unroutable),
                      hot_link=view.describe_link(a2a.link) if a2a.link >= 0 else None,
                      hot_link_sources=int(a2a.n_src[a2a.link]) if a2a.link >= 0 else 0,
                      hot_link_destinations=int(a2a.n_dst[a2a.link]) if a2a.link >= 0 else 0)
    elif pattern in ("rp", "sp"):
        stages = (cg.rp_risk(view, paths, order, rng, samples=args.samples, progress=bar)
                  if pattern == "rp" else cg.sp_risk(view, paths, order, progress=bar))
        result.update(stages.summary())
        result["congestion_risk"] = (stages.risk_median if pattern == "rp"
                                     else stages.risk_max)
        result["unroutable"] = stages.total_unroutable
    else:
        seq = cps(pattern[4:], len(order))
        if args.order == "random":
            ro = cg.hsd_random_orders(view, paths, seq, rng, orders=args.orders,
                                      participants=order)
            result.update(stages=seq.n_stages, orders=args.orders, hsd_avg=ro.mean,
                          hsd_avg_min=ro.min, hsd_avg_max=ro.max,
                          hsd_max=int(ro.max_flows.max()) if ro.max_flows.size else 0,
                          unroutable=int(ro.unroutable.sum()))
        else:
            stages = cg.evaluate(view, paths, seq, order, progress=bar)
            result.update(stages.summary())
            result["unroutable"] = stages.total_unroutable
    prog.done("analysis", t)
    if args.plot:
        from pathlib import Path

        from smroute.analysis.plot import plot_analysis

        t = prog.start(f"plotting {args.plot}")
        result["hot_spots"] = plot_analysis(
            args.plot, view, paths, pattern, order, plot_rng, samples=args.samples,
            random_order=args.order == "random", progress=bar,
            title=f"{pattern} on {Path(args.fabric).name} ({Path(args.tables).name}), "
                  f"order {args.order}, {len(order):,} participants")
        result["plot"] = args.plot
        prog.done("plot", t)
    if args.per_stage and stages is not None:
        result["per_stage"] = [
            {"stage": (stages.labels[k] if stages.labels else str(k)),
             "flows": int(stages.flows[k]), "hsd": int(stages.max_flows[k]),
             "risk": int(stages.risk[k]), "unroutable": int(stages.unroutable[k])}
            for k in range(stages.n_stages)
        ]
    from smroute.cli.outputs import write_output

    write_output(args.out, json.dumps(result, indent=2) + "\n" if args.json
                 else _format_table(result))
    return 1 if result.get("unroutable", 0) else 0


_LABELS = {
    "congestion_risk": "congestion risk", "flows": "flows", "unroutable": "undeliverable flows",
    "hot_link": "hottest link", "hot_link_sources": "  its sources",
    "hot_link_destinations": "  its destinations", "stages": "stages",
    "hsd_avg": "HSD average over stages", "hsd_max": "HSD maximum",
    "hsd_avg_min": "HSD average, best order", "hsd_avg_max": "HSD average, worst order",
    "risk_max": "risk maximum", "risk_median": "risk median", "orders": "random orders",
    "plot": "plot",
}


def _format_table(r: dict[str, Any]) -> str:
    out = [f"pattern {r['pattern']}, order {r['order']}, {r['participants']} participants\n"]
    for key, label in _LABELS.items():
        if key in r and r[key] is not None:
            v = r[key]
            text = f"{v:.3f}" if isinstance(v, float) and not v.is_integer() else (
                str(int(v)) if isinstance(v, float) else str(v))
            out.append(f"  {label:<26} {text}\n")
    for row in r.get("per_stage", ()):
        out.append(f"  stage {row['stage']:>8}: flows {row['flows']:>8}  hsd {row['hsd']:>4}  "
                   f"risk {row['risk']:>4}  undeliverable {row['unroutable']}\n")
    return "".join(out)
