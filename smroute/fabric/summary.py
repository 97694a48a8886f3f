"""Structural summary of a fabric: levels, counts, link types, parallel links, anomalies.

Pure: takes a :class:`~smroute.fabric.model.Fabric`, returns a
:class:`FabricSummary` (a plain ``dict`` via :meth:`FabricSummary.to_dict`, text
via :func:`format_summary`).  All per-link and per-node work is vectorized.

Definitions
-----------
Roles and ranks come from :mod:`smroute.fabric.roles`, the one model that
routing, analysis and the daemon use too: leaf switches carry hosts
(aggregation nodes do not count), every other switch's rank is its hop
distance from the leaves.

* **host link**: a link between a switch and a CA; ``ca_links[s]`` counts them
  per switch (aggregation nodes included).  Routers are counted but treated
  as neither host nor switch.
* **up / down links** of a switch of rank ``r``: its links to switches of rank
  ``r + 1`` / ``r - 1``; for leaves, down links are host links.

Anomalies
---------
``hosts_on_non_leaf``
    switches of rank > 0 that carry hosts (aggregation nodes do not count):
    service hosts on spines, or stray cables.
``self_loops``
    cables looped back to the same switch (never used by routing).
``unranked_switches``
    switches no leaf reaches (no CA and no path to one): rank -1.
``disconnected``
    every connected component (over all links, CAs included) but the largest.
``link_mismatch``
    links whose two ports both report a width (or speed) and disagree.
``same_rank_links``
    switch-to-switch links between two switches of the same rank (a fat-tree
    has none; two leaves linked with the same number of hosts shows here;
    never used by tree routing).
``missing_up_links`` / ``missing_down_links``
    switches with fewer up (down) links than the most any switch of their rank
    has, i.e. missing links against a regular tree.  Up links are only checked
    below the top rank; down links of leaves are host links.

The top rank's missing switches cannot be seen this way when a whole switch
is gone (every leaf then loses the same up link): compare ``levels`` against
the expected shape for that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from smroute.fabric.graph import components
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import SPEEDS, NodeType
from smroute.fabric.roles import (
    REASONS,
    EndportRole,
    FabricRoles,
    SwitchRole,
    fabric_roles,
    needed_pairs,
    switch_links,
)

__all__ = [
    "ANOMALY_KINDS",
    "FabricSummary",
    "LevelStats",
    "components",
    "format_summary",
    "summarize",
]

IntArray = npt.NDArray[np.int64]

#: Anomaly kinds, in report order.
ANOMALY_KINDS: tuple[str, ...] = (
    "hosts_on_non_leaf",
    "self_loops",
    "unranked_switches",
    "disconnected",
    "link_mismatch",
    "same_rank_links",
    "missing_up_links",
    "missing_down_links",
)

_ANOMALY_TITLES: dict[str, str] = {
    "hosts_on_non_leaf": "hosts on non-leaf switches",
    "self_loops": "cables looped back to the same switch (unused)",
    "unranked_switches": "switches with no CA and no path to a leaf",
    "disconnected": "disconnected components (besides the largest)",
    "link_mismatch": "links whose ends disagree on width/speed",
    "same_rank_links": "links between switches of the same rank (unused by tree routing)",
    "missing_up_links": "switches with fewer up-links than their level's max",
    "missing_down_links": "switches with fewer down-links than their level's max",
}


@dataclass(frozen=True)
class LevelStats:
    """One rank of switches: counts and per-switch link ranges."""

    rank: int
    switches: int
    hosts: int
    up_min: int
    up_max: int
    down_min: int
    down_max: int
    free_ports: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "switches": self.switches,
            "hosts": self.hosts,
            "up_links": {"min": self.up_min, "max": self.up_max},
            "down_links": {"min": self.down_min, "max": self.down_max},
            "free_ports": self.free_ports,
        }


@dataclass(frozen=True)
class FabricSummary:
    """What :func:`summarize` found.  ``anomalies[kind]`` is ``(total, items)``
    where ``items`` holds at most ``max_items`` JSON-ready dicts."""

    source: str | None
    nodes: int
    switches: int
    hosts: int
    routers: int
    links: int
    switch_links: int
    host_links: int
    levels: tuple[LevelStats, ...]
    unranked: int
    link_types: dict[str, int]
    parallel_pairs: int
    parallel_multiplicity: dict[int, int]
    parallel_items: tuple[dict[str, Any], ...]
    component_sizes: tuple[int, ...]
    anomalies: dict[str, tuple[int, tuple[dict[str, Any], ...]]] = field(default_factory=dict)
    roles: tuple[dict[str, Any], ...] = ()
    routing_mode: str = "tree"
    why_not_tree: str = ""
    #: why the routing took ``routing_mode`` (its own words); ``routed``: the
    #: mode is the one the routing decided (else the roles' tree or updown)
    routing_reason: str = ""
    routed: bool = False
    #: ordered CA pairs in one physical component that need a route, and
    #: those that need none (aggregation nodes on switches not adjacent)
    ca_pairs_needed: int = 0
    ca_pairs_unneeded: int = 0

    @property
    def ok(self) -> bool:
        """True if no anomaly was found."""
        return all(total == 0 for total, _ in self.anomalies.values())

    def anomaly_count(self, kind: str) -> int:
        """Number of anomalies of ``kind`` (see :data:`ANOMALY_KINDS`)."""
        return self.anomalies[kind][0]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (GUIDs as ``0x``-prefixed 16-digit hex strings)."""
        return {
            "source": self.source,
            "nodes": self.nodes,
            "switches": self.switches,
            "hosts": self.hosts,
            "routers": self.routers,
            "links": self.links,
            "switch_links": self.switch_links,
            "host_links": self.host_links,
            "levels": [lv.to_dict() for lv in self.levels],
            "unranked_switches": self.unranked,
            "link_types": dict(self.link_types),
            "parallel_links": {
                "pairs": self.parallel_pairs,
                "multiplicity": {str(k): v for k, v in self.parallel_multiplicity.items()},
                "items": list(self.parallel_items),
            },
            "components": {"count": len(self.component_sizes),
                           "sizes": list(self.component_sizes)},
            "roles": list(self.roles),
            "routing_mode": self.routing_mode,
            "why_not_tree": self.why_not_tree,
            "routing_reason": self.routing_reason,
            "routed": self.routed,
            "ca_pairs": {"needed": self.ca_pairs_needed, "unneeded": self.ca_pairs_unneeded},
            "anomalies": {
                k: {"total": total, "items": list(items)}
                for k, (total, items) in self.anomalies.items()
            },
            "ok": self.ok,
        }


# --------------------------------------------------------------------------- graph helpers
def _guid(g: int) -> str:
    return f"{int(g):#018x}"


@dataclass(frozen=True)
class _Links:
    """Per-link node indices and classes, shared by the analyses."""

    na: IntArray
    nb: IntArray
    ss: npt.NDArray[np.bool_]  # switch-switch
    sc_sw: IntArray  # switch end of switch-CA links
    ca_links: IntArray  # per node: host links (switches only)


def _links(f: Fabric) -> _Links:
    na = f.port_node[f.link_a].astype(np.int64)
    nb = f.port_node[f.link_b].astype(np.int64)
    ta = f.node_type[na]
    tb = f.node_type[nb]
    sw, ca = int(NodeType.SWITCH), int(NodeType.CA)
    ss = (ta == sw) & (tb == sw)
    sc_sw = np.concatenate([na[(ta == sw) & (tb == ca)], nb[(tb == sw) & (ta == ca)]])
    ca_links = np.bincount(sc_sw, minlength=f.n_nodes).astype(np.int64)
    return _Links(na, nb, ss, sc_sw, ca_links)


# --------------------------------------------------------------------------- summary
def role_table(roles: FabricRoles) -> tuple[dict[str, Any], ...]:
    """Per role and reason, how many nodes: ``{"kind": "endport"|"switch",
    "role": name, "reason": how it was decided, "count": n}``, end-ports first."""
    out: list[dict[str, Any]] = []
    for kind, arr, enum in (("endport", roles.endport_role, EndportRole),
                            ("switch", roles.switch_role, SwitchRole)):
        sel = arr >= 0
        code = arr[sel].astype(np.int64) * 256 + roles.reason[sel]
        keys, counts = np.unique(code, return_counts=True)
        for k, c in zip(keys.tolist(), counts.tolist(), strict=True):
            out.append({"kind": kind, "role": enum(k // 256).name.lower(),
                        "reason": REASONS[k % 256], "count": int(c)})
    return tuple(out)


def summarize(
    fabric: Fabric, *, source: str | None = None, max_items: int = 100,
    roles: FabricRoles | None = None, routing: tuple[str, str] | None = None,
) -> FabricSummary:
    """Analyse ``fabric`` (see the module docstring for every definition).

    ``max_items`` bounds each item list (anomalies, parallel pairs); totals are
    always exact.  ``roles``: the fabric's roles if already known.
    ``routing``: the mode the routing took and its reason
    (``RoutingResult.mode`` and ``mode_reason``: the one source of the mode;
    without it the summary gives the roles' ``tree`` or ``updown``).
    """
    f = fabric
    lk = _links(f)
    is_sw = f.node_type == NodeType.SWITCH
    roles = roles if roles is not None else fabric_roles(f)
    rank = roles.rank
    na, nb, ss = lk.na, lk.nb, lk.ss
    sa, sb = na[ss], nb[ss]
    src = np.concatenate([sa, sb])
    dst = np.concatenate([sb, sa])
    n = f.n_nodes

    # per-switch up/down links (down for leaves = host links; a cable that
    # skips ranks, from a leaf ranked apart, counts too)
    up_e = (rank[src] >= 0) & (rank[dst] > rank[src])
    dn_e = (rank[src] > 0) & (rank[dst] >= 0) & (rank[dst] < rank[src])
    up = np.bincount(src[up_e], minlength=n).astype(np.int64)
    down = np.bincount(src[dn_e], minlength=n).astype(np.int64)
    down = np.where(rank == 0, lk.ca_links, down)
    connected = f.port_exists & (f.port_peer >= 0) & (f.port_num > 0)
    used = np.bincount(f.port_node[connected], minlength=n).astype(np.int64)
    free = f.num_ports.astype(np.int64) - used

    max_rank = int(rank.max()) if n else -1
    levels: list[LevelStats] = []
    up_max_at = np.zeros(max(max_rank + 1, 1), dtype=np.int64)
    down_max_at = np.zeros(max(max_rank + 1, 1), dtype=np.int64)
    for r in range(max_rank + 1):
        m = rank == r
        u, d = up[m], down[m]
        up_max_at[r], down_max_at[r] = int(u.max()), int(d.max())
        levels.append(LevelStats(
            rank=r, switches=int(m.sum()), hosts=int(roles.hosts[m].sum()),
            up_min=int(u.min()), up_max=int(u.max()),
            down_min=int(d.min()), down_max=int(d.max()),
            free_ports=int(free[m].sum()),
        ))
    unranked_mask = is_sw & (rank < 0)

    anomalies: dict[str, tuple[int, tuple[dict[str, Any], ...]]] = {}

    def node_items(mask: npt.NDArray[np.bool_], extra: dict[str, np.ndarray]) -> tuple[
        int, tuple[dict[str, Any], ...]
    ]:
        idx = np.flatnonzero(mask)
        items = []
        for i in idx[:max_items].tolist():
            item: dict[str, Any] = {"guid": _guid(f.node_guid[i]), "desc": f.node_desc[i]}
            for k, arr in extra.items():
                item[k] = int(arr[i])
            items.append(item)
        return int(idx.size), tuple(items)

    def link_items(sel: np.ndarray, extra: dict[str, Any] | None = None) -> tuple[
        int, tuple[dict[str, Any], ...]
    ]:
        idx = np.flatnonzero(sel)
        items = []
        for li in idx[:max_items].tolist():
            ra, rb = int(f.link_a[li]), int(f.link_b[li])
            item: dict[str, Any] = {"a": _port_dict(f, ra), "b": _port_dict(f, rb)}
            if extra:
                for k, fn in extra.items():
                    item[k] = fn(ra, rb)
            items.append(item)
        return int(idx.size), tuple(items)

    host_ranks = is_sw & (roles.hosts > 0) & (rank > 0)
    anomalies["hosts_on_non_leaf"] = node_items(
        host_ranks, {"rank": rank, "hosts": roles.hosts}
    )
    anomalies["self_loops"] = link_items(np.isin(np.arange(f.n_links), roles.self_loops))
    anomalies["unranked_switches"] = node_items(unranked_mask, {"links": used})

    # components over all links
    labels = components(n, na, nb)
    roots, sizes = np.unique(labels, return_counts=True)
    order = np.lexsort((roots, -sizes))
    roots, sizes = roots[order], sizes[order]
    comp_items = []
    for root, size in zip(roots[1:max_items + 1].tolist(), sizes[1:max_items + 1].tolist(),
                          strict=True):
        members = np.flatnonzero(labels == root)
        comp_items.append({
            "size": int(size),
            "switches": int(is_sw[members].sum()),
            "hosts": int((f.node_type[members] == NodeType.CA).sum()),
            "example": {"guid": _guid(f.node_guid[members[0]]), "desc": f.node_desc[members[0]]},
        })
    anomalies["disconnected"] = (max(len(roots) - 1, 0), tuple(comp_items))

    # link widths/speeds
    wa, wb = f.port_width[f.link_a].astype(np.int64), f.port_width[f.link_b].astype(np.int64)
    sa_, sb_ = f.port_speed[f.link_a].astype(np.int64), f.port_speed[f.link_b].astype(np.int64)
    mismatch = ((wa > 0) & (wb > 0) & (wa != wb)) | ((sa_ > 0) & (sb_ > 0) & (sa_ != sb_))
    anomalies["link_mismatch"] = link_items(mismatch)
    w = np.where(wa > 0, wa, wb)
    s = np.where(sa_ > 0, sa_, sb_)
    codes, counts = np.unique(w * 16 + s, return_counts=True)
    link_types: dict[str, int] = {}
    for code, cnt in sorted(zip(codes.tolist(), counts.tolist(), strict=True),
                            key=lambda kv: (-kv[1], kv[0])):
        ww, sp = divmod(code, 16)
        label = f"{ww if ww else '?'}x{SPEEDS[sp] if sp < len(SPEEDS) else '???'}"
        link_types[label] = link_types.get(label, 0) + int(cnt)

    same = np.zeros(f.n_links, dtype=bool)
    same[roles.same_rank] = True
    anomalies["same_rank_links"] = link_items(same, {"rank": lambda ra, rb: int(
        rank[int(f.port_node[ra])])})

    ranked = is_sw & (rank >= 0)
    rr = np.where(ranked, rank, 0)
    miss_up = ranked & (rank < max_rank) & (up < up_max_at[rr])
    miss_dn = ranked & (down < down_max_at[rr])
    anomalies["missing_up_links"] = node_items(
        miss_up, {"rank": rank, "up_links": up, "level_max": up_max_at[rr]}
    )
    anomalies["missing_down_links"] = node_items(
        miss_dn, {"rank": rank, "down_links": down, "level_max": down_max_at[rr]}
    )

    # parallel switch-switch links
    lo, hi = np.minimum(sa, sb), np.maximum(sa, sb)
    keys, mult = np.unique(lo * max(n, 1) + hi, return_counts=True)
    par = mult > 1
    pk, pm = keys[par], mult[par]
    m_vals, m_counts = np.unique(pm, return_counts=True)
    par_items = tuple(
        {
            "a": {"guid": _guid(f.node_guid[k // n]), "desc": f.node_desc[k // n]},
            "b": {"guid": _guid(f.node_guid[k % n]), "desc": f.node_desc[k % n]},
            "links": int(c),
        }
        for k, c in zip(pk[:max_items].tolist(), pm[:max_items].tolist(), strict=True)
    )

    needed, unneeded = ca_pair_counts(f, roles)
    return FabricSummary(
        source=source,
        nodes=n,
        switches=int(is_sw.sum()),
        hosts=int((f.node_type == NodeType.CA).sum()),
        routers=int((f.node_type == NodeType.ROUTER).sum()),
        links=f.n_links,
        switch_links=int(ss.sum()),
        host_links=int(lk.sc_sw.size),
        levels=tuple(levels),
        unranked=int(unranked_mask.sum()),
        link_types=link_types,
        parallel_pairs=int(par.sum()),
        parallel_multiplicity={int(v): int(c) for v, c in zip(m_vals, m_counts, strict=True)},
        parallel_items=par_items,
        component_sizes=tuple(int(x) for x in sizes.tolist()),
        anomalies=anomalies,
        roles=role_table(roles),
        routing_mode=routing[0] if routing is not None else roles.mode,
        why_not_tree=roles.why_not_tree,
        routing_reason=routing[1] if routing is not None else roles.why_not_tree,
        routed=routing is not None,
        ca_pairs_needed=needed - unneeded,
        ca_pairs_unneeded=unneeded,
    )


def ca_pair_counts(f: Fabric, roles: FabricRoles) -> tuple[int, int]:
    """Ordered pairs of linked end-ports in one physical component, and
    those of them that need no route (:func:`~smroute.fabric.roles.needed_pairs`)."""
    sw = f.switches
    ep = np.flatnonzero((roles.endport_role >= 0) & (roles.attach >= 0))
    if not len(sw) or not len(ep):
        return 0, 0
    need = needed_pairs(f, roles, sw, ep)
    sid = np.full(f.n_nodes, -1, dtype=np.int64)
    sid[sw] = np.arange(len(sw))
    at = sid[roles.attach[ep]]
    la, lb, _ = switch_links(f)
    comp = components(len(sw), sid[la], sid[lb])
    per = np.bincount(comp[at], minlength=len(sw)).astype(np.int64)
    total = int((per * (per - 1)).sum())
    aggs = np.bincount(at[need.agg], minlength=len(sw)).astype(np.int64)
    far = ~need.adjacent & (comp[:, None] == comp[None, :])
    return total, int(aggs @ far @ aggs)


def _port_dict(f: Fabric, row: int) -> dict[str, Any]:
    node = int(f.port_node[row])
    return {"guid": _guid(f.node_guid[node]), "desc": f.node_desc[node],
            "port": int(f.port_num[row]), "width": int(f.port_width[row]),
            "speed": SPEEDS[int(f.port_speed[row])] if int(f.port_speed[row]) < len(SPEEDS)
            else "???"}


# --------------------------------------------------------------------------- text
def _fmt_item(kind: str, item: dict[str, Any]) -> str:
    if "a" in item and "b" in item and isinstance(item["a"], dict) and "port" in item["a"]:
        a, b = item["a"], item["b"]
        s = (f'"{a["desc"]}" ({a["guid"]})[{a["port"]}] {a["width"]}x{a["speed"]}'
             f' <-> "{b["desc"]}" ({b["guid"]})[{b["port"]}] {b["width"]}x{b["speed"]}')
        return s + (f' (rank {item["rank"]})' if "rank" in item else "")
    if kind == "disconnected":
        ex = item["example"]
        return (f'{item["size"]} nodes ({item["switches"]} switches, {item["hosts"]} hosts), '
                f'e.g. "{ex["desc"]}" ({ex["guid"]})')
    head = f'"{item["desc"]}" ({item["guid"]})'
    rest = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in item.items()
                     if k not in ("guid", "desc"))
    return f"{head}: {rest}" if rest else head


def format_summary(s: FabricSummary, *, max_lines: int = 20) -> list[str]:
    """Human-readable report of ``s`` as lines (at most ``max_lines`` items per list)."""
    out: list[str] = []
    if s.source:
        out.append(f"Fabric: {s.source}")
    out.append(f"  nodes {s.nodes}: {s.switches} switches, {s.hosts} hosts (CAs), "
               f"{s.routers} routers")
    out.append(f"  links {s.links}: {s.switch_links} switch-switch, {s.host_links} host")
    out.append("Levels (rank = hops from the leaf switches):")
    out.append("  rank  switches   hosts  up-links/switch  down-links/switch  free ports")
    for lv in s.levels:
        upr = f"{lv.up_min}" if lv.up_min == lv.up_max else f"{lv.up_min}-{lv.up_max}"
        dnr = f"{lv.down_min}" if lv.down_min == lv.down_max else f"{lv.down_min}-{lv.down_max}"
        out.append(f"  {lv.rank:>4}  {lv.switches:>8}  {lv.hosts:>6}  {upr:>15}  {dnr:>17}"
                   f"  {lv.free_ports:>10}")
    if s.unranked:
        out.append(f"  unranked switches: {s.unranked}")
    out.append("Link types:")
    for label, cnt in s.link_types.items():
        out.append(f"  {label:<10} {cnt}")
    if s.parallel_pairs:
        mult = ", ".join(f"{v} pairs x{k}" for k, v in sorted(s.parallel_multiplicity.items()))
        out.append(f"Parallel links: {s.parallel_pairs} switch pairs ({mult})")
    else:
        out.append("Parallel links: none")
    out.append(f"Components: {len(s.component_sizes)}")
    out.append("Roles (how each was decided):")
    for r in s.roles:
        out.append(f"  {r['kind']:<7} {r['role']:<11} {r['count']:>7}  {r['reason']}")
    how = "as smroute route runs it" if s.routed else "from the roles, not routed"
    out.append(f"Routing ({how}): {s.routing_mode}"
               + (f" ({s.routing_reason})" if s.routing_reason else ""))
    out.append(f"CA pairs: {s.ca_pairs_needed} need a route" + (
        f", {s.ca_pairs_unneeded} need none (aggregation nodes on switches not adjacent)"
        if s.ca_pairs_unneeded else ""))
    if s.ok:
        out.append("Anomalies: none")
        return out
    out.append("Anomalies:")
    for kind in ANOMALY_KINDS:
        total, items = s.anomalies[kind]
        if not total:
            continue
        out.append(f"  {_ANOMALY_TITLES[kind]}: {total}")
        for item in items[:max_lines]:
            out.append(f"    {_fmt_item(kind, item)}")
        if total > min(len(items), max_lines):
            out.append(f"    ... and {total - min(len(items), max_lines)} more")
    return out
