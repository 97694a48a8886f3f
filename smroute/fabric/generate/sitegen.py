"""Building blocks of site-shaped fabrics (the catalogue of
:mod:`smroute.fabric.generate.catalogue`): standalone switches, director chassis
(an internal two-level Clos of ASICs), cables and hosts, assembled into a
:class:`~smroute.fabric.model.Fabric`.

A :class:`Site` collects switch ASICs, cables and hosts in the order they are
added; :meth:`Site.build` turns them into a fabric:

* **Nodes.**  Switch ASICs first (in the order added), then hosts.
* **Ports.**  A cable or host takes the lowest free port of each switch it
  joins, within the switch's *external* ports (``1..radix``; on a director's
  line ASIC ``1..radix/2``, its other ports being the chassis' internal cables).
  Add hosts before uplinks to get hosts on the low ports.
* **Directors** (:meth:`Site.director`): line ASICs ``"MF0;<system>:<model>/L<nn>/U<k>"``
  and spine ASICs ``".../S<nn>/U<k>"`` wired as :func:`smroute.fabric.generate.shapegen.director`
  (internal port ``E + 1 + i`` of line ASIC ``a`` to spine ASIC ``i mod S``),
  every ASIC with the chassis' system image GUID.  Cables to a director
  (:meth:`Site.cable_director`) go round-robin over its line ASICs.
* **GUIDs.**  Switch ``i``: ``switch_base + (i << 4)`` (room for an aggregation
  node at ``+ 8``); chassis ``d``: ``chassis_base + (d << 4)``; host ``j``:
  ``host_base + (perm[j] << 4)``, ``perm`` a permutation drawn from the
  generator passed in, so the GUID order of hosts is not their cabling or
  name order (as on a real site, where HCA GUIDs come from the factory).
  A host's port GUID is its node GUID + 1 (ibsim's convention).
* **LIDs.**  Host ports ``1..H`` in host order, then switches; with
  ``lmc`` (:attr:`Site.lmc`) host ``j`` has base LID ``(j + 1) << lmc``
  and ``2**lmc`` LIDs, the switches the LIDs after the last host's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType, speed_code
from smroute.fabric.model.builder import FabricBuilder

__all__ = [
    "CONNECTX5",
    "CONNECTX6",
    "CONNECTX7",
    "QUANTUM",
    "QUANTUM2",
    "SWITCHIB",
    "Director",
    "Site",
]

#: Switch ASIC device ids (vendor 0x2c9): Switch-IB (EDR), Quantum (HDR), Quantum-2 (NDR).
SWITCHIB, QUANTUM, QUANTUM2 = 0xCB20, 0xD2F0, 0xD2F2
#: HCA device ids: ConnectX-5, ConnectX-6, ConnectX-7.
CONNECTX5, CONNECTX6, CONNECTX7 = 0x1017, 0x101B, 0x1021
_VENDOR = 0x2C9


@dataclass
class Director:
    """A director chassis of a :class:`Site`: its line and spine ASICs (switch
    ids) and the next line ASIC a cable goes to."""

    system: str
    line: list[int]
    spine: list[int]
    next_line: int = 0


@dataclass
class Site:
    """A fabric under construction (module doc).  ``speed`` is every link's."""

    speed: str = "HDR"
    width: int = 4
    host_device: int = CONNECTX6
    lmc: int = 0
    switch_base: int = 0xB8CE_F603_0000_0000
    chassis_base: int = 0x9803_9B03_0000_0000
    host_base: int = 0x0C42_A103_0000_0000
    sw_desc: list[str] = field(default_factory=list)
    sw_radix: list[int] = field(default_factory=list)
    sw_device: list[int] = field(default_factory=list)
    sw_chassis: list[int] = field(default_factory=list)  # -1: standalone
    sw_next: list[int] = field(default_factory=list)  # lowest free external port
    sw_last: list[int] = field(default_factory=list)  # highest external port
    links: list[tuple[int, int, int, int]] = field(default_factory=list)
    host_desc: list[str] = field(default_factory=list)
    host_at: list[tuple[int, int]] = field(default_factory=list)
    directors: list[Director] = field(default_factory=list)

    # ------------------------------------------------------------------ switches
    def switch(self, desc: str, radix: int, device: int, *, chassis: int = -1,
               external: int | None = None) -> int:
        """Add one switch ASIC; its id (node index in the built fabric)."""
        if not 1 <= radix <= 254:
            raise FabricError(f"radix {radix} not in 1..254")
        self.sw_desc.append(desc)
        self.sw_radix.append(radix)
        self.sw_device.append(device)
        self.sw_chassis.append(chassis)
        self.sw_next.append(1)
        self.sw_last.append(radix if external is None else external)
        return len(self.sw_desc) - 1

    def switches(self, descs: list[str], radix: int, device: int) -> list[int]:
        """Add standalone switches, one per description."""
        return [self.switch(d, radix, device) for d in descs]

    def director(self, system: str, model: str, *, line_asics: int, spine_asics: int,
                 radix: int, device: int, asics_per_card: int = 2) -> Director:
        """Add a director chassis (module doc); ``line_asics`` line and
        ``spine_asics`` spine ASICs of ``radix`` ports, ``asics_per_card``
        per blade (descriptions ``L<blade>/U<k>``)."""
        ext = radix // 2
        up = radix - ext
        if up % spine_asics or line_asics * (up // spine_asics) > radix:
            raise FabricError(f"{line_asics} line ASICs do not spread over {spine_asics} spines "
                              f"of radix {radix}")
        d = len(self.directors)
        apc = asics_per_card

        def desc(kind: str, a: int) -> str:
            return f"MF0;{system}:{model}/{kind}{a // apc + 1:02d}/U{a % apc + 1}"

        line = [self.switch(desc("L", a), radix, device, chassis=d, external=ext)
                for a in range(line_asics)]
        spine = [self.switch(desc("S", s), radix, device, chassis=d, external=0)
                 for s in range(spine_asics)]
        per_pair = up // spine_asics
        for a, la in enumerate(line):
            for i in range(up):
                self.links.append((la, ext + 1 + i, spine[i % spine_asics],
                                   a * per_pair + i // spine_asics + 1))
        director = Director(system, line, spine)
        self.directors.append(director)
        return director

    # ------------------------------------------------------------------ cables and hosts
    def _port(self, sw: int) -> int:
        p = self.sw_next[sw]
        if p > self.sw_last[sw]:
            raise FabricError(f"switch {self.sw_desc[sw]!r} has no free port left "
                              f"({self.sw_last[sw]} external ports)")
        self.sw_next[sw] = p + 1
        return p

    def cable(self, a: int, b: int, count: int = 1) -> None:
        """``count`` parallel cables between switches ``a`` and ``b``."""
        for _ in range(count):
            self.links.append((a, self._port(a), b, self._port(b)))

    def cable_director(self, a: int, director: Director, count: int = 1) -> None:
        """``count`` cables from switch ``a`` to the director, each to its next
        line ASIC (round-robin)."""
        for _ in range(count):
            la = director.line[director.next_line % len(director.line)]
            director.next_line += 1
            self.cable(a, la)

    def host(self, sw: int, desc: str) -> None:
        """A single-port host on switch ``sw``'s lowest free port."""
        self.host_desc.append(desc)
        self.host_at.append((sw, self._port(sw)))

    def free_ports(self, sw: int) -> int:
        """External ports of ``sw`` still free."""
        return self.sw_last[sw] - self.sw_next[sw] + 1

    # ------------------------------------------------------------------ build
    def build(self, rng: np.random.Generator) -> Fabric:
        """The fabric (module doc); ``rng`` draws the host GUID permutation."""
        n_sw, n_h = len(self.sw_desc), len(self.host_desc)
        b = FabricBuilder()
        sw_guid = np.uint64(self.switch_base) + (np.arange(n_sw, dtype=np.uint64) << np.uint64(4))
        chassis = np.asarray(self.sw_chassis, dtype=np.int64)
        sysimg = np.where(
            chassis >= 0,
            np.uint64(self.chassis_base) + (np.maximum(chassis, 0).astype(np.uint64)
                                            << np.uint64(4)),
            sw_guid,
        ).astype(np.uint64)
        devices = np.asarray(self.sw_device, dtype=np.int64)
        sw_nodes = np.empty(n_sw, dtype=np.int64)
        # in switch order, one add_nodes per run of ASICs of one device id
        change = np.flatnonzero(devices[1:] != devices[:-1]) + 1
        bounds = [0, *change.tolist(), n_sw] if n_sw else [0]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            sw_nodes[lo:hi] = b.add_nodes(
                NodeType.SWITCH, sw_guid[lo:hi], np.asarray(self.sw_radix[lo:hi]),
                self.sw_desc[lo:hi], sysimg_guids=sysimg[lo:hi], vendor_id=_VENDOR,
                device_id=int(devices[lo]),
            )
        perm = rng.permutation(n_h).astype(np.uint64)
        h_guid = np.uint64(self.host_base) + (perm << np.uint64(4))
        hosts = b.add_nodes(NodeType.CA, h_guid, 1, self.host_desc, sysimg_guids=h_guid,
                            vendor_id=_VENDOR, device_id=self.host_device)
        spd = speed_code(self.speed)
        b.set_ports(hosts, 1, guid=h_guid + np.uint64(1),
                    lid=np.arange(1, n_h + 1, dtype=np.int64) << self.lmc, lmc=self.lmc)
        first = (n_h + 1) << self.lmc  # the LIDs after the last host's
        if first + n_sw - 1 > 0xBFFF:
            raise FabricError(f"{n_h} hosts with LMC {self.lmc} and {n_sw} switches need LIDs "
                              f"up to {first + n_sw - 1}, beyond the unicast 49,151")
        b.set_ports(sw_nodes, 0, guid=sw_guid, lid=np.arange(first, first + n_sw))
        at = np.asarray(self.host_at, dtype=np.int64).reshape(-1, 2)
        lk = np.asarray(self.links, dtype=np.int64).reshape(-1, 4)
        na = np.concatenate([hosts, sw_nodes[lk[:, 0]]])
        pa = np.concatenate([np.ones(n_h, dtype=np.int64), lk[:, 1]])
        nb = np.concatenate([sw_nodes[at[:, 0]], sw_nodes[lk[:, 2]]])
        pb = np.concatenate([at[:, 1], lk[:, 3]])
        b.add_links_rows(na, pa, nb, pb)
        b.set_ports(np.concatenate([na, nb]), np.concatenate([pa, pb]), width=self.width,
                    speed=spd)
        return b.build()
