"""Write a :class:`~smroute.fabric.model.Fabric` as ibnetdiscover text or as an
ibsim net file.

ibnetdiscover text
------------------
:func:`format_topology` prints what infiniband-diags' ``ibnetdiscover``
(rdma-core v44, ``dump_topology`` without ``-g``/``-f``) prints: a header
comment, then one blank-line separated record per switch, CA and router, in
that order (within a type: node index order; the real tool's order is its
discovery order).  Record layout, byte for byte (``\\t`` = TAB)::

    vendid=0x2c9
    devid=0xcb20
    sysimgguid=0x2c90310000000                     (only if non-zero)
    switchguid=0x2c90310000000(2c90310000000)      (node GUID(port-0 GUID))
    Switch\\t6 "S-0002c90310000000"\\t\\t# "pgft L1 0.0.0" base port 0 lid 13 lmc 0
    [1]\\t"H-0002c90300000000"[1](2c90300000001) \\t\\t# "host 0.0.0" lid 1 4xEDR
    [3]\\t"S-0002c90320000000"[1]\\t\\t# "pgft L2 0.0.0" lid 19 4xEDR

    caguid=0x2c90300000000                          (rtguid= for routers)
    Ca\\t1 "H-0002c90300000000"\\t\\t# "host 0.0.0"
    [1](2c90300000001) \\t"S-0002c90310000000"[1]\\t\\t# lid 1 lmc 0 "pgft L1 0.0.0" lid 13 4xEDR

Only linked ports are listed.  The remote LID is the remote switch's port-0
LID or the remote CA port's base LID; width/speed are the local port's
(``??`` / ``???`` when unknown).  Enhanced port 0 is not modelled, so switches
always read ``base port 0``.

External port numbers of chassis (``ibnetdiscover -g``): given ``ext_ports``
(per port row, 0 = none; :func:`chassis_ext_ports` computes rdma-core's), a
port number is followed by ``[ext N]``, on the local port as on the remote
one, exactly where the real tool prints it::

    [1][ext 1]\t"H-0002c90300000000"[1](2c90300000001) \t\t# "node001 HCA-1" lid 1 4xEDR
    [1](2c90300000001) \t"S-0002c90310000000"[1][ext 1]\t\t# lid 1 lmc 0 "MF0;..." ...

The parser (:mod:`smroute.fabric.ibnetdiscover.parse`) accepts and ignores them.

ibsim net files (ibsim 0.10, ``ibsim/sim_net.c``)
------------------------------------------------
ibsim reads the ibnetdiscover format itself.  What it takes from it:

* ``switchguid=G`` / ``caguid=G`` (also ``hcaguids=``) / ``rtguid=G`` set the
  GUID of the *next* node of that type (``=+N`` is relative); the text after
  the number (``(...)``) is ignored.  Without them GUIDs count up from
  0x200000 (switches) / 0x100000 (CAs).  A switch's port GUID is its node GUID;
  a CA's port ``p`` gets ``node GUID + p`` -- the generator's convention.
* ``vendid=``, ``devid=``, ``sysimgguid=`` apply to the next node (reset after).
* Header ``Switch N "id" # "desc" [base|enhanced] port 0 lid L lmc M`` and
  ``Ca N "id" # "desc"`` (``Hca`` too, ``Rt`` for routers): ``"id"`` is only a
  name local to the file (must be unique; ``#`` and ``@`` are reserved), the
  description becomes NodeDescription, ``lid``/``lmc`` preset switch port 0.
* Port lines ``[p] "remote-id"[rp] ...``: both ends must list the link.  On a
  CA line the first ``lid L lmc M`` presets the port's LID/LMC; on both the
  last ``lid R WxSPEED`` sets the enabled width (1x 2x 4x 8x 12x) and speed
  (SDR DDR QDR FDR10 FDR EDR HDR; ibsim 0.10 knows no NDR/XDR, those ports
  come up at its default SDR).  Any ``X=value`` on a port line is parsed as a
  port option (``w=``, ``s=``, ``e=``), so descriptions must not contain ``=``.
* Lines are at most 255 characters; ``#`` lines are comments; ``include``,
  ``do <cmd>``, ``module=``, ``width=``, ``speed=``, ``extspeed=`` also exist.
* The first node's first port is ibsim's default attach point (where OpenSM
  and the diags run), so :func:`format_ibsim_net` writes CAs first.
* Sizes above the defaults (2048 nodes, 256 switches, 256*36+2048*2 ports,
  LIDs below 30720) need ``ibsim -N -S -P -L``; :func:`ibsim_limits` gives them.

Preset LIDs are what OpenSM finds in PortInfo; OpenSM keeps valid ones, so
LIDs usually survive a sweep, but only GUIDs and links are guaranteed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection

import numpy as np
import numpy.typing as npt

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType, speed_name
from smroute.fileio import atomic_writer

__all__ = [
    "RDMA_CORE_CHASSIS_DEVICE_IDS",
    "chassis_ext_ports",
    "format_ibsim_net",
    "format_topology",
    "ibsim_limits",
    "write_ibsim_net",
    "write_topology",
]

_EPOCH = "Thu Jan  1 00:00:00 1970"
_PREFIX = {NodeType.SWITCH: "S", NodeType.CA: "H", NodeType.ROUTER: "R"}
_KIND = {NodeType.SWITCH: "Switch", NodeType.CA: "Ca", NodeType.ROUTER: "Rt"}
_GUIDKEY = {NodeType.SWITCH: "switchguid", NodeType.CA: "caguid", NodeType.ROUTER: "rtguid"}
_WIDTH = {1: "1x", 2: "2x", 4: "4x", 8: "8x", 12: "12x"}
_IBSIM_SPEEDS = {"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR"}
#: Mellanox devices whose line-card ports rdma-core (libibnetdisc ``chassis.c``,
#: ``fill_mellanox_chassis_record``) numbers as external ports: InfiniScale IV.
RDMA_CORE_CHASSIS_DEVICE_IDS: tuple[int, ...] = (0xBD36,)
_MLNX_VENDOR = 0x2C9
#: 'MF0;<system name>:<system type>/<slot>[:board type]/U<node index>', slot L<nn>
_MF0_LINE = re.compile(r"MF0;[^:]*:[^/]*/L[^/:]*(?::[^/]*)?/U")
_RDMA_CORE_LINE_EXT_PORTS = 18


def chassis_ext_ports(
    fabric: Fabric, *, device_ids: Collection[int] | None = None
) -> npt.NDArray[np.int16]:
    """External port number of every port row, shape ``(P,)`` int16, 0 for none,
    by rdma-core's rule for Mellanox chassis: a switch of vendor 0x2c9 whose
    description reads ``"MF0;<system>:<type>/L<nn>[:<board>]/U<k>"`` (a line
    card) has its ports ``1..18`` numbered ``[ext 1]..[ext 18]``.  rdma-core
    applies it to :data:`RDMA_CORE_CHASSIS_DEVICE_IDS` only (pass them as
    ``device_ids`` to match the real ``ibnetdiscover -g``); ``None`` applies it
    to any device (e.g. Switch-IB directors such as the CS7500)."""
    desc_ok = np.fromiter(
        (_MF0_LINE.match(d) is not None for d in fabric.node_desc), dtype=bool,
        count=fabric.n_nodes,
    )
    line = desc_ok & (fabric.node_type == NodeType.SWITCH) & (fabric.vendor_id == _MLNX_VENDOR)
    if device_ids is not None:
        line &= np.isin(fabric.device_id, np.asarray(list(device_ids), dtype=np.uint32))
    pnum = fabric.port_num.astype(np.int64)
    on = line[fabric.port_node] & (pnum >= 1) & (pnum <= _RDMA_CORE_LINE_EXT_PORTS)
    out = np.where(on, pnum, 0).astype(np.int16)
    out.setflags(write=False)
    return out


def _clean(desc: str) -> str:
    """NodeDescription as ibnetdiscover prints it: at most 64 bytes,
    non-printable characters as spaces."""
    return "".join(c if c.isprintable() and ord(c) < 127 else " " for c in desc[:64])


def _records(
    fabric: Fabric, order: list[int], *, ibsim: bool, ext_ports: list[int] | None = None
) -> list[str]:
    ntype = fabric.node_type.tolist()
    nguid = fabric.node_guid.tolist()
    sysg = fabric.sysimg_guid.tolist()
    vend = fabric.vendor_id.tolist()
    dev = fabric.device_id.tolist()
    nports = fabric.num_ports.tolist()
    pstart = fabric.port_start.tolist()
    pnode = fabric.port_node.tolist()
    pnum = fabric.port_num.tolist()
    pguid = fabric.port_guid.tolist()
    plid = fabric.port_lid.tolist()
    plmc = fabric.port_lmc.tolist()
    pwidth = fabric.port_width.tolist()
    pspeed = fabric.port_speed.tolist()
    peer = fabric.port_peer.tolist()
    desc = [_clean(d) for d in fabric.node_desc]
    names = [f'"{_PREFIX[NodeType(t)]}-{g:016x}"' for t, g in zip(ntype, nguid, strict=True)]
    sw = NodeType.SWITCH
    ext = [f"[ext {x}]" if x else "" for x in ext_ports] if ext_ports else None

    def link_str(row: int) -> str:
        w = _WIDTH.get(pwidth[row], "??")
        s = speed_name(pspeed[row]) if pspeed[row] < 10 else "???"
        if ibsim and s not in _IBSIM_SPEEDS:
            s = "???"
        return f"{w}{s}"

    def remote_lid(r: int) -> int:
        n = pnode[r]
        return plid[pstart[n]] if ntype[n] == sw else plid[r]

    out: list[str] = []
    for n in order:
        t = ntype[n]
        out.append("")
        out.append(f"vendid=0x{vend[n]:x}")
        out.append(f"devid=0x{dev[n]:x}")
        if sysg[n]:
            out.append(f"sysimgguid=0x{sysg[n]:x}")
        base = pstart[n]
        if t == sw:
            p0 = base
            out.append(f"switchguid=0x{nguid[n]:x}({(pguid[p0] or nguid[n]):x})")
            out.append(
                f'Switch\t{nports[n]} {names[n]}\t\t# "{desc[n]}" base port 0 '
                f"lid {plid[p0]} lmc {plmc[p0]}"
            )
        else:
            out.append(f"{_GUIDKEY[NodeType(t)]}=0x{nguid[n]:x}")
            out.append(f'{_KIND[NodeType(t)]}\t{nports[n]} {names[n]}\t\t# "{desc[n]}"')
        for row in range(base + 1, base + nports[n] + 1):
            r = peer[row]
            if r < 0:
                continue
            rn = pnode[r]
            rdesc = desc[rn]
            if t == sw:
                if ext is None:
                    line = f"[{pnum[row]}]\t{names[rn]}[{pnum[r]}]"
                else:
                    line = f"[{pnum[row]}]{ext[row]}\t{names[rn]}[{pnum[r]}]{ext[r]}"
                if ntype[rn] != sw:
                    line += f"({pguid[r]:x}) "
                line += f'\t\t# "{rdesc}" lid {remote_lid(r)} {link_str(row)}'
            else:
                line = f"[{pnum[row]}]({pguid[row]:x}) \t{names[rn]}[{pnum[r]}]"
                if ext is not None:
                    line += ext[r]
                if ntype[rn] != sw:
                    line += f" ({pguid[r]:x}) "
                line += (
                    f'\t\t# lid {plid[row]} lmc {plmc[row]} "{rdesc}" '
                    f"lid {remote_lid(r)} {link_str(row)}"
                )
            out.append(line)
    return out


def _type_order(fabric: Fabric, kinds: tuple[NodeType, ...]) -> list[int]:
    order: list[int] = []
    for k in kinds:
        order.extend(np.flatnonzero(fabric.node_type == k).tolist())
    return order


def format_topology(
    fabric: Fabric,
    *,
    generated_on: str = _EPOCH,
    from_node: int | None = None,
    ext_ports: npt.ArrayLike | None = None,
) -> list[str]:
    """ibnetdiscover text for ``fabric``, one string per line (no newlines).

    ``generated_on`` is the ``ctime`` text of the header (default the epoch,
    so output is deterministic); ``from_node`` the node named in "Initiated
    from" (default: the first CA, else node 0); ``ext_ports`` (shape ``(P,)``,
    int, 0 = none) external port numbers to print as ``[p][ext N]``, e.g.
    :func:`chassis_ext_ports` (default: none, as plain ``ibnetdiscover``).
    Switch records come first, then CAs, then routers, each in node index order.
    """
    ext: list[int] | None = None
    if ext_ports is not None:
        arr = np.asarray(ext_ports, dtype=np.int64)
        if arr.shape != (fabric.n_ports,):
            raise FabricError(f"ext_ports has shape {arr.shape}, expected ({fabric.n_ports},)")
        if (arr < 0).any():
            raise FabricError("ext_ports must be >= 0")
        ext = arr.tolist()
    if from_node is None:
        cas = fabric.cas
        from_node = int(cas[0]) if len(cas) else 0
    lines = ["#", f"# Topology file: generated on {generated_on}", "#"]
    if fabric.n_nodes:
        g = int(fabric.node_guid[from_node])
        lo = int(fabric.port_start[from_node])
        rows = range(lo, lo + int(fabric.num_ports[from_node]) + 1)
        pg = next((int(fabric.port_guid[r]) for r in rows if int(fabric.port_guid[r])), g)
        lines.append(f"# Initiated from node {g:016x} port {pg:016x}")
    order = _type_order(fabric, (NodeType.SWITCH, NodeType.CA, NodeType.ROUTER))
    lines.extend(_records(fabric, order, ibsim=False, ext_ports=ext))
    return lines


def format_ibsim_net(fabric: Fabric, *, sm_node: int | None = None) -> list[str]:
    """An ibsim net file reproducing ``fabric`` with its own GUIDs, node
    descriptions, links, widths, speeds and preset LIDs/LMCs.

    ``sm_node`` is written first and becomes ibsim's default attach point
    (where OpenSM and the diags run); default: the first CA.  The rest follow
    as CAs, switches, routers.  Raises :class:`FabricError` for what ibsim
    cannot represent: a CA port GUID other than node GUID + port, ``=`` in a
    description, or a line longer than 255 characters.
    """
    for n in fabric.cas.tolist() + fabric.routers.tolist():
        lo = int(fabric.port_start[n])
        np_ = int(fabric.num_ports[n])
        pg = fabric.port_guid[lo + 1: lo + np_ + 1]
        want = fabric.node_guid[n] + np.arange(1, np_ + 1, dtype=np.uint64)
        have = pg != 0
        if (pg[have] != want[have]).any():
            raise FabricError(
                f"{fabric.describe_node(n)}: ibsim gives CA port p the GUID node GUID + p"
            )
    for d in fabric.node_desc:
        if "=" in d:
            raise FabricError(f'node description "{d}" contains "=", which ibsim misparses')
    if sm_node is None:
        cas = fabric.cas
        sm_node = int(cas[0]) if len(cas) else 0
    order = _type_order(fabric, (NodeType.CA, NodeType.SWITCH, NodeType.ROUTER))
    if fabric.n_nodes:
        order.remove(sm_node)
        order.insert(0, sm_node)
    lines = [
        "# ibsim net file written by smroute",
        f"# {fabric.n_nodes} nodes ({len(fabric.switches)} switches), {fabric.n_links} links",
    ]
    lines.extend(_records(fabric, order, ibsim=True))
    for ln in lines:
        if len(ln) > 255:
            raise FabricError(f"ibsim line longer than 255 characters: {ln[:60]}...")
    return lines


def ibsim_limits(fabric: Fabric) -> list[str]:
    """``ibsim`` options (``-N -S -P -L``) large enough for ``fabric``."""
    n_ports = int((fabric.num_ports.astype(np.int64) + 1).sum())
    top_lid = int(len(fabric.lid_to_port))
    return [
        "-N", str(max(2048, fabric.n_nodes)),
        "-S", str(max(256, len(fabric.switches))),
        "-P", str(max(256 * 36 + 2048 * 2, n_ports)),
        "-L", str(max(30 * 1024, (top_lid + 1023) // 1024 * 1024)),
    ]


def _write(lines: list[str], path: str | os.PathLike[str]) -> None:
    with atomic_writer(path) as fh:
        fh.write("\n".join(lines))
        fh.write("\n")


def write_topology(fabric: Fabric, path: str | os.PathLike[str], **kwargs: object) -> None:
    """Atomically write :func:`format_topology` to ``path``."""
    _write(format_topology(fabric, **kwargs), path)  # type: ignore[arg-type]


def write_ibsim_net(fabric: Fabric, path: str | os.PathLike[str], **kwargs: object) -> None:
    """Atomically write :func:`format_ibsim_net` to ``path``."""
    _write(format_ibsim_net(fabric, **kwargs), path)  # type: ignore[arg-type]
