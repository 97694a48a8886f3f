"""What :func:`smroute.fabric.export.slurm.slurm_topology` returns and the files it
writes: :class:`SlurmSwitch`, :class:`SlurmTopology` (``topology.conf`` for
``topology/tree``, ``topology.yaml``), :func:`check_block_sizes` and
:data:`TOPOLOGY_YAML_SCHEMA`.  Re-exported by :mod:`smroute.fabric.export.slurm`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from smroute.fabric.export.slurm_hostlist import hostlist
from smroute.fabric.export.slurm_names import MAX_NAME

__all__ = ["TOPOLOGY_YAML_SCHEMA", "SlurmSwitch", "SlurmTopology", "check_block_sizes",
           "GUID_NAME", "hostlist_of"]

#: The names made from a GUID (``ib-<node GUID>``, ``sw-<node GUID>``): listed
#: as they are, since the digits a hex GUID ends in are no number of a series.
GUID_NAME = re.compile(r"^(?:ib|sw)-[0-9a-f]{16}$")


def hostlist_of(names: Sequence[str]) -> str:
    """:func:`~smroute.fabric.export.slurm_hostlist.hostlist` of ``names``, the GUID
    names (:data:`GUID_NAME`) kept whole."""
    return hostlist(names, literal=GUID_NAME.match)

#: JSON schema of Slurm's ``topology.yaml`` written from ``topology.yaml(5)``
#: (Slurm 25.05): a list of topologies, each with a unique name, an optional
#: ``cluster_default`` and exactly one of ``tree`` / ``block`` / ``flat``.  A
#: switch lists child switches or nodes, never both (Slurm's tree plugin
#: refuses a switch with both, and one with neither); names are at most 64
#: characters; ``block_sizes`` ascend.  "``topology`` must be the first
#: attribute" is not expressible in JSON schema (:meth:`SlurmTopology.to_yaml`
#: writes it first).
_NAME_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_NAME,
                                "pattern": r"^[^\s,\[\]#=\"]+$"}
_HOSTLIST_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": r"^\S+$"}
TOPOLOGY_YAML_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Slurm topology.yaml",
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["topology"],
        "additionalProperties": False,
        "properties": {
            "topology": {"type": "string", "minLength": 1, "pattern": r"^\S+$"},
            "cluster_default": {"type": "boolean"},
            "tree": {
                "type": "object",
                "required": ["switches"],
                "additionalProperties": False,
                "properties": {
                    "switches": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["switch"],
                            "additionalProperties": False,
                            "properties": {
                                "switch": _NAME_SCHEMA,
                                "children": _HOSTLIST_SCHEMA,
                                "nodes": _HOSTLIST_SCHEMA,
                            },
                            "oneOf": [{"required": ["children"]}, {"required": ["nodes"]}],
                        },
                    },
                },
            },
            "block": {
                "type": "object",
                "required": ["blocks"],
                "additionalProperties": False,
                "properties": {
                    "block_sizes": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "integer", "minimum": 1},
                    },
                    "blocks": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["block", "nodes"],
                            "additionalProperties": False,
                            "properties": {"block": _NAME_SCHEMA, "nodes": _HOSTLIST_SCHEMA},
                        },
                    },
                },
            },
            "flat": {"const": True},
        },
        "oneOf": [
            {"required": ["tree"]},
            {"required": ["block"]},
            {"required": ["flat"]},
        ],
    },
}


@dataclass(frozen=True)
class SlurmSwitch:
    """One switch line: ``name``, the fabric node it stands for (-1 for a
    ``fabric`` root), its level (0 for switches that list nodes), child
    switch names, node names (natural order; never both), ``link_speed`` in
    Gb/s (0 unknown) and ``kind``: ``"switch"``, ``"hosts"`` (the host ports of
    an upper switch) or ``"fabric"`` (a root joining a connected part)."""

    name: str
    node: int
    level: int
    switches: tuple[str, ...]
    nodes: tuple[str, ...]
    link_speed: int
    kind: str = "switch"


@dataclass(frozen=True, eq=False)
class SlurmTopology:
    """Switches (level, then natural name order) and hosts of a fabric for
    Slurm (see :mod:`smroute.fabric.export.slurm`).

    hosts: Slurm node names, natural order; host_switch: per host, the name of
    the switch it is listed under; hca_host: ``(N,)`` int64 per fabric node,
    the index into ``hosts`` of the host an HCA belongs to (-1 for switches
    and left-out end-ports); split_hosts: hosts whose HCAs hang off several
    switches; generated: hosts named ``ib-<GUID>``; left_out: end-ports left
    out per reason; warnings: human-readable notes (generated names, split
    hosts, unused host-map entries).
    """

    switches: tuple[SlurmSwitch, ...]
    hosts: tuple[str, ...]
    host_switch: tuple[str, ...]
    hca_host: np.ndarray
    split_hosts: tuple[str, ...]
    generated: tuple[str, ...]
    left_out: dict[str, int]
    warnings: tuple[str, ...]

    def switch(self, name: str) -> SlurmSwitch:
        """The switch called ``name``; ``KeyError`` if none."""
        for s in self.switches:
            if s.name == name:
                return s
        raise KeyError(name)

    def conf_lines(self) -> list[str]:
        """``topology.conf`` lines, one per switch (no comments)."""
        out = []
        for s in self.switches:
            line = f"SwitchName={s.name} "
            line += f"Switches={hostlist_of(s.switches)}" if s.switches else \
                f"Nodes={hostlist_of(s.nodes)}"
            if s.link_speed > 0:
                line += f" LinkSpeed={s.link_speed}"
            out.append(line)
        return out

    def to_conf(self, source: str | None = None) -> str:
        """``topology.conf`` text for ``TopologyPlugin=topology/tree``:
        comment lines (source, counts), then :meth:`conf_lines`."""
        head = [
            "# Slurm topology.conf (TopologyPlugin=topology/tree), generated by smroute"
            + (f" from {source}" if source else ""),
            f"# {len(self.hosts)} nodes under {len(self.switches)} switches; "
            "LinkSpeed in Gb/s",
        ]
        return "\n".join(head + self.conf_lines()) + "\n"

    def yaml_doc(
        self, *, tree_name: str = "tree", block_name: str = "block",
        block_sizes: Sequence[int] | None = None,
    ) -> list[dict[str, Any]]:
        """The ``topology.yaml`` document: a ``tree`` topology (the cluster
        default) and a ``block`` topology with one block per switch that lists
        nodes, ``block_sizes`` if given."""
        sw: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        for s in self.switches:
            if s.switches:
                sw.append({"switch": s.name, "children": hostlist_of(s.switches)})
            else:
                sw.append({"switch": s.name, "nodes": hostlist_of(s.nodes)})
                blocks.append({"block": s.name, "nodes": hostlist_of(s.nodes)})
        block: dict[str, Any] = {}
        if block_sizes:
            block["block_sizes"] = [int(b) for b in block_sizes]
        block["blocks"] = blocks
        return [
            {"topology": tree_name, "cluster_default": True, "tree": {"switches": sw}},
            {"topology": block_name, "cluster_default": False, "block": block},
        ]

    def to_yaml(
        self, source: str | None = None, *, tree_name: str = "tree",
        block_name: str = "block", block_sizes: Sequence[int] | None = None,
    ) -> str:
        """``topology.yaml`` text of :meth:`yaml_doc` (comment lines first)."""
        import yaml

        head = ("# Slurm topology.yaml, generated by smroute"
                + (f" from {source}" if source else "") + "\n"
                f"# {len(self.hosts)} nodes under {len(self.switches)} switches\n")
        doc = self.yaml_doc(tree_name=tree_name, block_name=block_name, block_sizes=block_sizes)
        body: str = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1 << 20)
        return head + "---\n" + body


def check_block_sizes(sizes: Sequence[int]) -> None:
    """``ValueError`` unless ``sizes`` are positive and each is the previous
    one times a power of two larger than 1 (``topology.yaml(5)``)."""
    prev = 0
    for s in sizes:
        if s < 1:
            raise ValueError(f"block size {s} is not positive")
        if prev and (s <= prev or s % prev or (s // prev) & (s // prev - 1)):
            raise ValueError(f"block size {s} is not {prev} times a power of two")
        prev = s
