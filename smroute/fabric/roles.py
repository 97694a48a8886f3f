"""The roles of a fabric's nodes: one model used by summary, routing, analysis,
LID selection, the study and the daemon.

Pure: :func:`fabric_roles` takes a :class:`~smroute.fabric.model.Fabric` (and
optional operator overrides in OpenSM's guid-file formats) and returns a
:class:`FabricRoles`.  Deterministic: the same fabric gives the same roles.

End-ports (CAs and routers) are classified from the structure first; node
descriptions are only hints:

* **aggregation** (SHARP aggregation node): a CA built into its switch: its
  node GUID is its switch's with only the low byte changed and it hangs off
  the switch's last port, or (hint) its description names an aggregation node.
  It is routed like any end-port but is no host: it does not make its switch a
  leaf and it is left out of host lists.
* **router**: a router port (node type 3).
* **compute** / **service**: a host on a leaf switch is compute, a host on an
  upper switch is a service host; a description hint can make either a
  **storage** or **management** host.  ``cn_guid_file`` lists the compute
  nodes (every other host is then a service host), ``io_guid_file`` the I/O
  nodes.

Switches: **leaf** switches carry hosts (aggregation nodes do not count).  Of
two linked switches that both carry hosts, the one with fewer hosts is taken to
be an upper switch with hosts cabled to it (a fat-tree links no two leaves);
so is one with under half the median leaf's hosts sharing at most half of its
switch neighbours with every leaf with more (UFM on a director's line ASIC
or a core, one that joins only two pods too: a leaf shares its spines with
the leaves beside it).
Every other switch's **rank** is its BFS distance from the leaves over
switch-to-switch links (self-looped cables never count), but for a leaf
hanging off upper switches alone (no switch it is cabled to has another
leaf: a storage switch cabled to a core): its switches are ranked from the
other leaves where that puts none above the top (a core stays a core), and
its cables skip ranks; where that puts cables within a rank and the switches
have two sides with leaves on both (storage leaves or a site's first leaves
on the cores of a three-level tree, a chassis whose leaves sit at two
depths), they are ranked from the leaves of one side
(:func:`~smroute.fabric.ranking.switch_ranks`), the others' cables skip
ranks; the switches of the highest rank are the **roots** (every one of them
roots the general up*/down* of a fabric that is no tree, as OpenSM's updn
chooses its roots), but in a **direct network** (every switch carries hosts
and some cable joins two of one rank: a torus, a hypercube, a random graph)
no switch is above the others and its centre roots it: rooted at every top
switch, the hosts of two tops had no up*/down* path between them.
``root_guid_file`` names the roots instead: ranks then count down from them
and the leaves are the lowest switches.

Which CA-to-CA pairs need a route (:func:`needed_pairs`): every pair with an
end-port that is not an aggregation node (compute, service, storage,
management, I/O, router), and an aggregation node's pairs with aggregation
nodes on its own or an adjacent switch (SHARP's aggregation trees follow the
cables between adjacent switches).  Other aggregation-node pairs carry no
traffic: routed where it costs nothing, else counted, never a failure;
``every_ca`` restores "every CA pair".

The fabric is a **tree** (Dmodc routes it as one) unless it has no switch
above its leaves although two leaves are connected (two switches with hosts
on both, a ring), or hosts on every level (every root carries hosts).  Other
fabrics are routed by a general up*/down* over ranks from a root (see
:func:`smroute.routing.topology.rooted_graph`); the roles say why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from smroute.errors import InputError
from smroute.fabric.graph import bfs_distance, components, first_per_group
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.ranking import switch_ranks, tree_check, upper_leaves

__all__ = [
    "EndportRole",
    "SwitchRole",
    "GuidOverrides",
    "FabricRoles",
    "NeededPairs",
    "fabric_roles",
    "needed_pairs",
    "parse_guid_file",
    "read_guid_file",
    "switch_links",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class EndportRole(IntEnum):
    """Role of a CA or router node."""

    COMPUTE = 0
    AGGREGATION = 1
    SERVICE = 2
    STORAGE = 3
    MANAGEMENT = 4
    IO = 5
    ROUTER = 6


class SwitchRole(IntEnum):
    """Role of a switch."""

    LEAF = 0
    LEVEL = 1
    ROOT = 2
    UNRANKED = 3


#: How a role was decided, index = value of ``FabricRoles.reason``.
REASONS: tuple[str, ...] = (
    "",
    "switch-embedded (its switch's GUID, on the switch's last port)",
    "description names an aggregation node",
    "router port",
    "host on a leaf switch",
    "host on an upper switch",
    "description names a storage host",
    "description names a management host",
    "listed in cn_guid_file",
    "not listed in cn_guid_file",
    "listed in io_guid_file",
    "carries hosts",
    "carries a compute node (cn_guid_file)",
    "fewer hosts than a linked switch that carries hosts",
    "hop distance from the leaves",
    "highest rank",
    "listed in root_guid_file",
    "hop distance from the roots (root_guid_file)",
    "no path to a leaf",
    "not linked to any switch",
    "few hosts, cabled like switches without hosts above the leaves",
    "carries hosts, ranked apart from the other leaves: its cables skip ranks",
)
(_R_NONE, _R_EMBEDDED, _R_AGG_DESC, _R_ROUTER, _R_ON_LEAF, _R_ON_UPPER, _R_STORAGE,
 _R_MGMT, _R_CN, _R_NOT_CN, _R_IO, _R_HOSTS, _R_HOSTS_CN, _R_FEWER, _R_BFS, _R_TOP,
 _R_ROOT_FILE, _R_FROM_ROOTS, _R_UNRANKED, _R_NO_LINK, _R_LIKE_UPPER,
 _R_APART) = range(len(REASONS))

# lower-case patterns per hint, matched against lower-cased text (much faster
# than IGNORECASE; one alternation of all three is slower than three scans)
_HINTS: dict[str, re.Pattern[str]] = {
    "aggregation": re.compile(r"aggregation node"),
    "storage": re.compile(r"(?<![a-z])(?:stor|storage|gpfs|lustre|oss|mds|nfs|nas|ddn|netapp|"
                          r"weka|vast|ess)(?![a-z])"),
    "management": re.compile(r"(?<![a-z])(?:ufm|mgmt|mgt|opensm|sm|head|admin|master|login)"
                             r"(?![a-z])"),
}


def _desc_hints(f: Fabric) -> dict[str, BoolArray]:
    """Per hint (``aggregation``, ``storage``, ``management``), ``(N,)`` bool:
    the nodes whose description names it, case-insensitively: one scan of all
    descriptions lower-cased and joined by newlines (cached on the fabric)."""
    cached = f._cache.get("node:desc_hints")
    if isinstance(cached, dict):
        return cached
    n = f.n_nodes
    out = {k: np.zeros(n, dtype=bool) for k in _HINTS}
    if n:
        lengths = np.fromiter(map(len, f.node_desc), dtype=np.int64, count=n) + 1
        starts = np.cumsum(lengths) - lengths
        text = "\n".join(f.node_desc).lower()
        for k, pattern in _HINTS.items():
            pos = np.fromiter((m.start() for m in pattern.finditer(text)), dtype=np.int64)
            out[k][np.searchsorted(starts, pos, side="right") - 1] = True
    f._cache["node:desc_hints"] = out
    return out


@dataclass(frozen=True)
class GuidOverrides:
    """Operator overrides in OpenSM's guid-file formats (node or port GUIDs)."""

    roots: frozenset[int] = frozenset()
    compute: frozenset[int] = frozenset()
    io: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.roots or self.compute or self.io)


def parse_guid_file(lines: Iterable[str] | str, source: str = "<input>") -> frozenset[int]:
    """GUIDs of an OpenSM guid file (``root_guid_file``, ``cn_guid_file``,
    ``io_guid_file``): one GUID per line (``0x`` hex, or plain hex), blank lines
    and ``#`` comments ignored.  :class:`InputError` names a bad line."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    out: set[int] = set()
    for no, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        tok = text.split()[0]
        try:
            g = int(tok, 16)
        except ValueError:
            raise InputError(f"not a GUID: {tok[:40]!r}; expected one 0x-prefixed hex GUID "
                             "per line", source=source, line=no) from None
        if not 0 < g < 1 << 64:
            raise InputError(f"GUID {tok[:40]!r} out of range", source=source, line=no)
        out.add(g)
    return frozenset(out)


def read_guid_file(path: str | os.PathLike[str]) -> frozenset[int]:
    """:func:`parse_guid_file` of a file."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_guid_file(fh, str(path))


def switch_links(f: Fabric) -> tuple[IntArray, IntArray, BoolArray]:
    """Switch-to-switch links: ``(a, b, self_loop)``, shape ``(K,)`` each:
    node indices of both ends and whether the cable loops back to its own switch."""
    na, nb = f.port_node[f.link_a].astype(np.int64), f.port_node[f.link_b].astype(np.int64)
    sw = f.node_type == NodeType.SWITCH
    ss = sw[na] & sw[nb]
    a, b = na[ss], nb[ss]
    return a, b, a == b


@dataclass(frozen=True, eq=False)
class FabricRoles:
    """The roles of every node (see the module doc).

    Node arrays, shape ``(N,)``:
        endport_role (int8 :class:`EndportRole`, -1 for switches and unlinked
        end-ports), switch_role (int8 :class:`SwitchRole`, -1 for end-ports),
        reason (int8 index into :data:`REASONS`: how the role was decided),
        rank (int64: switches' rank, 0 = leaf, -1 unranked or not a switch),
        attach (int64: the switch node an end-port hangs off, -1 if none),
        hosts (int64: per switch, linked end-ports that are not aggregation
        nodes).
    tree: whether Dmodc routes the fabric as a tree; why_not_tree: the reason
    when not; roots: ``(K,)`` int64 switch nodes the general up*/down*
    fallback is rooted at: per physical component its top switches (rank
    above 0, the highest; or the listed roots), else (none above the
    others, or a :attr:`direct` network) its centre; empty for a tree.
    self_loops / same_rank: link ids ``(K,)`` int64 of self-looped cables and
    of links between switches of the same rank (both never used by routing).
    """

    endport_role: np.ndarray
    switch_role: np.ndarray
    reason: np.ndarray
    rank: np.ndarray
    attach: np.ndarray
    hosts: np.ndarray
    tree: bool
    why_not_tree: str
    roots: np.ndarray
    self_loops: np.ndarray
    same_rank: np.ndarray
    overrides: GuidOverrides = field(default_factory=GuidOverrides)

    @property
    def direct(self) -> bool:
        """A direct network: no tree, every ranked switch carries hosts and
        some cable joins two switches of one rank (a torus, a hypercube, a
        ring, a Dragonfly): no switch is above the others, whatever the
        ranks say (a tree with a login host on every top switch is none)."""
        return not self.tree and _direct(self.switch_role >= 0, self.rank, self.hosts,
                                         self.same_rank)

    @property
    def leaves(self) -> IntArray:
        """Node indices of leaf switches, ascending, ``(L,)`` int64."""
        return np.flatnonzero(self.switch_role == SwitchRole.LEAF)

    @property
    def max_rank(self) -> int:
        return int(self.rank.max()) if self.rank.size else -1

    def endports(self, *roles: EndportRole) -> IntArray:
        """Node indices of the end-ports with one of ``roles`` (all linked
        end-ports if none given), ascending, ``(K,)`` int64."""
        if not roles:
            return np.flatnonzero(self.endport_role >= 0)
        return np.flatnonzero(np.isin(self.endport_role, [int(r) for r in roles]))

    @property
    def hosts_mask(self) -> BoolArray:
        """``(N,)`` bool: linked end-ports that are hosts (not aggregation nodes)."""
        return (self.endport_role >= 0) & (self.endport_role != EndportRole.AGGREGATION)

    @property
    def mode(self) -> str:
        """``"tree"`` or ``"updown"`` (the general up*/down* fallback)."""
        return "tree" if self.tree else "updown"

    def counts(self) -> dict[str, int]:
        """Number of nodes per role name (end-port and switch roles)."""
        out = {r.name.lower(): int((self.endport_role == r).sum()) for r in EndportRole}
        out.update({r.name.lower(): int((self.switch_role == r).sum()) for r in SwitchRole})
        return out


@dataclass(frozen=True, eq=False)
class NeededPairs:
    """Which CA-to-CA pairs need a route (module doc), in the switch space of
    a routing: ``every`` ``(S,)`` bool, switches whose end-ports need a route
    to every CA (one of them is no aggregation node, or ``every_ca``);
    ``adjacent`` ``(S, S)`` bool, switches joined by a cable or the same;
    ``agg`` ``(E,)`` bool, per end-port of the routing, aggregation nodes."""

    every: BoolArray
    adjacent: BoolArray
    agg: BoolArray
    every_ca: bool = False

    def mask(self, src: IntArray, target: IntArray, agg: BoolArray) -> BoolArray:
        """``(K, D)`` bool: whether the end-ports on switches ``src`` ``(K,)``
        need a route to the CA destinations on switches ``target`` ``(D,)``
        (``agg`` ``(D,)``: the destination is an aggregation node)."""
        if self.every_ca:
            return np.ones((len(src), len(target)), dtype=bool)
        out = self.adjacent[np.ix_(src, target)]
        out |= self.every[src][:, None]
        out |= ~agg[None, :]
        return out

    def pairs(self, src: IntArray, target: IntArray, agg: BoolArray) -> BoolArray:
        """``(K,)`` bool: :meth:`mask` for the pairs ``(src[k], target[k])``."""
        if self.every_ca:
            return np.ones(len(src), dtype=bool)
        return self.adjacent[src, target] | self.every[src] | ~agg


def needed_pairs(fabric: Fabric, roles: FabricRoles, sw_node: IntArray, ep_node: IntArray,
                 *, every_ca: bool = False) -> NeededPairs:
    """The pairs that need a route (module doc) for a routing whose
    switches are the nodes ``sw_node`` ``(S,)`` and end-ports ``ep_node``
    ``(E,)``; ``every_ca``: every CA pair."""
    n_sw = len(sw_node)
    sid = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sid[sw_node] = np.arange(n_sw)
    agg = roles.endport_role[ep_node] == EndportRole.AGGREGATION
    at = sid[roles.attach[ep_node]]
    every = np.zeros(n_sw, dtype=bool)
    every[at[~agg & (at >= 0)]] = True
    a, b, _ = switch_links(fabric)
    a, b = sid[a], sid[b]
    ok = (a >= 0) & (b >= 0)
    adjacent = np.eye(n_sw, dtype=bool)
    adjacent[a[ok], b[ok]] = adjacent[b[ok], a[ok]] = True
    return NeededPairs(every | every_ca, adjacent, agg, every_ca)


def _attachment(f: Fabric) -> tuple[IntArray, IntArray, IntArray]:
    """Per end-port node: its switch node and that switch's port (the first
    linked port, -1 if none); and the end-port node of each end-port link."""
    n = f.n_nodes
    sw = f.node_type == NodeType.SWITCH
    rows = np.flatnonzero(f.port_exists & (f.port_peer >= 0))
    own = f.port_node[rows].astype(np.int64)
    peer = f.port_peer[rows]
    pn = f.port_node[peer].astype(np.int64)
    ep = ~sw[own] & sw[pn]
    attach = np.full(n, -1, dtype=np.int64)
    attach_port = np.full(n, -1, dtype=np.int64)
    # first linked port wins: rows ascend, so write in reverse
    e_own, e_sw = own[ep][::-1], pn[ep][::-1]
    attach[e_own] = e_sw
    attach_port[e_own] = f.port_num[peer[ep]][::-1]
    return attach, attach_port, own[ep]


def _classify_endports(
    f: Fabric, attach: IntArray, attach_port: IntArray
) -> tuple[np.ndarray, np.ndarray, BoolArray]:
    """End-port roles before leaves are known: (role, reason, is_agg)."""
    n = f.n_nodes
    role = np.full(n, -1, dtype=np.int8)
    reason = np.zeros(n, dtype=np.int8)
    linked = attach >= 0
    is_ca = f.node_type == NodeType.CA
    is_rt = f.node_type == NodeType.ROUTER
    sw_of = np.maximum(attach, 0)
    last_port = attach_port == f.num_ports[sw_of].astype(np.int64)
    same_guid = (f.node_guid >> np.uint64(8)) == (f.node_guid[sw_of] >> np.uint64(8))
    embedded = is_ca & linked & same_guid & last_port & (f.node_guid != f.node_guid[sw_of])
    desc_agg = _desc_hints(f)["aggregation"]
    is_agg = is_ca & linked & (embedded | desc_agg)
    role[is_ca & linked] = EndportRole.COMPUTE
    role[is_rt & linked] = EndportRole.ROUTER
    reason[is_rt & linked] = _R_ROUTER
    role[is_agg] = EndportRole.AGGREGATION
    reason[is_agg & embedded] = _R_EMBEDDED
    reason[is_agg & ~embedded] = _R_AGG_DESC
    return role, reason, is_agg


def _guid_mask(f: Fabric, guids: frozenset[int]) -> BoolArray:
    """``(N,)`` bool: nodes whose node GUID or any port GUID is listed."""
    if not guids:
        return np.zeros(f.n_nodes, dtype=bool)
    g = np.fromiter(guids, dtype=np.uint64, count=len(guids))
    m = np.isin(f.node_guid, g)
    pm = f.port_exists & np.isin(f.port_guid, g)
    m[f.port_node[pm]] = True
    return m


def fabric_roles(fabric: Fabric, overrides: GuidOverrides | None = None) -> FabricRoles:
    """Classify every node of ``fabric`` (see the module doc).  ``overrides``:
    OpenSM-style root / compute / I/O GUID lists (node or port GUIDs)."""
    f = fabric
    ov = overrides or GuidOverrides()
    n = f.n_nodes
    is_sw = f.node_type == NodeType.SWITCH
    attach, attach_port, ep_nodes = _attachment(f)
    ep_role, reason, is_agg = _classify_endports(f, attach, attach_port)
    host = (ep_role >= 0) & ~is_agg
    hosts = np.bincount(attach[host], minlength=n).astype(np.int64)
    cn = _guid_mask(f, ov.compute)
    io = _guid_mask(f, ov.io)

    a, b, loop = switch_links(f)
    la, lb = a[~loop], b[~loop]
    src, dst = np.concatenate([la, lb]), np.concatenate([lb, la])
    sw_reason = np.zeros(n, dtype=np.int8)
    roots_given = _guid_mask(f, ov.roots) & is_sw
    if roots_given.any():
        depth = bfs_distance(n, src, dst, roots_given)
        host_depth = depth[(hosts > 0) & (depth >= 0)]
        bottom = int(host_depth.max()) if host_depth.size else int(depth.max())
        rank = np.where(is_sw & (depth >= 0) & (depth <= bottom), bottom - depth, -1)
        leaf = rank == 0
        sw_reason[is_sw & (rank >= 0)] = _R_FROM_ROOTS
        sw_reason[roots_given] = _R_ROOT_FILE
    else:
        cand = is_sw & ((hosts > 0) if not ov.compute else np.isin(
            np.arange(n), attach[cn & (attach >= 0)]))
        if not cand.any():  # only aggregation nodes: their switches are the leaves
            cand = is_sw & (np.bincount(attach[ep_role >= 0], minlength=n) > 0)
        both = cand[la] & cand[lb]
        fewer = np.zeros(n, dtype=bool)
        fewer[la[both & (hosts[la] < hosts[lb])]] = True
        fewer[lb[both & (hosts[lb] < hosts[la])]] = True
        upper = upper_leaves(n, la, lb, cand & ~fewer, hosts)
        leaf = cand & ~fewer & ~upper
        rank, apart = switch_ranks(n, src, dst, leaf, hosts)
        rank[~is_sw] = -1
        sw_reason[is_sw & (rank > 0)] = _R_BFS
        sw_reason[leaf] = _R_HOSTS_CN if ov.compute else _R_HOSTS
        sw_reason[apart] = _R_APART
        sw_reason[cand & fewer] = _R_FEWER
        sw_reason[upper] = _R_LIKE_UPPER
    max_rank = int(rank.max()) if n else -1
    sw_role = np.full(n, -1, dtype=np.int8)
    sw_role[is_sw] = SwitchRole.UNRANKED
    sw_role[is_sw & (rank > 0)] = SwitchRole.LEVEL
    top = is_sw & (rank == max_rank) & (rank > 0)
    sw_role[top] = SwitchRole.ROOT
    if not roots_given.any():
        sw_reason[top] = _R_TOP
    else:
        sw_role[roots_given & (rank >= 0)] = SwitchRole.ROOT
    sw_role[leaf & (rank == 0)] = SwitchRole.LEAF
    unranked = is_sw & (rank < 0)
    deg = np.bincount(src, minlength=n)
    sw_reason[unranked] = np.where(deg[unranked] > 0, _R_UNRANKED, _R_NO_LINK)

    # hosts: compute on leaves, service above; hints and guid files refine
    on_leaf = host & (attach >= 0) & (rank[np.maximum(attach, 0)] == 0)
    plain = host & (f.node_type == NodeType.CA)
    ep_role[plain & on_leaf] = EndportRole.COMPUTE
    reason[plain & on_leaf] = _R_ON_LEAF
    ep_role[plain & ~on_leaf] = EndportRole.SERVICE
    reason[plain & ~on_leaf] = _R_ON_UPPER
    hints = _desc_hints(f)
    stor = np.flatnonzero(plain & hints["storage"])
    mgmt = np.flatnonzero(plain & hints["management"])
    ep_role[stor], reason[stor] = EndportRole.STORAGE, _R_STORAGE
    ep_role[mgmt], reason[mgmt] = EndportRole.MANAGEMENT, _R_MGMT
    if ov.compute:
        ep_role[plain & ~cn] = EndportRole.SERVICE
        reason[plain & ~cn] = _R_NOT_CN
        ep_role[plain & cn] = EndportRole.COMPUTE
        reason[plain & cn] = _R_CN
    ep_role[plain & io] = EndportRole.IO
    reason[plain & io] = _R_IO
    reason[is_sw] = sw_reason[is_sw]

    sl = np.flatnonzero(is_sw[f.port_node[f.link_a]] & is_sw[f.port_node[f.link_b]])
    self_loops = sl[loop]
    ra, rb = rank[a], rank[b]
    same_rank = sl[~loop & (ra == rb) & (ra >= 0)]

    tree, why = tree_check(rank, leaf & (rank == 0), hosts, is_sw, la, lb)
    ep_count = hosts + np.bincount(attach[is_agg], minlength=n)
    # a direct network (FabricRoles.direct): its centre roots it, not its top switches
    direct = _direct(is_sw, rank, hosts, same_rank)
    tops = roots_given | (sw_role == SwitchRole.ROOT) if not direct else roots_given
    roots = np.zeros(0, dtype=np.int64) if tree else _centres(
        f, ep_count, is_sw, src, dst, tops)
    return FabricRoles(
        endport_role=ep_role, switch_role=sw_role, reason=reason, rank=rank.astype(np.int64),
        attach=attach, hosts=hosts, tree=tree, why_not_tree=why, roots=roots,
        self_loops=self_loops.astype(np.int64), same_rank=same_rank.astype(np.int64),
        overrides=ov,
    )


def _direct(is_sw: BoolArray, rank: IntArray, hosts: IntArray, same_rank: IntArray) -> bool:
    """Every ranked switch of ``is_sw`` carries hosts and some cable joins
    two switches of one rank (``same_rank``: link ids)."""
    ranked = is_sw & (rank >= 0)
    return len(same_rank) > 0 and bool(ranked.any()) and bool((hosts[ranked] > 0).all())


def _centres(
    f: Fabric, ep_count: IntArray, is_sw: BoolArray,
    src: IntArray, dst: IntArray, roots_given: BoolArray,
) -> IntArray:
    """The roots of the up*/down* fallback per physical component of
    switches: every switch of ``roots_given`` (listed or top) in it, else the
    switch with the least mean hop distance to the end-ports (lowest GUID on
    a tie).  One BFS per switch that carries end-ports (fallback fabrics only)."""
    sws = np.flatnonzero(is_sw)
    if not len(sws):
        return np.zeros(0, dtype=np.int64)
    comp = components(f.n_nodes, src, dst)[sws]
    given_comp = np.unique(comp[roots_given[sws]])
    listed = sws[roots_given[sws]]
    if np.isin(comp, given_comp).all():
        return np.sort(listed).astype(np.int64)
    total = np.zeros(f.n_nodes, dtype=np.float64)
    reach = np.zeros(f.n_nodes, dtype=np.int64)
    for s in np.flatnonzero(is_sw & (ep_count > 0)).tolist():
        d = bfs_distance(f.n_nodes, src, dst, np.array([s]))
        ok = d >= 0
        total[ok] += d[ok] * ep_count[s]
        reach[ok] += ep_count[s]
    mean = np.where(reach > 0, total / np.maximum(reach, 1), np.inf)[sws]
    given = roots_given[sws]
    # per component: listed roots first, then least mean distance, then lowest GUID
    o = np.lexsort((f.node_guid[sws], mean, ~given, comp))
    centre = first_per_group(o, comp[o])
    centre = sws[centre[~np.isin(comp[centre], given_comp)]]
    return np.sort(np.concatenate([listed, centre])).astype(np.int64)
