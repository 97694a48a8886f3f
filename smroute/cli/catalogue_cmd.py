"""``smroute fabric generate catalogue NAME``: a named site shape of
:mod:`smroute.fabric.generate.catalogue` as ibnetdiscover text (the shape's dialect:
plain ibnetdiscover or ibdiagnet's), or as an ibsim net file, with
``--seed``/``--remove-switches``/``--remove-links`` damaged as the other
generators' trees are; ``--list`` prints the catalogue with its host and
switch counts.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from smroute.cli.generate_cmd import degradation_options, degraded
from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.errors import InputError

__all__ = ["add_catalogue_parser", "catalogue_table", "cmd_catalogue"]


def add_catalogue_parser(gs: Any) -> None:
    """Add ``catalogue`` to the generators of ``smroute fabric generate``."""
    g = gs.add_parser(
        "catalogue", help="a named site shape (directors, DGX SuperPODs, pods, islands); "
        "--list shows them",
        description="Write a named site shape of the catalogue (--list: every name with "
        "its hosts and switches).",
    )
    g.add_argument("name", nargs="?", metavar="NAME", help="the shape's name (see --list)")
    g.add_argument("--list", action="store_true", help="print the catalogue and exit")
    g.add_argument("--format", choices=("auto", "topology", "ibdiagnet", "ibsim"),
                   default="auto", help="ibnetdiscover text in the shape's dialect (auto, "
                   "default), plain ibnetdiscover, ibdiagnet's dialect, or an ibsim net file")
    g.add_argument("--out", default="-", metavar="FILE|-",
                   help="output file (replaced atomically), - for stdout (default)")
    g.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")
    degradation_options(g)
    g.set_defaults(func=cmd_catalogue)


def catalogue_table() -> list[str]:
    """The catalogue as a markdown table: name, compute hosts, service hosts,
    switch ASICs, directors, dialect, what it models."""
    from smroute.fabric.generate.catalogue import CATALOGUE, build_shape
    from smroute.fabric.roles import EndportRole, fabric_roles

    out = ["| name | compute hosts | service hosts | switches | dialect | models |",
           "|---|---|---|---|---|---|"]
    for name, shape in CATALOGUE.items():
        f = build_shape(name)
        roles = fabric_roles(f)
        compute = len(roles.endports(EndportRole.COMPUTE))
        agg = len(roles.endports(EndportRole.AGGREGATION))
        service = len(f.cas) - compute - agg
        out.append(f"| {name} | {compute:,} | {service} | {len(f.switches):,} | "
                   f"{shape.dialect} | {shape.title} |")
    return out


def cmd_catalogue(args: argparse.Namespace) -> int:
    """Write the shape (or list the catalogue); exit 0, 2 for a bad name."""
    from smroute.fabric.export.ibdiagwrite import format_ibdiagnet
    from smroute.fabric.export.writers import format_ibsim_net, format_topology
    from smroute.fabric.generate.catalogue import CATALOGUE, build_shape

    if args.list:
        print("\n".join(catalogue_table()))
        return 0
    if not args.name:
        raise InputError("catalogue: name a shape (smroute fabric generate catalogue --list "
                         "shows them)")
    shape = CATALOGUE.get(args.name)
    if shape is None:
        raise InputError(f"catalogue: no shape {args.name!r}; known: {', '.join(CATALOGUE)}")
    if not is_stdout(args.out):
        check_output(args.out)
    fabric, note = degraded(build_shape(args.name), args)
    fmt = shape.dialect if args.format == "auto" else args.format
    if fmt == "ibsim":
        lines = format_ibsim_net(fabric)
    elif fmt == "ibdiagnet":
        lines = format_ibdiagnet(fabric)
    else:
        fmt = "topology"
        lines = format_topology(fabric)
    write_output(args.out, "\n".join(lines) + "\n")
    if not args.quiet:
        where = "stdout" if args.out == "-" else args.out
        print(f"smroute: {args.name}: {len(fabric.switches)} switches, {len(fabric.cas)} CAs, "
              f"{fabric.n_links} links" + (f", {note}" if note else "")
              + f" -> {where} ({fmt})", file=sys.stderr)
    return 0
