"""Sweep smroute's default over fabric variants the catalogue does not name:
other sizes and seeds of the catalogue's shapes, uneven leaves and pods,
missing and extra parallel cables, links and switches removed, service hosts
on spines and director line ASICs, management islands, directors of several
kinds in one fabric, the ibdiagnet dialect, odd host names, a single switch,
two disconnected parts, a leaf without hosts.

Per variant: the fabric is written as a capture would be (ibnetdiscover text
or ibdiagnet's dialect), ``smroute route FILE`` runs as a user runs it (one
VL, then ``--vls 8 --lanes-out``: the plugin's setting), each timed; a
traceback, an exit code other than 0 or a fallback mode is a finding.  For
fabrics up to ``--metrics-max`` CAs the tables are routed again in process
and measured with the catalogue bench's code (``bench/site_compare.py``:
needed pairs left, SP / A2A / RP over compute hosts in port-GUID order), and
Dmodc's figures beside them.  One line per variant::

    PYTHONPATH=. .venv/bin/python research/unseen_sweep.py [--only SUBSTR] [--metrics-max N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from site_compare import table_metrics  # noqa: E402

from smroute.errors import SmrouteError  # noqa: E402
from smroute.fabric.export.ibdiagwrite import format_ibdiagnet  # noqa: E402
from smroute.fabric.export.writers import format_topology  # noqa: E402
from smroute.fabric.generate.catalogue import core_tier  # noqa: E402
from smroute.fabric.generate.shapes import (  # noqa: E402
    attach_cas,
    with_aggregation_nodes,
    with_split_ports,
)
from smroute.fabric.generate.sitegen import (  # noqa: E402
    CONNECTX6,
    QUANTUM,
    QUANTUM2,
    SWITCHIB,
    Director,
    Site,
)
from smroute.fabric.generate.trees import degrade, pgft  # noqa: E402
from smroute.fabric.ibnetdiscover.parse import read_fabric  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fabric.model.base import NodeType  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.routing.engine import route  # noqa: E402

SMROUTE = str(Path(sys.executable).with_name("smroute"))
#: director kinds: model, line ASICs, spine ASICs, radix, device
KINDS = {
    "cs7500": ("CS7500", 36, 18, 36, SWITCHIB),
    "cs7510": ("CS7510", 18, 9, 36, SWITCHIB),
    "cs7520": ("CS7520", 12, 6, 36, SWITCHIB),
    "cs8500": ("CS8500", 40, 20, 40, QUANTUM),
    "qm9790": ("QM9790", 32, 16, 64, QUANTUM2),
}
SPEED = {SWITCHIB: "EDR", QUANTUM: "HDR", QUANTUM2: "NDR"}
ROWS = "abcdefghijklmnopqrstuvwxyz"


# ------------------------------------------------------------------ recipes
def _name(style: str, rack: int, slot: int) -> str:
    """A host's node description in one of several forms seen on sites."""
    base = f"cn-{ROWS[rack // 20 % 26]}{rack % 20 + 1:02d}-c{slot + 1:02d}"
    return {"std": f"{base} mlx5_0", "bare": base, "hca": f"{base} HCA-1",
            "fqdn": f"{base}.cluster.example.org mlx5_0",
            "odd": f"{'node' if slot % 2 else 'NODE'}#{rack}/{slot} \"x\" (mlx5_0)",
            "empty": "", "num": f"{rack * 100 + slot}"}[style]


def add_hosts(site: Site, leaves: list[int], per: list[int], style: str, start: int = 0) -> None:
    for i, (leaf, k) in enumerate(zip(leaves, per, strict=True)):
        for c in range(k):
            site.host(leaf, _name(style, start + i, c))


def per_leaf(hosts: int | list[int], n: int) -> list[int]:
    return [hosts] * n if isinstance(hosts, int) else (hosts * n)[:n]


def _island(site: Site, leaf: int, radix: int, device: int) -> None:
    sw = site.switch("MF0;mgmt-sw01:MQM8700/U1", radix, device)
    site.cable(leaf, sw, 2)
    for d in ("ufm-01 HCA-1", "ufm-02 HCA-1", "mgmt-01 HCA-1", "head-01 HCA-1"):
        site.host(sw, d)


def add_director(site: Site, k: int, kind: str) -> Director:
    m, line, spine, radix, dev = KINDS[kind]
    return site.director(f"core{k + 1}", m, line_asics=line, spine_asics=spine, radix=radix,
                         device=dev)


@dataclass
class Plan:
    """What a recipe returns: the site, service hosts (switch, desc) to attach."""

    site: Site
    services: list[tuple[int, str]]


def two_level(leaves: int, hosts: int | list[int], spines: int, cables: int, *,
              radix: int = 40, device: int = QUANTUM, empty_leaves: int = 0,
              spine_svc: int = 0, island: bool = False, style: str = "std",
              extra: int = 0, seed: int = 0) -> Plan:
    """Leaf/spine; ``extra`` random leaf-spine pairs get one more cable."""
    site = Site(speed=SPEED[device], host_device=CONNECTX6)
    lv = site.switches([f"MF0;leaf{i + 1:03d}:MQM/U1" for i in range(leaves)], radix, device)
    per = per_leaf(hosts, leaves)
    for i in range(empty_leaves):
        per[-1 - i] = 0
    if island:  # room for the island's two cables on the first leaf
        per[0] = min(per[0], radix - spines * cables - 2)
    add_hosts(site, lv, per, style)
    if island:
        _island(site, lv[0], radix, device)
    sp = site.switches([f"MF0;spine{j + 1:02d}:MQM/U1" for j in range(spines)], radix, device)
    for leaf in lv:
        for s in sp:
            site.cable(leaf, s, cables)
    rng = np.random.default_rng(seed)
    for _ in range(extra):
        site.cable(lv[int(rng.integers(leaves))], sp[int(rng.integers(spines))])
    svc = [(sp[k % spines], f"{'ufm' if k % 2 == 0 else 'stor'}-{k + 1:02d} HCA-1")
           for k in range(spine_svc)]
    return Plan(site, svc)


def pod_leaves(site: Site, pods: list[int], hosts: int | list[int], radix: int, device: int,
               style: str = "std", prefix: str = "p", start: int = 0) -> list[list[int]]:
    """Per pod, its leaves (named ``<prefix><pod>-leaf<i>``) with their
    hosts, racks numbered on from ``start``."""
    groups = []
    for g, n in enumerate(pods):
        lv = site.switches([f"MF0;{prefix}{g + 1}-leaf{i + 1:02d}:MQM/U1" for i in range(n)],
                           radix, device)
        add_hosts(site, lv, per_leaf(hosts, n), style, start)
        start += n
        groups.append(lv)
    return groups


def pod_spines(site: Site, groups: list[list[int]], spines: int, cables: int, radix: int,
                device: int, prefix: str = "p") -> list[list[int]]:
    """Per pod, ``spines`` spines, each cabled to every leaf of the pod
    (named ``<prefix><pod>-spine<j>``)."""
    sps = []
    for g, lv in enumerate(groups):
        sp = site.switches([f"MF0;{prefix}{g + 1}-spine{j + 1:02d}:MQM/U1" for j in range(spines)],
                           radix, device)
        for leaf in lv:
            for s in sp:
                site.cable(leaf, s, cables)
        sps.append(sp)
    return sps


def three_level(pods: list[int], hosts: int | list[int], spines: int, cores_per: int,
                cables: int = 1, core_cables: int = 1, *, radix: int = 40,
                device: int = QUANTUM, core_svc: int = 0, spine_svc: int = 0,
                island: bool = False, style: str = "std") -> Plan:
    """Pods of leaves under ``spines`` pod spines; spine ``j`` of every pod
    cabled to each of the ``cores_per`` cores of index ``j``."""
    site = Site(speed=SPEED[device], host_device=CONNECTX6)
    groups = pod_leaves(site, pods, hosts, radix, device, style)
    if island:
        _island(site, groups[0][0], radix, device)
    sps = pod_spines(site, groups, spines, cables, radix, device)
    flat_c = core_tier(site, sps, cores_per, core_cables, radix, device, "MQM")
    flat_s = [s for sp in sps for s in sp]
    svc = [(flat_c[k % len(flat_c)], f"stor-{k + 1:02d} HCA-1") for k in range(core_svc)]
    svc += [(flat_s[(3 * k) % len(flat_s)], f"ufm-{k + 1:02d} HCA-1") for k in range(spine_svc)]
    return Plan(site, svc)


def leaves_dirs(leaves: int, hosts: int | list[int], kinds: list[str], cables: int, *,
                leaf_radix: int = 0, leaf_device: int = QUANTUM, line_svc: int = 0,
                line_svc_dirs: int = 1, island: bool = False, style: str = "std") -> Plan:
    """Leaves cabled ``cables`` times to each director (kinds may differ);
    ``line_svc`` UFM/storage hosts on the line ASICs of the first
    ``line_svc_dirs`` directors; leaves of 40 ports (64-port NDR ones under
    QM9790s unless ``leaf_radix`` is given)."""
    if not leaf_radix:
        ndr = "qm9790" in kinds
        leaf_radix, leaf_device = (64, QUANTUM2) if ndr else (40, leaf_device)
    site = Site(speed=SPEED[leaf_device], host_device=CONNECTX6)
    lv = site.switches([f"MF0;leaf{i + 1:03d}:MQM/U1" for i in range(leaves)], leaf_radix,
                       leaf_device)
    add_hosts(site, lv, per_leaf(hosts, leaves), style)
    if island:
        _island(site, lv[0], leaf_radix, leaf_device)
    dirs = [add_director(site, k, kd) for k, kd in enumerate(kinds)]
    for sw in lv:
        for d in dirs:
            site.cable_director(sw, d, cables)
    svc = []
    lines = [a for d in dirs[:line_svc_dirs] for a in d.line]
    for k in range(line_svc):
        svc.append((lines[(5 * k + 1) % len(lines)],
                    f"{'ufm' if k % 2 == 0 else 'stor'}-{k + 1:02d} HCA-1"))
    return Plan(site, svc)


def single_dir(kind: str, per_asic: int | list[int], *, line_svc: int = 0,
               style: str = "std") -> Plan:
    m, line, spine, radix, dev = KINDS[kind]
    site = Site(speed=SPEED[dev], host_device=CONNECTX6)
    d = add_director(site, 0, kind)
    add_hosts(site, d.line, per_leaf(per_asic, line), style)
    svc = [(d.line[(7 * k) % line], f"ufm-{k + 1:02d} HCA-1") for k in range(line_svc)]
    return Plan(site, svc)


def pods_dirs(pods: list[int], hosts: int, spines: int, up: int, kinds: list[str], *,
              cables: int = 1, radix: int = 40, device: int = QUANTUM, line_svc: int = 0,
              spine_svc: int = 0) -> Plan:
    """A three-level tree with directors as the core."""
    site = Site(speed=SPEED[device], host_device=CONNECTX6)
    groups = pod_leaves(site, pods, hosts, radix, device)
    flat = [s for sp in pod_spines(site, groups, spines, cables, radix, device) for s in sp]
    dirs = [add_director(site, k, kd) for k, kd in enumerate(kinds)]
    for s in flat:
        for d in dirs:
            site.cable_director(s, d, up)
    lines = [a for d in dirs for a in d.line]
    svc = [(lines[(7 * k) % len(lines)], f"stor-{k + 1:02d} HCA-1") for k in range(line_svc)]
    svc += [(flat[(3 * k) % len(flat)], f"ufm-{k + 1:02d} HCA-1") for k in range(spine_svc)]
    return Plan(site, svc)


def superpod(units: int, nodes: int | list[int], spines_per: int, cables: int, *,
             cores_per: int = 0, core_cables: int = 1, rail_groups: bool = False,
             leaf_svc: int = 0) -> Plan:
    site = Site(speed="NDR", host_device=CONNECTX6)
    per = per_leaf(nodes, units)
    leaves = []
    for s in range(units):
        lv = [site.switch(f"MF0;su{s + 1:02d}-leaf-r{r}:MQM9700/U1", 64, QUANTUM2)
              for r in range(8)]
        for r, leaf in enumerate(lv):
            for n in range(per[s]):
                site.host(leaf, f"gpu-{ROWS[s // 10]}{s % 10 + 1:02d}-c{n + 1:02d} mlx5_{r}")
        leaves.append(lv)
    if rail_groups:
        groups = [[leaves[s][r] for s in range(units)] for r in range(8)]
    elif cores_per:
        groups = leaves
    else:
        groups = [[x for su in leaves for x in su]]
    sps = []
    for g, lv in enumerate(groups):
        sp = [site.switch(f"MF0;spine-g{g + 1:02d}-{j + 1:02d}:MQM9700/U1", 64, QUANTUM2)
              for j in range(spines_per)]
        for leaf in lv:
            for x in sp:
                site.cable(leaf, x, cables)
        sps.append(sp)
    if cores_per:
        core_tier(site, sps, cores_per, core_cables, 64, QUANTUM2, "MQM9700")
    svc = [(leaves[-1][k % 8], f"ufm-{k + 1:02d} HCA-1") for k in range(leaf_svc)]
    return Plan(site, svc)


# ------------------------------------------------------------------ building a variant
def _drop_isolated(f: Fabric) -> Fabric:
    """Without the CAs no cable reaches (a discovery never sees them)."""
    linked = np.zeros(f.n_nodes, dtype=bool)
    linked[f.port_node[f.link_a]] = True
    linked[f.port_node[f.link_b]] = True
    gone = np.flatnonzero(~linked & (f.node_type == NodeType.CA))
    return f.with_removed(nodes=gone) if len(gone) else f


def build(plan: Plan, *, seed: int = 1, agg: bool = True, links: int = 0, switches: int = 0,
          missing_cables: int = 0, lmc: int = 0, split: bool = False) -> Fabric:
    """The fabric of ``plan``: host GUIDs drawn with ``seed``, services
    attached, aggregation nodes on every switch, then ``switches`` switches and
    ``links`` switch links removed (seeded), CAs left without a cable dropped."""
    rng = np.random.default_rng(seed)
    f = plan.site.build(rng)
    if plan.services:
        f = attach_cas(f, [s for s, _ in plan.services], [d for _, d in plan.services])
    if split:  # every leaf in split-ready mode, its hosts on split ports
        leaves = [i for i in f.switches.tolist() if "leaf" in f.node_desc[i]]
        f = with_split_ports(f, leaves)
    if agg:
        f = with_aggregation_nodes(f)
    if lmc:
        f = _with_lmc(f, lmc)
    if links or switches or missing_cables:
        f, _ = degrade(f, np.random.default_rng(1000 + seed), switches=switches,
                       links=links + missing_cables)
        f = _drop_isolated(f)
    return f


@dataclass
class Variant:
    family: str
    params: str
    make: Callable[[], Fabric | list[str]]
    dialect: str = "ibnetdiscover"


def variants() -> list[Variant]:
    V = Variant
    out: list[Variant] = []
    # ---- two-level leaf/spine, sizes, odd host counts, cables
    for leaves, hosts, spines, cables, radix, dev in (
        (4, 20, 2, 10, 40, QUANTUM), (8, 18, 9, 2, 36, SWITCHIB), (15, [20, 17, 13], 5, 2, 40,
                                                                    QUANTUM),
        (31, 17, 9, 2, 64, QUANTUM2), (24, [32, 31, 29], 16, 2, 64, QUANTUM2),
        (40, 20, 20, 1, 40, QUANTUM), (7, 11, 3, 3, 40, QUANTUM), (2, 5, 1, 1, 36, SWITCHIB),
        (5, 16, 1, 4, 36, SWITCHIB), (60, 18, 18, 1, 64, QUANTUM2),
    ):
        p = f"L{leaves} h{hosts} S{spines} c{cables} r{radix}"
        for seed in (1, 2):
            out.append(V("2lvl", f"{p} seed{seed}", lambda a=(leaves, hosts, spines, cables,
                                                                radix, dev), s=seed:
                         build(two_level(*a[:4], radix=a[4], device=a[5]), seed=s)))
        out.append(V("2lvl+svc", f"{p} spine_svc3 island", lambda a=(leaves, hosts, spines,
                                                                       cables, radix, dev):
                     build(two_level(*a[:4], radix=a[4], device=a[5], spine_svc=3,
                                     island=True))))
        for k in (1, 5, 20):
            if 2 * k > leaves * spines * cables:  # not that many cables to cut
                continue
            for seed in (1, 2, 3):
                out.append(V("2lvl-links", f"{p} -{k} links seed{seed}",
                             lambda a=(leaves, hosts, spines, cables, radix, dev), k=k, s=seed:
                             build(two_level(*a[:4], radix=a[4], device=a[5], spine_svc=1),
                                   seed=s, links=k)))
        for seed in (1, 2):
            out.append(V("2lvl-switch", f"{p} -1 switch seed{seed}",
                         lambda a=(leaves, hosts, spines, cables, radix, dev), s=seed:
                         build(two_level(*a[:4], radix=a[4], device=a[5]), seed=s, switches=1)))
    out += [
        V("2lvl", "L10 h20 S4 c2 extra7 parallel", lambda: build(two_level(10, 20, 4, 2,
                                                                          extra=7))),
        V("2lvl", "L10 h20 S4 c1 2 empty leaves", lambda: build(two_level(10, 20, 4, 1,
                                                                         empty_leaves=2))),
        V("2lvl", "L10 h20 S4 c1 no agg", lambda: build(two_level(10, 20, 4, 1), agg=False)),
        V("2lvl", "L12 h[20,3] S4 c2 uneven hosts", lambda: build(two_level(12, [20, 3], 4, 2))),
    ]
    for style in ("bare", "hca", "fqdn", "odd", "empty", "num"):
        out.append(V("names", f"L6 h12 S3 c2 names={style}",
                     lambda st=style: build(two_level(6, 12, 3, 2, style=st))))
    # ---- three-level trees of switches
    for pods, hosts, spines, cores, cc, svc in (
        ([4, 4, 4], 16, 4, 2, 2, 0), ([6, 5, 3], 18, 6, 2, 1, 2), ([8, 8], [20, 18], 8, 1, 4, 4),
        ([5, 5, 5, 4, 2], 18, 6, 3, 2, 3),
    ):
        p = f"pods{pods} h{hosts} S{spines} C{cores} cc{cc} core_svc{svc}"
        out.append(V("3lvl", p, lambda a=(pods, hosts, spines, cores, 1, cc), s=svc:
                     build(three_level(*a, core_svc=s))))
        out.append(V("3lvl+island", p, lambda a=(pods, hosts, spines, cores, 1, cc), s=svc:
                     build(three_level(*a, core_svc=s, spine_svc=2, island=True))))
        for k in (3, 15):
            for seed in (1, 2):
                out.append(V("3lvl-links", f"{p} -{k} links seed{seed}",
                             lambda a=(pods, hosts, spines, cores, 1, cc), s=svc, k=k, sd=seed:
                             build(three_level(*a, core_svc=s), seed=sd, links=k)))
        out.append(V("3lvl-switch", f"{p} -2 switches", lambda a=(pods, hosts, spines, cores, 1,
                                                                    cc), s=svc:
                     build(three_level(*a, core_svc=s), switches=2)))
    # ---- leaves under directors
    for leaves, hosts, kinds, cables, lsvc, ldirs, isl in (
        (12, 18, ["cs7520"], 6, 2, 1, False), (20, [16, 14], ["cs7510", "cs7510"], 3, 2, 1, True),
        (16, 20, ["cs8500"], 10, 4, 1, False), (16, 20, ["cs7500", "cs8500"], 4, 2, 1, False),
        (16, 20, ["cs7500", "cs8500"], 4, 4, 2, False),
        (24, [20, 16], ["cs8500", "cs8500"], 5, 6, 2, True),
        (10, 32, ["qm9790"], 16, 2, 1, False), (30, 18, ["cs7520", "cs7510", "cs7500"], 2, 3, 1,
                                                 False),
        (40, [18, 17], ["cs7510", "cs7510"], 2, 2, 2, True),
    ):
        p = f"L{leaves} h{hosts} {'+'.join(kinds)} c{cables} line_svc{lsvc}/{ldirs}dir"
        out.append(V("dirs", p + (" island" if isl else ""),
                     lambda a=(leaves, hosts, kinds, cables), ls=lsvc, ld=ldirs, i=isl:
                     build(leaves_dirs(*a, line_svc=ls, line_svc_dirs=ld, island=i))))
        out.append(V("dirs", p + " ibdiagnet", lambda a=(leaves, hosts, kinds, cables), ls=lsvc,
                     ld=ldirs: build(leaves_dirs(*a, line_svc=ls, line_svc_dirs=ld)),
                     "ibdiagnet"))
        for k in (2, 10):
            for seed in (1, 2):
                out.append(V("dirs-links", f"{p} -{k} links seed{seed}",
                             lambda a=(leaves, hosts, kinds, cables), ls=lsvc, ld=ldirs, k=k,
                             sd=seed: build(leaves_dirs(*a, line_svc=ls, line_svc_dirs=ld),
                                            seed=sd, links=k)))
        out.append(V("dirs-switch", f"{p} -1 switch", lambda a=(leaves, hosts, kinds, cables),
                     ls=lsvc, ld=ldirs: build(leaves_dirs(*a, line_svc=ls, line_svc_dirs=ld),
                                              switches=1, seed=3)))
    # ---- single directors with hosts on the line ASICs
    for kind, per, svc in (("cs7520", [17, 16], 1), ("cs7510", 15, 2), ("cs8500", [18, 19, 17],
                                                                         3),
                           ("qm9790", 30, 2), ("cs7500", [16, 17], 0)):
        p = f"{kind} per_asic{per} line_svc{svc}"
        out.append(V("1dir", p, lambda k=kind, pa=per, s=svc: build(single_dir(k, pa,
                                                                               line_svc=s))))
        out.append(V("1dir", p + " ibdiagnet", lambda k=kind, pa=per, s=svc:
                     build(single_dir(k, pa, line_svc=s)), "ibdiagnet"))
        out.append(V("1dir-links", p + " -3 links", lambda k=kind, pa=per, s=svc:
                     build(single_dir(k, pa, line_svc=s), links=3)))
    # ---- three-level trees with a director core
    for pods, hosts, spines, up, kinds, lsvc in (
        ([6, 4, 3], 20, 4, 4, ["cs8500"], 2), ([8, 8], 18, 6, 3, ["cs7500"], 1),
        ([5, 5, 4], 16, 5, 2, ["cs7510", "cs7520"], 2), ([6, 6], 30, 8, 2, ["qm9790", "qm9790"], 3),
    ):
        p = f"pods{pods} h{hosts} S{spines} up{up} {'+'.join(kinds)} line_svc{lsvc}"
        out.append(V("dircore", p, lambda a=(pods, hosts, spines, up, kinds), s=lsvc:
                     build(pods_dirs(*a, line_svc=s, spine_svc=1))))
        out.append(V("dircore", p + " ibdiagnet", lambda a=(pods, hosts, spines, up, kinds),
                     s=lsvc: build(pods_dirs(*a, line_svc=s)), "ibdiagnet"))
        for seed in (1, 2):
            out.append(V("dircore-links", f"{p} -8 links seed{seed}",
                         lambda a=(pods, hosts, spines, up, kinds), s=lsvc, sd=seed:
                         build(pods_dirs(*a, line_svc=s), links=8, seed=sd)))
    # ---- DGX SuperPOD-like
    for units, nodes, spn, cab, cores, rails in (
        (1, 20, 4, 8, 0, False), (2, [32, 30], 8, 4, 0, False), (3, [20, 20, 19], 10, 2, 0,
                                                                  False),
        (4, 20, 4, 2, 2, True), (6, [32] * 5 + [28], 8, 2, 4, False),
    ):
        p = f"SU{units} nodes{nodes} spines{spn} c{cab} cores{cores} rails{rails}"
        out.append(V("dgx", p, lambda a=(units, nodes, spn, cab), c=cores, r=rails:
                     build(superpod(*a, cores_per=c, rail_groups=r, leaf_svc=2))))
        for seed in (1, 2):
            out.append(V("dgx-links", f"{p} -6 links seed{seed}",
                         lambda a=(units, nodes, spn, cab), c=cores, r=rails, sd=seed:
                         build(superpod(*a, cores_per=c, rail_groups=r), links=6, seed=sd)))
    # ---- split ports, LMC, large sizes (routing time)
    out += [
        V("split", "L12 h36 S6 c2 r64 split leaves (NDR)", lambda: build(
            two_level(12, 36, 6, 2, radix=64, device=QUANTUM2), split=True)),
        V("split", "L8 h30 S4 c2 r40 split leaves -4 links", lambda: build(
            two_level(8, 30, 4, 2), split=True, links=4)),
        V("lmc", "L10 h18 S6 c2 LMC 1", lambda: build(two_level(10, 18, 6, 2), lmc=1)),
        V("lmc", "L10 h18 S6 c2 LMC 2 -5 links", lambda: build(two_level(10, 18, 6, 2), lmc=2,
                                                              links=5)),
        V("lmc", "dirs cs7510 L12 h16 LMC 1 line_svc2", lambda: build(
            leaves_dirs(12, 16, ["cs7510"], 3, line_svc=2), lmc=1)),
        V("large", "3lvl pods[30]*10 h20 S20 C5 (6000 hosts)", lambda: build(
            three_level([30] * 10, 20, 20, 5, 1, 1, core_svc=4))),
        V("large", "3lvl pods[30]*10 h20 S20 C5 -40 links -3 switches", lambda: build(
            three_level([30] * 10, 20, 20, 5, 1, 1, core_svc=4), links=40, switches=3)),
        V("large", "dirs L300 h20 8xcs8500 c2 line_svc4 (6000 hosts)", lambda: build(
            leaves_dirs(300, 20, ["cs8500"] * 8, 2, line_svc=4))),
        V("large", "dirs L300 h20 4xcs8500+4xcs7500 c2 -30 links", lambda: build(
            leaves_dirs(300, 20, ["cs8500"] * 4 + ["cs7500"] * 4, 2), links=30)),
        V("large", "pods under 2 qm9790 [40,40,32] h32 S16 up4 (3600 hosts)", lambda: build(
            pods_dirs([40, 40, 32], 32, 16, 4, ["qm9790", "qm9790"], radix=64,
                      device=QUANTUM2, line_svc=2))),
        V("large", "dgx SU16 cores8 -20 links", lambda: build(
            superpod(16, 32, 8, 4, cores_per=8, core_cables=4, leaf_svc=2), links=20)),
    ]
    # ---- generated trees and odd fabrics
    out += [
        V("pgft", "PGFT(2;18,9;1,9;1,1) agg spine hosts",
          lambda: attach_cas(with_aggregation_nodes(pgft(2, (18, 9), (1, 9), (1, 1))),
                             [162 + 9 * 0 + 9], ["ufm01 HCA-1"])),
        V("pgft", "PGFT(3;4,4,4;1,4,2;1,1,1) agg -5 links",
          lambda: degrade(with_aggregation_nodes(pgft(3, (4, 4, 4), (1, 4, 2), (1, 1, 1))),
                          np.random.default_rng(5), links=5)[0]),
        V("odd", "single switch, 30 hosts + agg", lambda: build(two_level(1, 30, 0, 0))),
        V("odd", "single switch, 1 host", lambda: build(two_level(1, 1, 0, 0), agg=False)),
        V("odd", "two switches, hosts on both", lambda: build(_two_switches())),
        V("odd", "two disconnected leaf/spine parts", lambda: build(_two_parts())),
        V("odd", "leaf/spine, one spine without any leaf but one cable",
          lambda: build(_dangling_spine())),
        V("odd", "switch without hosts at the bottom, below a leaf",
          lambda: build(_switch_below_leaf())),
    ]
    return out


def _with_lmc(f: Fabric, lmc: int) -> Fabric:
    """``f`` with LMC ``lmc`` on every CA port, LIDs renumbered aligned."""
    import dataclasses

    lid = np.array(f.port_lid, copy=True)
    lmcs = np.array(f.port_lmc, copy=True)
    ca = f.node_type[f.port_node] != NodeType.SWITCH
    has = lid > 0
    step = 1 << lmc
    rows = np.flatnonzero(has)
    nxt = step
    for r in rows.tolist():
        if ca[r]:
            lid[r], lmcs[r] = nxt, lmc
            nxt += step
        else:
            lid[r] = nxt
            nxt += 1
    return dataclasses.replace(f, port_lid=lid, port_lmc=lmcs, _cache={})


def _two_switches() -> Plan:
    site = Site()
    a, b = site.switches(["MF0;sw-a:MQM8700/U1", "MF0;sw-b:MQM8700/U1"], 40, QUANTUM)
    add_hosts(site, [a, b], [12, 9], "std")
    site.cable(a, b, 4)
    return Plan(site, [])


def _two_parts() -> Plan:
    plan = two_level(4, 10, 2, 2)
    site = plan.site
    lv = site.switches([f"MF0;b-leaf{i + 1}:MQM/U1" for i in range(3)], 40, QUANTUM)
    add_hosts(site, lv, [8, 8, 8], "hca", 50)
    sp = site.switches(["MF0;b-spine1:MQM/U1", "MF0;b-spine2:MQM/U1"], 40, QUANTUM)
    for leaf in lv:
        for x in sp:
            site.cable(leaf, x)
    return plan


def _dangling_spine() -> Plan:
    plan = two_level(6, 16, 3, 2)
    s = plan.site.switch("MF0;spine-x:MQM/U1", 40, QUANTUM)
    plan.site.cable(0, s, 1)
    return plan


def _switch_below_leaf() -> Plan:
    plan = two_level(6, 16, 3, 2)
    s = plan.site.switch("MF0;edge-x:MQM/U1", 40, QUANTUM)
    plan.site.cable(1, s, 2)
    return plan


# ------------------------------------------------------------------ running
@dataclass
class Run:
    rc: int
    mode: str
    seconds: float
    problem: str


def run_cli(path: Path, out: Path, vls: int) -> Run:
    cmd = [SMROUTE, "route", str(path), "--out", str(out), "-q"]
    if vls > 1:
        cmd += ["--vls", str(vls), "--lanes-out", str(out.with_suffix(".lanes"))]
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    dt = time.monotonic() - t
    text = p.stdout + p.stderr
    m = re.search(r"^mode:\s+(\S+)", text, re.M)
    problem = ""
    if "Traceback" in text:
        problem = "TRACEBACK " + text.strip().splitlines()[-1][:100]
    elif p.returncode != 0:
        v = re.search(r"^(validation:.*|smroute: .*)$", text, re.M)
        problem = (v.group(1) if v else text.strip().splitlines()[-1])[:140]
    return Run(p.returncode, m.group(1) if m else "-", dt, problem)


def figures(f: Fabric, algorithm: str, vls: int, rp: int) -> str:
    try:
        res = route(f, algorithm=algorithm, workers=1, labels=False, max_vls=vls)
    except SmrouteError as err:
        return f"{algorithm}: {str(err).splitlines()[0][:60]}"
    roles = fabric_roles(f)
    m = table_metrics(f, res.tables, roles, res.lanes, seed=1, rp_samples=rp)
    c = m["sets"].get("compute")
    fig = (f"{c['guid']['sp']}/{c['a2a']}/{c['guid']['rp']}" if c else "-")
    return (f"miss {m['missing_needed']}/{m['needed_pairs']} loops "
            f"{'no' if m['credit_loop_free'] else 'YES'} {fig}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="variants whose family or params contain this")
    ap.add_argument("--metrics-max", type=int, default=1500,
                    help="measure SP/A2A/RP on fabrics up to this many CAs (0: none)")
    ap.add_argument("--rp-samples", type=int, default=10)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--write", type=Path, metavar="DIR",
                    help="only write the variants' capture files into DIR (vNNN.topo, the "
                    "number as --list shows it) and list them")
    args = ap.parse_args()
    todo = [(i, v) for i, v in enumerate(variants()) if args.only in f"{v.family} {v.params}"]
    if args.list or args.write:
        for i, v in todo:
            line = f"v{i:03d} {v.family} {v.params}" + (f" ({v.dialect})" if v.dialect !=
                                                         "ibnetdiscover" else "")
            if args.write:
                f = v.make()
                text = format_ibdiagnet(f) if v.dialect == "ibdiagnet" else format_topology(f)
                args.write.mkdir(parents=True, exist_ok=True)
                (args.write / f"v{i:03d}.topo").write_text("\n".join(text) + "\n")
            print(line)
        return 0
    print("| family | params | switches/CAs | mode 1VL | rc | s | mode 8VL | rc | s | "
          "default 1VL miss/needed, SP/A2A/RP | dmodc 1VL | default 8VL | problem |")
    print("|---" * 13 + "|")
    with tempfile.TemporaryDirectory(prefix="sweep-") as tmp:
        for i, v in todo:
            try:
                made = v.make()
            except Exception as err:  # a recipe that does not fit: say so, go on
                print(f"| v{i:03d} {v.family} | {v.params} | build failed: {err} |", flush=True)
                continue
            f = made
            lines = format_ibdiagnet(f) if v.dialect == "ibdiagnet" else format_topology(f)
            path = Path(tmp) / f"v{i}.topo"
            path.write_text("\n".join(lines) + "\n")
            r1 = run_cli(path, Path(tmp) / f"v{i}.lft", 1)
            r8 = run_cli(path, Path(tmp) / f"v{i}.lft", 8)
            sizes = f"{len(f.switches)}/{len(f.cas)}"
            figs = ["", "", ""]
            if len(f.cas) <= args.metrics_max:
                try:
                    parsed = read_fabric(path)
                    figs = [figures(parsed, "nmodc", 1, args.rp_samples),
                            figures(parsed, "dmodc", 1, args.rp_samples),
                            figures(parsed, "nmodc", 8, args.rp_samples)]
                except SmrouteError as err:
                    figs = [f"{err}"[:60], "", ""]
            prob = "; ".join(x for x in (r1.problem, r8.problem and f"8VL: {r8.problem}") if x)
            dia = f" ({v.dialect})" if v.dialect != "ibnetdiscover" else ""
            print(f"| v{i:03d} {v.family} | {v.params}{dia} | {sizes} | "
                  f"{r1.mode} | {r1.rc} | {r1.seconds:.1f} | {r8.mode} | {r8.rc} | "
                  f"{r8.seconds:.1f} | {figs[0]} | {figs[1]} | {figs[2]} | {prob} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
