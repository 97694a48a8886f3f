"""``smroute diff OLD NEW``: compare two forwarding-table files.

Each file may be in any format :func:`smroute.tables.formats.read_tables`
detects (OpenSM ``opensm-lfts.dump`` / file-engine input, ``ibroute`` /
``dump_fts`` output, ``opensm.fdbs``, smroute JSON).  Switches are matched by
GUID.  A table file cut short is an error naming its line.  The diff goes to
``--out`` (default ``-``, standard output; :mod:`smroute.cli.outputs`).  Exit
status like diff(1): 0 identical, 1 different, 2 bad input -- also when the
reader of the diff stops early (``smroute diff A B | head -1``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from smroute.cli.inputs import int_range, load_tables
from smroute.cli.outputs import check_output, is_stdout, write_output

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
        "opensm.fdbs, smroute JSON (detected). Each changed LID is named by the host or "
        "switch it leads to (from the tables' comments, or --fabric). Exit status: 0 "
        "identical, 1 different, 2 bad input.",
    )
    p.add_argument("old", metavar="OLD", help="tables before")
    p.add_argument("new", metavar="NEW", help="tables after")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.add_argument(
        "--max-entries", type=int_range(0), default=1000, metavar="N",
        help="list at most N changed entries (totals and blocks stay complete; default 1000)",
    )
    p.add_argument("--full", action="store_true", help="list every changed entry")
    p.add_argument("--fabric", metavar="FILE",
                   help="ibnetdiscover topology naming the host (or switch) of each changed "
                   "LID (default: the names the tables' comments give)")
    p.add_argument("--out", default="-", metavar="FILE|-",
                   help="write the diff here (a regular file, replaced atomically); - for "
                   "stdout (default)")
    p.set_defaults(func=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    """Print the diff of ``args.old`` and ``args.new``; 0 if identical, else 1."""
    from smroute.tables.diff import diff_tables, format_diff, lid_names

    if not is_stdout(args.out):
        check_output(args.out)
    old = load_tables(args.old)
    new = load_tables(args.new)
    d = diff_tables(old, new)
    limit = None if args.full else args.max_entries
    fabric_names = None
    if args.fabric is not None:
        from smroute.cli.inputs import load_fabric
        from smroute.tables.lft import lid_labels

        fabric_names = lid_labels(load_fabric(args.fabric), d.width)[2]
    names = lid_names(d.width, new.lid_desc, old.lid_desc, fabric_names)
    if args.json:
        doc = d.to_dict(max_entries=limit, names=names)
        doc["old"], doc["new"] = args.old, args.new
        text = json.dumps(doc, indent=1) + "\n"
    else:
        text = (f"--- {args.old}\n+++ {args.new}\n"
                + "\n".join(format_diff(d, max_entries=limit, names=names)) + "\n")
    write_output(args.out, text)
    return 0 if d.identical else 1
