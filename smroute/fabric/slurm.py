"""Slurm's network topology from the fabric's roles: ``topology.conf`` for the
``topology/tree`` plugin and ``topology.yaml`` (Slurm 24.11+: ``tree`` and
``block`` topologies).

Pure: :func:`slurm_topology` takes a :class:`~smroute.fabric.model.Fabric`
(and its :class:`~smroute.fabric.roles.FabricRoles`) and returns a
:class:`SlurmTopology`, whose :meth:`~SlurmTopology.to_conf` and
:meth:`~SlurmTopology.to_yaml` give the files' text.  Deterministic.

**Hosts.**  The end-ports of the roles ``include`` (default: every host role:
compute, service, storage, management, I/O) are Slurm nodes; SHARP
aggregation nodes, other switch-embedded CAs (a CA whose node GUID is its
switch's but for the low byte, or which shares its switch's system image GUID)
and routers are left out.  A host is named, per HCA, by the first of:

1. a ``host_map`` entry for the HCA's node GUID or one of its port GUIDs;
2. a ``host_map`` entry for its whole node description, or for the name
   derived from it;
3. the name derived from its node description: with ``name_regex``, the
   regex's group ``host`` (else its first group, else the whole match); by
   default the description's first word (``"a08-p1-dgx-04-c01 mlx5_5"`` gives
   ``a08-p1-dgx-04-c01``), unless the description is a vendor default
   (``"MT4129 ConnectX7   Mellanox Technologies"``, empty, ``localhost``).

A derived name must be a host name Slurm can use (letters, digits, ``.``,
``_``, ``-``; starting with a letter or digit; at most :data:`MAX_NAME`
characters).  HCAs with no usable name either get a generated name,
``ib-<node GUID>`` (one Slurm node per HCA), with a warning
(``unnamed="generate"``, the default), or make :func:`slurm_topology` raise
:class:`~smroute.errors.InputError` naming them (``unnamed="error"``).

HCAs with the same name are one Slurm node (a DGX's eight HCAs).  **A host whose
HCAs hang off several switches** (rail-optimized DGX pods, dual-rail hosts) is
placed on one of them, since Slurm's tree plugin wants every node under exactly
one leaf ("Multiple leaf switches contain nodes" otherwise): the switch with
most of its HCAs, then the lowest rank (a leaf before a spine), then the switch
of its first HCA in the natural order of the descriptions (``mlx5_0`` /
``HCA-1``: in a rail-optimized pod every host lands on its rail-0 leaf, so the
hosts of a scalable unit stay together).  The result counts them and a warning
names one.

**Switches.**  A switch's name comes from its description: ``MF0;NAME:MODEL/U1``
gives ``NAME``, a Voltaire ``"... # NAME"`` gives ``NAME``, a one-word
description is kept; vendor text (``"Quantum Mellanox Technologies"``) gives
``sw-<node GUID>``; a ``host_map`` entry for the switch's GUID wins.  Names are
sanitized to Slurm's limits (letters, digits, ``.``, ``_``, ``-``; at most
:data:`MAX_NAME` characters) and made unique by appending ``-<node GUID>``.

**Tree.**  One line per switch that has hosts below it: a switch that carries
hosts lists them (``Nodes=``); a switch of rank ``r > 0`` lists its linked
switches of rank ``r - 1`` (``Switches=``; a spine lists every leaf it is
cabled to, so a leaf has as many parents as spines).  Slurm refuses a switch
with both child switches and nodes, so hosts cabled to an upper switch are
listed by a switch ``<name>-hosts`` that stands for the upper switch's host
ports and is one of its children: they stay under the switch they are cabled
to.  Switches with no host below them (unranked ones, ones above only
aggregation nodes) are left out.  When no switch of a connected part of the
fabric reaches all of that part's hosts (leaves cabled to each other, degraded
trees), a switch ``fabric`` (``fabric2``, ...) lists the part's top switches,
so that Slurm lets jobs span the part as the cables do; parts of the fabric
that no cable joins stay separate trees.

``LinkSpeed=`` is the nominal data rate in Gb/s (4x NDR = 400, 4x HDR = 200,
4x EDR = 100) most common on the switch's cables to the children it lists;
omitted when the capture gives no speed.  Slurm does not use it.

**topology.yaml**: a list of topologies (``topology``, ``cluster_default``,
then one of ``tree`` / ``block`` / ``flat``); the ``tree`` entry has the
switches above as ``{switch, children, nodes}`` (hostlist strings), the
``block`` entry one block per switch that lists nodes (``{block, nodes}``) and
optionally ``block_sizes``.  :data:`TOPOLOGY_YAML_SCHEMA` is a JSON schema
written from Slurm's ``topology.yaml(5)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from smroute.errors import InputError
from smroute.fabric.graph import components
from smroute.fabric.model import Fabric, NodeType
from smroute.fabric.roles import EndportRole, FabricRoles, fabric_roles, switch_links

__all__ = [
    "MAX_NAME",
    "HOST_ROLES",
    "LANE_GBPS",
    "TOPOLOGY_YAML_SCHEMA",
    "HostMap",
    "SlurmSwitch",
    "SlurmTopology",
    "parse_host_map",
    "read_host_map",
    "hostlist",
    "expand_hostlist",
    "natural_key",
    "slurm_topology",
    "check_block_sizes",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Longest switch or node name Slurm takes (``topology.yaml(5)``: "cannot be
#: longer than 64 characters"; ``MAX_SLURM_NAME``).
MAX_NAME = 64
#: End-port roles that are hosts (Slurm node candidates).
HOST_ROLES: tuple[EndportRole, ...] = (
    EndportRole.COMPUTE, EndportRole.SERVICE, EndportRole.STORAGE,
    EndportRole.MANAGEMENT, EndportRole.IO,
)
#: Nominal data rate per lane in Gb/s, index = speed code of
#: :data:`smroute.fabric.model.SPEEDS` (4x of each is the marketed link rate).
LANE_GBPS: tuple[float, ...] = (0.0, 2.5, 5.0, 10.0, 10.0, 14.0, 25.0, 50.0, 100.0, 200.0)

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VENDOR_DESC = re.compile(
    r"^\s*$|^\s*(MT\d+|localhost|\(none\))(\s|$)|Mellanox Technologies|QLogic|Voltaire",
    re.IGNORECASE)
_MF0 = re.compile(r"^\s*MF0;([^:]+)")
_HASH_NAME = re.compile(r"#\s*(\S+)\s*$")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_SPLIT_NUM = re.compile(r"^(.*[^0-9])([0-9]{1,18})$")
_DIGITS = re.compile(r"(\d+)")

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


# ----------------------------------------------------------------- host lists
def natural_key(name: str) -> tuple[object, ...]:
    """Sort key comparing digit runs as numbers (``n2`` before ``n10``); ties
    (``n01`` / ``n1``) broken by the text itself."""
    parts: list[object] = []
    for i, tok in enumerate(_DIGITS.split(name)):
        parts.append(int(tok) if i % 2 else tok)
    return (tuple(parts), name)


def hostlist(names: Iterable[str]) -> str:
    """Slurm hostlist expression of ``names`` (duplicates dropped): names that
    end in a number (at most 18 digits, after a non-digit) are grouped by the
    text before it (and, for zero-padded numbers and others as wide, their
    width) into
    ``prefix[lo-hi,...]`` ranges of consecutive numbers, each written so that
    Slurm's parser (width of the lower bound) gives the names back; others are
    listed as they are.  Groups appear in the
    natural order of their first name.  ``expand_hostlist`` (and Slurm's
    parser) gives the names back."""
    uniq = sorted(set(names), key=natural_key)
    if not uniq:
        return ""
    keys: list[tuple[str, int]] = []
    nums = np.full(len(uniq), -1, dtype=np.int64)
    split = [_SPLIT_NUM.match(nm) for nm in uniq]
    padded = {(m.group(1), len(m.group(2))) for m in split
              if m and m.group(2)[0] == "0" and len(m.group(2)) > 1}
    for i, (nm, m) in enumerate(zip(uniq, split, strict=True)):
        if m:
            d = m.group(2)
            # zero-padded numbers, and others as wide, group by width (n[08-12]);
            # the rest of any width together (n[8-12])
            wide = (m.group(1), len(d))
            keys.append(wide if wide in padded else (m.group(1), 0))
            nums[i] = int(d)
        else:
            keys.append((nm, -1))
    # group ids in order of first appearance
    gid: dict[tuple[str, int], int] = {}
    g = np.fromiter((gid.setdefault(k, len(gid)) for k in keys), dtype=np.int64, count=len(keys))
    order = np.lexsort((nums, g))
    gs, ns = g[order], nums[order]
    new_run = np.ones(len(order), dtype=bool)
    new_run[1:] = (gs[1:] != gs[:-1]) | (ns[1:] != ns[:-1] + 1) | (ns[1:] < 0)
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(order)) - 1
    run_group = gs[starts]
    out: list[str] = []
    groups = list(gid)
    for gi in range(len(groups)):
        prefix, width = groups[gi]
        runs = np.flatnonzero(run_group == gi)
        width = max(width, 1)
        if groups[gi][1] < 0:
            out.append(prefix)
            continue
        if len(runs) == 1 and starts[runs[0]] == ends[runs[0]]:
            out.append(f"{prefix}{int(ns[starts[runs[0]]]):0{width}d}")
            continue
        parts = []
        for r in runs.tolist():
            lo, hi = int(ns[starts[r]]), int(ns[ends[r]])
            parts.append(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}")
        out.append(f"{prefix}[{','.join(parts)}]")
    return ",".join(out)


def expand_hostlist(expr: str) -> list[str]:
    """The names of a Slurm hostlist expression (``a[01-03,7],b``): ranges take
    the width of their lower bound, as Slurm's parser does.  Raises
    ``ValueError`` on unbalanced or nested brackets."""
    out: list[str] = []
    depth, start = 0, 0
    tokens: list[str] = []
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested brackets in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced brackets in hostlist {expr!r}")
        elif ch == "," and depth == 0:
            tokens.append(expr[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced brackets in hostlist {expr!r}")
    tokens.append(expr[start:])
    for tok in (t.strip() for t in tokens):
        if not tok:
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]*)\]([^\[\]]*)", tok)
        if not m:
            if "[" in tok or "]" in tok:
                raise ValueError(f"bad hostlist element {tok!r}")
            out.append(tok)
            continue
        prefix, body, suffix = m.groups()
        for rng in body.split(","):
            lo_s, _, hi_s = rng.partition("-")
            if not lo_s.isdigit() or (hi_s and not hi_s.isdigit()):
                raise ValueError(f"bad range {rng!r} in hostlist {expr!r}")
            lo, hi, w = int(lo_s), int(hi_s or lo_s), len(lo_s)
            if hi < lo:
                raise ValueError(f"descending range {rng!r} in hostlist {expr!r}")
            out.extend(f"{prefix}{v:0{w}d}{suffix}" for v in range(lo, hi + 1))
    return out


# ------------------------------------------------------------------- host map
@dataclass(frozen=True)
class HostMap:
    """Operator-given Slurm names: by node or port GUID, and by node
    description (or the host name derived from it).  A GUID of a switch names
    the switch."""

    by_guid: dict[int, str] = field(default_factory=dict)
    by_desc: dict[str, str] = field(default_factory=dict)
    source: str = "<host map>"

    def __bool__(self) -> bool:
        return bool(self.by_guid or self.by_desc)


def _check_name(name: str, what: str) -> str | None:
    """Why ``name`` is no usable Slurm name (``None`` if it is)."""
    if len(name) > MAX_NAME:
        return f"{what} {name[:80]!r} is longer than {MAX_NAME} characters"
    if not _NAME_OK.match(name):
        return (f"{what} {name[:80]!r} is not a Slurm name (letters, digits, '.', '_', '-'; "
                "starting with a letter or digit)")
    return None


def parse_host_map(lines: Iterable[str] | str, source: str = "<host map>") -> HostMap:
    """A host map: one ``KEY NAME`` per line, ``NAME`` the last word and
    ``KEY`` the rest: a ``0x``-prefixed node or port GUID, or a node
    description (whole, or the host name derived from it; a description
    with ``#`` in it is written in double quotes).  Blank lines are ignored;
    ``#`` starts a comment at the start of a line or after a blank.
    :class:`InputError` names a bad line or a key given twice."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    by_guid: dict[int, str] = {}
    by_desc: dict[str, str] = {}
    for no, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith('"'):
            end = text.find('"', 1)
            if end < 0:
                raise InputError("unterminated quoted description", source=source, line=no)
            key, name = text[1:end], re.split(r"\s#", text[end + 1:], maxsplit=1)[0].strip()
            if not name or len(name.split()) != 1:
                raise InputError(f"expected one node name after the quoted description, got "
                                 f"{name[:80]!r}", source=source, line=no)
        else:
            m = re.match(r"^(.*?\S)\s+(\S+)$", re.split(r"\s#", text, maxsplit=1)[0].strip())
            if not m:
                raise InputError(f"expected 'KEY NAME' (a GUID or node description, then the "
                                 f"Slurm node name), got {text[:80]!r}", source=source, line=no)
            key, name = m.group(1), m.group(2)
        why = _check_name(name, "node name")
        if why:
            raise InputError(why, source=source, line=no)
        if re.fullmatch(r"0[xX][0-9a-fA-F]{1,16}", key):
            g = int(key, 16)
            if g in by_guid:
                raise InputError(f"GUID {key} given twice", source=source, line=no)
            by_guid[g] = name
        else:
            if key in by_desc:
                raise InputError(f"description {key[:80]!r} given twice", source=source, line=no)
            by_desc[key] = name
    return HostMap(by_guid=by_guid, by_desc=by_desc, source=source)


def read_host_map(path: str | os.PathLike[str]) -> HostMap:
    """:func:`parse_host_map` of a file."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_host_map(fh, str(path))


def _guid_names(f: Fabric, nodes: IntArray, hmap: HostMap) -> list[str | None]:
    """Per node of ``nodes``: the host map's name for its node GUID, else for
    its first listed port GUID, else ``None``."""
    out: list[str | None] = [None] * len(nodes)
    if not hmap.by_guid or not len(nodes):
        return out
    keys = np.fromiter(hmap.by_guid, dtype=np.uint64, count=len(hmap.by_guid))
    vals = list(hmap.by_guid.values())
    order = np.argsort(keys)
    keys = keys[order]

    def find(g: np.ndarray) -> IntArray:
        i = np.minimum(np.searchsorted(keys, g), len(keys) - 1)
        return np.where(keys[i] == g, order[i], -1).astype(np.int64)

    hit = find(f.node_guid[nodes])
    # port GUIDs: rows of the nodes' ports
    counts = f.num_ports[nodes].astype(np.int64) + 1
    rows = np.repeat(f.port_start[nodes], counts) + (
        np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
    owner = np.repeat(np.arange(len(nodes)), counts)
    ok = f.port_exists[rows] & (f.port_guid[rows] != 0)
    phit = find(f.port_guid[rows[ok]])
    pown = owner[ok]
    first_port = np.full(len(nodes), -1, dtype=np.int64)
    sel = phit >= 0
    first_port[pown[sel][::-1]] = phit[sel][::-1]
    best = np.where(hit >= 0, hit, first_port)
    for i in np.flatnonzero(best >= 0).tolist():
        out[i] = vals[int(best[i])]
    return out


# ---------------------------------------------------------------- the result
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
    Slurm (see the module doc).

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
            line += f"Switches={hostlist(s.switches)}" if s.switches else \
                f"Nodes={hostlist(s.nodes)}"
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
                sw.append({"switch": s.name, "children": hostlist(s.switches)})
            else:
                sw.append({"switch": s.name, "nodes": hostlist(s.nodes)})
                blocks.append({"block": s.name, "nodes": hostlist(s.nodes)})
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


# ------------------------------------------------------------------ the build
def _derived_names(
    descs: Sequence[str], name_regex: re.Pattern[str] | None,
) -> list[str | None]:
    """Per description, the host name derived from it (``None`` if none)."""
    out: list[str | None] = []
    grp: int | str = 0
    if name_regex is not None:
        grp = "host" if "host" in name_regex.groupindex else (1 if name_regex.groups else 0)
    for d in descs:
        name: str | None
        if name_regex is not None:
            m = name_regex.search(d)
            name = m.group(grp) if m else None
        else:
            name = None if _VENDOR_DESC.search(d) else d.split(None, 1)[0]
        if name is not None and _check_name(name, "name") is not None:
            name = None
        out.append(name)
    return out


def _switch_base_name(desc: str, guid: int) -> str:
    """A switch's name from its description (module doc), sanitized."""
    m = _MF0.match(desc)
    cand: str | None = None
    if m:
        cand = m.group(1).strip()
    elif (h := _HASH_NAME.search(desc)) is not None:
        cand = h.group(1)
    elif desc.strip() and len(desc.split()) == 1:
        cand = desc.strip()
    if cand is not None:
        cand = _BAD_CHARS.sub("-", cand).strip("-._")[:MAX_NAME]
    return cand or f"sw-{guid:016x}"


def _unique_names(names: list[str], guids: Sequence[int]) -> list[str]:
    """Names made unique: a name used twice gets ``-<GUID>`` appended (the
    base cut to fit :data:`MAX_NAME`); a last resort appends a counter."""
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    out = []
    for n, g in zip(names, guids, strict=True):
        if seen[n] > 1:
            suffix = f"-{g:016x}"
            n = n[: MAX_NAME - len(suffix)] + suffix
        out.append(n)
    used: set[str] = set()
    for i, n in enumerate(out):
        k = 2
        base = n
        while n in used:
            suffix = f"-{k}"
            n = base[: MAX_NAME - len(suffix)] + suffix
            k += 1
        out[i] = n
        used.add(n)
    return out


def _embedded(f: Fabric, ep: IntArray, att: IntArray) -> BoolArray:
    """End-ports built into their switch: the switch's node GUID but for the
    low byte, or the switch's (non-zero) system image GUID."""
    sw = np.maximum(att, 0)
    same = (f.node_guid[ep] >> np.uint64(8)) == (f.node_guid[sw] >> np.uint64(8))
    sysimg = (f.sysimg_guid[ep] != 0) & (f.sysimg_guid[ep] == f.sysimg_guid[sw])
    return (att >= 0) & (f.node_type[ep] == NodeType.CA) & (same | sysimg)


def _link_rates(f: Fabric) -> tuple[IntArray, IntArray, IntArray]:
    """Per link: node at each end and the nominal rate in Gb/s (0 unknown)."""
    la, lb = f.link_a, f.link_b
    w = np.where(f.port_width[la] > 0, f.port_width[la], f.port_width[lb]).astype(np.float64)
    s = np.where(f.port_speed[la] > 0, f.port_speed[la], f.port_speed[lb]).astype(np.int64)
    rate = np.floor(w * np.asarray(LANE_GBPS)[s] + 0.5).astype(np.int64)
    return f.port_node[la].astype(np.int64), f.port_node[lb].astype(np.int64), rate


def _mode_rate(group: IntArray, rate: IntArray, n_groups: int) -> IntArray:
    """Per group, the most common positive rate (the higher on a tie; 0 if none)."""
    out = np.zeros(n_groups, dtype=np.int64)
    ok = rate > 0
    if not ok.any():
        return out
    g, r = group[ok], rate[ok]
    key, cnt = np.unique(g * (1 << 20) + r, return_counts=True)
    kg, kr = key >> 20, key & ((1 << 20) - 1)
    o = np.lexsort((kr, cnt, kg))  # last per group: most common, then highest
    last = np.ones(len(o), dtype=bool)
    last[:-1] = kg[o][1:] != kg[o][:-1]
    out[kg[o][last]] = kr[o][last]
    return out


def slurm_topology(
    fabric: Fabric,
    roles: FabricRoles | None = None,
    *,
    host_map: HostMap | None = None,
    name_regex: str | re.Pattern[str] | None = None,
    unnamed: str = "generate",
    include: Collection[EndportRole] = HOST_ROLES,
) -> SlurmTopology:
    """Slurm's view of ``fabric`` (see the module doc).

    ``roles`` default to :func:`~smroute.fabric.roles.fabric_roles`;
    ``host_map`` names hosts (and switches) by GUID or description;
    ``name_regex`` derives host names from descriptions instead of the first
    word; ``unnamed``: ``"generate"`` (``ib-<GUID>`` and a warning) or
    ``"error"`` (:class:`InputError`) for HCAs without a name; ``include``: the
    end-port roles that are Slurm nodes (aggregation nodes and routers never
    are).  :class:`InputError` if no host is left.
    """
    if unnamed not in ("generate", "error"):
        raise ValueError(f"unnamed must be 'generate' or 'error', not {unnamed!r}")
    f = fabric
    r = roles if roles is not None else fabric_roles(f)
    hmap = host_map or HostMap()
    rx = re.compile(name_regex) if isinstance(name_regex, str) else name_regex
    n = f.n_nodes
    is_sw = f.node_type == NodeType.SWITCH
    warnings: list[str] = []

    # ---- which end-ports are hosts
    ep = np.flatnonzero(r.endport_role >= 0)
    role = r.endport_role[ep].astype(np.int64)
    att = r.attach[ep]
    agg = role == EndportRole.AGGREGATION
    router = role == EndportRole.ROUTER
    emb = _embedded(f, ep, att) & ~agg
    wanted = np.isin(role, [int(x) for x in include if x not in (
        EndportRole.AGGREGATION, EndportRole.ROUTER)])
    keep = wanted & ~agg & ~router & ~emb
    left_out = {
        "aggregation": int(agg.sum()), "embedded": int(emb.sum()), "router": int(router.sum()),
        "role": int((~wanted & ~agg & ~router & ~emb).sum()),
    }
    hca = ep[keep]
    hatt = att[keep]
    if not len(hca):
        raise InputError("no host to place: the fabric has no end-port of the included roles "
                         f"({', '.join(EndportRole(int(x)).name.lower() for x in include)}) "
                         "other than aggregation nodes, switch-embedded CAs and routers")

    # ---- names
    descs = [f.node_desc[i] for i in hca.tolist()]
    names: list[str | None] = _guid_names(f, hca, hmap)
    derived = _derived_names(descs, rx)
    used_desc: set[str] = set()
    for i, nm in enumerate(names):
        if nm is not None:
            continue
        d, dn = descs[i], derived[i]
        if d in hmap.by_desc:
            names[i] = hmap.by_desc[d]
            used_desc.add(d)
        elif dn is not None and dn in hmap.by_desc:
            names[i] = hmap.by_desc[dn]
            used_desc.add(dn)
        else:
            names[i] = dn
    missing = [i for i, nm in enumerate(names) if nm is None]
    generated: list[str] = []
    if missing:
        eg = "; ".join(f.describe_node(int(hca[i])) for i in missing[:3])
        if unnamed == "error":
            raise InputError(
                f"{len(missing)} host(s) have no usable host name in their node description "
                f"(e.g. {eg}); name them in a host map (--host-map: 'GUID NAME' lines), derive "
                "names with --name-regex, or let them be named ib-<GUID> (--unnamed generate)")
        for i in missing:
            names[i] = f"ib-{int(f.node_guid[hca[i]]):016x}"
            generated.append(names[i])  # type: ignore[arg-type]
        warnings.append(
            f"{len(missing)} host(s) have no usable host name in their node description "
            f"(e.g. {eg}): named ib-<node GUID>, one Slurm node per HCA; name them with a "
            "host map (--host-map) or --name-regex")
    host_names_arr = np.array(names, dtype=object)
    uniq_names, hid = np.unique(host_names_arr, return_inverse=True)
    hid = hid.astype(np.int64).reshape(-1)
    n_hosts = len(uniq_names)

    # ---- placement: most HCAs, then lowest rank, then the first HCA's switch
    hca_order = np.empty(len(hca), dtype=np.int64)
    hca_order[sorted(range(len(hca)), key=lambda i: (natural_key(descs[i]),
                                                      int(f.node_guid[hca[i]])))] = \
        np.arange(len(hca))
    pair_key, pair_inv, pair_cnt = np.unique(hid * n + hatt, return_inverse=True,
                                             return_counts=True)
    pair_inv = pair_inv.reshape(-1)
    pair_host, pair_sw = pair_key // n, pair_key % n
    pair_first = np.full(len(pair_key), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(pair_first, pair_inv, hca_order)
    sw_rank = r.rank[pair_sw]
    rank_key = np.where(sw_rank < 0, np.iinfo(np.int32).max, sw_rank)
    o = np.lexsort((pair_first, rank_key, -pair_cnt, pair_host))
    first = np.ones(len(o), dtype=bool)
    first[1:] = pair_host[o][1:] != pair_host[o][:-1]
    host_sw = np.empty(n_hosts, dtype=np.int64)
    host_sw[pair_host[o][first]] = pair_sw[o][first]
    n_pairs = np.bincount(pair_host, minlength=n_hosts)
    split = np.flatnonzero(n_pairs > 1)

    # ---- which switches: those with a host below them
    a, b, loop = switch_links(f)
    la, lb = a[~loop], b[~loop]
    rank = r.rank
    src, dst = np.concatenate([la, lb]), np.concatenate([lb, la])
    ce = (rank[src] > 0) & (rank[dst] >= 0) & (rank[src] == rank[dst] + 1)
    edges = np.unique(src[ce] * n + dst[ce])
    par, chi = edges // n, edges % n
    carrier = np.zeros(n, dtype=bool)
    carrier[host_sw] = True
    has = carrier.copy()
    for rr in range(1, r.max_rank + 1):
        sel = rank[par] == rr
        np.logical_or.at(has, par[sel], has[chi[sel]])
    keep_e = has[par] & has[chi]
    par, chi = par[keep_e], chi[keep_e]
    emitted = np.flatnonzero(is_sw & has)
    with_children = np.zeros(n, dtype=bool)
    with_children[par] = True
    pseudo_of = np.flatnonzero(carrier & with_children)  # upper switches with hosts

    # ---- names of switches
    sw_map = _guid_names(f, emitted, hmap) if hmap.by_guid else [None] * len(emitted)
    base = [m if m is not None else _switch_base_name(f.node_desc[s], int(f.node_guid[s]))
            for s, m in zip(emitted.tolist(), sw_map, strict=True)]
    idx_of = np.full(n, -1, dtype=np.int64)
    idx_of[emitted] = np.arange(len(emitted))
    pseudo_base = [base[int(idx_of[s])][: MAX_NAME - 6] + "-hosts" for s in pseudo_of.tolist()]
    all_names = _unique_names(
        base + pseudo_base,
        [int(g) for g in f.node_guid[emitted]] + [int(g) for g in f.node_guid[pseudo_of]])
    sw_name = {int(s): all_names[i] for i, s in enumerate(emitted.tolist())}
    holder_name = dict(sw_name)  # switch node -> name of the line listing its hosts
    for j, s in enumerate(pseudo_of.tolist()):
        holder_name[int(s)] = all_names[len(emitted) + j]

    # ---- link speeds
    na, nb, rate = _link_rates(f)
    kept_hca = np.zeros(n, dtype=bool)
    kept_hca[hca] = True
    # host cables: the switch end of each link to a kept HCA
    h_sw = np.concatenate([na[kept_hca[nb] & is_sw[na]], nb[kept_hca[na] & is_sw[nb]]])
    h_rate = np.concatenate([rate[kept_hca[nb] & is_sw[na]], rate[kept_hca[na] & is_sw[nb]]])
    host_speed = _mode_rate(h_sw, h_rate, n)
    # switch cables to listed children
    child_pair = np.zeros(0, dtype=np.int64) if not len(par) else np.unique(par * n + chi)
    lk1, lk2 = na * n + nb, nb * n + na
    m1 = np.isin(lk1, child_pair)
    m2 = np.isin(lk2, child_pair)
    d_sw = np.concatenate([na[m1], nb[m2]])
    d_rate = np.concatenate([rate[m1], rate[m2]])
    down_speed = _mode_rate(d_sw, d_rate, n)

    # ---- hosts per holder
    order_h = sorted(range(n_hosts), key=lambda i: natural_key(str(uniq_names[i])))
    hosts_of: dict[int, list[str]] = {}
    for i in order_h:
        hosts_of.setdefault(int(host_sw[i]), []).append(str(uniq_names[i]))

    lines: list[SlurmSwitch] = []
    children_of: dict[int, list[str]] = {}
    for p, c in zip(par.tolist(), chi.tolist(), strict=True):
        children_of.setdefault(p, []).append(sw_name[c])
    for s in emitted.tolist():
        lvl = int(rank[s]) if rank[s] >= 0 else 0
        if s in children_of:
            kids = list(children_of[s])
            if carrier[s]:
                kids.append(holder_name[s])
                lines.append(SlurmSwitch(holder_name[s], s, 0, (), tuple(hosts_of[s]),
                                         int(host_speed[s]), "hosts"))
            lines.append(SlurmSwitch(sw_name[s], s, lvl, tuple(sorted(kids, key=natural_key)),
                                     (), int(down_speed[s])))
        else:
            lines.append(SlurmSwitch(sw_name[s], s, lvl, (), tuple(hosts_of[s]),
                                     int(host_speed[s])))

    # ---- a root for each connected part no switch covers
    lines += _fabric_roots(f, lines, la, lb)
    lines.sort(key=lambda s: (s.level, natural_key(s.name)))

    if len(split):
        h = int(split[0])
        others = sorted({sw_name.get(s) or _switch_base_name(f.node_desc[s], int(f.node_guid[s]))
                         for s in pair_sw[pair_host == h].tolist()}
                        - {holder_name[int(host_sw[h])]}, key=natural_key)
        warnings.append(
            f"{len(split)} host(s) have HCAs on several switches; each is listed under the "
            "switch with most of its HCAs (a leaf first, then its first HCA's), e.g. "
            f"{uniq_names[h]} under {holder_name[int(host_sw[h])]}, not {', '.join(others[:4])}"
            + (" ..." if len(others) > 4 else ""))
    unused = [k for k in hmap.by_desc if k not in used_desc]
    used_g = set(int(g) for g in f.node_guid) | set(int(g) for g in f.port_guid[f.port_exists])
    unused_g = [g for g in hmap.by_guid if g not in used_g]
    if unused or unused_g:
        eg2 = [f"{g:#018x}" for g in unused_g[:2]] + [repr(k) for k in unused[:2]]
        warnings.append(f"{hmap.source}: {len(unused) + len(unused_g)} entries match no host "
                        f"(e.g. {', '.join(eg2)})")

    hca_host = np.full(n, -1, dtype=np.int64)
    rank_of_name = np.empty(n_hosts, dtype=np.int64)
    rank_of_name[np.array(order_h, dtype=np.int64)] = np.arange(n_hosts)
    hca_host[hca] = rank_of_name[hid]
    return SlurmTopology(
        switches=tuple(lines),
        hosts=tuple(str(uniq_names[i]) for i in order_h),
        host_switch=tuple(holder_name[int(host_sw[i])] for i in order_h),
        hca_host=hca_host,
        split_hosts=tuple(sorted((str(uniq_names[i]) for i in split.tolist()), key=natural_key)),
        generated=tuple(sorted(generated, key=natural_key)),
        left_out=left_out,
        warnings=tuple(warnings),
    )


def _fabric_roots(
    f: Fabric, lines: list[SlurmSwitch], la: IntArray, lb: IntArray,
) -> list[SlurmSwitch]:
    """Synthetic ``fabric`` switches: one per connected part of the fabric in
    which no switch reaches all of the part's node-listing switches."""
    if not lines:
        return []
    names = [s.name for s in lines]
    pos = {nm: i for i, nm in enumerate(names)}
    holders = np.array([i for i, s in enumerate(lines) if s.nodes], dtype=np.int64)
    hpos = np.full(len(lines), -1, dtype=np.int64)
    hpos[holders] = np.arange(len(holders))
    cover = np.zeros((len(lines), len(holders)), dtype=bool)
    cover[holders, np.arange(len(holders))] = True
    # children edges between lines, processed by level
    pe, ce = [], []
    for i, s in enumerate(lines):
        for c in s.switches:
            pe.append(i)
            ce.append(pos[c])
    par, chi = np.array(pe, dtype=np.int64), np.array(ce, dtype=np.int64)
    level = np.array([s.level for s in lines], dtype=np.int64)
    for lv in range(1, int(level.max()) + 1 if len(level) else 1):
        sel = level[par] == lv
        np.logical_or.at(cover, par[sel], cover[chi[sel]])
    # physical parts: components of the switch graph, through each line's switch
    comp = components(f.n_nodes, la, lb)
    line_node = np.array([s.node for s in lines], dtype=np.int64)
    line_comp = comp[line_node]
    has_parent = np.zeros(len(lines), dtype=bool)
    has_parent[chi] = True
    out: list[SlurmSwitch] = []
    used = set(names)
    for cpt in np.unique(line_comp[holders]).tolist():
        in_c = line_comp == cpt
        hcols = hpos[np.flatnonzero(in_c & (hpos >= 0))]
        if cover[np.ix_(np.flatnonzero(in_c), hcols)].all(axis=1).any():
            continue
        tops = [names[i] for i in np.flatnonzero(in_c & ~has_parent).tolist()]
        k = len(out) + 1
        nm = "fabric" if k == 1 else f"fabric{k}"
        while nm in used:
            k += 1
            nm = f"fabric{k}"
        used.add(nm)
        lvl = int(level[in_c].max()) + 1
        out.append(SlurmSwitch(nm, -1, lvl, tuple(sorted(tops, key=natural_key)), (), 0,
                               "fabric"))
    return out
