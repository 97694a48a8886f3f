"""``smroute trace FABRIC TABLES SRC DST``: one path through a table file, hop
by hop (what ``ibtracert`` shows on a live fabric).

    smroute trace fabric.topo opensm-lfts.dump "node017" "node342"
    smroute trace fabric.topo tables.json 0x0002c903000000a0 lid:72 --lanes fabric.lanes

TABLES is any format smroute reads (``opensm-lfts.dump``, ``ibroute`` /
``dump_fts`` output, ``opensm.fdbs``, smroute JSON; ``.gz`` / ``.xz`` too).
SRC and DST: a host name (node description, or its first word), a node or
port GUID, or a LID (``lid:N`` / ``guid:X`` to say which).  With ``--lanes``
(the file ``smroute route --vls N --lanes-out`` writes) each hop shows the VL
it leaves on.  Exit status: 0 delivered, 1 not delivered (no route, a dead
end, a loop, a switch without a table: the output says where), 2 bad input
(an unknown or ambiguous endpoint, an unreadable file).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from smroute.cli.inputs import add_strict_option, load_fabric, load_tables
from smroute.cli.outputs import write_output

__all__ = ["register", "cmd_trace"]


def register(subparsers: Any) -> None:
    """Add the ``trace`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "trace", help="follow one path through a table file hop by hop (exit 1 if not "
        "delivered)", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fabric", metavar="FABRIC", help="ibnetdiscover file the tables route")
    p.add_argument("tables", metavar="TABLES", help="forwarding tables (any format)")
    p.add_argument("src", metavar="SRC", help="source: host name, GUID or LID")
    p.add_argument("dst", metavar="DST", help="destination: host name, GUID or LID")
    p.add_argument("--lanes", metavar="LANES",
                   help="lanes file of a routing with detours: show the VL of each hop")
    p.add_argument("--json", action="store_true", help="print the path as JSON")
    add_strict_option(p)
    p.set_defaults(func=cmd_trace)


def _port(f: Any, row: int) -> dict[str, Any]:
    n = int(f.port_node[row])
    return {"desc": f.node_desc[n], "guid": f"{int(f.node_guid[n]):#018x}",
            "port": int(f.port_num[row]), "lid": int(f.port_lid[row]),
            "kind": {1: "ca", 2: "switch", 3: "router"}.get(int(f.node_type[n]), "?")}


def cmd_trace(args: argparse.Namespace) -> int:
    """Print the path; 0 delivered, 1 not."""
    from smroute.analysis.hoptrace import find_endpoint, trace_route

    fabric = load_fabric(args.fabric, strict=args.strict)
    tables = load_tables(args.tables, fabric, args.fabric)
    lanes = None
    if args.lanes:
        from smroute.fabric.ibnetdiscover.text import read_text_lines
        from smroute.routing.lanesfile import parse_lanes

        lanes = parse_lanes(read_text_lines(args.lanes), args.lanes)
    src = find_endpoint(fabric, args.src)
    dst = find_endpoint(fabric, args.dst)
    t = trace_route(fabric, tables, src, dst, lanes=lanes)
    f = fabric
    hops = [{"switch": f.node_desc[h.node], "guid": f"{int(f.node_guid[h.node]):#018x}",
             "lid": int(f.node_lid[h.node]), "in_port": h.in_port, "out_port": h.out_port,
             "vl": h.vl} for h in t.hops]
    if args.json:
        doc = {"src": _port(f, t.src), "dst": _port(f, t.dst), "dlid": t.dlid, "sl": t.sl,
               "status": t.status, "reason": t.reason, "hops": hops}
        write_output(None, json.dumps(doc, indent=1) + "\n")
        return 0 if t.delivered else 1
    sl = f", SL {t.sl}" if t.sl is not None else ""
    lines = [f"From {f.describe_port(t.src)} LID {int(f.port_lid[t.src])} to "
             f"{f.describe_port(t.dst)} DLID {t.dlid}{sl}"]
    for k, h in enumerate(hops, 1):
        vl = f" VL {h['vl']}" if h["vl"] is not None else ""
        inp = f"[{h['in_port']}]" if h["in_port"] else "(start)"
        lines.append(f"{k:3d} {inp} -> switch \"{h['switch']}\" ({h['guid']}) LID {h['lid']} "
                     f"-> [{h['out_port']}]{vl}")
    if t.delivered:
        lines.append(f"To {f.describe_port(t.dst)}: delivered after {len(hops)} switch "
                     f"hop{'s' if len(hops) != 1 else ''}")
    else:
        lines.append(f"NOT DELIVERED ({t.status}): {t.reason}")
    write_output(None, "\n".join(lines) + "\n")
    return 0 if t.delivered else 1
