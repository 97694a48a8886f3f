"""``smroute slurm topology FABRIC``: Slurm's network topology from the fabric's
roles (:mod:`smroute.fabric.export.slurm`).

``--format conf`` (default) writes ``topology.conf`` for
``TopologyPlugin=topology/tree``; ``--format yaml`` writes ``topology.yaml``
(Slurm 24.11+) with a ``tree`` topology (the cluster default) and a ``block``
topology (one block per switch that lists nodes).  Hosts are named from their
HCAs' node descriptions (first word, or ``--name-regex``), a ``--host-map``
(``GUID NAME`` or ``DESCRIPTION NAME`` lines) naming the rest; HCAs without a
name are named ``ib-<GUID>`` with a warning, or are an error with
``--unnamed error``.  Warnings and a one-line summary go to stderr.

Exit status: 0 written, 2 bad input (unreadable fabric or host map, no host,
unnamed hosts with ``--unnamed error``).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from smroute.cli.outputs import check_output, is_stdout, write_output
from smroute.errors import InputError
from smroute.text import excerpt

__all__ = ["register", "cmd_topology"]


def register(subparsers: Any) -> None:
    """Add the ``slurm`` command (``topology``) to ``subparsers``."""
    from smroute.cli.inputs import add_role_options, add_strict_option

    p = subparsers.add_parser(
        "slurm", help="Slurm configuration from the fabric (topology.conf, topology.yaml)",
        description="Slurm configuration derived from the fabric's roles.",
    )
    sub = p.add_subparsers(dest="slurm_command", metavar="SLURM_COMMAND", required=True)
    t = sub.add_parser(
        "topology", help="topology.conf (topology/tree) or topology.yaml (tree + block)",
        description="Write Slurm's network topology for FABRIC: one switch per line, leaves "
        "listing their hosts and upper switches their child switches (hosts cabled to an upper "
        "switch under '<switch>-hosts'); SHARP aggregation nodes and switch-embedded CAs left "
        "out; a host with HCAs on several switches listed under the one with most of them.",
    )
    t.add_argument("fabric", metavar="FABRIC", help="ibnetdiscover topology file")
    add_strict_option(t)
    t.add_argument("--format", choices=("conf", "yaml"), default="conf",
                   help="conf: topology.conf (default); yaml: topology.yaml (Slurm 24.11+)")
    t.add_argument("--out", default="-", metavar="FILE|-",
                   help="write here (a regular file, replaced atomically); '-' or omitted: "
                   "stdout")
    t.add_argument("--host-map", metavar="FILE",
                   help="Slurm names by GUID or description: lines 'KEY NAME', KEY a 0x node or "
                   "port GUID (a switch GUID names the switch) or a node description (whole, "
                   "quoted if it has '#', or the host name derived from it)")
    t.add_argument("--name-regex", metavar="REGEX",
                   help="derive host names from node descriptions with this regex (group "
                   "'host', else group 1, else the match) instead of the first word")
    t.add_argument("--unnamed", choices=("generate", "error"), default="generate",
                   help="HCAs without a usable name: generate ib-<GUID> with a warning "
                   "(default) or fail")
    t.add_argument("--roles", default="compute", metavar="LIST",
                   help="end-port roles that are Slurm nodes, from compute, service, storage, "
                   "management, io, or 'all' (default: compute; storage servers, UFM and "
                   "other management hosts are left out)")
    t.add_argument("--block-sizes", metavar="N,N,...",
                   help="yaml: block_sizes of the block topology (each the previous times a "
                   "power of two); default: none written")
    add_role_options(t)
    t.set_defaults(func=cmd_topology)


def _parse_roles(text: str) -> list[Any]:
    from smroute.fabric.export.slurm import HOST_ROLES

    allowed = {r.name.lower(): r for r in HOST_ROLES}
    if text.strip().lower() == "all":
        return list(HOST_ROLES)
    out = []
    for tok in (x.strip().lower() for x in text.split(",")):
        if not tok:
            continue
        if tok not in allowed:
            raise InputError(f"--roles: unknown host role {excerpt(tok)}; choose from "
                             f"{', '.join(allowed)}")
        out.append(allowed[tok])
    if not out:
        raise InputError("--roles: no role given")
    return out


def _parse_block_sizes(text: str | None) -> list[int] | None:
    from smroute.fabric.export.slurm import check_block_sizes

    if not text:
        return None
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
        check_block_sizes(sizes)
    except ValueError as err:
        raise InputError(f"--block-sizes: {err}") from None
    return sizes


def cmd_topology(args: argparse.Namespace) -> int:
    """Run ``smroute slurm topology``."""
    from smroute.cli.inputs import guarded, load_fabric, load_overrides
    from smroute.fabric.export.slurm import read_host_map, slurm_topology
    from smroute.fabric.roles import fabric_roles

    if not is_stdout(args.out):
        check_output(args.out)
    include = _parse_roles(args.roles)
    block_sizes = _parse_block_sizes(args.block_sizes)
    if args.format != "yaml" and block_sizes:
        raise InputError("--block-sizes is for --format yaml")
    regex = None
    if args.name_regex:
        try:
            regex = re.compile(args.name_regex)
        except re.error as err:
            raise InputError(f"--name-regex: {err}") from None
    host_map = guarded(read_host_map, args.host_map) if args.host_map else None
    fabric = load_fabric(args.fabric, strict=args.strict)
    roles = fabric_roles(fabric, load_overrides(args))
    topo = slurm_topology(fabric, roles, host_map=host_map, name_regex=regex,
                          unnamed=args.unnamed, include=include)
    for w in topo.warnings:
        print(f"smroute: warning: {w}", file=sys.stderr)
    text = (topo.to_yaml(args.fabric, block_sizes=block_sizes) if args.format == "yaml"
            else topo.to_conf(args.fabric))
    write_output(args.out, text)
    left = ", ".join(f"{v} {k}" for k, v in topo.left_out.items() if v)
    print(f"slurm: {len(topo.hosts)} nodes under {len(topo.switches)} switches"
          + (f"; left out: {left}" if left else "")
          + (f"; {len(topo.split_hosts)} on several switches" if topo.split_hosts else "")
          + (f"; {len(topo.generated)} generated names" if topo.generated else ""),
          file=sys.stderr)
    return 0
