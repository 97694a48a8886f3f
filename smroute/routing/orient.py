"""Another orientation for the few destinations a tree cannot serve, on one VL.

Some end-ports of a tree have traffic with no up*/down* path in it (hosts and
aggregation nodes on upper switches, a leaf that lost its common ancestors).
The tree's routes stay for every destination they serve; only the
destinations such traffic needs
(:func:`~smroute.routing.turn_switches.needed_turns`) take another route
where the tree has none: the switches without an up*/down* path to one of
them take the tree's route towards a *turn switch*
(:func:`~smroute.routing.turn_switches.turn_options`: one with a path to
the destination that every switch needing one can reach), where the route
joins the tree's route to the destination (:func:`route_turns`).  Mode
``tree+turns`` accepts one turn root per
component when every route is up*/down* in the root's orientation (a
sufficient condition); :func:`accept` takes turns when the routes of those
destinations are delivered wherever they are needed and the channel
dependency graph of the whole table set is acyclic
(:func:`~smroute.routing.deadlock.check_credit_loops`): free of credit loops
on one VL, proven rather than implied by one orientation.
:func:`orient_whole` tries every destination at once, through the turn
switches most of them share
(:func:`~smroute.routing.turn_switches.shared_roots`: turns at two leaves in
opposite directions close cycles), then through each one's first turn switch
(leaves first, then the highest switches); :func:`orient_shared` those of
the most shared turn switch at once, the others one at a time on top;
:func:`orient_one_by_one` one
destination at a time (:func:`orient_each`: each takes the first of a few
turn switches that keeps the dependencies acyclic; a destination none
serves keeps the tree's routes, and the validation walk reports the needed
pairs it leaves).  The mode chain tries the service hosts' anchors
after the first of the three.
Those destinations are then walked for delivery only
(:attr:`Orientation.turns`), on the cables an escape route may take
(:func:`walk_graph`: the turn root's orientation uses cables between
switches of one rank of the tree, which the tree's graph leaves out).
Where some source needs two turns (no one turn switch serves every
source), :func:`search_turns` routes a
destination backwards from the switches with a path, each switch taking a
cable whose channel dependency keeps the graph acyclic (a last resort of
the mode chain, ``orient_each(..., search=True)``).

Pure: arrays in, arrays out; called by the mode chain
(:mod:`smroute.routing.modes`), whose ``tree+turns`` step routes through
one turn root per component with :func:`route_turns` too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import NeededPairs
from smroute.routing import kernel, turn_switches
from smroute.routing.acyclic import AcyclicGrowth, CycleError
from smroute.routing.deadlock import (
    VLS,
    ChannelLinks,
    Dependencies,
    channel_links,
    dependencies,
    loop_check,
    merged,
)
from smroute.routing.dmodc import INF, Destinations
from smroute.routing.topology import SwitchGraph, ranked_like
from smroute.routing.validate import OK, walk
from smroute.tables.lft import ForwardingTables

__all__ = ["Fixed", "Orientation", "accept", "as_tables", "dependencies_with", "fixed_routes",
           "orient_each", "orient_one_by_one", "orient_shared", "orient_whole", "route_turns",
           "search_turns", "turn_hops", "undelivered", "walk_graph"]


@dataclass(frozen=True, eq=False)
class Orientation:
    """Destinations ``turns`` ``(D,)`` bool routed through a turn switch,
    accepted by :func:`accept`; ``why``: the check's summary; ``complete``:
    every destination that needed it is among them."""

    turns: np.ndarray
    why: str
    complete: bool = True


@dataclass(frozen=True, eq=False)
class Fixed:
    """The channel dependencies ``rest`` of the routes towards every LID
    but ``lids`` (those an orientation may change) in some tables, and the
    fabric's ``links``: a check of other routes towards ``lids`` only
    follows those (:func:`dependencies_with`); ``hops``: the most switch
    hops of a route (:func:`turn_hops`, or more where routes are longer)."""

    rest: Dependencies
    lids: np.ndarray
    links: ChannelLinks
    hops: int


def fixed_routes(fabric: Fabric, g: SwitchGraph, ports: np.ndarray, lids: np.ndarray,
                 hops: int | None = None) -> Fixed:
    """The :class:`Fixed` routes of the tables ``ports`` (rows: ``g``'s
    switches) but those towards ``lids``, of at most ``hops`` switch hops
    (default :func:`turn_hops`)."""
    links = channel_links(fabric)
    hops = max(hops or 0, turn_hops(g))
    return Fixed(dependencies(fabric, as_tables(fabric, g, ports), max_hops=hops + 1,
                              links=links, skip=lids), np.asarray(lids, np.int64), links, hops)


def dependencies_with(fabric: Fabric, g: SwitchGraph, ports: np.ndarray,
                      fixed: Fixed) -> Dependencies:
    """The channel dependencies of every route of ``ports``, whose routes
    towards LIDs other than ``fixed.lids`` are ``fixed``'s."""
    return merged(fixed.rest, dependencies(fabric, as_tables(fabric, g, ports),
                                           max_hops=fixed.hops + 1, lids=fixed.lids,
                                           links=fixed.links))


def as_tables(fabric: Fabric, g: SwitchGraph, ports: np.ndarray) -> ForwardingTables:
    """The tables ``ports`` (rows: ``g``'s switches) as :class:`ForwardingTables`."""
    return ForwardingTables(switch_guid=g.sw_guid, switch_lid=g.sw_lid,
                            switch_desc=tuple(fabric.node_desc[n] for n in g.sw_node.tolist()),
                            ports=ports)


def turn_hops(g: SwitchGraph) -> int:
    """The longest walk through a turn root: up*/down* to the root, then
    up*/down* to the destination."""
    return 4 * max(g.max_rank, 0) + 2


def walk_graph(g: SwitchGraph, escape: SwitchGraph) -> SwitchGraph:
    """The graph the routes of an orientation are walked on: ``escape``'s
    cables with ``g``'s ranks where ``escape`` (the turn root's orientation,
    :func:`~smroute.routing.topology.rooted_graph`) has every cable of
    ``g`` and more (cables between switches of one rank of ``g``, which an
    escape route may take), else ``g``."""
    n = g.n_switches
    mine = g.grp_switch * n + g.grp_remote
    more = escape.grp_switch * n + escape.grp_remote
    if len(more) <= len(mine) or not np.isin(mine, more).all():
        return g
    return ranked_like(escape, g)


def undelivered(g: SwitchGraph, dest: Destinations, ports: np.ndarray, turns: np.ndarray,
                needed: NeededPairs, c: np.ndarray, walk_on: SwitchGraph | None = None,
                hops: int | None = None) -> np.ndarray:
    """``(D,)`` int64: per destination of ``turns`` ``(D,)`` bool, the
    switches carrying end-ports that need it (or have an up*/down* path to
    it) whose walk in the tables ``ports`` does not deliver it within
    ``hops`` switch hops (default :func:`turn_hops`); walked on ``walk_on``
    (:func:`walk_graph`; default ``g``)."""
    cols = np.flatnonzero(turns)
    src = np.unique(g.ep_switch)
    sub = Destinations(lid=dest.lid[cols], nid=dest.nid[cols], target=dest.target[cols],
                       local_port=dest.local_port[cols], is_switch=dest.is_switch[cols],
                       owner=dest.owner[cols])
    status, _ = walk(walk_on or g, ports, sub, src, turns=np.ones(len(cols), dtype=bool),
                     max_hops=hops or turn_hops(g))
    same = g.component[src][:, None] == g.component[sub.target][None, :]
    need = same & needed.mask(src, sub.target, needed.agg[sub.owner])
    need |= c[np.ix_(src, sub.target)] < INF
    out = np.zeros(len(dest.lid), dtype=np.int64)
    out[cols] = np.count_nonzero(need & (status != OK), axis=0)
    return out


def accept(fabric: Fabric, g: SwitchGraph, dest: Destinations, ports: np.ndarray,
           turns: np.ndarray, needed: NeededPairs, c: np.ndarray, fixed: Fixed,
           walk_on: SwitchGraph | None = None) -> str:
    """Why the tables ``ports`` with ``turns`` ``(D,)`` bool routed through
    the turn root are not accepted ("" if they are): a needed pair of those
    destinations left undelivered (:func:`undelivered`), or a credit loop
    (of every route, those towards LIDs other than ``fixed.lids`` being
    ``fixed``'s, of at most ``fixed.hops`` switch hops); ``walk_on``: as
    :func:`undelivered`'s."""
    lost = int(undelivered(g, dest, ports, turns, needed, c, walk_on, fixed.hops).sum())
    if lost:
        return f"{lost} needed switch-to-LID pairs of them undelivered through the turn root"
    check = loop_check(fabric, dependencies_with(fabric, g, ports, fixed))
    return "" if check.ok and not check.unfinished else check.summary()


def route_turns(g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
                turns: np.ndarray, root: np.ndarray, ports: np.ndarray) -> None:
    """Route the destinations ``turns`` ``(D,)`` bool through their turn
    switches ``root`` ``(K,)`` in place in ``ports``: a switch without an
    up*/down* path to such a destination takes Dmodc's route towards its
    turn switch, with the destination's NID (so the load still spreads); the
    others keep the tree's entries."""
    sel = np.flatnonzero(turns)
    have = root >= 0
    sel, root = sel[have], root[have]
    if not len(sel):
        return
    tgt = dest.target[sel]
    none = (c[:, tgt] == INF) & (c[:, root] < INF)  # (S, K)
    rows = np.flatnonzero(none.any(axis=1))
    k = len(sel)
    sub = Destinations(lid=np.arange(k, dtype=np.int64), nid=dest.nid[sel], target=root,
                       local_port=np.zeros(k, dtype=np.int64),
                       is_switch=dest.is_switch[sel], owner=dest.owner[sel])
    via = np.empty((len(rows), k), dtype=np.uint8)
    ctx = kernel.route_context(c, sub)
    for lo in range(0, len(rows), 256):
        kernel.route_block(g, c, pi, sub, rows[lo:lo + 256], via[lo:lo + 256], ctx)
    lids = dest.lid[sel]
    block = ports[np.ix_(rows, lids)]
    np.copyto(block, via, where=none[rows])
    ports[np.ix_(rows, lids)] = block


def orient_whole(fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray,
                 dest: Destinations, ports: np.ndarray, candidates: Sequence[np.ndarray],
                 needed: NeededPairs, walk_on: SwitchGraph | None = None
                 ) -> tuple[Orientation | None, str, Fixed | None]:
    """Try each set of destinations of ``candidates`` (``(D,)`` bool, e.g.
    every destination a turn would serve, then only the needed ones) in
    order, each with the turn switches most of them share
    (:func:`~smroute.routing.turn_switches.shared_roots`), then their own
    first ones low first, then high
    (:func:`~smroute.routing.turn_switches.turn_roots`): routed in a copy of
    ``ports`` (the tree's tables) by :func:`route_turns`, judged by
    :func:`accept` (an empty set: the tree's tables are accepted as they
    are); ``walk_on``: the graph the routes are walked on
    (:func:`walk_graph`; default ``g``).  Returns the
    accepted orientation with its tables written into ``ports``, else
    ``None`` (``ports`` untouched) and why, and the routes no trial changes
    (:func:`fixed_routes`, for :func:`orient_one_by_one`)."""
    why = ""
    fixed: Fixed | None = None
    on = walk_on or g
    for turns in candidates:
        if not turns.any():  # no needed pair lacks an up*/down* path: the tree's tables
            return Orientation(turns, "no needed pair lacks an up*/down* path"), "", fixed
        if fixed is None:  # the routes no trial changes, followed once
            fixed = fixed_routes(fabric, g, ports,
                                 dest.lid[np.logical_or.reduce(list(candidates))])
        tried: list[np.ndarray] = []
        for pick in ("shared", "low", "high"):
            root = turn_switches.shared_roots(g, c, dest, turns, needed) if (
                pick == "shared") else turn_switches.turn_roots(g, c, dest, turns, needed,
                                                                low_first=pick == "low")
            if any(np.array_equal(root, r) for r in tried):
                continue
            tried.append(root)
            trial = ports.copy()
            route_turns(g, c, pi, dest, turns, root, trial)
            why = accept(fabric, g, dest, trial, turns, needed, c, fixed, on)
            if not why:
                ports[...] = trial
                n = len(np.unique(root[root >= 0]))
                shared = "" if pick != "shared" else (
                    f"through the {'one switch' if n == 1 else f'{n} switches'} most of them "
                    "may turn at; ")
                return Orientation(turns, f"{shared}the channel dependencies of every route "
                                   "are acyclic"), "", fixed
    return None, why, fixed


def orient_one_by_one(fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray,
                      dest: Destinations, ports: np.ndarray, turns: np.ndarray,
                      needed: NeededPairs, fixed: Fixed,
                      escape: tuple[SwitchGraph, np.ndarray, np.ndarray] | None = None,
                      own: str = "the tree's routes", walk_on: SwitchGraph | None = None,
                      progress: Callable[[int, int], None] | None = None
                      ) -> tuple[Orientation | None, str]:
    """The destinations ``turns`` oriented one at a time (:func:`orient_each`;
    if that leaves some, again in the other order, the one serving more
    kept) in a copy of ``ports`` (the tree's tables), judged by
    :func:`accept`; ``fixed``: :func:`orient_whole`'s.  Returns the
    orientation with its tables written into ``ports``, else ``(None,
    why)`` (``ports`` untouched); ``own``: what the routes of ``ports`` are
    called in the summary; ``progress``: :func:`orient_each`'s, per order."""
    trial = ports.copy()
    done = orient_each(fabric, g, c, pi, dest, turns, needed, trial, escape=escape, fixed=fixed,
                       progress=progress)
    if done.sum() < turns.sum():  # some left: the other order may serve more
        other = ports.copy()
        more = orient_each(fabric, g, c, pi, dest, turns, needed, other,
                           escape=escape, fewest_first=False, fixed=fixed, progress=progress)
        if more.sum() > done.sum():
            trial, done = other, more
    if not done.any():
        return None, ""
    left = int(turns.sum() - done.sum())
    why = accept(fabric, g, dest, trial, done, needed, c, fixed, walk_on or g)
    if why:
        return None, why
    ports[...] = trial
    tail = (f"; {left} destination LIDs no orientation serves free of credit loops keep "
            f"{own} (the needed pairs they leave are reported; detours over 2 VLs "
            "deliver them where the subnet manager programs VLs)") if left else ""
    return Orientation(done, "each destination's turn switch chosen so that the channel "
                       f"dependencies of every route stay acyclic{tail}", not left), ""


def orient_shared(fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray,
                  dest: Destinations, ports: np.ndarray, turns: np.ndarray,
                  needed: NeededPairs, fixed: Fixed,
                  escape: tuple[SwitchGraph, np.ndarray, np.ndarray] | None = None,
                  walk_on: SwitchGraph | None = None,
                  progress: Callable[[int, int], None] | None = None
                  ) -> Orientation | None:
    """The destinations ``turns`` that may turn at the switch most of them
    may turn at (:func:`~smroute.routing.turn_switches.shared_roots`) routed
    through it all at once, in a copy of ``ports`` (the tree's tables),
    then the others one at a time on top (:func:`orient_each`, with its
    search), judged by :func:`accept`; ``fixed``: :func:`orient_whole`'s.
    Returns the orientation with its tables written into ``ports`` if it
    serves every one, else ``None`` (``ports`` untouched).  Where turns at
    several switches close cycles (one's cable into it after another's
    cable out of it, and back), turns at one serve most destinations free
    of credit loops, and the greedy choice of :func:`orient_each` is left
    only the few that one switch cannot serve."""
    sel = np.flatnonzero(turns)
    root = turn_switches.shared_roots(g, c, dest, turns, needed)
    if not (root >= 0).any():
        return None
    vals, counts = np.unique(root[root >= 0], return_counts=True)
    top = int(vals[np.argmax(counts)])
    batch = np.zeros(len(dest.lid), dtype=bool)
    batch[sel[root == top]] = True
    rest = turns & ~batch
    if not rest.any():  # one switch for every one: orient_whole's trial
        return None
    trial = ports.copy()
    route_turns(g, c, pi, dest, batch, np.full(int(batch.sum()), top), trial)
    done = orient_each(fabric, g, c, pi, dest, rest, needed, trial, escape=escape, patience=1,
                       fixed=fixed_routes(fabric, g, trial, dest.lid[rest]), search=True,
                       progress=progress)
    if done.sum() < rest.sum() or accept(fabric, g, dest, trial, turns, needed, c, fixed,
                                         walk_on or g):
        return None
    ports[...] = trial
    return Orientation(turns, (
        f"{int(batch.sum())} of them through the one switch most of them may turn at, the "
        f"other {int(rest.sum())} each through a turn switch chosen so that the channel "
        "dependencies stay acyclic, or where none serves, routed backwards from the switches "
        "with a path, cable by cable; the channel dependencies of every route are acyclic"))


def orient_each(fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray,
                dest: Destinations, turns: np.ndarray, needed: NeededPairs,
                ports: np.ndarray, tries: int = 16,
                escape: tuple[SwitchGraph, np.ndarray, np.ndarray] | None = None,
                fewest_first: bool = True, patience: int = 64,
                fixed: Fixed | None = None, search: bool = False,
                progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Orient the destinations ``turns`` ``(D,)`` bool one at a time in
    place in ``ports`` (the tree's tables): each takes the first of its
    :func:`~smroute.routing.turn_switches.turn_options` (a few low, then
    high) whose routes keep the channel dependencies of all routes so far
    acyclic, else (``escape``: a graph with its costs and dividers, e.g.
    the turn root's up*/down* orientation) its whole column routed up*/down* in ``escape`` if that
    keeps them acyclic; ``(D,)`` bool, the destinations oriented (the others
    keep the tree's routes; none is tried with the target switch and kind
    of one that failed: the same options, and none after ``patience`` in a
    row failed: where turns close
    cycles with the tree's routes, trying every destination costs a
    dependency check each and serves none).  ``fewest_first``: in order of
    the switches that lack a path to them, fewest first (else most first).
    ``fixed``: the routes of ``ports`` towards the other LIDs
    (:func:`fixed_routes`, else followed here).  ``search``: a destination
    none of those serves is then routed by :func:`search_turns`.  None is
    oriented where the routes of ``ports`` already close a cycle.
    ``progress(done, total)``: called before each destination is tried and
    once at the end."""
    fixed = fixed or fixed_routes(fabric, g, ports, dest.lid[turns])
    t = as_tables(fabric, g, ports)
    hops = turn_hops(g) + 1
    dep = dependencies_with(fabric, g, ports, fixed)
    done = np.zeros(len(dest.lid), dtype=bool)
    try:
        graph = AcyclicGrowth(dep.n_channels, dep.edges)
    except CycleError:  # the routes it starts from close a cycle: none can be added
        return done
    used: dict[int, int] = {}
    sel = np.flatnonzero(turns)
    lacking = np.count_nonzero(c[:, dest.target[sel]] == INF, axis=0)
    # destinations with the same options: the target switch and whether an aggregation node
    key = np.full(len(dest.lid), -1, dtype=np.int64)
    key[sel] = turn_switches.option_keys(dest, sel, needed)
    failed: set[int] = set()
    options: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # (the same for a key's LIDs)
    in_a_row = 0
    tick = progress or (lambda done, total: None)
    for i, j in enumerate(sel[np.argsort(lacking if fewest_first else -lacking,
                                         kind="stable")].tolist()):
        tick(i, len(sel))
        if int(key[j]) in failed:  # the same options failed for another LID
            continue
        lid = int(dest.lid[j])
        keep = ports[:, lid].copy()
        one = np.zeros(len(dest.lid), dtype=bool)
        one[j] = True
        if int(key[j]) not in options:
            options[int(key[j])] = turn_switches.turn_options(g, c, dest, j, needed)
        low, high = options[int(key[j])]
        valid = np.zeros(g.n_switches, dtype=bool)
        valid[low] = True
        # the turn switches taken so far first (turns at few switches close
        # few cycles), then the options low and high
        opts = list(dict.fromkeys([*(r for r in sorted(used, key=lambda x: -used[x])
                                     if valid[r])][:tries // 2]
                                  + low[:tries // 2].tolist() + high[:4].tolist()))
        for r in opts:
            route_turns(g, c, pi, dest, one, np.array([r]), ports)
            d = dependencies(fabric, t, max_hops=hops, lids=np.array([lid]),
                             links=fixed.links)
            if not d.unfinished and graph.add(d.edges):
                done[j] = True
                used[r] = used.get(r, 0) + 1
                break
            ports[:, lid] = keep
        if not done[j] and escape is not None:  # the whole column up*/down* in the escape
            eg, ec, epi = escape
            sub = Destinations(lid=np.zeros(1, dtype=np.int64), nid=dest.nid[j:j + 1],
                               target=dest.target[j:j + 1], local_port=dest.local_port[j:j + 1],
                               is_switch=dest.is_switch[j:j + 1], owner=dest.owner[j:j + 1])
            col = np.empty((g.n_switches, 1), dtype=np.uint8)
            kernel.route_block(eg, ec, epi, sub, np.arange(g.n_switches), col)
            ports[:, lid] = col[:, 0]
            d = dependencies(fabric, t, max_hops=hops, lids=np.array([lid]),
                             links=fixed.links)
            if not d.unfinished and graph.add(d.edges):
                done[j] = True
            else:
                ports[:, lid] = keep
        if not done[j] and search:
            if search_turns(fabric, g, c, dest, j, ports, graph, fixed.links,
                            turn_switches.lacking_sources(g, c, dest, j, needed)):
                d = dependencies(fabric, t, max_hops=hops, lids=np.array([lid]),
                                 links=fixed.links)
                done[j] = not d.unfinished and graph.add(d.edges)
            if not done[j]:
                ports[:, lid] = keep
        in_a_row = 0 if done[j] else in_a_row + 1
        if not done[j]:
            failed.add(int(key[j]))
            if in_a_row >= patience:
                break
    tick(len(sel), len(sel))
    return done


def search_turns(fabric: Fabric, g: SwitchGraph, c: np.ndarray, dest: Destinations, j: int,
                 ports: np.ndarray, graph: AcyclicGrowth, links: ChannelLinks,
                 must: np.ndarray) -> bool:
    """Route destination ``j`` backwards from the switches with an up*/down*
    path to it (they keep their entries), in place in ``ports``: in rounds,
    each switch next to the routed ones takes one of its cables to one (from
    its ``NID`` on, those whose dependency on the next channel follows
    ``graph``'s order first) if that dependency keeps ``graph`` acyclic (it
    is added).  Such a route may turn more than once (a turn switch per
    switch, where no one turn switch serves every source).  Whether every
    switch of ``must`` ``(K,)`` is routed (else ``ports``' column is to be
    restored; ``graph`` keeps the edges added, which only constrains)."""
    t, lid, nid = int(dest.target[j]), int(dest.lid[j]), int(dest.nid[j])
    sid = np.full(fabric.n_nodes, -1, dtype=np.int64)
    sid[fabric.switches] = np.arange(len(fabric.switches))
    fs = sid[g.sw_node]
    sw, rem = g.grp_switch, g.grp_remote
    done = c[:, t] < INF
    out = np.full(g.n_switches, -1, dtype=np.int64)  # the channel each routed switch takes
    on = np.flatnonzero(done & (ports[:, lid] < links.link.shape[1]))
    hop = links.link[fs[on], ports[on, lid]]
    out[on] = np.where(hop >= 0, hop * VLS, -1)
    out[t] = -1  # the destination's own switch: on to the end-port
    grew = True
    while grew:
        grew = False
        for u in np.unique(sw[~done[sw] & done[rem]]).tolist():
            opts = [(int(rem[i]), p) for i in np.flatnonzero((sw == u) & done[rem]).tolist()
                    for p in g.grp_ports[g.grp_port_first[i]:g.grp_port_first[i]
                                         + g.grp_port_count[i]].tolist()]
            opts = opts[nid % len(opts):] + opts[:nid % len(opts)]
            chs = [int(links.link[fs[u], p]) * VLS for _, p in opts]
            back = [out[v] >= 0 and graph.pos[ch] >= graph.pos[out[v]]
                    for (v, _), ch in zip(opts, chs, strict=True)]
            for k in np.argsort(back, kind="stable").tolist():
                (v, p), ch = opts[k], chs[k]
                if out[v] < 0 or graph.add(np.array([ch * graph.n + out[v]])):
                    ports[u, lid], out[u], done[u], grew = p, ch, True, True
                    break
    return bool(done[must].all())
