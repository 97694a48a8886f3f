"""Route a fabric: preprocessing, the worker pool, and the resulting tables.

:func:`route` is the one entry point: it takes a fabric and returns a
:class:`RoutingResult` with the forwarding tables, the NIDs and the time of
each phase.  Time is measured with a clock passed in (``time.perf_counter``
by default) so callers and tests control it.

Modes (``RoutingResult.mode``), chosen automatically from the fabric's roles
and said in every result:

Algorithms (:data:`ALGORITHMS`): ``dmodc`` (the paper), ``nmodc`` (Dmodc
with nominal slots for degraded trees, :mod:`smroute.routing.nominal`: the
same tables on a complete PGFT, the same modes and guarantees) and ``dmodk``.

* ``tree``: Dmodc over the leaves and ranks of the roles.
* ``tree+turns``: as ``tree``, but some end-ports' traffic has no up*/down*
  path in the tree (an aggregation node or host on a spine talking to one on
  another spine; a leaf that lost every common ancestor with another).  For
  the destinations such traffic needs, the switches without a path take
  Dmodc's route towards a turn root (a leaf per component), where the route
  turns towards the destination; every route is then checked to be
  up*/down* in the orientation towards that root
  (:func:`~smroute.routing.topology.rooted_graph`): deadlock-free by
  construction.
* ``tree+detours`` (only with ``max_vls >= 2``, never the default): the
  check above failed; the destinations the turn root was for are routed with
  detours instead (:mod:`smroute.routing.detour`): switches with an up*/down*
  path keep their entries, the others turn up again after going down, on a
  higher virtual lane at every such turn (SLs and SL-to-VL tables in
  :attr:`RoutingResult.lanes`, :mod:`smroute.routing.vlassign`).  Only a
  subnet manager that programs SLs and VLs can use it (the OpenSM plugin).
* ``tree+orient``: the check above failed (and detours were off or could
  not route every pair): the tree's routes stay for every destination they
  serve, and only the destinations some needed pair lacks a path to take
  the turn root's routes where the tree has none, accepted when they are
  delivered and the channel dependencies of all routes are acyclic
  (:mod:`smroute.routing.orient`: one VL, proven free of credit loops).
  Failing that, the tables are the tree's and the pairs left without a
  route are reported by the validation walk.
* ``updown``: the fabric is no tree (roles): every destination is routed
  up*/down* towards the roots of its component (its top switches).

Which pairs need a route: :func:`~smroute.fabric.roles.needed_pairs`
(``all_ca_pairs``: every CA pair); :attr:`RoutingResult.needed`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from smroute.errors import RoutingError
from smroute.fabric.graph import first_per_group
from smroute.fabric.model import Fabric
from smroute.fabric.roles import FabricRoles, GuidOverrides, NeededPairs, fabric_roles, needed_pairs
from smroute.routing import dmodc, dmodk, nominal, orient
from smroute.routing.detour import route_detours
from smroute.routing.dmodc import INF, NO_ROUTE, Destinations
from smroute.routing.pool import RoutePool
from smroute.routing.topology import SwitchGraph, next_switch, rooted_graph, switch_graph
from smroute.routing.validate import Validation, validate
from smroute.routing.vlassign import VirtualLanes
from smroute.tables.lft import ForwardingTables, lid_labels

__all__ = ["ALGORITHMS", "DMODC_LIKE", "NominalState", "RoutingResult", "route",
           "route_destinations", "unrouted_connected", "validate_result"]

ALGORITHMS = ("dmodc", "dmodk", "nmodc")
#: Algorithms built on Dmodc's costs, closer groups and modes (pool, turns):
#: every route takes a closer group, so every pair with a path is routed by
#: construction (:func:`unrouted_connected` guards what a bug would break).
DMODC_LIKE = ("dmodc", "nmodc")


@dataclass(frozen=True, eq=False)
class NominalState:
    """What an incremental reroute of an Nmodc routing reads besides its
    tables (:mod:`smroute.service.reroute`): the nominal slots, the switches
    whose cables may be shared by capacity ``(S,)`` bool
    (:func:`~smroute.routing.slot_tables.may_share`), the ``(leaf, target)``
    pairs of the redirects by load, ``(K,)`` int64 switch ids each
    (:attr:`~smroute.routing.balance.PartialPairs.leaf_target`), and the down-cable
    offsets ``(u, d, shift)`` (:func:`~smroute.routing.down_offsets.foreign_entries`)."""

    slots: nominal.NominalSlots
    share: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray]
    offsets: tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class RoutingResult:
    """Tables and by-products of one routing run.

    graph: the switch graph routed; costs ``(S, S)`` uint8 (encoded, see
    :mod:`smroute.routing.dmodc`); dividers ``(S,)``; nids ``(E,)``
    topological NIDs of the end-ports (aligned with ``graph.ep_row``); dest:
    the routed LIDs; timings: seconds per phase.  mode / mode_reason: see the
    module doc; check_graph: the orientation every route is up*/down* in
    (``graph`` unless ``tree+turns``; in ``tree+detours`` the tree's ranks
    over every link, :attr:`lanes` saying which LIDs may turn); turn_lids: LIDs routed through the
    turn root; roles: the roles the routing used; lanes: the SLs and
    SL-to-VL tables of mode ``tree+detours`` (else ``None``: one VL, SL 0).
    nominal: Nmodc's :class:`NominalState` where a reroute computed it (else
    ``None``: the next reroute computes it from this result).  needed: the
    pairs that need a route; oriented: ``(D,)`` bool, the destinations of
    mode ``tree+orient`` (walked for delivery only), else ``None``.
    """

    algorithm: str
    tables: ForwardingTables
    graph: SwitchGraph
    costs: np.ndarray
    dividers: np.ndarray
    nids: np.ndarray
    dest: Destinations
    timings: dict[str, float] = field(default_factory=dict)
    mode: str = "tree"
    mode_reason: str = ""
    check_graph: SwitchGraph | None = None
    turn_lids: int = 0
    roles: FabricRoles | None = None
    lanes: VirtualLanes | None = None
    nominal: NominalState | None = None
    needed: NeededPairs | None = None
    oriented: np.ndarray | None = None

    @property
    def walk_graph(self) -> SwitchGraph:
        """The graph whose orientation the validation walk checks."""
        return self.check_graph if self.check_graph is not None else self.graph

    def walk_turns(self) -> tuple[np.ndarray | None, int | None]:
        """The :func:`~smroute.routing.validate.walk` options ``(turns,
        max_hops)`` of the destinations whose routes may turn (detours, mode
        ``tree+orient``); ``(None, None)`` for up*/down* routes."""
        if self.lanes is not None:
            return np.isin(self.dest.lid, self.lanes.lids), self.lanes.max_hops
        if self.oriented is not None:
            return self.oriented, orient.turn_hops(self.graph)
        return None, None

    @property
    def total_seconds(self) -> float:
        return float(sum(self.timings.values()))


def route(
    fabric: Fabric,
    *,
    algorithm: str = "dmodc",
    lmc: int | None = None,
    pool: RoutePool | None = None,
    workers: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    labels: bool = True,
    roles: FabricRoles | None = None,
    overrides: GuidOverrides | None = None,
    max_vls: int = 1,
    all_ca_pairs: bool = False,
) -> RoutingResult:
    """Compute forwarding tables for every switch and every destination LID.

    ``lmc``: route ``2**lmc`` LIDs per end-port (``None``: the LMC each port
    has in the fabric).  ``pool``: a live :class:`RoutePool` (else one with
    ``workers`` processes is made for this call).  ``labels``: attach per-LID
    GUIDs/descriptions for the OpenSM-format writer.  ``roles``: the fabric's
    roles if already known (else computed with ``overrides``).  ``max_vls``:
    the data VLs the subnet manager can program (1..15); 2 or more allows
    mode ``tree+detours`` where the tree would otherwise fall back to ``updown``.
    ``all_ca_pairs``: every CA pair needs a route (else the roles' rule).
    Raises :class:`~smroute.errors.RoutingError` if the fabric cannot be routed.
    """
    if algorithm not in ALGORITHMS:
        raise RoutingError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    if lmc is not None and not 0 <= lmc <= 7:
        raise RoutingError(f"LMC must be 0..7, got {lmc}")
    if not 1 <= max_vls <= 15:
        raise RoutingError(f"max_vls must be 1..15, got {max_vls}")
    timings: dict[str, float] = {}
    t0 = clock()
    if len(fabric.switches) == 0:
        raise RoutingError(
            f"the fabric has no switch to route ({len(fabric.cas)} CAs and no switch: a "
            "partial discovery? rerun ibnetdiscover from a host whose port is active)")
    roles = roles if roles is not None else fabric_roles(fabric, overrides)
    if algorithm == "dmodk" and not roles.tree:
        raise RoutingError(f"D-mod-K routes fat-trees only; this fabric is no tree "
                           f"({roles.why_not_tree}): use --algorithm dmodc")
    if roles.tree:
        g = switch_graph(fabric, roles)
        mode, reason = "tree", ""
    else:
        g = rooted_graph(fabric, roles, roles.roots)
        mode, reason = "updown", f"no tree: {roles.why_not_tree}"
    if len(g.ep_row) == 0:
        raise RoutingError("no switch has an end-port attached: nothing to route")
    needed = needed_pairs(fabric, roles, g.sw_node, fabric.port_node[g.ep_row].astype(np.int64),
                          every_ca=all_ca_pairs)
    if mode == "updown" and len(roles.roots) > len(roles.centres):
        c0 = dmodc.costs_and_dividers(g)[0]  # every top a root: pairs without a path?
        if orient.needed_turns(g, c0, route_destinations(algorithm, g, c0, lmc)[1],
                               needed).any():
            g = rooted_graph(fabric, roles, roles.centres)
            reason += ("; end-ports on the top switches need each other: rooted at one "
                       "switch per component")
    t1 = clock()
    timings["rank"] = t1 - t0
    slots = nominal.nominal_slots(g) if algorithm == "nmodc" else None
    c, pi = _costs(g, slots)
    t2 = clock()
    timings["costs"] = t2 - t1
    nids, dest = route_destinations(algorithm, g, c, lmc)
    t3 = clock()
    timings["nids"] = t3 - t2

    own = pool is None and algorithm in DMODC_LIKE
    p = pool if pool is not None else RoutePool(workers) if own else None
    check: SwitchGraph | None = None
    turn_lids = 0
    lanes: VirtualLanes | None = None
    oriented: np.ndarray | None = None
    try:
        ports = _tables(fabric, algorithm, p, g, c, pi, dest, slots)
        t4 = clock()
        timings["routes"] = t4 - t3
        need = (turn_destinations(g, c, dest) if mode == "tree" and algorithm in DMODC_LIKE
                else np.zeros(0, bool))
        if need.any():
            roots = turn_roots(g)
            g2 = rooted_graph(fabric, roles, roots, like=g)
            tree_ports = ports.copy()
            if _turn_through_roots(g, c, pi, dest, need, ports, roots, g2):
                mode, check, turn_lids = "tree+turns", g2, int(need.sum())
                reason = (f"{turn_lids} destination LIDs have end-port traffic with no "
                          "up*/down* path in the tree; routed through the turn root")
            elif max_vls >= 2 and (det := _detours(fabric, g, c, pi, dest, need, ports, max_vls,
                                                   g2, algorithm == "nmodc"))[0] is not None:
                lanes = det[0]
                mode, turn_lids = "tree+detours", int(need.sum())
                # every link the routes may take (the escape's too), the tree's ranks
                check = dataclasses.replace(g2, rank=g.rank, n_up=g.n_up, is_leaf=g.is_leaf,
                                            mode=g.mode)
                reason = (f"{turn_lids} destination LIDs have end-port traffic with no "
                          "up*/down* path in the tree; routed with detours over "
                          f"{lanes.n_vls} VLs ({lanes.n_sls} SLs)")
            else:
                why = f"; {det[1]}" if max_vls >= 2 else ""
                ports = tree_ports
                ori, no = orient.orient(fabric, g, c, pi, dest, ports,
                                        (need, orient.needed_turns(g, c, dest, needed)), needed,
                                        (g2, *dmodc.costs_and_dividers(g2)))
                turn_lids = int(ori.turns.sum()) if ori is not None else 0
                mode = "tree+orient" if turn_lids else "tree"
                oriented = ori.turns if turn_lids and ori is not None else None
                reason = (f"the tree's routes through the turn root are not all up*/down* "
                          f"towards it{why}; " + (
                              f"{turn_lids} destination LIDs take the turn root's routes where "
                              f"the tree has none ({ori.why})" if ori is not None else ""))
                if ori is None or not ori.complete:
                    # last resort: one orientation for every destination
                    mode, oriented, turn_lids = "updown", None, 0
                    reason = ("the tree's routes through the turn root are not all up*/down* "
                              f"towards it{why}, and turning the destinations that need it one "
                              "at a time left some without a route"
                              f"{f' ({no})' if no else ''}: routed every destination "
                              "up*/down* towards the turn root")
                    g = g2
                    slots = nominal.nominal_slots(g) if algorithm == "nmodc" else None
                    c, pi = _costs(g, slots)
                    nids, dest = route_destinations(algorithm, g, c, lmc)
                    ports = _tables(fabric, algorithm, p, g, c, pi, dest, slots)
            timings["turns"] = clock() - t4
    finally:
        if own and p is not None:
            p.close()

    width = ports.shape[1]
    lg, lk, ld = lid_labels(fabric, width) if labels else (None, None, None)
    tables = ForwardingTables(
        switch_guid=g.sw_guid,
        switch_lid=g.sw_lid,
        switch_desc=tuple(fabric.node_desc[n] for n in g.sw_node.tolist()),
        ports=ports,
        lid_guid=lg,
        lid_kind=lk,
        lid_desc=ld,
    )
    return RoutingResult(algorithm, tables, g, c, pi, nids, dest, timings, mode, reason,
                         check, turn_lids, roles, lanes, needed=needed, oriented=oriented)


def route_destinations(algorithm: str, g: SwitchGraph, c: np.ndarray,
                       lmc: int | None) -> tuple[np.ndarray, Destinations]:
    """The topological NIDs ``(E,)`` int64 of ``g``'s end-ports (costs ``c``)
    and the destinations ``algorithm`` routes with: Dmodc's, or for Nmodc
    with its wrap gaps (:func:`~smroute.routing.nominal.wrap_gaps`)."""
    nids = dmodc.topological_nids(g, c)
    t = nominal.wrap_gaps(g, nids) if algorithm == "nmodc" else nids
    return nids, dmodc.destinations(g, t, lmc=lmc)


def validate_result(
    r: RoutingResult, *, max_failures: int = 50,
    walked: tuple[np.ndarray, np.ndarray] | None = None,
) -> Validation:
    """The validation walk of ``r``'s tables in the orientation its routes
    follow (:attr:`RoutingResult.walk_graph`); see
    :func:`~smroute.routing.validate.validate` for ``walked``."""
    turns, max_hops = r.walk_turns()
    return validate(r.walk_graph, r.tables.ports, r.dest, r.costs,
                    switch_desc=r.tables.switch_desc, lid_desc=r.tables.lid_desc,
                    max_failures=max_failures, walked=walked, needed=r.needed,
                    turns=turns, max_hops=max_hops)


def unrouted_connected(r: RoutingResult) -> int:
    """CA-to-CA pairs that need a route (:attr:`RoutingResult.needed`) and
    that cables join but ``r``'s tables leave without a
    first hop (the source's switch has no route): what a routing that could
    not connect a switch to a target leaves (all of that target's LIDs).  Read
    for one CA LID per (end-port switch, target switch), counted for every
    CA LID of the target: cheap enough to gate every commit; the validation
    walk checks every hop of every pair."""
    g, dest = r.graph, r.dest
    src, count = np.unique(g.ep_switch, return_counts=True)
    ca = np.flatnonzero(~dest.is_switch)
    if not len(src) or not len(ca):
        return 0
    agg = r.needed.agg[dest.owner[ca]] if r.needed is not None else np.zeros(len(ca), bool)
    key, first, lids_per = np.unique(dest.target[ca] * 2 + agg, return_index=True,
                                     return_counts=True)
    tgt = key // 2
    ports = r.tables.ports[np.ix_(src, dest.lid[ca[first]])]
    gap = (ports == NO_ROUTE) & (g.component[src][:, None] == g.component[tgt][None, :])
    if r.needed is not None:
        gap &= r.needed.mask(src, tgt, (key % 2).astype(bool))
    return int(count @ gap @ lids_per)


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


def _tables(
    fabric: Fabric, algorithm: str, pool: RoutePool | None, g: SwitchGraph, c: np.ndarray,
    pi: np.ndarray, dest: Destinations, slots: nominal.NominalSlots | None,
) -> np.ndarray:
    """The ``(S, max_lid + 1)`` uint8 tables of ``dest`` with ``algorithm``
    (Nmodc: with its nominal ``slots``)."""
    if algorithm == "dmodk":
        return dmodk.route_tables(fabric, g, c, pi, dest)
    assert pool is not None
    return pool.route(g, c, pi, dest, slots=slots)


def _costs(g: SwitchGraph, slots: nominal.NominalSlots | None) -> tuple[np.ndarray, np.ndarray]:
    """Encoded costs ``(S, S)`` and the dividers ``(S,)``: Dmodc's, or with
    Nmodc's nominal ``slots`` the nominal ones."""
    return nominal.costs_and_dividers(g, slots) if slots is not None else (
        dmodc.costs_and_dividers(g))


def turn_destinations(g: SwitchGraph, c: np.ndarray, dest: Destinations) -> np.ndarray:
    """``(D,)`` bool: end-port destinations that some switch carrying
    end-ports has no up*/down* path to although cables join them (same
    physical component).  Switch LIDs without an up*/down* path stay unrouted."""
    src = np.unique(g.ep_switch)
    if not len(src) or not len(dest.lid):
        return np.zeros(len(dest.lid), dtype=bool)
    unreached = c[src] == INF  # (sources, S)
    if len(np.unique(g.component)) > 1:
        unreached &= g.component[src][:, None] == g.component[None, :]
    need_t = unreached.any(axis=0)  # per target switch
    return need_t[dest.target] & ~dest.is_switch  # switch LIDs never need a turn


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
    rows = np.flatnonzero(none.any(axis=1))
    # column k of ``via`` routes destination sel[k] towards its root; one
    # target per component: cheap enough in this process (no pool round trip)
    k = len(sel)
    sub = Destinations(lid=np.arange(k, dtype=np.int64), nid=dest.nid[sel], target=root,
                       local_port=np.zeros(k, dtype=np.int64),
                       is_switch=dest.is_switch[sel], owner=dest.owner[sel])
    via = np.empty((len(rows), k), dtype=np.uint8)  # the rows that need it
    ctx = dmodc.route_context(c, sub)
    for lo in range(0, len(rows), 256):
        dmodc.route_block(g, c, pi, sub, rows[lo:lo + 256], via[lo:lo + 256], ctx)
    lids = dest.lid[sel]
    block = ports[np.ix_(rows, lids)]
    np.copyto(block, via, where=none[rows])
    ports[np.ix_(rows, lids)] = block
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
