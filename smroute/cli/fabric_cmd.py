"""``smroute fabric ...``: inspect fabric files.

``smroute fabric summary FILE [--json]`` reads an ibnetdiscover topology and
prints levels, counts, link types, parallel links and anomalies
(:mod:`smroute.fabric.summary`).  A bad file is reported as ``FILE:LINE: ...``
with exit status 2.  ``smroute fabric generate GENERATOR ...`` writes a
generated fabric (:mod:`smroute.cli.generate_cmd`); ``smroute fabric compare
REFERENCE CURRENT`` names the cables that changed (:mod:`smroute.cli.compare_cmd`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from smroute.cli.inputs import (
    add_role_options,
    add_strict_option,
    int_range,
    load_fabric,
    load_overrides,
)
from smroute.cli.outputs import write_output

__all__ = ["register", "cmd_summary"]


def register(subparsers: Any) -> None:
    """Add the ``fabric`` command and its subcommands to ``subparsers``."""
    p = subparsers.add_parser("fabric", help="inspect and generate fabric topology files")
    sub = p.add_subparsers(dest="fabric_command", metavar="SUBCOMMAND", required=True)
    from smroute.cli.generate_cmd import add_parser as add_generate_parser

    add_generate_parser(sub)  # smroute fabric generate (smroute/cli/generate_cmd.py)

    s = sub.add_parser(
        "summary",
        help="levels, counts, link types, parallel links and anomalies of a topology",
        description="Summarize an ibnetdiscover topology file: switch levels (ranked by "
        "hops from the leaf switches), switch/host counts, link widths and speeds, "
        "parallel links, anomalies, and the routing mode smroute route takes (tree, "
        "tree+turns or updown, routed with its defaults to know).",
    )
    s.add_argument("file", metavar="FILE", help="ibnetdiscover topology file")
    add_strict_option(s)
    add_role_options(s)
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument(
        "--max-items", type=int_range(0), default=100, metavar="N",
        help="list at most N items per anomaly (totals stay exact; default 100)",
    )
    s.set_defaults(func=cmd_summary)

    from smroute.cli.draw_cmd import add_parser as add_draw_parser

    add_draw_parser(sub)  # smroute fabric draw (smroute/cli/draw_cmd.py)

    from smroute.cli.compare_cmd import add_parser as add_compare_parser

    add_compare_parser(sub)  # smroute fabric compare (smroute/cli/compare_cmd.py)


def cmd_summary(args: argparse.Namespace) -> int:
    """Print the summary of ``args.file``; exit status 0 (anomalies are reported,
    not errors)."""
    from smroute.errors import RoutingError
    from smroute.fabric.roles import fabric_roles
    from smroute.fabric.summary import format_summary, summarize
    from smroute.routing.engine import route

    fabric = load_fabric(args.file, strict=args.strict)
    roles = fabric_roles(fabric, load_overrides(args))
    try:  # the mode route takes: decided by the routing itself, with its defaults
        r = route(fabric, roles=roles, labels=False, workers=1)
        routing = (r.mode, r.mode_reason)
    except RoutingError as err:
        routing = ("none", f"cannot route: {err}")
    summary = summarize(fabric, source=args.file, max_items=args.max_items, roles=roles,
                        routing=routing)
    write_output(None, json.dumps(summary.to_dict(), indent=2) + "\n" if args.json
                 else "\n".join(format_summary(summary)) + "\n")
    return 0
