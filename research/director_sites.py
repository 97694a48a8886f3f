"""Director sites: smroute's default against OpenSM's updn, ftree and dfsssp.

Each shape is a two-level tree whose spines are directors (a three-level
PGFT: leaves, the directors' line ASICs, their spine ASICs), a SHARP
aggregation node on every ASIC including the spine ASICs, service hosts on
a spine ASIC (as ``smroute fabric generate ... --agg --spine-hosts N``) or
UFM/storage hosts on line ASICs, some with cables removed.  Every engine
routes the same fabric under ibsim in the same run
(:func:`smroute.lab.sidebyside.run_side_by_side`); the metrics are over the
compute hosts, in port-GUID order and in host-name order.  OpenSM's updn
runs with its own root detection and with the top switches in
``root_guid_file``, ftree with that and the compute nodes in
``cn_guid_file`` (as SHARP sites configure them).

    PYTHONPATH=. .venv/bin/python research/director_sites.py [--json FILE]

Run it with another checkout on PYTHONPATH for that checkout's smroute.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from smroute.analysis.compare import CompareConfig, compare_tables
from smroute.analysis.view import routing_view
from smroute.errors import SmrouteError
from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.catalogue import director_site
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import EndportRole, SwitchRole, fabric_roles
from smroute.fileio import read_lines
from smroute.lab.ibsim import IbSim
from smroute.lab.sidebyside import LOG_FLAGS
from smroute.lab.sim import ibnetdiscover, run_opensm
from smroute.lab.simnet import simulable, sm_node
from smroute.routing.engine import route, validate_result
from smroute.tables.formats import parse_lft_dump

#: name, PGFT (m, w, p), spine-ASIC hosts, line-ASIC hosts, links removed, seed
SHAPES = [
    ("6 dirs x (6 line + 3 spine ASICs), 18 leaves, 2 hosts on a spine ASIC",
     ((18, 3, 6), (1, 6, 3), (1, 3, 3)), 2, 0, 0, 0),
    ("6 dirs x (6 line + 6 spine ASICs), 36 leaves, 2 hosts on a spine ASIC",
     ((18, 6, 6), (1, 6, 6), (1, 3, 3)), 2, 0, 0, 0),
    ("2 dirs x (4 line + 2 spine), 32 leaves (9:1), 2 hosts on a spine ASIC",
     ((18, 8, 4), (1, 2, 2), (1, 1, 1)), 2, 0, 0, 0),
    ("2 dirs x (4 line + 2 spine), 32 leaves (9:1), 4 UFM/storage, 6 cables cut",
     ((18, 8, 4), (1, 2, 2), (1, 1, 1)), 0, 4, 6, 3),
    ("4 dirs x (9 line + 9 spine), 108 leaves (4.5:1), 6 UFM/storage, 10 cables cut",
     ((18, 12, 9), (1, 4, 9), (1, 1, 1)), 0, 6, 10, 2),
]
ENGINES = ("dmodc", "updn", "ftree", "dfsssp")


def opensm_runs(fabric: Fabric, wd: Path, timeout: float) -> tuple[Fabric, dict[str, Any]]:
    """OpenSM's engines under ibsim on ``fabric``: updn with its own root
    detection, updn and ftree with the operator's guid files (the top
    switches as roots; ftree also the compute nodes), dfsssp; then the
    discovered fabric.  Engine -> tables, or the error text."""
    roles = fabric_roles(fabric)
    tops = np.flatnonzero(roles.switch_role == SwitchRole.ROOT)
    roots = wd / "roots.guids"
    roots.write_text("".join(f"0x{int(fabric.node_guid[t]):016x}\n" for t in tops))
    cn = wd / "cn.guids"
    comp = np.flatnonzero(roles.endport_role == EndportRole.COMPUTE)
    rows = fabric.port_start[comp] + 1
    cn.write_text("".join(f"0x{int(g):016x}\n" for g in fabric.port_guid[rows]))
    runs: dict[str, Any] = {}
    engines = {"updn": ("updn", {}), "updn+roots": ("updn", {"root_guid_file": roots}),
               "ftree+roots": ("ftree", {"root_guid_file": roots, "cn_guid_file": cn}),
               "dfsssp": ("dfsssp", {})}
    net = wd / "fabric.net"
    sm = sm_node(fabric)
    write_ibsim_net(simulable(fabric), net, sm_node=sm)
    with IbSim(net, wd, linear_cap=None) as sim:
        for name, (engine, conf) in engines.items():
            try:
                osm = run_opensm(sim, wd / name, engine=engine, extra_conf=conf,
                                 log_flags=LOG_FLAGS, timeout=timeout)
            except SmrouteError as err:
                runs[name] = str(err).splitlines()[0]
                continue
            if osm.engine_used != engine:
                runs[name] = f"fell back to {osm.engine_used}"
                continue
            runs[name] = parse_lft_dump(read_lines(osm.lfts), str(osm.lfts))
        disc = parse_topology(ibnetdiscover(sim), "ibnetdiscover")
    return disc, runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rp-samples", type=int, default=300)
    ap.add_argument("--only", type=int, nargs="*")
    args = ap.parse_args()
    rows = []
    for k, (name, (m, w, p), sh, lh, rem, seed) in enumerate(SHAPES):
        if args.only and k not in args.only:
            continue
        fabric = director_site(m, w, p, spine_hosts=sh, line_hosts=lh, remove_links=rem,
                               seed=seed)
        with tempfile.TemporaryDirectory() as wd:
            disc, runs = opensm_runs(fabric, Path(wd), 900.0)
        r = route(disc, workers=1, labels=False)
        v = validate_result(r)
        tables = {"smroute": r.tables}
        notes = {"smroute": f"{r.mode}, {'valid' if v.ok else 'INVALID'}"}
        for e, t in runs.items():
            if isinstance(t, str):
                print(f"| {name} | - | {e} | {t[:150]} |", flush=True)
            else:
                tables[e], notes[e] = t, ""
        view = routing_view(disc, r.tables)
        roles = fabric_roles(disc)
        comp = np.flatnonzero(roles.endport_role[view.ep_node] == EndportRole.COMPUTE)
        orders = {"guid": comp[np.argsort(view.ep_guid[comp], kind="stable")],
                  "name": comp[np.argsort([disc.node_desc[int(view.ep_node[i])]
                                           for i in comp], kind="stable")]}
        for oname, order in orders.items():
            ms = compare_tables(disc, tables, order, np.random.default_rng(2),
                                CompareConfig(rp_samples=args.rp_samples, random_orders=0))
            for mt in ms:
                rows.append({"shape": name, "order": oname, "engine": mt.name,
                             "note": notes[mt.name], "sp": mt.values["sp"],
                             "a2a": mt.values["a2a"], "rp": mt.values["rp"],
                             "hsd": mt.values.get("hsd_topo_shift"),
                             "unroutable": mt.unroutable.get("pairs", 0)})
                x = rows[-1]
                print(f"| {name} | {oname} | {mt.name} | {x['note']} | {x['sp']:.0f} | "
                      f"{x['a2a']:.0f} | {x['rp']:.2f} | {x['hsd']:.3f} | {x['unroutable']} |",
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
