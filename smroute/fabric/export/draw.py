"""What a picture of a fabric shows: switches by level, identical switches
collapsed into one box, hosts as counts, anomalies and removed equipment.

Pure: :func:`draw_fabric` takes a :class:`~smroute.fabric.model.Fabric` (and
optionally the original fabric it was degraded from) and returns a
:class:`Drawing` -- boxes, edges and rows, with their text -- that a renderer
turns into a picture (:mod:`smroute.cli.draw_cmd` writes it with Graphviz).
Nothing here reads a file, a clock or a random generator; the same fabric
gives the same drawing.

Levels and roles come from :func:`smroute.fabric.roles.fabric_roles` (rank 0 =
leaf switches), anomaly totals from :func:`smroute.fabric.summary.summarize`.

Grouping
--------
Drawing 1,620 switches one by one gives a picture nobody can read, so
switches are collapsed into **boxes**.  Candidate partitions, coarsest first:

1. ``level``: same rank and role, and the same yes/no anomaly flags and
   kinds of end-ports (hosts, service hosts, aggregation nodes);
2. ``counts``: also the same numbers of hosts, service hosts, aggregation
   nodes, up-, down-, same-level and self-looped links and lost links;
3. ``refined N``: colour refinement (1-dimensional Weisfeiler-Leman) of
   ``counts`` over the switch links, round ``N``: same number of links to
   each box of the previous round, up to the stable partition;
4. ``identical``: also the very same neighbour switches (structural
   twins): e.g. the leaves of one pod, same uplink switches and host count.

The finest partition with at most ``max_boxes`` switch boxes in any level
is drawn (the ``level`` one if even that has more): the picture stays about
as wide as ``max_boxes`` boxes.  A complete PGFT(3;18,18,36;1,18,18;1,1,1)
(1,620 switches) is 3 boxes (``refined``); its 36 pods show in the leaf box's
text ("36 groups of 18 with the same uplinks").  Damaged switches differ in
their counts, so they get boxes of their own.

Hosts are never nodes of their own: each box carries a hosts node ("18 hosts
each") and, where service, storage, management or I/O hosts or routers hang
off its switches, a second one naming them.

Anomalies shown (and named in the text)
---------------------------------------
hosts on non-leaf switches, self-looped cables (a loop on the box),
same-level links (dashed, not used by tree routing), missing up/down-links
against the level's maximum, unranked switches; with ``original``: removed
switches (dashed boxes at their former level, with the cables they took) and
removed links (dashed edges between the boxes of their two ends), switches
not in the original.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.fabric.export.drawing import (
    GROUPING_TEXT,
    Box,
    Drawing,
    Edge,
    Line,
    count_rows,
    dense,
    level_name,
    link_keys,
    partitions,
    plural,
    short,
    span,
    widest_row,
)
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, FabricRoles, fabric_roles, switch_links
from smroute.fabric.summary import summarize

__all__ = [
    "ANOMALY_NAMES",
    "Box",
    "Drawing",
    "Edge",
    "Line",
    "MAX_BOXES",
    "draw_fabric",
    "level_name",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Default bound on the number of switch boxes in one level (row).
MAX_BOXES = 8
#: Short names of the anomalies, as the picture writes them.
ANOMALY_NAMES: dict[str, str] = {
    "hosts_on_non_leaf": "hosts on a spine (non-leaf switch)",
    "self_loops": "self-looped cables",
    "same_rank_links": "same-level links",
    "missing_up_links": "missing up-links",
    "missing_down_links": "missing down-links",
    "unranked_switches": "unranked switches (no path to a leaf)",
    "disconnected": "disconnected components",
    "link_mismatch": "width/speed mismatches",
    "removed_switches": "removed switches",
    "removed_links": "removed links",
    "new_switches": "switches not in the original",
}

_OTHER_ROLES = (EndportRole.SERVICE, EndportRole.STORAGE, EndportRole.MANAGEMENT,
                EndportRole.IO, EndportRole.ROUTER)
# per-switch flag bits
_F_MISS_UP, _F_MISS_DOWN, _F_SPINE_HOSTS, _F_LOOP, _F_SAME, _F_UNRANKED, _F_NEW, _F_LOST = (
    1 << k for k in range(8))


# --------------------------------------------------------------------------- the drawing
@dataclass
class _Switches:
    """Per-switch counts, indexed by switch id ``0..S-1`` (``nodes[i]``)."""

    nodes: IntArray
    rank: IntArray
    role: IntArray
    compute: IntArray
    other: IntArray
    agg: IntArray
    up: IntArray
    down: IntArray
    same: IntArray
    loops: IntArray
    odd: IntArray
    lost: IntArray
    flags: IntArray
    up_max: IntArray
    down_max: IntArray


def _switch_counts(f: Fabric, roles: FabricRoles, lost: IntArray,
                   new: BoolArray) -> tuple[_Switches, IntArray, IntArray, IntArray]:
    """Per-switch counts and flags; the switch links as switch ids ``(la, lb)``
    and their fabric link ids."""
    sw = f.switches
    s = len(sw)
    loc = np.full(f.n_nodes, -1, dtype=np.int64)
    loc[sw] = np.arange(s)
    ep, att = roles.endport_role, roles.attach

    def per_switch(mask: BoolArray) -> IntArray:
        m = mask & (att >= 0)
        return np.bincount(loc[att[m]], minlength=s).astype(np.int64)

    rank = roles.rank[sw]
    a, b, loop = switch_links(f)
    is_sw = f.node_type == NodeType.SWITCH
    sl = np.flatnonzero(is_sw[f.port_node[f.link_a]] & is_sw[f.port_node[f.link_b]])
    la, lb = loc[a], loc[b]
    ra, rb = rank[la], rank[lb]
    ok = ~loop & (ra >= 0) & (rb >= 0)
    loops = np.bincount(la[loop], minlength=s).astype(np.int64)
    same_l = ok & (ra == rb)
    same = np.bincount(np.concatenate([la[same_l], lb[same_l]]), minlength=s).astype(np.int64)
    up = np.bincount(np.concatenate([la[ok & (rb == ra + 1)], lb[ok & (ra == rb + 1)]]),
                     minlength=s).astype(np.int64)
    down = np.bincount(np.concatenate([la[ok & (rb == ra - 1)], lb[ok & (ra == rb - 1)]]),
                       minlength=s).astype(np.int64)
    odd_l = ~loop & ~ok
    odd = np.bincount(np.concatenate([la[odd_l], lb[odd_l]]), minlength=s).astype(np.int64)
    max_rank = int(rank.max()) if s else -1
    up_max = np.zeros(max_rank + 2, dtype=np.int64)
    down_max = np.zeros(max_rank + 2, dtype=np.int64)
    for r in range(max_rank + 1):
        m = rank == r
        if m.any():
            up_max[r], down_max[r] = int(up[m].max()), int(down[m].max())
    rr = np.where(rank >= 0, rank, max_rank + 1)
    flags = np.zeros(s, dtype=np.int64)
    flags |= np.where((rank >= 0) & (rank < max_rank) & (up < up_max[rr]), _F_MISS_UP, 0)
    flags |= np.where((rank > 0) & (down < down_max[rr]), _F_MISS_DOWN, 0)
    flags |= np.where((rank > 0) & (roles.hosts[sw] > 0), _F_SPINE_HOSTS, 0)
    flags |= np.where(loops > 0, _F_LOOP, 0)
    flags |= np.where(same > 0, _F_SAME, 0)
    flags |= np.where(rank < 0, _F_UNRANKED, 0)
    flags |= np.where(new, _F_NEW, 0)
    flags |= np.where(lost > 0, _F_LOST, 0)
    sws = _Switches(
        nodes=sw, rank=rank, role=roles.switch_role[sw].astype(np.int64),
        compute=per_switch(ep == EndportRole.COMPUTE),
        other=per_switch(np.isin(ep, [int(r) for r in _OTHER_ROLES])),
        agg=per_switch(ep == EndportRole.AGGREGATION),
        up=up, down=down, same=same, loops=loops, odd=odd, lost=lost, flags=flags,
        up_max=up_max, down_max=down_max,
    )
    return sws, la, lb, sl


@dataclass
class _Removed:
    """What the original had that the fabric lacks."""

    orig: Fabric
    orig_roles: FabricRoles
    gone: IntArray          # original switch nodes absent now
    links: IntArray         # original switch-link ids absent now, both ends present
    lost_now: IntArray      # per current switch id: cables lost (removed links + removed switches)
    cut_off: int            # original hosts with a link that have none now
    new: BoolArray          # per current switch id: not in the original


def _compare(f: Fabric, sw: IntArray, orig: Fabric) -> _Removed:
    oroles = fabric_roles(orig)
    osw = orig.switches
    now = f.nodes_by_guid(orig.node_guid[osw])
    gone = osw[now < 0]
    a, b, _ = switch_links(orig)
    is_sw = orig.node_type == NodeType.SWITCH
    sl = np.flatnonzero(is_sw[orig.port_node[orig.link_a]] & is_sw[orig.port_node[orig.link_b]])
    cur_sw = f.node_type == NodeType.SWITCH
    csl = np.flatnonzero(cur_sw[f.port_node[f.link_a]] & cur_sw[f.port_node[f.link_b]])
    current = set(link_keys(f, csl))
    keys = link_keys(orig, sl)
    lost_link = np.array([k not in current for k in keys], dtype=bool)
    gone_mask = np.zeros(orig.n_nodes, dtype=bool)
    gone_mask[gone] = True
    both = ~gone_mask[a] & ~gone_mask[b]
    links = sl[lost_link & both]
    # cables each current switch lost: removed links and links to removed switches
    loc = np.full(f.n_nodes, -1, dtype=np.int64)
    loc[sw] = np.arange(len(sw))
    ends = np.concatenate([a[lost_link], b[lost_link]])
    cur = f.nodes_by_guid(orig.node_guid[ends])
    cur = cur[cur >= 0]
    lost_now = np.bincount(loc[cur][loc[cur] >= 0], minlength=len(sw)).astype(np.int64)
    # hosts linked in the original, unlinked (or absent) now
    ohosts = oroles.endports()
    ohosts = ohosts[oroles.endport_role[ohosts] != EndportRole.AGGREGATION]
    croles = fabric_roles(f)
    cn = f.nodes_by_guid(orig.node_guid[ohosts])
    cut_off = int(((cn < 0) | (croles.endport_role[np.maximum(cn, 0)] < 0)).sum())
    new = orig.nodes_by_guid(f.node_guid[sw]) < 0
    return _Removed(orig, oroles, gone, links, lost_now, cut_off, new)


def draw_fabric(
    fabric: Fabric, *, original: Fabric | None = None, roles: FabricRoles | None = None,
    max_boxes: int = MAX_BOXES, title: str | None = None,
) -> Drawing:
    """The :class:`Drawing` of ``fabric`` (module doc).  ``original``: the
    fabric before equipment was removed (switches and switch links present
    there but absent now are drawn as removed); ``roles``: the fabric's roles
    if already known (e.g. with operator overrides); ``max_boxes``: bound on
    the switch boxes in one level (grouping); ``title``: the picture's title (default a
    count of the fabric)."""
    f = fabric
    roles = roles if roles is not None else fabric_roles(f)
    summary = summarize(f, roles=roles, max_items=0)
    sw = f.switches
    s = len(sw)
    rem = _compare(f, sw, original) if original is not None else None
    lost = rem.lost_now if rem is not None else np.zeros(s, dtype=np.int64)
    new = rem.new if rem is not None else np.zeros(s, dtype=bool)
    c, la, lb, sl = _switch_counts(f, roles, lost, new)
    max_rank = int(c.rank.max()) if s else -1

    # candidate partitions, then the finest within the budget
    a_rows = np.stack([c.role, c.compute > 0, c.other > 0, c.agg > 0, c.flags], axis=1)
    b_rows = np.stack([c.role, c.compute, c.other, c.agg, c.up, c.down, c.same, c.loops,
                       c.odd, c.lost, c.flags], axis=1)
    a_key = count_rows(c.rank, a_rows.astype(np.int64))
    b_key = count_rows(c.rank, b_rows.astype(np.int64))
    nl = ~(la == lb)
    src = np.concatenate([la[nl], lb[nl]])
    dst = np.concatenate([lb[nl], la[nl]])
    cands = partitions(a_key, b_key, src, dst)
    twins = cands[-1][1]
    grouping, part = cands[0]
    for name, p in cands:
        if widest_row(p, c.rank) <= max(max_boxes, 1):
            grouping, part = name, p
    n_box = int(part.max(initial=-1)) + 1

    boxes: list[Box] = []
    edges: list[Edge] = []
    anomalies: dict[str, int] = {}
    box_ids = [f"g{k}" for k in range(n_box)]
    rows: dict[int, list[str]] = {}
    for k in range(n_box):
        mem = np.flatnonzero(part == k)
        boxes.extend(_switch_box(f, roles, c, mem, twins, max_rank, box_ids[k]))
        rows.setdefault(int(c.rank[mem[0]]), []).append(box_ids[k])

    # cables between boxes
    bl, bh = part[la], part[lb]
    rlo, rhi = c.rank[la], c.rank[lb]
    swap = (rhi < rlo) | ((rhi == rlo) & (bh < bl))
    t_box = np.where(swap, bh, bl)
    h_box = np.where(swap, bl, bh)
    t_sw = np.where(swap, lb, la)
    loop = la == lb
    same = ~loop & (rlo == rhi) & (rlo >= 0)
    other = ~loop & ((rlo < 0) | (rhi < 0))
    kind = np.where(loop, 3, np.where(same, 1, np.where(other, 2, 0)))
    key = (t_box * n_box + h_box) * 4 + kind
    for kk in np.unique(key).tolist():
        sel = key == kk
        tb, hb, kd = kk // 4 // max(n_box, 1), kk // 4 % max(n_box, 1), kk % 4
        cables = int(sel.sum())
        per = np.bincount(t_sw[sel], minlength=s)[part == tb]
        label = f"{cables:,}"
        if kd == 0 and int(per.min()) == int(per.max()) > 1 and len(per) > 1:
            label += f" ({int(per[0])} each)"
        if kd == 1:
            edges.append(Edge(box_ids[tb], box_ids[hb], "same_rank", cables,
                              f"{cables:,} same-level", "same_rank_links"))
        elif kd == 3:
            edges.append(Edge(box_ids[tb], box_ids[hb], "self_loop", cables,
                              f"{cables:,} self-looped", "self_loops"))
        else:
            edges.append(Edge(box_ids[tb], box_ids[hb], "link" if kd == 0 else "other",
                              cables, label))

    if rem is not None:
        _removed_parts(f, c, rem, part, box_ids, max_rank, boxes, edges, rows)

    for kind_ in ("hosts_on_non_leaf", "self_loops", "same_rank_links", "missing_up_links",
                  "missing_down_links", "unranked_switches", "disconnected", "link_mismatch"):
        if summary.anomaly_count(kind_):
            anomalies[kind_] = summary.anomaly_count(kind_)
    if rem is not None:
        for kind_, n in (("removed_switches", len(rem.gone)), ("removed_links", len(rem.links)),
                         ("new_switches", int(rem.new.sum()))):
            if n:
                anomalies[kind_] = n

    n_hosts = int(roles.hosts_mask.sum())
    n_agg = int((roles.endport_role == EndportRole.AGGREGATION).sum())
    head = title or (f"{plural(s, 'switch')} in {max_rank + 1} level"
                     f"{'s' if max_rank else ''}, {plural(n_hosts, 'host')}"
                     + (f", {plural(n_agg, 'aggregation node')}" if n_agg else ""))
    legend = [Line(f"{plural(n_box, 'box')}: " + GROUPING_TEXT[grouping.split()[0]], "note")]
    if not roles.tree:
        legend.append(Line(f"not a tree: {roles.why_not_tree}", "note"))
    leaves_short = anomalies.get("missing_down_links", 0) - int(
        ((c.flags & _F_MISS_DOWN) > 0).sum())
    for kind_, n in anomalies.items():
        what = {"disconnected": f"{n:,} disconnected component{'s' if n > 1 else ''} "
                                "(besides the largest)",
                "missing_up_links": f"missing up-links: {plural(n, 'switch')}",
                "missing_down_links": f"missing down-links: {plural(n, 'switch')}" + (
                    f" ({leaves_short:,} of them leaves with fewer hosts than the fullest)"
                    if leaves_short else ""),
                "hosts_on_non_leaf": f"hosts on a spine (non-leaf switch): "
                                     f"{plural(n, 'switch')}",
                }.get(kind_, f"{ANOMALY_NAMES[kind_]}: {n:,}")
        legend.append(Line(what, "removed" if kind_.startswith("removed") else "anomaly"))
    if rem is not None and rem.cut_off:
        legend.append(Line(f"{plural(rem.cut_off, 'host')} of the original cut off or gone",
                           "removed"))
    if not anomalies:
        legend.append(Line("no anomaly", "note"))
    order = sorted(rows, key=lambda r: (r < 0, -r))
    return Drawing(
        title=head, legend=tuple(legend), boxes=tuple(boxes), edges=tuple(edges),
        rows=tuple((r, tuple(rows[r])) for r in order), grouping=grouping, n_switches=s,
        anomalies=anomalies,
    )


def _switch_box(f: Fabric, roles: FabricRoles, c: _Switches, mem: IntArray, twins: IntArray,
                max_rank: int, box_id: str) -> list[Box]:
    """A switch box and its hosts / service boxes."""
    n = len(mem)
    rank = int(c.rank[mem[0]])
    lvl = level_name(rank, max_rank)
    nodes = c.nodes[mem]
    desc = short(f.node_desc[int(nodes[0])])
    if n == 1:
        lines = [Line(f"{lvl}: {desc}", "title"),
                 Line(f"{int(f.node_guid[int(nodes[0])]):#018x}", "note")]
    else:
        lines = [Line(f"{n:,} × {lvl}", "title"), Line(f"e.g. {desc}", "note")]
    links = []
    if rank >= 0 and rank < max_rank:
        links.append(f"up {span(c.up[mem])}")
    if rank > 0:
        links.append(f"down {span(c.down[mem])}")
    if links:
        lines.append(Line(" · ".join(links) + (" each" if n > 1 else "")))
    if int(c.odd[mem].max()):
        lines.append(Line(f"links to unranked switches {span(c.odd[mem])}"))
    agg = int((c.agg[mem] > 0).sum())
    if agg:
        lines.append(Line("SHARP aggregation node" + (" on each" if agg == n > 1 else (
            f" on {agg} of {n}" if n > 1 else "")), "note"))
    if n > 1:
        groups = np.unique(twins[mem], return_counts=True)[1]
        if 1 < len(groups) < n:
            sizes = (f"of {int(groups[0]):,}" if int(groups.min()) == int(groups.max())
                     else f"of {span(groups)}")
            what = "uplinks" if rank == 0 else "neighbour switches"
            lines.append(Line(f"{len(groups):,} groups {sizes} with the same {what}", "note"))
    fl = np.bitwise_or.reduce(c.flags[mem])
    anomalies: list[str] = []
    if fl & _F_MISS_UP:
        miss = mem[(c.flags[mem] & _F_MISS_UP) > 0]
        lines.append(Line(f"missing up-links: {span(c.up[miss])} of "
                          f"{int(c.up_max[rank])}", "anomaly"))
        anomalies.append("missing_up_links")
    if fl & _F_MISS_DOWN:
        miss = mem[(c.flags[mem] & _F_MISS_DOWN) > 0]
        lines.append(Line(f"missing down-links: {span(c.down[miss])} of "
                          f"{int(c.down_max[rank])}", "anomaly"))
        anomalies.append("missing_down_links")
    if fl & _F_SPINE_HOSTS:  # named on its service box
        anomalies.append("hosts_on_non_leaf")
    if fl & _F_LOOP:
        lines.append(Line(f"self-looped cables: {int(c.loops[mem].sum()):,}", "anomaly"))
        anomalies.append("self_loops")
    if fl & _F_SAME:
        lines.append(Line(f"same-level links: {span(c.same[mem])}" + (" each" if n > 1 else ""),
                          "anomaly"))
        anomalies.append("same_rank_links")
    if fl & _F_UNRANKED:
        lines.append(Line("unranked: no path to a leaf", "anomaly"))
        anomalies.append("unranked_switches")
    if fl & _F_LOST:
        lines.append(Line(f"lost {span(c.lost[mem])} cable" + ("s" if int(c.lost[mem].max()) > 1
                                                                  else "") + " (removed)",
                          "removed"))
    if fl & _F_NEW:
        lines.append(Line("not in the original", "anomaly"))
        anomalies.append("new_switches")
    out = [Box(box_id, "switches", rank, n, tuple(lines), nodes.copy(), tuple(anomalies))]
    comp = c.compute[mem]
    if int(comp.max()):
        total = int(comp.sum())
        word = "host" if int(comp.max()) == 1 else "hosts"
        hl = [Line(f"{span(comp)} {word}" + (" each" if n > 1 else ""), "title")]
        if n > 1:
            hl.append(Line(f"{total:,} in all", "note"))
        out.append(Box(f"h{box_id}", "hosts", rank, total, tuple(hl),
                       np.zeros(0, dtype=np.int64), (), box_id))
    oth = c.other[mem]
    if int(oth.max()):
        out.append(_service_box(f, roles, nodes, rank, box_id))
    return out


def _service_box(f: Fabric, roles_: FabricRoles, switch_nodes: IntArray, rank: int,
                 box_id: str) -> Box:
    """The service / storage / management / I/O hosts and routers on ``switch_nodes``."""
    on = np.isin(roles_.attach, switch_nodes) & np.isin(
        roles_.endport_role, [int(r) for r in _OTHER_ROLES])
    eps = np.flatnonzero(on)
    names = {EndportRole.SERVICE: "service", EndportRole.STORAGE: "storage",
             EndportRole.MANAGEMENT: "management", EndportRole.IO: "I/O",
             EndportRole.ROUTER: "router"}
    lines = []
    kinds = np.unique(roles_.endport_role[eps], return_counts=True)
    head = ", ".join(f"{int(n):,} {names[EndportRole(int(r))]}" for r, n in zip(*kinds,
                                                                              strict=True))
    lines.append(Line(f"host{'s' if len(eps) > 1 else ''}: {head}", "title"))
    for e in eps[:3].tolist():
        lines.append(Line(short(f.node_desc[e], 28), "note"))
    if len(eps) > 3:
        lines.append(Line(f"and {len(eps) - 3:,} more", "note"))
    anomalies: tuple[str, ...] = ()
    if rank > 0:
        lines.append(Line("hosts on a spine", "anomaly"))
        anomalies = ("hosts_on_non_leaf",)
    return Box(f"s{box_id}", "service", rank, len(eps), tuple(lines), eps, anomalies, box_id)


def _removed_parts(f: Fabric, c: _Switches, rem: _Removed, part: IntArray, box_ids: list[str],
                   max_rank: int, boxes: list[Box], edges: list[Edge],
                   rows: dict[int, list[str]]) -> None:
    """Removed switches (boxes at their former rank) and removed cables (edges)."""
    o, oroles = rem.orig, rem.orig_roles
    loc = np.full(f.n_nodes, -1, dtype=np.int64)
    loc[c.nodes] = np.arange(len(c.nodes))
    # removed switches grouped by former rank and host count
    gone = rem.gone
    grank = oroles.rank[gone]
    ghosts = oroles.hosts[gone]
    gkey = dense([(int(r), int(h)) for r, h in zip(grank.tolist(), ghosts.tolist(),
                                                    strict=True)])
    a, b, loop = switch_links(o)
    cab = np.bincount(np.concatenate([a[~loop], b[~loop]]), minlength=o.n_nodes)
    where: dict[int, str] = {}  # original node -> box id
    for k in range(int(gkey.max(initial=-1)) + 1):
        mem = gone[gkey == k]
        r = int(oroles.rank[mem[0]])
        bid = f"r{k}"
        n = len(mem)
        lvl = level_name(r, max(max_rank, int(oroles.rank.max())))
        lines = [Line(f"removed: {n:,} × {lvl}" if n > 1 else f"removed {lvl}", "removed"),
                 Line(short(o.node_desc[int(mem[0])]) if n == 1 else
                      f"e.g. {short(o.node_desc[int(mem[0])])}", "note")]
        h = int(oroles.hosts[mem[0]])
        had = [f"{span(cab[mem])} switch cable" + ("s" if int(cab[mem].max()) > 1 else "")]
        if h:
            had.append(f"{h:,} host" + ("s" if h > 1 else ""))
        lines.append(Line("had " + ", ".join(had) + (" each" if n > 1 else ""), "removed"))
        boxes.append(Box(bid, "removed", r, n, tuple(lines), mem.copy(), ("removed_switches",)))
        rows.setdefault(r, []).append(bid)
        for m in mem.tolist():
            where[m] = bid
    # cables: original switch links with a removed end, and removed links
    is_sw = o.node_type == NodeType.SWITCH
    sl = np.flatnonzero(is_sw[o.port_node[o.link_a]] & is_sw[o.port_node[o.link_b]])
    gone_mask = np.zeros(o.n_nodes, dtype=bool)
    gone_mask[gone] = True
    removed_link = np.isin(sl, rem.links)
    pick = (gone_mask[a] | gone_mask[b] | removed_link) & ~loop
    cur_a = f.nodes_by_guid(o.node_guid[a[pick]])
    cur_b = f.nodes_by_guid(o.node_guid[b[pick]])
    agg: dict[tuple[str, str], int] = {}
    for na, nb, ca, cb in zip(a[pick].tolist(), b[pick].tolist(), cur_a.tolist(),
                              cur_b.tolist(), strict=True):
        ida = where.get(na) if ca < 0 else (box_ids[int(part[loc[ca]])] if loc[ca] >= 0 else None)
        idb = where.get(nb) if cb < 0 else (box_ids[int(part[loc[cb]])] if loc[cb] >= 0 else None)
        if ida is None or idb is None:
            continue
        ra, rb = int(oroles.rank[na]), int(oroles.rank[nb])
        key = (ida, idb) if (ra, ida) <= (rb, idb) else (idb, ida)
        agg[key] = agg.get(key, 0) + 1
    for (tail, head), n in agg.items():
        gone_end = tail.startswith("r") or head.startswith("r")
        # a removed switch's box says how many cables it had; removed links are counted
        edges.append(Edge(tail, head, "removed", n, "" if gone_end else f"{n:,} removed",
                          "removed_switches" if gone_end else "removed_links"))
