"""Hash the forwarding tables smroute computes on a fixed corpus, to check a
refactor of the routing changes no table bit.

Routes, with the code on ``PYTHONPATH``: every fixture (``fixtures/*.topo``),
every capture of ``--real`` that routes, a few generated shapes (PGFTs,
k-ary n-trees, a tree with SHARP aggregation nodes, degraded trees,
Dragonfly+ where the code has its generator), the
site shapes of the catalogue whose trees need mode ``tree+orient`` or
``updown`` (where the code has the catalogue) and
``--throws`` of the degradation study's throws (PGFT(2;18,36;1,18;1,1),
seed 2026, switch and link modes, as ``smroute study degrade`` makes them),
with every algorithm the code knows that applies (max_vls 1 and 4; the
lanes are hashed where detours use them), then incremental reroutes through
the daemon core (``RoutingCore.apply_faults``) after link, switch and CA
faults and their repair.  Prints ``case sha256`` per table set, sorted;
``diff`` two runs to compare::

    PYTHONPATH=/work/main python research/table_hashes.py > before.txt
    PYTHONPATH=. python research/table_hashes.py > after.txt
    diff before.txt after.txt

``research/table_hashes.expected.txt`` holds the output of the code before
the routing engines moved behind one interface (every later run must print
the same, or say why the tables changed), with the 16 table sets of four
catalogue shapes and one study throw that the ranking of UFM/storage
switches and the end of the one-root fallback changed
(``research/orient-ranking.md`` lists them), the Dragonfly+ cases
added with their generator (``research/dragonfly-plus.md``), and the six
table sets of two captures and one catalogue shape that the spines' own
cable counts on damaged trees and the givers' turns changed
(``research/mixed-sites.md``), and the four of the two catalogue shapes
with leaves ranked apart that the pods' climb by every up group and the
line switches' digit of their strides changed
(``research/site-catalogue-current.md``).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

from smroute.errors import SmrouteError
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, kary_ntree, pgft
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import fabric_roles
from smroute.routing.engine import route
from smroute.service.core import RoutingCore
from smroute.service.sequencer import FaultEvent
from smroute.study.degrade import parse_pgft, plan_throw

try:
    from smroute.fabric.generate.catalogue import build_shape
except ImportError:  # code older than the catalogue of site shapes
    build_shape = None
try:
    from smroute.fabric.generate.shapes import dragonfly_plus
except ImportError:  # code older than the Dragonfly+ generator
    dragonfly_plus = None

ROOT = Path(__file__).resolve().parent.parent
ALGS = ("dmodc", "nmodc", "dmodk")
#: catalogue shapes whose routing ends in tree+orient or updown
SITES = ("edr-pods-cs7500-core-450", "hdr-cs8500-core-island-900", "edr-3level-1600",
         "hdr-dgx-a100-1100", "edr-2xcs7500-1150", "edr-bundles-3xcs7500-1400",
         "edr-pods-storage-2xcs7500-800", "edr-two-depths-2xcs7500-850")


def digest(res: object) -> str:
    """sha256 of a routing's tables, mode and lanes."""
    h = hashlib.sha256()
    t = res.tables  # type: ignore[attr-defined]
    h.update(np.ascontiguousarray(t.ports).tobytes())
    h.update(str(t.ports.shape).encode())
    h.update(np.ascontiguousarray(t.switch_guid).tobytes())
    h.update(str(getattr(res, "mode", "")).encode())
    lanes = getattr(res, "lanes", None)
    if lanes is not None:
        for f in ("targets", "target_sl", "lid_target", "from_switch", "port_vl",
                  "exc_key", "exc_vl"):
            h.update(np.ascontiguousarray(getattr(lanes, f)).tobytes())
    return h.hexdigest()[:24]


def route_all(name: str, f: Fabric, out: list[str]) -> None:
    for alg in ALGS:
        for vls in (1, 4):
            try:
                r = route(f, algorithm=alg, workers=1, labels=False, max_vls=vls)
            except SmrouteError as err:
                out.append(f"{name} {alg} vls{vls} ERROR {type(err).__name__}")
                continue
            out.append(f"{name} {alg} vls{vls} {r.mode} {digest(r)}")


def faults(name: str, f: Fabric, alg: str, out: list[str], pool_workers: int) -> None:
    """Incremental reroutes through the daemon core: link, switch, CA faults and repair."""
    sw = np.flatnonzero(f.node_type == NodeType.SWITCH)
    issw = f.node_type == NodeType.SWITCH
    inter = np.flatnonzero(issw[f.port_node[f.link_a]] & issw[f.port_node[f.link_b]])
    rng = np.random.default_rng(5)
    links = rng.choice(inter, size=min(3, len(inter)), replace=False)
    core = RoutingCore(workers=pool_workers, coalesce_s=0.0, validate_epochs=False,
                       algorithm=alg)
    try:
        core.load_fabric(f, name)
        core.route()
        evs: list[tuple[str, list[FaultEvent]]] = []
        for i, li in enumerate(links.tolist()):
            row = int(f.link_a[li])
            g, p = int(f.node_guid[f.port_node[row]]), int(f.port_num[row])
            evs.append((f"link{i}-down", [FaultEvent("link_down", g, p)]))
        for i, li in enumerate(links.tolist()):
            row = int(f.link_a[li])
            g, p = int(f.node_guid[f.port_node[row]]), int(f.port_num[row])
            evs.append((f"link{i}-up", [FaultEvent("link_up", g, p)]))
        # an upper switch (rank above the leaves') and a CA
        rank = fabric_roles(f).rank
        upper = [s for s in sw.tolist() if rank[s] > 0]
        if upper:
            g = int(f.node_guid[upper[len(upper) // 2]])
            evs += [("switch-down", [FaultEvent("switch_down", g, 0)]),
                    ("switch-up", [FaultEvent("switch_up", g, 0)])]
        cas = np.flatnonzero(f.node_type == NodeType.CA)
        if len(cas):
            g = int(f.node_guid[cas[len(cas) // 3]])
            evs += [("ca-down", [FaultEvent("ca_down", g, 0)]),
                    ("ca-up", [FaultEvent("ca_up", g, 0)])]
        for label, ev in evs:
            r = core.apply_faults(ev)
            ep = core.store.current
            assert ep is not None
            out.append(f"{name} {alg} fault-{label} committed={r.committed} "
                       f"{digest(ep.result)}")
    finally:
        core.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--real", default="/work/shared/fabrics/real")
    ap.add_argument("--throws", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2, help="pool workers of the daemon core")
    args = ap.parse_args()
    out: list[str] = []
    for p in sorted((ROOT / "fixtures").glob("*.topo")):
        route_all(f"fixture:{p.name}", read_topology(p), out)
    for p in sorted(Path(args.real).iterdir()):
        if p.name == "README.md":
            continue
        try:
            f = read_topology(p)
        except SmrouteError:
            out.append(f"real:{p.name} unreadable")
            continue
        route_all(f"real:{p.name}", f, out)
    shapes = {
        "pgft-3-4.4.4": pgft(3, [4, 4, 4], [1, 4, 4], [1, 1, 1]),
        "pgft-2-18.36-p2": pgft(2, [18, 36], [1, 18], [1, 2]),
        "pgft-3-2.2.3-2.2.1-1.2.1": pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]),
        "kary-4-3": kary_ntree(4, 3),
        "agg-pgft-2-8.16": with_aggregation_nodes(pgft(2, [8, 16], [1, 8], [1, 1])),
    }
    base = pgft(3, [4, 4, 4], [1, 4, 4], [1, 1, 1])
    for seed in range(3):
        shapes[f"degraded-links-{seed}"] = degrade(base, np.random.default_rng(seed),
                                                   links=10 + 10 * seed)[0]
        shapes[f"degraded-switches-{seed}"] = degrade(base, np.random.default_rng(seed),
                                                      switches=2 + seed)[0]
    if dragonfly_plus is not None:  # mode tree+cross; with aggregation nodes, detours
        shapes["dfp-4.3.3.4"] = dragonfly_plus(4, 3, 3, 4, seed=1)
        shapes["dfp-spread-agg-7.2.3.3"] = with_aggregation_nodes(
            dragonfly_plus(7, 2, 3, 3, spread=True, seed=2))
    for name, f in shapes.items():
        route_all(f"shape:{name}", f, out)
    for name in SITES if build_shape is not None else ():
        route_all(f"site:{name}", build_shape(name), out)
    full = parse_pgft("2;18,36;1,18;1,1").build()
    for i in range(args.throws):
        mode = ("switch", "link")[i % 2]
        t = plan_throw(full, mode, 2026, i // 2)
        route_all(f"throw:{mode}-{i // 2}", t.fabric, out)
    for alg in ("dmodc", "nmodc"):
        faults("pgft-2-18.36", pgft(2, [18, 36], [1, 18], [1, 1]), alg, out, args.workers)
        faults("degraded-links-1", shapes["degraded-links-1"], alg, out, args.workers)
        faults("throw-link-5", plan_throw(full, "link", 2026, 5).fabric, alg, out, 1)
    sys.stdout.write("\n".join(sorted(out)) + "\n")


if __name__ == "__main__":
    main()
