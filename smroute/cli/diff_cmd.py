"""``smroute diff OLD NEW``: compare two forwarding-table files.

Each file may be in any format :func:`smroute.tables.formats.read_tables`
detects (OpenSM ``opensm-lfts.dump`` / file-engine input, ``ibroute`` /
``dump_fts`` output, ``opensm.fdbs``, smroute JSON).  Switches are matched by
GUID.  Exit status like diff(1): 0 identical, 1 different, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from smroute.cli.inputs import load_tables
from smroute.errors import InputError

__all__ = ["register", "cmd_diff"]


def register(subparsers: Any) -> None:
    """Add the ``diff`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "diff",
        help="compare two forwarding-table files (exit 0 same, 1 different, 2 bad input)",
        description="Compare two sets of linear forwarding tables switch by switch "
        "(matched by GUID): changed LIDs with old and new port, the 64-LID blocks a "
        "subnet manager would rewrite, and switches present in one file only. "
        "Formats: opensm-lfts.dump / OpenSM file-engine input, ibroute/dump_fts output, "
        "opensm.fdbs, smroute JSON (detected). Exit status: 0 identical, 1 different, "
        "2 bad input.",
    )
    p.add_argument("old", metavar="OLD", help="tables before")
    p.add_argument("new", metavar="NEW", help="tables after")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.add_argument(
        "--max-entries", type=int, default=1000, metavar="N",
        help="list at most N changed entries (totals and blocks stay complete; default 1000)",
    )
    p.add_argument("--full", action="store_true", help="list every changed entry")
    p.set_defaults(func=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    """Print the diff of ``args.old`` and ``args.new``; 0 if identical, else 1."""
    from smroute.tables.diff import diff_tables, format_diff

    if args.max_entries < 0:
        raise InputError("--max-entries must be >= 0")
    old = load_tables(args.old)
    new = load_tables(args.new)
    d = diff_tables(old, new)
    limit = None if args.full else args.max_entries
    if args.json:
        doc = d.to_dict(max_entries=limit)
        doc["old"], doc["new"] = args.old, args.new
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(f"--- {args.old}\n+++ {args.new}\n")
        sys.stdout.write("\n".join(format_diff(d, max_entries=limit)) + "\n")
    return 0 if d.identical else 1
