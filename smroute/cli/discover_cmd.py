"""``smroute discover``: the local HCAs and the fabric seen through one of them.

Prints the local HCA ports (from pyverbs, else sysfs; the source is named),
runs ``ibnetdiscover`` through the chosen port (:mod:`smroute.discovery.discover`),
checks that the text parses, and writes it atomically with ``--out``.
``--summary`` adds the fabric summary, ``--json`` prints ports and summary
as JSON.  Under ``ibsim-run`` it sees the simulated fabric.

Exit status: 0 ok, 1 discovery failed (no HCA / no permission / no SM, said
which), 2 bad input (unparsable topology).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from smroute.cli.inputs import float_range, int_range

__all__ = ["register", "cmd_discover"]


def register(subparsers: Any) -> None:
    """Add the ``discover`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "discover",
        help="show local HCAs and discover the fabric through one (ibnetdiscover)",
        description="Show the local HCA ports (pyverbs or sysfs) and discover the fabric "
        "through one of them with ibnetdiscover; write the topology text atomically.",
    )
    p.add_argument("--ca", metavar="NAME", help="HCA to use (ibnetdiscover -C), e.g. mlx5_0")
    p.add_argument("--port", type=int_range(1, 254), metavar="N",
                   help="HCA port to use (ibnetdiscover -P)")
    p.add_argument("--out", metavar="FILE",
                   help="write the discovered topology text here ('-': standard output, "
                   "with the port listing on standard error)")
    p.add_argument("--timeout", type=float_range(0, above=True), default=120.0, metavar="S",
                   help="ibnetdiscover timeout in seconds (default 120)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--summary", action="store_true", help="also print the fabric summary")
    g.add_argument("--json", action="store_true", help="print ports and summary as JSON")
    p.set_defaults(func=cmd_discover)


def cmd_discover(args: argparse.Namespace) -> int:
    """List the local HCA ports, discover the fabric, write/print it; 0 on success."""
    from smroute.cli.outputs import STDOUT, check_output, write_output
    from smroute.discovery.discover import discover_topology_lines
    from smroute.discovery.hca import local_ports
    from smroute.errors import InputError
    from smroute.fabric.ibnetdiscover.parse import parse_topology
    from smroute.fabric.summary import format_summary, summarize

    to_stdout = args.out == STDOUT
    if to_stdout and (args.json or args.summary):
        raise InputError("--out - prints the topology; it cannot go with --json or --summary")
    if args.out and not to_stdout:
        check_output(args.out)  # fail now, not after the discovery
    info = sys.stderr if to_stdout else sys.stdout
    ports, notes = local_ports()
    if not args.json:
        print(f"local HCA ports ({ports[0].source if ports else 'none found'}):", file=info)
        for p in ports:
            print(f"  {p.describe()}", file=info)
        for n in notes:
            if n:
                print(f"  note: {n}", file=info)
    lines = discover_topology_lines(ca=args.ca, port=args.port, timeout=args.timeout)
    source = f"ibnetdiscover via {args.ca or 'default HCA'}"
    fabric = parse_topology(lines, source)
    if to_stdout:
        write_output(STDOUT, "\n".join(lines) + "\n")
        print(f"discovered {len(fabric.switches)} switches, {len(fabric.cas)} CAs, "
              f"{fabric.n_links} links", file=info)
        return 0
    if args.out:
        write_output(args.out, "\n".join(lines) + "\n")
    summary = summarize(fabric, source=args.out or source)
    if args.json:
        json.dump({"ports": [p.to_dict() for p in ports], "notes": [n for n in notes if n],
                   "out": args.out, "summary": summary.to_dict()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    n_sw, n_ca = len(fabric.switches), len(fabric.cas)
    print(f"discovered {n_sw} switches, {n_ca} CAs, {fabric.n_links} links"
          + (f"; written to {args.out}" if args.out else ""))
    if args.summary:
        print("\n".join(format_summary(summary)))
    return 0
