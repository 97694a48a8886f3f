"""The mode chain: how a fabric is routed when the routes of its graph do
not serve every pair, in one place for every engine (algorithm-free).

``tree`` -> ``tree+cross`` -> ``tree+turns`` -> ``tree+detours`` ->
``tree+orient``; when the fabric is no tree, ``shortest`` (a direct
network), else ``updown`` -> ``updown+detours`` -> ``updown+orient``:

* ``tree``: the engine's tables over the tree's ranks (:func:`start`).
* ``tree+cross``: some end-ports' traffic has no up*/down* path in the tree
  and cables between switches of one rank join them (Dragonfly+): where the
  tree has no path, routes up*, across one such cable, then down*
  (:mod:`smroute.routing.cross`; free of credit loops with the tree's
  routes on one VL).  Where they leave needed pairs (end-ports on upper
  switches without a cable across), with VLs only the switches without
  such a route take detours, the crossing routes kept as paths (accepted
  when the channel dependencies over the lanes are acyclic: mode
  ``tree+detours``); else those switches take routes up*/down* in an order
  of the switches every route is up*/down* in
  (:func:`~smroute.routing.cross.fill_ordered`, kept where every needed
  pair is then delivered free of credit loops); else, where they deliver
  every needed pair of some destination, the destinations they leave take
  the steps below on top of them (their columns the tree's again;
  ``tree+turns`` is skipped: its check assumes the tree's routes alone),
  and the mode is theirs.
* ``tree+turns``: some end-ports' traffic has no up*/down* path in the tree
  (:func:`turn_destinations`); the switches without a path take the
  engine's route towards a turn root (:func:`turn_roots`), where the route
  turns towards the destination; every route is then checked to be
  up*/down* in the orientation towards that root.
* ``tree+detours`` (``max_vls >= 2``): the check failed; those
  destinations are routed with detours over virtual lanes instead
  (:mod:`smroute.routing.detour`).
* ``tree+orient``: the check failed (and detours were off or could not
  route every pair): the tree's routes stay for every destination they
  serve; only the destinations some needed pair lacks a path to take the
  turn root's routes where the tree has none, accepted when they are
  delivered and the channel dependencies of all routes are acyclic
  (:mod:`smroute.routing.orient`: one VL, proven free of credit loops),
  first all at once. Where that fails, the service hosts' switches turn at
  anchors whose cables carry no transit
  (:mod:`smroute.routing.turn_anchors`), kept where every needed pair is
  then delivered free of credit loops; else the destinations take their
  turn switches one at a time, and where that leaves some, every switch
  lacking a path to those turns at its anchor on the orientation's tables.
  (The all-at-once orientation first: where it serves, it routes the
  compute hosts better than the anchors; the anchors before the
  one-at-a-time search: that search costs seconds on a large site.)
  Where those leave needed pairs too,
  a last resort orients every such destination again, one at a time (most
  switches lacking a path first): one no turn switch serves is routed
  backwards from the switches with a path, cable by cable while the channel
  dependencies stay acyclic, so a route may turn more than once
  (:func:`~smroute.routing.orient.search_turns`); kept only where it serves
  every one. Where it does not, the same search takes only the destinations
  left on top of the orientation's tables, then of the anchors' (kept on
  the same terms). A destination none serves keeps
  the tree's routes; the validation walk reports the needed pairs it
  leaves. A few destinations the tree cannot serve never change the
  routes of the others: no step re-routes the whole tree.
* ``shortest``: the fabric is a direct network
  (:attr:`~smroute.fabric.roles.FabricRoles.direct`: a torus, a hypercube,
  a ring, a random graph, hosts on every switch): every destination whose
  shortest routes in the cable graph avoid turning up after coming down in
  the up*/down* orientation below takes them (one VL), and with VLs so does
  every destination whose turns fit, moving to a higher VL at each
  (:mod:`smroute.routing.shortest`); kept where that serves every
  destination the next steps would take, checked free of credit loops over
  the lanes; the others keep the up*/down* routes.
* ``updown``: the fabric is no tree: every destination is routed up*/down*
  towards every top switch of its component (the roles' roots, as OpenSM's
  updn chooses its roots), never towards one.
* ``updown+detours`` / ``updown+orient``: as ``tree+detours`` /
  ``tree+orient``, for the destinations some end-port's traffic has no
  up*/down* path to towards the top switches (end-ports on top switches
  that need each other): the other destinations keep their up*/down* routes;
  the needed pairs no orientation serves free of credit loops are reported.

Which pairs need a route: :func:`~smroute.fabric.roles.needed_pairs`.
:func:`chain` runs the steps after the engine's tables (engines whose every
route leads to a switch with a path, :attr:`~smroute.routing.api.Guarantees.closer_groups`);
a new step plugs in there.  :func:`mode_graphs` gives the graphs a stored
mode was routed on (resume); :func:`routed_again`: the stored routings
resume routes again instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from smroute.fabric.graph import first_per_group
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import FabricRoles, NeededPairs
from smroute.routing import cross, dmodc, orient, shortest, turn_switches
from smroute.routing.api import Engine, Prepared
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.detour import route_detours
from smroute.routing.dmodc import INF, Destinations
from smroute.routing.topology import (
    SwitchGraph,
    next_switch,
    ranked_like,
    rooted_graph,
    switch_graph,
)
from smroute.routing.turn_anchors import anchor_turns
from smroute.routing.vlassign import VirtualLanes

__all__ = ["MODES", "ROUTED_AGAIN", "Outcome", "ProgressHook", "chain", "mode_graphs",
           "routed_again", "start", "turn_destinations", "turn_roots"]


#: A progress callback: ``(label, done, total)``.
ProgressHook = Callable[[str, int, int], None]


#: Every mode a routing can end in (:attr:`Outcome.mode`).
MODES = ("tree", "tree+cross", "tree+turns", "tree+detours", "tree+orient", "updown",
         "updown+detours", "updown+orient", "shortest")

#: Modes whose by-products (lanes, the oriented destinations) are not
#: stored with the tables: resume routes them again.
ROUTED_AGAIN = ("tree+cross", "tree+detours", "tree+orient", "updown+detours", "updown+orient",
                "shortest")

#: What the reason of an ``updown`` routing rooted at one switch per
#: component said (stored epochs of an older smroute).
_ONE_ROOT = "rooted at one switch per component"


def routed_again(mode: str, reason: str) -> bool:
    """Whether resume routes a stored routing in ``mode`` (``reason``) again
    rather than rebuilding its structure around the stored tables: the
    modes of :data:`ROUTED_AGAIN`, and ``updown`` routings rooted at one
    switch per component (no longer made: routed again, they resume only if
    the tables agree)."""
    return mode in ROUTED_AGAIN or (mode == "updown" and _ONE_ROOT in reason)


@dataclass(frozen=True, eq=False)
class Outcome:
    """Where the chain ended: the mode and why, the orientation every route
    is up*/down* in (``None``: the routed graph's), the LIDs routed through
    the turn root or with detours, the lanes of ``tree+detours``, the
    routing (``prep``, ``ports``) in force: the tree's, or ``updown``'s, and
    ``oriented`` ``(D,)`` bool: the destinations of ``tree+orient`` (else
    ``None``), ``max_hops``: the walks' bound for their routes where they
    may be longer than :func:`~smroute.routing.orient.turn_hops` (else 0);
    ``complete``: no destination was left that no orientation serves."""

    mode: str
    reason: str
    check: SwitchGraph | None
    turn_lids: int
    lanes: VirtualLanes | None
    prep: Prepared
    ports: np.ndarray
    oriented: np.ndarray | None = None
    max_hops: int = 0
    complete: bool = True


def start(fabric: Fabric, roles: FabricRoles) -> tuple[SwitchGraph, str, str]:
    """The graph a routing starts on, its mode and why: the tree's ranks
    (``tree``), else up*/down* towards the roles' roots (``updown``)."""
    if roles.tree:
        return switch_graph(fabric, roles), "tree", ""
    return rooted_graph(fabric, roles, roles.roots), "updown", f"no tree: {roles.why_not_tree}"


def mode_graphs(fabric: Fabric, roles: FabricRoles,
                mode: str) -> tuple[SwitchGraph, SwitchGraph | None]:
    """The graph a routing in ``mode`` (none :func:`routed_again` routes
    again) was routed on, and its check graph (``tree+turns``: the
    orientation towards the turn roots; else ``None``)."""
    g, _, _ = start(fabric, roles)
    if roles.tree and mode == "tree+turns":
        return g, rooted_graph(fabric, roles, turn_roots(g), like=g)
    if roles.tree and mode == "updown":  # a tree stored as routed towards its turn roots
        return rooted_graph(fabric, roles, turn_roots(g), like=g), None
    return g, None


def chain(fabric: Fabric, roles: FabricRoles, engine: Engine, prep: Prepared,
          ports: np.ndarray, mode: str, reason: str, max_vls: int,
          needed: NeededPairs, progress: ProgressHook | None = None) -> Outcome:
    """The steps after the tables ``ports`` of ``prep`` (module doc): the
    tree's (``mode`` ``tree``) or up*/down* towards every top switch
    (``updown``), ``reason`` so far, for the pairs ``needed``.  ``ports`` is
    changed in place.  ``progress(label, done, total)``: called as the
    steps that orient destinations one at a time go (they may take
    minutes on a large site)."""
    g, c, pi, dest = prep.graph, prep.costs, prep.dividers, prep.dest
    none = Outcome(mode, reason, None, 0, None, prep, ports)
    if mode not in ("tree", "updown") or not engine.guarantees.closer_groups:
        return none
    need = turn_destinations(g, c, dest)
    if mode == "updown" and roles.direct:
        sp_ports = ports.copy()
        sp_lanes, short = shortest.route_over_vls(fabric, g, dest, sp_ports, max_vls=max_vls)
        if short.any() and not (need & ~short).any() and (sp_lanes is None or check_credit_loops(
                fabric, orient.as_tables(fabric, g, sp_ports), sp_lanes).ok):
            ports[...] = sp_ports
            over = ", up*/down* (one VL)" if sp_lanes is None else (
                f", those that turn up again moving to a higher VL ({sp_lanes.n_vls} VLs, "
                f"{sp_lanes.n_sls} SLs)")
            return Outcome("shortest", (
                f"{reason}; {int(short.sum())} of {len(short)} destination LIDs routed over "
                f"shortest paths{over}"), None, int(short.sum()), sp_lanes, prep, ports)
    if not need.any():
        return none
    n = int(need.sum())
    roots = turn_roots(g)
    g2 = rooted_graph(fabric, roles, roots, like=g)
    tree_ports = ports.copy()
    on = orient.walk_graph(g, g2)  # (the cables an escape route may take, walked too)
    crossed = np.zeros(len(dest.lid), dtype=bool)
    if mode == "tree":
        lacking = f"{n} destination LIDs have end-port traffic with no up*/down* path in the tree"
        x = cross.crossing(fabric, g, c, pi, dest, need, needed, ports, on)
        if x is not None:
            across = (f"; {int(x.crossed.sum())} destination LIDs take routes up*, across one "
                      "cable between two switches of one rank, then down*, where the tree has "
                      "none")
            if not x.left.any():
                ports[...] = x.ports
                return Outcome("tree+cross", f"{lacking}{across} (their channel dependencies "
                               "and the tree's are acyclic)", on, int(x.crossed.sum()), None,
                               prep, ports, x.crossed)
            rest = f"; {int(x.left.sum())} have needed pairs no such route serves"
            got = cross.with_detours(fabric, g, pi, dest, x, max_vls, g2, on,
                                     engine.guarantees.detours_by_load)
            if got is not None:
                x_lanes, ports[...] = got
                return Outcome("tree+detours", (
                    f"{lacking}{across}{rest}: their switches without such a route take "
                    f"detours over {x_lanes.n_vls} VLs ({x_lanes.n_sls} SLs)"), on, n, x_lanes,
                    prep, ports, x.crossed)
            got_x = cross.filled(fabric, g, c, pi, dest, x, need, needed, on)
            if got_x is not None:
                ports[...], hops = got_x
                return Outcome("tree+cross", (
                    f"{lacking}{across}{rest}: the switches those leave without a route take "
                    "routes up*/down* in an order of the switches by rank, then by hops "
                    "across from a root of their rank, in which every route is up*/down* "
                    "(their channel dependencies are acyclic)"), on,
                    int((x.crossed | x.left).sum()), None, prep, ports, x.crossed | x.left, hops)
        if x is not None and (x.crossed & need & ~x.left).any():
            # the steps below take the destinations those leave (the tree's columns again)
            crossed = x.crossed & ~x.left
            ports[...] = x.ports
            ports[:, dest.lid[x.left]] = tree_ports[:, dest.lid[x.left]]
            tree_ports, need = ports.copy(), x.left
            lacking += f"{across}{rest}"
        elif _turn_through_roots(g, c, pi, dest, need, ports, roots, g2):
            return Outcome("tree+turns", f"{lacking}; routed through the turn root", g2, n,
                           None, prep, ports)
        head = lacking if crossed.any() else (
            "the tree's routes through the turn root are not all up*/down* towards it")
        own, other = "the tree's routes", "the turn root's routes where the tree has none"
    else:
        lacking = (f"{reason}; {n} destination LIDs have end-port traffic with no up*/down* "
                   "path towards the top switches")
        head = lacking
        own = "their routes up*/down* towards every top switch"
        other = "a turn switch's routes where those have none"
    why = ""
    if max_vls >= 2:
        lanes, why = _detours(fabric, g, c, pi, dest, need, ports, max_vls, g2,
                              engine.guarantees.detours_by_load)
        if lanes is not None:
            # every link the routes may take (the escape's too), the routed graph's ranks
            check = ranked_like(g2, g)
            return Outcome(f"{mode}+detours", (
                f"{lacking}; routed with detours over {lanes.n_vls} VLs ({lanes.n_sls} SLs)"),
                check, n, lanes, prep, ports, crossed if crossed.any() else None)
        why = f"; {why}"
    ports[...] = tree_ports
    candidates = (need, turn_switches.needed_turns(g, c, dest, needed) & need)
    escape = (g2, *dmodc.costs_and_dividers(g2))

    partial: list[tuple[str, np.ndarray]] = []  # (tables that serve some of them)

    def anchored(base: np.ndarray, left: np.ndarray, wide: bool,
                 first: str) -> orient.Orientation | None:
        """The switches lacking a path to the destinations ``left`` turn at
        their anchors (``wide``: every such switch, else the service hosts'),
        on the tables ``base``: written into ``ports`` where
        :func:`orient.accept` takes every needed one (``first``: the
        summary of the others)."""
        trial = base.copy()
        n_x = anchor_turns(g, c, dest, trial, left, wide)
        if wide and n_x:
            partial.append(("the anchors", trial))
        if not n_x or orient.accept(
                fabric, g, dest, trial, candidates[-1], needed, c,
                orient.fixed_routes(fabric, g, trial, dest.lid[candidates[-1]]), on):
            return None
        ports[...] = trial
        return orient.Orientation(candidates[-1], (
            f"{first}the traffic of {n_x} switches{'' if wide else ' of service hosts'} "
            "turns at one lower neighbour each, whose cables to it carry only their own "
            "traffic; the channel dependencies of every route are acyclic"))

    # the destinations through their turn switches all at once; else the
    # service hosts' switches turn at their anchors, from the tree's tables;
    # else each destination through a turn switch of its own, and where that
    # leaves some, every switch lacking a path to those turns at its anchor,
    # on the orientation's tables (the first that serves every needed one)
    ori, no, fixed = orient.orient_whole(fabric, g, c, pi, dest, ports, candidates, needed, on)
    if ori is None:
        ori = anchored(tree_ports, candidates[-1], False, "")
    if ori is None and fixed is not None:
        label = "orienting the destination LIDs the shared turn switch cannot serve"
        ori = orient.orient_shared(fabric, g, c, pi, dest, ports, candidates[-1], needed, fixed,
                                   escape, on, _labelled(progress, label))
    if ori is None and fixed is not None:
        ori, why_each = orient.orient_one_by_one(
            fabric, g, c, pi, dest, ports, candidates[-1], needed, fixed, escape, own, on,
            _labelled(progress, "orienting destination LIDs one at a time"))
        no = why_each or no
        if ori is not None and not ori.complete:
            partial.append(("the orientation", ports.copy()))
            ori = anchored(ports, candidates[-1] & ~ori.turns, True, (
                f"{int(ori.turns.sum())} of them each through a turn switch chosen so that "
                "the channel dependencies stay acyclic, the others: ")) or ori
    turns = candidates[-1]
    # a last resort: every such destination again, one at a time, those most switches
    # lack a path to first, each that no turn switch serves routed backwards from the
    # switches with a path, cable by cable while the dependencies stay acyclic (kept only
    # if it serves every one: it stops at the first it cannot); from the tree's tables,
    # then on top of those that serve most (the orientation's, the anchors' on it), only
    # the destinations they leave
    for name, base in [("the tree", tree_ports), *partial]:
        if ori is not None and ori.complete:
            break
        left = turns if base is tree_ports else turns & (
            orient.undelivered(g, dest, base, turns, needed, c, on) > 0)
        trial = _search_left(fabric, g, c, pi, dest, needed, escape, base, turns, left, on,
                             _labelled(progress, f"searching again from {name}'s tables"))
        if trial is None:
            continue
        ports[...] = trial
        ori = orient.Orientation(turns, (
            "each destination's turn switch chosen so that the channel dependencies of "
            "every route stay acyclic, or where none serves, its routes built backwards "
            "from the switches with a path, cable by cable, with several turns"
            if left is turns else
            f"{int(turns.sum() - left.sum())} of them as {name} left them, the other "
            f"{int(left.sum())} each through a turn switch chosen so "
            "that the channel dependencies stay acyclic, or where none serves, routed "
            "backwards from the switches with a path, cable by cable, with several turns"))
    head += why
    if ori is None:
        # no destination can take another orientation free of credit loops:
        # the routed graph's routes for every one; the walk reports the needed pairs left
        k_x = int(crossed.sum())
        return Outcome(f"{mode}+cross" if k_x else mode, (
            f"{head}; no destination could take another orientation "
            f"free of credit loops on one VL ({no}): {own} stay (detours over VLs can "
            "route such pairs where the subnet manager programs VLs: smroute's "
            "OpenSM plugin, or smroute route --vls 2 --lanes-out FILE)"),
            on if k_x else None, k_x, None, prep, ports, crossed if k_x else None,
            complete=False)
    k = int(ori.turns.sum())
    turned = ori.turns | crossed
    k_all = int(turned.sum())
    return Outcome(f"{mode}+orient" if k else f"{mode}+cross" if k_all else mode, (
        f"{head}; {k} destination LIDs take {other} ({ori.why})"),
        on if k_all and on is not g else None, k_all, None, prep, ports,
        turned if k_all else None, complete=ori.complete)


def _search_left(
    fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
    needed: NeededPairs, escape: tuple[SwitchGraph, np.ndarray, np.ndarray],
    base: np.ndarray, turns: np.ndarray, left: np.ndarray, walk_on: SwitchGraph,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray | None:
    """The tables ``base`` with the destinations ``left`` (of ``turns``,
    ``(D,)`` bool each) oriented again one at a time, backwards where no
    turn switch serves (:func:`~smroute.routing.orient.orient_each`), if
    that serves every one and :func:`~smroute.routing.orient.accept` takes
    them with every destination of ``turns``, walked on ``walk_on``
    (:func:`~smroute.routing.orient.walk_graph`); else ``None``."""
    trial = base.copy()
    fixed = orient.fixed_routes(fabric, g, trial, dest.lid[turns])  # unchanged by the search
    mine = fixed if left is turns else orient.fixed_routes(fabric, g, trial, dest.lid[left])
    done = orient.orient_each(fabric, g, c, pi, dest, left, needed, trial, escape=escape,
                              fewest_first=False, patience=1, fixed=mine, search=True,
                              progress=progress)
    if done.sum() < left.sum() or orient.accept(fabric, g, dest, trial, turns, needed, c,
                                                fixed, walk_on):
        return None
    return trial


def _labelled(progress: ProgressHook | None, label: str) -> Callable[[int, int], None] | None:
    """``progress`` for the step ``label`` (``None``: none)."""
    if progress is None:
        return None
    return lambda done, total: progress(label, done, total)


def _detours(
    fabric: Fabric, g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
    need: np.ndarray, ports: np.ndarray, max_vls: int, escape: SwitchGraph, by_load: bool,
) -> tuple[VirtualLanes | None, str]:
    """Route ``need`` ``(D,)`` bool with detours in place in ``ports``:
    ``(lanes, "")`` if every pair it was for is then routed, else ``(None,
    why)`` naming a few of the pairs left (``ports`` is then to be discarded)."""
    lanes, short = route_detours(fabric, g, c, pi, dest, need, ports, max_vls=max_vls,
                                 escape=escape, by_load=by_load)
    if not len(short):
        return lanes, ""
    l2p = fabric.lid_to_port
    names = [f"{fabric.describe_node(int(g.sw_node[s]))} -> LID {lid} "
             f"{fabric.describe_port(int(l2p[lid]))}" for s, lid in short[:3].tolist()]
    more = f" and {len(short) - 3} more" if len(short) > 3 else ""
    return None, (f"detours within {max_vls} VLs and {lanes.n_sls} SLs leave {len(short)} "
                  f"switch-to-LID pairs without a route: {', '.join(names)}{more}")


def turn_destinations(g: SwitchGraph, c: np.ndarray, dest: Destinations) -> np.ndarray:
    """``(D,)`` bool: end-port destinations that some switch carrying
    end-ports has no up*/down* path to although cables join them (same
    physical component): :func:`~smroute.routing.turn_switches.needed_turns` for
    every CA pair."""
    return turn_switches.needed_turns(g, c, dest, None)


def turn_roots(g: SwitchGraph) -> np.ndarray:
    """Switch nodes of the turn roots ``(K,)``, one per physical component:
    its leaf with the most up groups (lowest GUID on a tie), else its switch
    with the lowest GUID."""
    o = np.lexsort((g.sw_guid, -g.n_up, ~g.is_leaf, g.component))
    return np.sort(g.sw_node[first_per_group(o, g.component[o])])


def _turn_through_roots(
    g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
    need: np.ndarray, ports: np.ndarray, roots: np.ndarray,
    g2: SwitchGraph,
) -> bool:
    """Route the destinations ``need`` ``(D,)`` bool through the turn roots,
    in place in ``ports``; whether every route is then delivered and
    up*/down* in ``g2``'s orientation (else ``ports`` is to be discarded).

    A switch that has an up*/down* path to such a destination keeps Dmodc's
    entry; one that has none takes Dmodc's entry towards its component's turn
    root, with the destination's NID (so the load still spreads).  A route
    then follows the tree towards the root until it meets a switch with a path
    to the destination, at the latest the root itself: delivered if the root
    has a path to every such destination and every end-port switch lacking
    one has a path to the root.
    """
    rid = np.searchsorted(g.sw_node, roots)
    root_of_label = np.zeros(g.n_switches, dtype=np.int64)  # labels are switch ids
    root_of_label[g.component[rid]] = rid
    root_of = root_of_label[g.component]
    sel = np.flatnonzero(need)
    tgt = dest.target[sel]
    root = root_of[tgt]
    if (c[root, tgt] == INF).any():
        return False
    none = c[:, tgt] == INF  # (S, K): switches without a path to the destination
    src = np.unique(g.ep_switch)
    cut = src[c[src, root_of[src]] == INF]  # end-port switches without a path to the root
    if (none[cut] & (g.component[cut][:, None] == g.component[tgt][None, :])).any():
        return False
    orient.route_turns(g, c, pi, dest, need, root, ports)
    # where a route towards the root may hop down in g2's orientation, the
    # switch it reaches may turn up towards the destination: check those rows
    junction = _down_towards(g, g2, c, root_of) & none.any(axis=1)
    return _updown_in(g, g2, ports, dest, np.flatnonzero(junction), ~need)


def _down_towards(g: SwitchGraph, g2: SwitchGraph, c: np.ndarray,
                  root_of: np.ndarray) -> np.ndarray:
    """``(S,)`` bool: switches one of whose Dmodc next hops towards their
    turn root (``root_of`` ``(S,)`` switch ids) is a ``g2``-down link (a route
    to the root that is not a shortest path in the cable graph)."""
    sw, rem = g.grp_switch, g.grp_remote
    if not len(sw):
        return np.zeros(g.n_switches, dtype=bool)
    root = root_of[sw]
    cs, cr = c[sw, root], c[rem, root]
    down1 = g.rank[rem] < g.rank[sw]
    hop = np.uint8(dmodc.UP_PHASE - 1)
    closer = np.where(cs < dmodc.UP_PHASE, down1 & (cr < cs), ~down1 & ((cr & hop) < (cs & hop)))
    closer &= cs < INF
    out = np.zeros(g.n_switches, dtype=bool)
    out[sw[closer & (g2.rank[rem] < g2.rank[sw])]] = True
    return out


def _updown_in(g1: SwitchGraph, g2: SwitchGraph, ports: np.ndarray, dest: Destinations,
               junction: np.ndarray, tree_cols: np.ndarray) -> bool:
    """Whether every route is up*/down* in ``g2``'s orientation (so the
    tables are free of credit loops).  Every route follows Dmodc's routes in
    ``g1``'s orientation: towards its destination, or (the columns not in
    ``tree_cols`` ``(D,)`` bool, from the switches without a path to it)
    towards the turn root until a switch has a path, where it turns.

    A route leaves ``g2``'s up*/down* only where it enters a switch ``b`` by a
    ``g2``-down link and leaves it by a ``g2``-up link.  Along ``g1``-routes
    that needs a *risky* link: a ``g2``-down link into a switch with a
    ``g2``-up link a ``g1``-route may take next (any, after a ``g1``-up move;
    a ``g1``-down one after a ``g1``-down move): the rows of those switches
    are read for every column, a few rows on a complete tree.  At a turn the
    hop in comes from a route towards the root: the rows ``junction`` ``(J,)``
    (switches that may hop ``g2``-down towards the root) are read for the
    turn columns; none on a complete tree.
    """
    n = g1.n_switches
    sw, rem = g1.grp_switch, g1.grp_remote
    up1 = g1.rank[rem] > g1.rank[sw]
    up2 = g2.rank[rem] > g2.rank[sw]
    up_after_up = np.zeros(n, dtype=bool)
    up_after_up[sw[up2]] = True
    up_after_down = np.zeros(n, dtype=bool)
    up_after_down[sw[up2 & ~up1]] = True
    risky = ~up2 & np.where(up1, up_after_up[rem], up_after_down[rem])
    # per (switch, port): the link's class, and where it leads
    cnt = g1.grp_port_count
    at = (np.repeat(sw, cnt), g1.grp_ports)

    def per_port(flag: np.ndarray) -> np.ndarray:
        out = np.zeros((n, 256), dtype=bool)
        out[at] = np.repeat(flag, cnt)
        return out

    up2_port, risky_port, down2_port = per_port(up2), per_port(risky), per_port(~up2)
    nxt = next_switch(g1)

    def bad(rows: np.ndarray, lids: np.ndarray, into: np.ndarray) -> bool:
        """Some entry of ``rows`` x ``lids`` leaves by a port of ``into``
        ``(S, 256)`` bool to a switch whose entry then goes ``g2``-up."""
        if not len(rows) or not len(lids):
            return False
        p1 = ports[rows][:, lids]
        hit = into[rows[:, None], p1]  # NO_ROUTE (255) is no link: False
        hb = nxt[rows[:, None], p1][hit]
        p2 = ports[hb, lids[np.nonzero(hit)[1]]]
        return bool(up2_port[hb, p2].any())

    return not (bad(np.unique(sw[risky]), dest.lid, risky_port)
                or bad(junction, dest.lid[~tree_cols], down2_port))
