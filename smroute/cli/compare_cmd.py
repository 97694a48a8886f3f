"""``smroute fabric compare REFERENCE CURRENT``: what changed in the cabling.

    smroute fabric compare fabric-as-built.topo today.topo.gz [--json]

Both files are ibnetdiscover captures (topology text or ``-p`` ports report;
``.gz`` / ``.xz`` too).  Cables are named by both ends, node description,
GUID and port: missing, extra and moved cables; cables below the
reference's width or speed; cables below the usual width or speed of the
current fabric (switch-to-switch and host cables apart); nodes missing or
extra (:mod:`smroute.fabric.compare`).  Exit status: 0 the same (at most
slow cables the reference has too), 1 different, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from smroute.cli.inputs import add_strict_option, int_range, load_fabric
from smroute.cli.outputs import check_output, is_stdout, write_output

__all__ = ["add_parser", "cmd_compare"]


def add_parser(subparsers: Any) -> None:
    """Add ``compare`` to the ``fabric`` subcommands."""
    p = subparsers.add_parser(
        "compare", help="compare a fabric with a reference: missing, extra, moved and slow "
        "cables (exit 0 same, 1 different, 2 bad input)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference", metavar="REFERENCE", help="ibnetdiscover file as it should be")
    p.add_argument("current", metavar="CURRENT", help="ibnetdiscover file as it is")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--max-items", type=int_range(0), default=100, metavar="N",
                   help="list at most N items per kind (totals stay exact; default 100)")
    p.add_argument("--out", default="-", metavar="FILE|-",
                   help="write here (replaced atomically); - for stdout (default)")
    add_strict_option(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """Print the comparison; 0 same, 1 different."""
    from smroute.fabric.compare import compare_fabrics, format_comparison

    if not is_stdout(args.out):
        check_output(args.out)
    ref = load_fabric(args.reference, strict=args.strict)
    cur = load_fabric(args.current, strict=args.strict)
    c = compare_fabrics(ref, cur)
    if args.json:
        doc = {"reference": args.reference, "current": args.current, **c.to_dict()}
        text = json.dumps(doc, indent=1) + "\n"
    else:
        text = (f"--- {args.reference}\n+++ {args.current}\n"
                + "\n".join(format_comparison(c, args.max_items)) + "\n")
    write_output(args.out, text)
    return 0 if c.same else 1
