"""Putting any fabric into ibsim, and what the simulation saw (edge helpers of
:mod:`smroute.lab.sidebyside`).

Two ways into ibsim 0.10:

* the **capture itself**: ibsim reads plain ``ibnetdiscover`` text as a net
  file (it also skips ibdiagnet's port labels); OpenSM is attached to the CA
  :func:`sm_node` picks through ibsim's ``SIM_HOST`` (the record name
  ``"H-<node GUID>"``), the capture's LIDs are preset on the ports (OpenSM
  keeps the valid ones and reassigns the rest);
* a **written** net file (:func:`simulable` then
  :func:`~smroute.fabric.export.writers.write_ibsim_net`), for whatever the parser
  had to clean up (a ports report, noise lines) or ibsim could not read.

Either way :func:`discovery_gap` compares what ``ibnetdiscover`` finds in
the simulation with the parsed fabric, so a capture ibsim misread is noticed
(the runner then falls back to the written file) and nodes the subnet manager
cannot reach (a partitioned fabric) are reported, not silently dropped.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.summary import components

__all__ = [
    "strip_lids",
    "simulable",
    "sm_node",
    "sim_name",
    "capture_sim_host",
    "discovery_gap",
    "opensm_error",
]

_PREFIX = {int(NodeType.SWITCH): "S", int(NodeType.CA): "H", int(NodeType.ROUTER): "R"}
_ERR_RE = re.compile(r"\bERR [0-9A-F]{4}: (.*)$")
_ROUTE_RE = re.compile(r"building routing with '([^']+)' routing algorithm")
_INFO_RE = re.compile(r" 0x02 -> (?:\w+: )?(.*)$")
_LOG_TS_RE = re.compile(r"^\w{3}\s+\d{1,2} \d\d:\d\d:\d\d \d{6} ")
_LEVEL1_RE = re.compile(r" 0x01 -> \w+: (.*)$")


def strip_lids(f: Fabric) -> Fabric:
    """``f`` without LIDs/LMCs, so that OpenSM assigns every LID itself."""
    z16, z8 = np.zeros_like(f.port_lid), np.zeros_like(f.port_lmc)
    z16.setflags(write=False)
    z8.setflags(write=False)
    return dataclasses.replace(f, port_lid=z16, port_lmc=z8, _cache={})


def simulable(f: Fabric) -> Fabric:
    """``f`` as ibsim can represent it: LIDs stripped (:func:`strip_lids`),
    every CA/router port ``p`` with the GUID node GUID + ``p`` (what ibsim
    gives it whatever a capture says; real HCAs often have port GUID = node
    GUID) and ``=`` in node descriptions (which ibsim misparses as a port
    option) replaced by ``:``.  Node GUIDs, links, widths and speeds stay."""
    out = strip_lids(f)
    pg = np.array(f.port_guid, copy=True)
    end = np.isin(f.node_type[f.port_node], [int(NodeType.CA), int(NodeType.ROUTER)])
    rows = np.flatnonzero(end & (f.port_num > 0) & (pg != 0))
    pg[rows] = f.node_guid[f.port_node[rows]] + f.port_num[rows].astype(np.uint64)
    pg.setflags(write=False)
    desc = tuple(d.replace("=", ":") for d in f.node_desc)
    return dataclasses.replace(out, port_guid=pg, node_desc=desc, _cache={})


def _linked(f: Fabric) -> np.ndarray:
    linked = np.zeros(f.n_nodes, dtype=bool)
    linked[f.port_node[f.link_a]] = True
    linked[f.port_node[f.link_b]] = True
    return linked


def _labels(f: Fabric) -> np.ndarray:
    return components(f.n_nodes, f.port_node[f.link_a], f.port_node[f.link_b])


def sm_node(f: Fabric) -> int:
    """A CA node in the connected component holding the most CAs (where OpenSM
    and the diags attach), or the first node if there is no linked CA.

    ibsim attaches a client to a CA's port 1 (OpenSM on a down port sweeps
    until it times out), so a CA whose port 1 is linked is taken; if that
    component has none, one of its switches (a client there uses the switch's
    management port 0, which is always up)."""
    lab = _labels(f)
    cas = f.cas
    cas = cas[_linked(f)[cas]]
    if not len(cas):
        return 0
    vals, counts = np.unique(lab[cas], return_counts=True)
    best = vals[np.argmax(counts)]
    cas = cas[lab[cas] == best]
    p1 = f.port_start[cas] + 1
    up = (f.num_ports[cas] >= 1) & (f.port_peer[np.minimum(p1, f.n_ports - 1)] >= 0)
    if up.any():
        return int(cas[up][0])
    sw = f.switches[lab[f.switches] == best]
    return int(sw[0]) if len(sw) else int(cas[0])


def sm_part(f: Fabric) -> Fabric:
    """The part of ``f`` a subnet manager attached at :func:`sm_node` reaches
    (what ``ibnetdiscover`` finds there): ``f`` without the nodes of the
    other components, LIDs kept."""
    lab = _labels(f)
    return f.with_removed(nodes=np.flatnonzero(lab != lab[sm_node(f)]))


def sim_name(f: Fabric, node: int) -> str:
    """The record name ibnetdiscover gives ``node`` (``H-``/``S-``/``R-`` and
    the 16-digit node GUID), which ibsim's ``SIM_HOST`` selects."""
    return f"{_PREFIX.get(int(f.node_type[node]), 'H')}-{int(f.node_guid[node]):016x}"


def capture_sim_host(text: str, f: Fabric, node: int) -> str | None:
    """``SIM_HOST`` for attaching to ``node`` in a capture booted as is, or
    ``None`` if the capture does not name the node the usual way."""
    name = sim_name(f, node)
    return name if f'"{name}"' in text else None


def _census(f: Fabric, keep: np.ndarray) -> tuple[set[int], int, int]:
    """(switch node GUIDs, CA count, link count) of the nodes in ``keep``."""
    sw = {int(g) for g in f.node_guid[f.switches[keep[f.switches]]].tolist()}
    cas = int(keep[f.cas].sum())
    links = int(keep[f.port_node[f.link_a]].sum())
    return sw, cas, links


def discovery_gap(expected: Fabric, sm: int, disc: Fabric) -> tuple[str, str]:
    """Compare what ``ibnetdiscover`` found in the simulation (``disc``) with
    the component of ``expected`` that holds the SM's node ``sm``.

    Returns ``(mismatch, partition)``: ``mismatch`` is ``''`` when the
    switches (by node GUID), the CA count and the link count agree, else what
    differs; ``partition`` is ``''`` when that component is the whole linked
    fabric, else which part the subnet manager cannot reach.
    """
    lab = _labels(expected)
    comp = lab == lab[sm]
    e_sw, e_ca, e_links = _census(expected, comp)
    d_sw, d_ca, d_links = _census(disc, np.ones(disc.n_nodes, dtype=bool))
    diffs = []
    if e_sw != d_sw:
        diffs.append(f"{len(d_sw - e_sw)} switches more and {len(e_sw - d_sw)} fewer")
    if e_ca != d_ca:
        diffs.append(f"{d_ca} CAs instead of {e_ca}")
    if e_links != d_links:
        diffs.append(f"{d_links} links instead of {e_links}")
    mismatch = ("the simulated fabric differs from the input: " + ", ".join(diffs)
                if diffs else "")
    linked = _linked(expected)
    rest = linked & ~comp
    partition = ""
    if rest.any():
        n_parts = len(np.unique(lab[rest]))
        n_sw = int(rest[expected.switches].sum())
        n_ca = int(rest[expected.cas].sum())
        partition = (f"{n_sw} switches and {n_ca} CAs in {n_parts} other physically "
                     f"disconnected part{'s' if n_parts != 1 else ''} of the fabric, "
                     "which a subnet manager attached here cannot reach")
    return mismatch, partition


def opensm_error(log: str | Path, engine: str) -> str:
    """Why OpenSM gave up on ``engine``, from its log: the first ``ERR XXXX:``
    message logged while building routing with it (with its first
    continuation line when it ends in ``:``), else its first info-level
    notice (updn: "disabling UPDN algorithm, no root nodes were found"), else
    its first error-level line; ``''`` if none."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    section: list[str] = []
    inside = False
    for line in lines:
        m = _ROUTE_RE.search(line)
        if m:
            if inside:
                break
            inside = m.group(1) == engine
        elif inside:
            section.append(line)
    for i, line in enumerate(section):
        e = _ERR_RE.search(line)
        if e:
            msg = f"ERR {line[e.start() + 4:e.start() + 8]}: {e.group(1).strip()}"
            nxt = section[i + 1].strip() if i + 1 < len(section) else ""
            if msg.endswith(":") and nxt and not _LOG_TS_RE.match(nxt):
                msg += f" {nxt} ..."
            return msg
    for pick in (_INFO_RE, _LEVEL1_RE):
        for line in section:
            d = pick.search(line)
            if d:
                return d.group(1).strip()
    return ""
