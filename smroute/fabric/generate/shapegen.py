"""Real-world fabric generators (:mod:`smroute.fabric.generate.shapes`): rings and
two-switch fabrics, director switches, Dragonfly+.  GUIDs, LIDs and descriptions follow
:mod:`smroute.fabric.generate.trees` (:func:`~smroute.fabric.generate.assemble.assemble`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

import numpy as np

from smroute.fabric.generate.assemble import DEFAULT_GUID_BASE, Level, assemble
from smroute.fabric.generate.sitegen import QUANTUM, Site
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError

__all__ = ["IS4_DEVICE_ID", "director", "dragonfly_plus", "dragonfly_plus_groups", "ring",
           "torus", "two_switch"]

#: InfiniScale IV: the one Mellanox device rdma-core groups into chassis with ``[ext N]``.
IS4_DEVICE_ID = 0xBD36
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# --------------------------------------------------------------------------- rings
def ring(
    k: int,
    hosts_per_switch: int | Sequence[int],
    *,
    parallel: int = 1,
    switch_ports: int | None = None,
    lmc: int = 0,
    speed: str = "EDR",
    width: int = 4,
    guid_base: int = DEFAULT_GUID_BASE,
    name: str = "ring",
) -> Fabric:
    """``k`` switches in a ring, ``parallel`` links between neighbours, hosts on
    every switch (``hosts_per_switch``: an int or ``k`` ints >= 0).

    Switch ``s`` (``"<name> L1 <s>"``) has its hosts ``"host <s>.<j>"`` on ports
    ``1..H_s``, then ``parallel`` ports to switch ``s+1 mod k`` and (``k >= 3``)
    ``parallel`` ports from switch ``s-1``: port ``H_s + 1 + t`` of ``s`` links
    to port ``H_{s+1} + parallel + 1 + t``.  ``k = 2`` is a pair of switches with
    ``parallel`` links on ports ``H_s + 1 ..`` of both; ``k = 1`` one switch.
    GUIDs, LIDs and descriptions follow :mod:`smroute.fabric.generate.trees`
    (hosts level 0, switches level 1).
    """
    if k < 1:
        raise FabricError(f"a ring needs k >= 1 switches, got {k}")
    if parallel < 1:
        raise FabricError(f"parallel must be >= 1, got {parallel}")
    if not _NAME_RE.fullmatch(name) or not name[0].isalpha():
        raise FabricError(f"bad generator name {name!r}")
    h = np.broadcast_to(np.asarray(hosts_per_switch, dtype=np.int64), (k,)).copy()
    if (h < 0).any():
        raise FabricError("hosts_per_switch must be >= 0")
    ring_ports = 0 if k == 1 else (parallel if k == 2 else 2 * parallel)
    nports = h + ring_ports
    if switch_ports is not None:
        if switch_ports < int(nports.max()):
            raise FabricError(
                f"switch_ports={switch_ports} is below the {int(nports.max())} ports needed"
            )
        nports = np.full(k, switch_ports, dtype=np.int64)
    if int(nports.max()) > 255 or int(nports.min()) < 1:
        raise FabricError(f"ring switches need 1..255 ports, got {nports.tolist()}")
    total = int(h.sum())
    sw_of = np.repeat(np.arange(k, dtype=np.int64), h)
    j = np.arange(total, dtype=np.int64) - (np.cumsum(h) - h)[sw_of]
    levels = [
        Level(0, total, np.ones(total, dtype=np.int64),
              [f"host {s}.{i}" for s, i in zip(sw_of.tolist(), j.tolist(), strict=True)]),
        Level(1, k, nports, [f"{name} L1 {s}" for s in range(k)]),
    ]
    links = [(0, np.arange(total, dtype=np.int64), np.ones(total, dtype=np.int64), 1, sw_of, j + 1)]
    t = np.arange(parallel, dtype=np.int64)
    if k == 2:
        links.append((1, np.zeros(parallel, dtype=np.int64), h[0] + 1 + t,
                      1, np.ones(parallel, dtype=np.int64), h[1] + 1 + t))
    elif k >= 3:
        s = np.repeat(np.arange(k, dtype=np.int64), parallel)
        tt = np.tile(t, k)
        nxt = (s + 1) % k
        links.append((1, s, h[s] + 1 + tt, 1, nxt, h[nxt] + parallel + 1 + tt))
    return assemble(levels, links, lmc=lmc, speed=speed, width=width, guid_base=guid_base)


def two_switch(
    hosts_per_switch: int | Sequence[int] = 4, *, parallel: int = 2, **kwargs: object
) -> Fabric:
    """Two switches with hosts on both and ``parallel`` links between them:
    :func:`ring` with ``k = 2`` (keyword arguments as :func:`ring`; switches are
    ``"switch L1 0"`` / ``"switch L1 1"`` unless ``name`` is given)."""
    kwargs.setdefault("name", "switch")
    return ring(2, hosts_per_switch, parallel=parallel, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- directors
def director(
    system: str = "dir01",
    *,
    model: str = "CS7500",
    line_cards: int = 4,
    spine_cards: int = 2,
    asics_per_card: int = 1,
    radix: int = 36,
    hosts_per_asic: int = 0,
    device_id: int = 0xCB20,
    lmc: int = 0,
    speed: str = "EDR",
    width: int = 4,
    guid_base: int = DEFAULT_GUID_BASE,
) -> Fabric:
    """A director switch: ``line_cards`` line and ``spine_cards`` spine cards of
    ``asics_per_card`` ``radix``-port ASICs each, internally a 2-level fat tree.

    Line ASIC ports ``1..E`` (``E = radix // 2``) are the chassis' external
    ports, ``E+1..radix`` internal: internal port ``E + 1 + i`` goes to spine
    ASIC ``i mod S`` (``S = spine_cards * asics_per_card``), its
    ``c = i // S``-th link there, on spine port ``a * (radix - E) / S + c + 1``
    for line ASIC ``a`` (needs ``S | radix - E`` and every spine port count
    within ``radix``).  Descriptions ``"MF0;<system>:<model>/L<nn>/U<k>"`` and
    ``".../S<nn>/U<k>"``; vendor 0x2c9, ``device_id`` (0xcb20 Switch-IB;
    :data:`IS4_DEVICE_ID` makes ``ibnetdiscover -g`` show ``[ext N]``); every
    ASIC has the chassis' system image GUID ``guid_base + (15 << 28)``.  Line
    ASIC ``a`` has node GUID ``guid_base + (1 << 28) + (a << 4)``, spine ASIC
    ``s`` ``guid_base + (2 << 28) + (s << 4)``.  ``hosts_per_asic`` hosts
    ``"node<NNN> HCA-1"`` (NNN from 001) sit on external ports ``1..`` of every
    line ASIC, in ASIC order.
    """
    if not _NAME_RE.fullmatch(system) or not _NAME_RE.fullmatch(model):
        raise FabricError(f"bad director system/model name {system!r}/{model!r}")
    if min(line_cards, spine_cards, asics_per_card) < 1 or radix < 2:
        raise FabricError("a director needs >= 1 line card, spine card and ASIC, radix >= 2")
    if radix > 255:
        raise FabricError(f"radix {radix} > 255")
    ext = radix // 2
    up = radix - ext
    n_line, n_spine = line_cards * asics_per_card, spine_cards * asics_per_card
    if up % n_spine:
        raise FabricError(f"{up} internal ports per line ASIC do not spread over {n_spine} spines")
    per_pair = up // n_spine
    if n_line * per_pair > radix:
        raise FabricError(
            f"{n_line} line ASICs x {per_pair} links need {n_line * per_pair} ports per spine "
            f"ASIC, radix is {radix}"
        )
    if not 0 <= hosts_per_asic <= ext:
        raise FabricError(f"hosts_per_asic={hosts_per_asic} not in 0..{ext}")

    def descs(kind: str, count: int) -> list[str]:
        apc = asics_per_card
        return [f"MF0;{system}:{model}/{kind}{a // apc + 1:02d}/U{a % apc + 1}"
                for a in range(count)]

    chassis = guid_base + (15 << 28)
    n_hosts = n_line * hosts_per_asic
    levels = [
        Level(0, n_hosts, np.ones(n_hosts, dtype=np.int64),
              [f"node{i + 1:03d} HCA-1" for i in range(n_hosts)]),
        Level(1, n_line, np.full(n_line, radix, dtype=np.int64), descs("L", n_line),
              sysimg=chassis, device_id=device_id),
        Level(2, n_spine, np.full(n_spine, radix, dtype=np.int64), descs("S", n_spine),
              sysimg=chassis, device_id=device_id),
    ]
    hosts = np.arange(n_hosts, dtype=np.int64)
    a = np.repeat(np.arange(n_line, dtype=np.int64), up)
    i = np.tile(np.arange(up, dtype=np.int64), n_line)
    links = [
        (0, hosts, np.ones(n_hosts, dtype=np.int64), 1, hosts // max(hosts_per_asic, 1),
         hosts % max(hosts_per_asic, 1) + 1),
        (1, a, ext + 1 + i, 2, i % n_spine, a * per_pair + i // n_spine + 1),
    ]
    return assemble(levels, links, lmc=lmc, speed=speed, width=width, guid_base=guid_base)


# --------------------------------------------------------------------------- Dragonfly+
def dragonfly_plus_groups(
    site: Site, groups: int, leaves: int, spines: int, host: Callable[[int, int, int], str],
    hosts_per_leaf: int, *, global_cables: int = 1, spread: bool = False, radix: int = 40,
    device: int = QUANTUM, model: str = "MQM8790", name: str = "dfp",
) -> tuple[list[list[int]], list[list[int]]]:
    """Wire a Dragonfly+ (Shpiner et al., 2017) into ``site``: ``groups``
    groups of a two-level leaf/spine Clos, ``leaves`` leaves of
    ``hosts_per_leaf`` hosts (``host(group, leaf, slot)`` names them, on the
    leaves' low ports) and ``spines`` spines each, every leaf cabled to
    every spine of its group; spine ``j`` of every group cabled to spine
    ``j`` of every other group with ``global_cables`` cables, or
    (``spread``, the canonical Dragonfly+) every two groups joined by one
    spine of each, a group's spines spreading the other groups evenly
    (group ``b`` is ``o = (b - a) mod groups`` on from group ``a``: the
    spine ``(o - 1) * spines // (groups - 1)`` of ``a``), so a spine
    reaches only some groups across.  Switches are
    ``"MF0;<name>-g<gg>-leaf<ll>:<model>/U1"`` / ``...-spine<ss>...``.
    Returns the leaves and the spines, per group (switch ids of ``site``)."""
    if min(groups, leaves, spines, global_cables) < 1 or hosts_per_leaf < 0:
        raise FabricError("a Dragonfly+ needs >= 1 group, leaf, spine and global cable")
    across = -(-(groups - 1) // spines) if spread else groups - 1
    if hosts_per_leaf + spines > radix or leaves + across * global_cables > radix:
        raise FabricError(
            f"a Dragonfly+ of {groups} groups needs {hosts_per_leaf + spines} ports a leaf and "
            f"{leaves + across * global_cables} a spine; the switches have {radix}")
    all_leaves, all_spines = [], []
    for g in range(groups):
        lv = site.switches([f"MF0;{name}-g{g + 1:02d}-leaf{i + 1:02d}:{model}/U1"
                            for i in range(leaves)], radix, device)
        for i, leaf in enumerate(lv):
            for k in range(hosts_per_leaf):
                site.host(leaf, host(g, i, k))
        all_leaves.append(lv)
    for g, lv in enumerate(all_leaves):
        sp = site.switches([f"MF0;{name}-g{g + 1:02d}-spine{j + 1:02d}:{model}/U1"
                            for j in range(spines)], radix, device)
        for leaf in lv:
            for s in sp:
                site.cable(leaf, s)
        all_spines.append(sp)
    for a in range(groups):
        for b in range(a + 1, groups):
            if spread:
                ja = ((b - a) % groups - 1) * spines // (groups - 1)
                jb = ((a - b) % groups - 1) * spines // (groups - 1)
                site.cable(all_spines[a][ja], all_spines[b][jb], global_cables)
                continue
            for j in range(spines):
                site.cable(all_spines[a][j], all_spines[b][j], global_cables)
    return all_leaves, all_spines


def dragonfly_plus(groups: int, leaves: int, spines: int, hosts_per_leaf: int, *,
                   global_cables: int = 1, spread: bool = False, radix: int = 40,
                   speed: str = "HDR", width: int = 4, lmc: int = 0, seed: int = 0) -> Fabric:
    """A Dragonfly+ (:func:`dragonfly_plus_groups`) of HDR Quantum switches,
    hosts ``"node<NNNN> HCA-1"`` in cabling order with LMC ``lmc``, host
    GUIDs drawn with ``numpy.random.default_rng(seed)``
    (:class:`~smroute.fabric.generate.sitegen.Site`)."""
    site = Site(speed=speed, width=width, lmc=lmc)
    dragonfly_plus_groups(site, groups, leaves, spines,
                          lambda g, i, k: f"node{(g * leaves + i) * hosts_per_leaf + k + 1:04d} "
                                          "HCA-1",
                          hosts_per_leaf, global_cables=global_cables, spread=spread,
                          radix=radix)
    return site.build(np.random.default_rng(seed))


def torus(dims: Sequence[int], hosts_per_switch: int, *, parallel: int = 1, radix: int = 40,
          speed: str = "HDR", width: int = 4, lmc: int = 0, seed: int = 0) -> Fabric:
    """A torus of HDR Quantum switches, ``dims`` switches along each axis
    (a hypercube: every size 2), ``parallel`` cables between neighbours
    along an axis (one bundle where the axis has 2 switches, none where it
    has 1), ``hosts_per_switch`` hosts ``"node<NNNN> HCA-1"`` on each, as
    SDSC Gordon's 3-D torus or SGI ICE's hypercubes.  Switches are
    ``"MF0;torus-<x>-<y>..:MQM8790/U1"``; host GUIDs drawn with
    ``numpy.random.default_rng(seed)``."""
    dims = [int(x) for x in dims]
    if not dims or min(dims) < 1 or min(parallel, hosts_per_switch + 1) < 1:
        raise FabricError("a torus needs >= 1 switch along each axis, parallel >= 1 and "
                          "hosts >= 0")
    need = hosts_per_switch + parallel * sum(2 if x > 2 else x - 1 for x in dims)
    if need > radix:
        raise FabricError(f"a torus {'x'.join(map(str, dims))} needs {need} ports a switch; "
                          f"the switches have {radix}")
    site = Site(speed=speed, width=width, lmc=lmc)
    coords = list(itertools.product(*[range(x) for x in dims]))
    at = {c: site.switch(f"MF0;torus-{'-'.join(map(str, c))}:MQM8790/U1", radix, QUANTUM)
          for c in coords}
    for n, c in enumerate(coords):
        for k in range(hosts_per_switch):
            site.host(at[c], f"node{n * hosts_per_switch + k + 1:04d} HCA-1")
    for c in coords:
        for axis, x in enumerate(dims):
            if x == 1 or (x == 2 and c[axis] == 1):
                continue
            nb = (*c[:axis], (c[axis] + 1) % x, *c[axis + 1:])
            site.cable(at[c], at[nb], parallel)
    return site.build(np.random.default_rng(seed))
