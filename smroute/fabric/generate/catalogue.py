"""A catalogue of named site shapes, from 200 to 12,000 hosts, modelled on
public descriptions of production InfiniBand machines.

Each :class:`Shape` builds a :class:`~smroute.fabric.model.Fabric` with
:class:`~smroute.fabric.generate.sitegen.Site`, then adds service hosts with
:func:`~smroute.fabric.generate.shapes.attach_cas` (UFM and storage on spines and on
director line ASICs) and a SHARP aggregation node on every switch ASIC,
director ASICs included (:func:`~smroute.fabric.generate.shapes.with_aggregation_nodes`).
What the catalogue covers:

* **Directors** as an internal two-level Clos: CS7500 (648 EDR ports: 18 line
  blades of two 36-port Switch-IB ASICs, 9 spine blades of two), CS7510 /
  CS7520 (324 / 216 ports), CS8500 (800 HDR ports: 20 line blades of two
  40-port Quantum ASICs, 10 spine blades of two) and a QM9790-class
  Quantum-2 chassis (64-port ASICs, 32 external ports each); alone (hosts on
  the line ASICs) or as the core of two- and three-level trees.
* **DGX SuperPOD** compute fabrics after NVIDIA's reference architectures:
  scalable units of 20 (A100) or 32 (H100, B200) nodes with eight HCAs each
  (``gpu-<row><su>-c<nn> mlx5_<rail>``), one leaf per rail per unit,
  spines per unit, a core tier from 16 units on.
* **Dragonfly+**: groups of a two-level leaf/spine Clos whose spines are
  cabled to the spines of every other group (one cable within a rank on
  every route between groups).
* Unequal pods, parallel cables, hosts on spines, a management island (a
  small switch with UFM and management servers) hanging off one leaf,
  storage leaves cabled to the core directors' line ASICs (one hop nearer
  the top than the compute leaves, two to each ASIC), a site grown in
  phases (its first leaves on the core directors, later pods behind
  spines).
* **ibdiagnet's dialect** for some shapes (:attr:`Shape.dialect`):
  :func:`~smroute.fabric.export.ibdiagwrite.format_ibdiagnet`, the director ASICs as
  ``switchguid=0x<system image guid>(<node guid>)`` and port labels.

Host names sort differently from host GUIDs on every shape (HCA GUIDs are
drawn, as from a factory, by a generator seeded per shape).  Building is
deterministic: :func:`build_shape` of a name always gives the same fabric.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smroute.fabric.generate.shapegen import dragonfly_plus_groups
from smroute.fabric.generate.shapes import attach_cas, with_aggregation_nodes
from smroute.fabric.generate.sitegen import (
    CONNECTX5,
    CONNECTX6,
    CONNECTX7,
    QUANTUM,
    QUANTUM2,
    SWITCHIB,
    Director,
    Site,
)
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError

__all__ = ["CATALOGUE", "Shape", "build", "build_shape", "bundles", "bundles_to_directors",
           "core_tier", "director_site", "shape_names"]

_ROWS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Shape:
    """One named site shape: what it models, its output dialect
    (``"ibnetdiscover"`` or ``"ibdiagnet"``), the seed of its host GUIDs."""

    name: str
    title: str
    dialect: str
    seed: int
    make: Callable[[Site], tuple[Site, list[tuple[int, str]]]]
    speed: str = "HDR"
    host_device: int = CONNECTX6


# ------------------------------------------------------------------ recipes
def _cpu_hosts(site: Site, leaves: list[int], per_leaf: list[int] | int, prefix: str,
               start: int = 0) -> None:
    """Hosts ``"<prefix><row><rack>-c<slot> mlx5_0"``: rack = leaf (rows of 20 racks)."""
    counts = [per_leaf] * len(leaves) if isinstance(per_leaf, int) else per_leaf
    for i, (leaf, k) in enumerate(zip(leaves, counts, strict=True)):
        rack = start + i
        for c in range(k):
            site.host(leaf, f"{prefix}-{_ROWS[rack // 20]}{rack % 20 + 1:02d}-c{c + 1:02d} mlx5_0")


def _dgx_units(site: Site, units: int, nodes: int | list[int], radix: int, device: int,
               model: str) -> list[list[int]]:
    """Scalable units of DGX nodes with 8 HCAs, one leaf per rail per unit:
    ``leaves[su][rail]``; node ``n`` of unit ``s`` is ``gpu-<row><s>-c<n> mlx5_<rail>``."""
    per = [nodes] * units if isinstance(nodes, int) else nodes
    out = []
    for s in range(units):
        leaves = [site.switch(f"MF0;su{s + 1:02d}-leaf-r{r}:{model}/U1", radix, device)
                  for r in range(8)]
        for r, leaf in enumerate(leaves):
            for n in range(per[s]):
                site.host(leaf, f"gpu-{_ROWS[s // 10]}{s % 10 + 1:02d}-c{n + 1:02d} mlx5_{r}")
        out.append(leaves)
    return out


def _spines(site: Site, groups: list[list[int]], per_group: int, cables: int, radix: int,
            device: int, model: str, label: str = "spine") -> list[list[int]]:
    """``per_group`` spines per group of leaves, each leaf cabled to every
    spine of its group with ``cables`` parallel cables."""
    out = []
    for g, leaves in enumerate(groups):
        sp = [site.switch(f"MF0;{label}-g{g + 1:02d}-{j + 1:02d}:{model}/U1", radix, device)
              for j in range(per_group)]
        for leaf in leaves:
            for s in sp:
                site.cable(leaf, s, cables)
        out.append(sp)
    return out


def core_tier(site: Site, spines: list[list[int]], per_index: int, cables: int, radix: int,
           device: int, model: str) -> list[int]:
    """A core tier: spine ``j`` of every group cabled to each of the
    ``per_index`` cores of core group ``j`` with ``cables`` cables."""
    width = len(spines[0])
    cores = [[site.switch(f"MF0;core-{j + 1:02d}-{k + 1:02d}:{model}/U1", radix, device)
              for k in range(per_index)] for j in range(width)]
    for group in spines:
        for j, s in enumerate(group):
            for c in cores[j]:
                site.cable(s, c, cables)
    return [c for grp in cores for c in grp]


def _to_directors(site: Site, below: list[int], directors: list[Director], cables: int) -> None:
    """Every switch of ``below`` cabled to every director with ``cables`` cables."""
    for sw in below:
        for d in directors:
            site.cable_director(sw, d, cables)


def _island(site: Site, leaf: int, radix: int, device: int) -> list[tuple[int, str]]:
    """A management island: a small switch off ``leaf`` (two cables) with UFM,
    subnet manager and head nodes."""
    sw = site.switch("MF0;mgmt-sw01:MQM8700/U1", radix, device)
    site.cable(leaf, sw, 2)
    for d in ("ufm-01 HCA-1", "ufm-02 HCA-1", "mgmt-01 HCA-1", "mgmt-02 HCA-1",
              "head-01 HCA-1"):
        site.host(sw, d)
    return []


def _storage_leaves(site: Site, directors: list[Director], k: int, cables: int, radix: int,
                    device: int, model: str) -> list[int]:
    """``k`` storage switches cabled to the directors' line ASICs, every two
    to the same ASIC of each director (from its last), with ``cables``
    cables: leaves one hop nearer the directors' spines than the compute
    leaves below spines, and no leaf alone on its ASICs."""
    store = site.switches([f"MF0;stor-leaf{i + 1:02d}:{model}/U1" for i in range(k)],
                          radix, device)
    for i, sw in enumerate(store):
        for d in directors:
            site.cable(sw, d.line[-1 - (i // 2) % len(d.line)], cables)
    return store


def _services(site: Site, where: list[int], kind: str, count: int) -> list[tuple[int, str]]:
    """``count`` service hosts of ``kind`` (``ufm``, ``stor``) round-robin over
    the switches of ``where`` that still have a free port: ``(switch, kind)``
    (:func:`build_shape` names and attaches them)."""
    out: list[tuple[int, str]] = []
    i = 0
    while len(out) < count:
        open_ = [sw for sw in where if site.free_ports(sw) > 0]
        if not open_:
            raise FabricError(f"no free port left for {kind} hosts")
        sw = open_[i % len(open_)]
        site.sw_next[sw] += 1  # reserved: attach_cas puts the host on it
        out.append((sw, kind))
        i += 1
    return out


def _line(directors: list[Director]) -> list[int]:
    return [a for d in directors for a in d.line]


# ------------------------------------------------------------------ directors alone
def _single_director(model: str, line: int, spine: int, radix: int, device: int,
                     per_asic: list[int], ufm: int, stor: int, prefix: str
                     ) -> Callable[[Site], tuple[Site, list[tuple[int, str]]]]:
    def make(site: Site) -> tuple[Site, list[tuple[int, str]]]:
        d = site.director("core1", model, line_asics=line, spine_asics=spine, radix=radix,
                          device=device)
        counts = (per_asic * line)[:line]
        _cpu_hosts(site, d.line, counts, prefix)
        return site, (_services(site, d.line[:2], "ufm", ufm)
                      + _services(site, d.line[-4:], "stor", stor))
    return make


# ------------------------------------------------------------------ leaves under directors
def _leaves_to_directors(model: str, n_dir: int, line: int, spine: int, radix: int,
                         device: int, leaves: int, hosts: list[int], cables: int,
                         leaf_radix: int, leaf_device: int, leaf_model: str, prefix: str,
                         ufm: int, stor: int, island: bool = False
                         ) -> Callable[[Site], tuple[Site, list[tuple[int, str]]]]:
    def make(site: Site) -> tuple[Site, list[tuple[int, str]]]:
        lv = site.switches([f"MF0;{prefix}-leaf{i + 1:03d}:{leaf_model}/U1"
                            for i in range(leaves)], leaf_radix, leaf_device)
        _cpu_hosts(site, lv, (hosts * leaves)[:leaves], prefix)
        extra = _island(site, lv[0], leaf_radix, leaf_device) if island else []
        dirs = [site.director(f"core{k + 1}", model, line_asics=line, spine_asics=spine,
                              radix=radix, device=device) for k in range(n_dir)]
        _to_directors(site, lv, dirs, cables)
        ln = _line(dirs)
        return site, (extra + _services(site, ln[:2], "ufm", ufm)
                      + _services(site, ln[::3], "stor", stor))
    return make


def bundles(rng: np.random.Generator, up: int, spread: tuple[int, int],
            most: int) -> list[int]:
    """``up`` cables in bundles of 1 to ``most``: how many go to each of
    ``spread[0]`` to ``spread[1]`` switches, drawn with ``rng``."""
    k = int(rng.integers(spread[0], spread[1] + 1))
    k = min(max(k, -(-up // most)), up)
    while True:
        cut = np.sort(rng.choice(np.arange(1, up), size=k - 1, replace=False))
        sizes = np.diff(np.r_[0, cut, up])
        if sizes.max() <= most:
            return sizes.tolist()


def bundles_to_directors(model: str, n_dir: int, line: int, spine: int, radix: int,
                          device: int, leaves: int, hosts: int, up: int,
                          spread: tuple[int, int], most: int, leaf_model: str, prefix: str,
                          ufm: int, stor: int, seed: int
                          ) -> Callable[[Site], tuple[Site, list[tuple[int, str]]]]:
    """Leaves of ``hosts`` hosts, each with ``up`` cables in uneven bundles
    (:func:`bundles`, drawn with ``seed``) to line ASICs of any of
    ``n_dir`` directors (one of every director, then those with the most
    free ports, ties drawn): two leaves that share a line ASIC have a route
    through it, all others go over the spines (as CU Boulder's Janus)."""
    def make(site: Site) -> tuple[Site, list[tuple[int, str]]]:
        rng = np.random.default_rng(seed)
        lv = site.switches([f"MF0;{prefix}-leaf{i + 1:03d}:{leaf_model}/U1"
                            for i in range(leaves)], radix, device)
        _cpu_hosts(site, lv, hosts, prefix)
        dirs = [site.director(f"core{k + 1}", model, line_asics=line, spine_asics=spine,
                              radix=radix, device=device) for k in range(n_dir)]
        ln = np.asarray(_line(dirs))
        of = np.repeat(np.arange(n_dir), line)
        for leaf in lv:
            sizes = bundles(rng, up, (max(spread[0], n_dir), max(spread[1], n_dir)), most)
            free = np.asarray([site.free_ports(a) for a in ln.tolist()])
            order = np.lexsort((rng.random(len(ln)), -free))
            # one line ASIC of every director first, then the freest of any
            first = order[np.sort(np.unique(of[order], return_index=True)[1])]
            pick = np.r_[first, order[~np.isin(order, first)]][:len(sizes)]
            pick = pick[np.argsort(-free[pick], kind="stable")]  # the largest bundles freest
            for a, n in zip(ln[pick].tolist(), sorted(sizes, reverse=True), strict=True):
                site.cable(leaf, a, n)  # (FabricError where the line ASIC has no room)
        return site, (_services(site, ln[:2].tolist(), "ufm", ufm)
                      + _services(site, ln[::5].tolist(), "stor", stor))
    return make


# ------------------------------------------------------------------ pods under a core
def _pods(pod_leaves: list[int], hosts: int, spines: int, cables: int, up: int, radix: int,
          device: int, model: str, core: str, prefix: str, ufm: int, stor: int,
          cores_per_index: int = 0, core_cables: int = 1, n_dir: int = 1,
          dir_shape: tuple[str, int, int, int, int] = ("CS7500", 36, 18, 36, SWITCHIB),
          island: bool = False, storage_leaves: tuple[int, int, int] = (0, 0, 0),
          direct: tuple[int, int] = (0, 0),
          ) -> Callable[[Site], tuple[Site, list[tuple[int, str]]]]:
    """Pods of ``pod_leaves[g]`` leaves with ``hosts`` hosts each, ``spines``
    spines per pod; core: ``"switches"`` (``cores_per_index`` per spine index)
    or ``"directors"`` (``n_dir`` of ``dir_shape`` = model, line, spine, radix,
    device; every spine cabled ``up`` times to each); ``storage_leaves``:
    ``(k, hosts, cables)``, with directors: k storage switches of ``hosts``
    storage hosts (:func:`_storage_leaves`); ``direct``: ``(k, cables)``,
    with directors: k more leaves of ``hosts`` hosts cabled straight to each
    director with ``cables`` cables, as a site grown in phases keeps its
    first leaves on the core (first in host order)."""
    def make(site: Site) -> tuple[Site, list[tuple[int, str]]]:
        groups, start = [], direct[0]
        first = site.switches([f"MF0;{prefix}-leaf{i + 1:02d}:{model}/U1"
                               for i in range(direct[0])], radix, device)
        _cpu_hosts(site, first, hosts, prefix, 0)
        for g, n in enumerate(pod_leaves):
            lv = site.switches([f"MF0;{prefix}-p{g + 1}-leaf{i + 1:02d}:{model}/U1"
                                for i in range(n)], radix, device)
            _cpu_hosts(site, lv, hosts, prefix, start)
            start += n
            groups.append(lv)
        extra = _island(site, groups[0][0], radix, device) if island else []
        sp = _spines(site, groups, spines, cables, radix, device, model)
        flat = [s for g in sp for s in g]
        if core == "switches":
            cores = core_tier(site, sp, cores_per_index, core_cables, radix, device, model)
            svc_at, store = cores, []
        else:
            m, line, spine, dradix, ddev = dir_shape
            dirs = [site.director(f"core{k + 1}", m, line_asics=line, spine_asics=spine,
                                  radix=dradix, device=ddev) for k in range(n_dir)]
            _to_directors(site, flat, dirs, up)
            _to_directors(site, first, dirs, direct[1])
            svc_at = _line(dirs)
            store = _storage_leaves(site, dirs, *storage_leaves[::2], radix, device, model)
        return site, (extra + _services(site, flat[:1] + svc_at[:1], "ufm", ufm)
                      + _services(site, flat[1::3] + svc_at[1::5], "stor", stor)
                      + _services(site, store, "stor", storage_leaves[0] * storage_leaves[1]))
    return make


# ------------------------------------------------------------------ DGX SuperPODs
def _superpod(units: int, nodes: int | list[int], spines_per: int, cables: int,
              radix: int, device: int, model: str, cores_per_index: int = 0,
              core_cables: int = 1, ufm: int = 0, stor: int = 0, rail_groups: bool = False
              ) -> Callable[[Site], tuple[Site, list[tuple[int, str]]]]:
    """``units`` scalable units; spines per unit (``rail_groups``: per rail
    across the units; a single group when there is no core tier)."""
    def make(site: Site) -> tuple[Site, list[tuple[int, str]]]:
        leaves = _dgx_units(site, units, nodes, radix, device, model)
        if rail_groups:
            groups = [[leaves[s][r] for s in range(units)] for r in range(8)]
        elif cores_per_index:
            groups = leaves
        else:
            groups = [[x for su in leaves for x in su]]
        sp = _spines(site, groups, spines_per, cables, radix, device, model)
        flat = [s for g in sp for s in g]
        top = flat
        if cores_per_index:
            top = core_tier(site, sp, cores_per_index, core_cables, radix, device, model)
        svc = [leaves[-1][r] for r in range(8)] if not any(site.free_ports(t) for t in top) \
            else top
        return site, (_services(site, svc, "ufm", ufm)
                      + _services(site, svc[::-1], "stor", stor))
    return make


# ------------------------------------------------------------------ Dragonfly+
def _dragonfly_plus(groups: int, leaves: int, hosts: int, spines: int, global_cables: int,
                    radix: int, device: int, model: str, ufm: int, stor: int
                    ) -> Callable[[Site], tuple[Site, list[tuple[int, str]]]]:
    """A Dragonfly+ (:func:`~smroute.fabric.generate.shapegen.dragonfly_plus_groups`),
    UFM and storage hosts on its spines."""
    def make(site: Site) -> tuple[Site, list[tuple[int, str]]]:
        def host(g: int, i: int, k: int) -> str:
            rack = g * leaves + i
            return f"cn-{_ROWS[rack // 20]}{rack % 20 + 1:02d}-c{k + 1:02d} mlx5_0"

        _, sp = dragonfly_plus_groups(site, groups, leaves, spines, host, hosts,
                                      global_cables=global_cables, radix=radix, device=device,
                                      model=model)
        flat = [s for g in sp for s in g]
        return site, (_services(site, flat[:1], "ufm", ufm)
                      + _services(site, flat[spines::spines + 1], "stor", stor))
    return make


def _shapes() -> list[Shape]:
    cs7500 = ("CS7500", 36, 18, 36, SWITCHIB)
    cs8500 = ("CS8500", 40, 20, 40, QUANTUM)
    qm9790 = ("QM9790", 32, 16, 64, QUANTUM2)
    s: list[Shape] = [
        Shape("edr-cs7520-200", "one CS7520 director (216 EDR ports), hosts on its line ASICs",
              "ibnetdiscover", 11,
              _single_director("CS7520", 12, 6, 36, SWITCHIB, [17, 17, 17, 16], 1, 2, "cn"),
              "EDR", CONNECTX5),
        Shape("ndr-dgx-h100-1su", "DGX H100 SuperPOD, one scalable unit: 32 nodes x 8 rails, "
              "4 spines, 8 parallel cables per leaf-spine pair", "ibnetdiscover", 12,
              _superpod(1, 31, 4, 8, 64, QUANTUM2, "MQM9700", ufm=2), "NDR", CONNECTX7),
        Shape("hdr-mgmt-island-300", "two-level HDR leaf/spine, 2 parallel cables, a management "
              "island off the first leaf, storage on spines", "ibnetdiscover", 13,
              _pods([15], 20, 5, 2, 0, 40, QUANTUM, "MQM8790", "switches", "cn", 0, 4,
                    cores_per_index=0, island=True), "HDR", CONNECTX6),
        Shape("edr-pods-cs7500-core-450", "three unequal pods (9/6/4 leaves, 2:1 oversubscribed) "
              "under one CS7500 director", "ibnetdiscover", 17,
              _pods([9, 6, 4], 24, 6, 2, 18, 36, SWITCHIB, "SB7800", "directors", "cn", 1, 4,
                    n_dir=1, dir_shape=cs7500), "EDR", CONNECTX5),
        Shape("ndr-topograph-like-540", "NDR site like the topograph capture: 31 leaves, 9 "
              "spines, 2 parallel cables, DGX nodes, UFM on a spine", "ibnetdiscover", 14,
              _pods([31], 17, 9, 2, 0, 64, QUANTUM2, "MQM9700", "switches", "gpu", 1, 2),
              "NDR", CONNECTX7),
        Shape("edr-cs7500-600", "one CS7500 director (648 EDR ports), hosts on its 36 line "
              "ASICs, UFM and storage on line ASICs", "ibnetdiscover", 15,
              _single_director("CS7500", 36, 18, 36, SWITCHIB, [17, 16, 17, 15], 2, 6, "cn"),
              "EDR", CONNECTX5),
        Shape("hdr-cs8500-720", "one CS8500 director (800 HDR ports) written by ibdiagnet",
              "ibdiagnet", 16,
              _single_director("CS8500", 40, 20, 40, QUANTUM, [18, 19, 18, 17], 2, 8, "cn"),
              "HDR", CONNECTX6),
        Shape("edr-pods-storage-2xcs7500-800", "three pods (14/14/12 EDR leaves, 9 spines "
              "each) under two CS7500 directors, 6 Lustre storage leaves cabled to the "
              "directors' line ASICs (two to each ASIC)", "ibnetdiscover", 35,
              _pods([14, 14, 12], 18, 9, 2, 4, 36, SWITCHIB, "SB7800", "directors", "cn", 2, 4,
                    n_dir=2, dir_shape=cs7500, storage_leaves=(6, 12, 4)), "EDR", CONNECTX5),
        Shape("edr-two-depths-2xcs7500-850", "a site grown in phases: 20 EDR leaves cabled "
              "straight to two CS7500 directors (9 cables to each), three later pods of 9 "
              "leaves behind 9 spines each (2 cables per leaf and spine, 9 to each director)",
              "ibnetdiscover", 36,
              _pods([9, 9, 9], 18, 9, 2, 9, 36, SWITCHIB, "SB7800", "directors", "cn", 2, 4,
                    n_dir=2, dir_shape=cs7500, direct=(20, 9)), "EDR", CONNECTX5),
        Shape("hdr-cs8500-core-island-900", "48 HDR leaves (unequal 20/16), 10 cables to one "
              "CS8500 director, a management island, ibdiagnet dialect", "ibdiagnet", 31,
              _leaves_to_directors("CS8500", 1, 40, 20, 40, QUANTUM, 48, [20, 16], 10, 40,
                                   QUANTUM, "MQM8790", "cn", 1, 6, island=True),
              "HDR", CONNECTX6),
        Shape("ndr-dgx-h100-4su", "DGX H100 SuperPOD of 4 scalable units (127 nodes, 32 leaves, "
              "16 spines, 2 cables per pair), UFM on the last unit's leaves", "ibnetdiscover", 18,
              _superpod(4, [32, 32, 32, 31], 16, 2, 64, QUANTUM2, "MQM9700", ufm=4),
              "NDR", CONNECTX7),
        Shape("edr-2xcs7500-1150", "64 EDR leaves (18 hosts, 9 cables to each of two CS7500 "
              "directors), UFM and storage on director line ASICs", "ibnetdiscover", 19,
              _leaves_to_directors("CS7500", 2, 36, 18, 36, SWITCHIB, 64, [18], 9, 36,
                                   SWITCHIB, "SB7800", "cn", 2, 16), "EDR", CONNECTX5),
        Shape("hdr-dgx-a100-1100", "DGX A100 SuperPOD-like: 7 units of 20 nodes (one short), "
              "rail-grouped spines, 20 cores", "ibnetdiscover", 20,
              _superpod(7, [20] * 6 + [18], 10, 2, 40, QUANTUM, "MQM8790", rail_groups=True,
                        cores_per_index=2, core_cables=4, ufm=2, stor=4), "HDR", CONNECTX6),
        Shape("edr-bundles-3xcs7500-1400", "80 EDR leaves (18 hosts, 18 cables in bundles of "
              "1 to 6 to 5-9 line ASICs of any of three CS7500 directors, as Janus's)",
              "ibnetdiscover", 34,
              bundles_to_directors("CS7500", 3, 36, 18, 36, SWITCHIB, 80, 18, 18, (5, 9), 6,
                                    "SB7800", "cn", 2, 8, 34), "EDR", CONNECTX5),
        Shape("hdr-2xcs8500-1500", "76 HDR leaves (20 hosts, 10 cables to each of two CS8500), "
              "written by ibdiagnet", "ibdiagnet", 21,
              _leaves_to_directors("CS8500", 2, 40, 20, 40, QUANTUM, 76, [20], 10, 40, QUANTUM,
                                   "MQM8790", "cn", 2, 16), "HDR", CONNECTX6),
        Shape("edr-dragonfly-plus-1580", "Dragonfly+ of four EDR wings (as Niagara's): 22 "
              "leaves of 18 hosts and 18 spines a wing, 4 cables between spine j of every two "
              "wings", "ibdiagnet", 32,
              _dragonfly_plus(4, 22, 18, 18, 4, 36, SWITCHIB, "SB7800", 1, 4),
              "EDR", CONNECTX5),
        Shape("edr-3level-1600", "three-level EDR tree: 5 pods of 18/16 leaves under 18 pod "
              "spines, 54 cores, storage on cores", "ibnetdiscover", 30,
              _pods([18, 18, 18, 18, 16], 18, 18, 1, 0, 36, SWITCHIB, "SB7800", "switches", "cn",
                    2, 8, cores_per_index=3, core_cables=6), "EDR", CONNECTX5),
        Shape("edr-site-174sw", "174 switches: 119 EDR leaves under two CS7510 directors (2 cables "
              "each), unequal leaves, a management island", "ibnetdiscover", 22,
              _leaves_to_directors("CS7510", 2, 18, 9, 36, SWITCHIB, 119, [16, 16, 14, 12], 2, 36,
                                   SWITCHIB, "SB7800", "cn", 2, 8, island=True),
              "EDR", CONNECTX5),
        Shape("ndr-qm9790-core-2000", "60 NDR leaves (32/31 hosts, 16 cables to each of two "
              "QM9790-class directors), ibdiagnet dialect", "ibdiagnet", 23,
              _leaves_to_directors("QM9790", 2, 32, 16, 64, QUANTUM2, 60, [32, 31], 16, 64,
                                   QUANTUM2, "MQM9700", "gpu", 2, 8), "NDR", CONNECTX7),
        Shape("hdr-pods-4xcs8500-2500", "7 unequal HDR pods (20..14 leaves, 20 spines each) "
              "under four CS8500 directors", "ibdiagnet", 24,
              _pods([20, 20, 20, 20, 18, 16, 14], 20, 20, 1, 5, 40, QUANTUM, "MQM8790",
                    "directors", "cn", 2, 8, n_dir=4, dir_shape=cs8500), "HDR", CONNECTX6),
        Shape("hdr-dragonfly-plus-3800", "Dragonfly+ of 20 HDR cells (as JUWELS Booster's): 10 "
              "leaves of 19 hosts and 10 spines a cell, spine j of every cell cabled to spine j "
              "of every other", "ibnetdiscover", 33,
              _dragonfly_plus(20, 10, 19, 10, 1, 40, QUANTUM, "MQM8790", 2, 8),
              "HDR", CONNECTX6),
        Shape("ndr-dgx-b200-16su", "DGX B200 SuperPOD of 16 units (512 nodes, 128 leaves, 128 "
              "spines, 64 cores, 4 cables per pair)", "ibnetdiscover", 25,
              _superpod(16, [32] * 15 + [31], 8, 4, 64, QUANTUM2, "MQM9700", cores_per_index=8,
                        core_cables=4, ufm=4), "NDR", CONNECTX7),
        Shape("hdr-3level-4800", "three-level HDR fat tree of standalone switches: 8 pods of 30 "
              "leaves, 20 spines per pod, 100 cores", "ibnetdiscover", 26,
              _pods([30] * 8, 20, 20, 1, 0, 40, QUANTUM, "MQM8790", "switches", "cn", 2, 8,
                    cores_per_index=5, core_cables=2), "HDR", CONNECTX6),
        Shape("ndr-pods-qm9790-5900", "unequal NDR pods (48/48/48/40 leaves of 32 hosts, 32 "
              "spines each) under four QM9790-class directors", "ibnetdiscover", 27,
              _pods([48, 48, 48, 40], 32, 32, 1, 4, 64, QUANTUM2, "MQM9700", "directors", "gpu",
                    2, 8, n_dir=4, dir_shape=qm9790), "NDR", CONNECTX7),
        Shape("ndr-dgx-b200-32su", "DGX B200 SuperPOD of 32 units (1,024 nodes, 256 leaves, 256 "
              "spines, 128 cores)", "ibnetdiscover", 28,
              _superpod(32, [32] * 31 + [31], 8, 4, 64, QUANTUM2, "MQM9700", cores_per_index=16,
                        core_cables=2, ufm=4), "NDR", CONNECTX7),
        Shape("hdr-500leaf-16xcs8500-12000", "12,000 HDR hosts: 500 leaves (24 hosts, one cable "
              "to each of 16 CS8500 directors)", "ibnetdiscover", 29,
              _leaves_to_directors("CS8500", 16, 40, 20, 40, QUANTUM, 500, [24], 1, 40, QUANTUM,
                                   "MQM8790", "cn", 2, 16), "HDR", CONNECTX6),
    ]
    return s


#: The named shapes, in catalogue order (smallest first).
CATALOGUE: dict[str, Shape] = {s.name: s for s in _shapes()}


def shape_names() -> list[str]:
    """The catalogue's names, in order."""
    return list(CATALOGUE)


def build_shape(name: str) -> Fabric:
    """The fabric of the shape ``name``: its site, its service hosts and an
    aggregation node on every switch ASIC.  Raises :class:`FabricError` for
    an unknown name."""
    shape = CATALOGUE.get(name)
    if shape is None:
        raise FabricError(f"no shape {name!r} in the catalogue; known: {', '.join(CATALOGUE)}")
    return build(shape)


def build(shape: Shape) -> Fabric:
    """The fabric of ``shape`` (one of the catalogue's or another made of
    its recipes): as :func:`build_shape`."""
    site, services = shape.make(Site(speed=shape.speed, host_device=shape.host_device))
    fabric = site.build(np.random.default_rng(shape.seed))
    if services:
        seen = {k: sum(d.startswith(f"{k}-") for d in site.host_desc) for _, k in services}
        descs = []
        for _, k in services:
            seen[k] += 1
            descs.append(f"{k}-{seen[k]:02d} HCA-1")
        fabric = attach_cas(fabric, [sw for sw, _ in services], descs,
                            device_id=shape.host_device)
    return with_aggregation_nodes(fabric)


def director_site(m: tuple[int, ...] = (18, 8, 4), w: tuple[int, ...] = (1, 2, 2),
                  p: tuple[int, ...] = (1, 1, 1), *, spine_hosts: int = 2, line_hosts: int = 0,
                  remove_links: int = 0, seed: int = 0) -> Fabric:
    """A two-level tree whose spines are directors, wired as the three-level
    PGFT ``(3; m; w; p)`` (leaves, the directors' line ASICs, their spine
    ASICs; the default: 32 leaves under 2 directors of 4 line and 2 spine
    ASICs), ``remove_links`` random switch links removed (generator seeded
    with ``seed``), a SHARP aggregation node on every ASIC, ``spine_hosts``
    service hosts on the first spine ASIC and ``line_hosts`` UFM / storage
    hosts spread over the line ASICs."""
    f = pgft(3, m, w, p)
    if remove_links:
        f, _ = degrade(f, np.random.default_rng(seed), links=remove_links)
    f = with_aggregation_nodes(f)
    tops = [i for i, d in enumerate(f.node_desc) if d.startswith("pgft L3")]
    lines = [i for i, d in enumerate(f.node_desc) if d.startswith("pgft L2")]
    on = [tops[0]] * spine_hosts + [lines[(3 * k) % len(lines)] for k in range(line_hosts)]
    descs = [f"service{k:02d} HCA-1" for k in range(spine_hosts)] + [
        f"{'ufm' if k % 2 == 0 else 'storage'}{k:02d} HCA-1" for k in range(line_hosts)]
    return attach_cas(f, on, descs) if on else f
