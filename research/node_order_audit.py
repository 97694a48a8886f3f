"""Whether smroute's default routes the same cabling to the same tables
whatever order its capture lists the nodes in.

ibnetdiscover lists what it found breadth first from the subnet manager;
a generated file lists the fabric leaf by leaf.  This script writes every
catalogue shape (up to ``--max-cas`` CAs), every capture of the real
fabrics folder and the capture files given as ibnetdiscover text, reverses
the order of the node blocks, parses it again, routes both on one VL and
with ``--vls`` VLs, and compares the tables switch by switch (by GUID; the
LIDs are the file's in both).  One line per fabric and setting: ``same``,
or how many entries differ.

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python research/node_order_audit.py [--max-cas 2200] [FILE ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from smroute.errors import SmrouteError
from smroute.fabric.export.writers import format_topology
from smroute.fabric.generate.catalogue import CATALOGUE, build_shape
from smroute.fabric.ibnetdiscover.parse import parse_topology, read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import route

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "fabrics" / "real"


def reversed_nodes(f: Fabric) -> Fabric:
    """``f`` written as ibnetdiscover text with its node blocks reversed,
    parsed again."""
    head, *blocks = "\n".join(format_topology(f)).split("\n\n")
    return parse_topology("\n\n".join([head, *reversed(blocks)]))


def verdict(f: Fabric, vls: int) -> str:
    """``same``, ``N entries differ`` or why it did not route."""
    got = []
    for fab in (f, reversed_nodes(f)):
        try:
            r = route(fab, workers=1, labels=False, max_vls=vls)
        except SmrouteError as err:
            return f"not routed: {str(err).splitlines()[0][:60]}"
        got.append((r.mode, r.tables.ports[np.argsort(r.tables.switch_guid)]))
    (m0, t0), (m1, t1) = got
    if m0 != m1 or t0.shape != t1.shape:
        return f"modes {m0} and {m1}"
    n = int((t0 != t1).sum())
    return f"{m0}: same" if n == 0 else f"{m0}: {n} entries differ"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="capture files (default: the catalogue "
                    "and the real fabrics folder)")
    ap.add_argument("--max-cas", type=int, default=2200)
    ap.add_argument("--vls", type=int, default=8)
    args = ap.parse_args()
    todo: list[tuple[str, Fabric]] = []
    if not args.files:
        for n in CATALOGUE:
            f = build_shape(n)
            if len(f.cas) <= args.max_cas:
                todo.append((n, f))
        paths = sorted(p for p in REAL.iterdir() if p.name != "README.md") if REAL.is_dir() else []
    else:
        paths = args.files
    for p in paths:
        try:
            todo.append((p.name, read_fabric(p)))
        except SmrouteError as err:
            print(f"{p.name}: not read: {str(err).splitlines()[0][:60]}")
    for name, f in todo:
        for vls in (1, args.vls):
            print(f"{name} ({vls} VL{'s' if vls > 1 else ''}): {verdict(f, vls)}", flush=True)


if __name__ == "__main__":
    main()
