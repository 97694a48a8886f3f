"""Route a fabric: preprocessing, the worker pool, and the resulting tables.

:func:`route` is the one entry point: it takes a fabric and returns a
:class:`RoutingResult` with the forwarding tables, the NIDs and the time of
each phase.  Time is measured with a clock passed in (``time.perf_counter``
by default) so callers and tests control it.

Algorithms are the engines of :data:`smroute.routing.api.REGISTRY` (the
interface: :mod:`smroute.routing.api`); the modes are the mode chain's
(:mod:`smroute.routing.modes`), the same for every engine.

Modes (``RoutingResult.mode``), chosen automatically from the fabric's roles
and said in every result:

* ``tree``: Dmodc over the leaves and ranks of the roles.
* ``tree+cross``: as ``tree``, but some end-ports' traffic has no up*/down*
  path in the tree because it joins trees through cables between switches
  of one rank (Dragonfly+: spines cabled to the spines of other groups; two
  trees joined at their tops): where the tree has no path, the entry goes
  up*, across one such cable, then down*, a shortest such route
  (:mod:`smroute.routing.cross`); with the tree's routes its channel
  dependencies are acyclic on one VL.  Where needed pairs have no such
  route (end-ports on upper switches without a cable across), with VLs
  only those switches take detours (``tree+detours``); on one VL those
  destinations' switches without a route take routes up*/down* in one
  order of the switches every route is up*/down* in (several cables
  across), else they go on to the modes below, the others keep their
  crossing routes.
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
  A destination no orientation serves free of credit loops keeps the
  tree's routes; the needed pairs they leave are the validation walk's to
  report (never a re-route of the other destinations).
* ``shortest``: the fabric is a direct network
  (:attr:`~smroute.fabric.roles.FabricRoles.direct`: hosts on every
  switch, a torus, a hypercube, a ring): every destination whose
  shortest routes need not turn up after coming down (in ``updown``'s
  orientation) takes them; with VLs also those whose turns fit, a higher
  VL at each turn (:mod:`smroute.routing.shortest`); the others keep
  ``updown``'s routes.
* ``updown``: the fabric is no tree (roles): every destination is routed
  up*/down* towards the roots of its component (its top switches, never
  one of them alone).
* ``updown+detours`` / ``updown+orient``: as ``tree+detours`` /
  ``tree+orient`` for a fabric that is no tree: only the destinations some
  end-port's traffic has no up*/down* path to towards the top switches
  (end-ports on top switches that need each other) take detours or another
  orientation; the others keep their up*/down* routes.

Which pairs need a route: :func:`~smroute.fabric.roles.needed_pairs`
(``all_ca_pairs``: every CA pair); :attr:`RoutingResult.needed`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smroute.errors import RoutingError
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import FabricRoles, GuidOverrides, NeededPairs, fabric_roles, needed_pairs
from smroute.routing import modes, orient
from smroute.routing.api import DEFAULT, Engine, Prepared, engine
from smroute.routing.dmodc import NO_ROUTE, Destinations
from smroute.routing.pool import RoutePool
from smroute.routing.topology import SwitchGraph
from smroute.routing.validate import Validation, validate
from smroute.routing.vlassign import VirtualLanes
from smroute.tables.lft import ForwardingTables, lid_labels

__all__ = ["RoutingResult", "commit_gaps", "route", "unrouted_connected", "validate_result"]


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
    state: the engine's incremental state where a reroute computed it (else
    ``None``: the next reroute computes it from this result,
    :mod:`smroute.routing.reroute`).  needed: the pairs that need a route;
    oriented: ``(D,)`` bool, the destinations of mode ``tree+orient``
    (walked for delivery only), else ``None``; max_hops: the walks' bound
    for their routes where they may be longer than
    :func:`~smroute.routing.orient.turn_hops` (else 0).
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
    state: Any = None
    needed: NeededPairs | None = None
    oriented: np.ndarray | None = None
    max_hops: int = 0

    @property
    def walk_graph(self) -> SwitchGraph:
        """The graph whose orientation the validation walk checks."""
        return self.check_graph if self.check_graph is not None else self.graph

    def walk_turns(self) -> tuple[np.ndarray | None, int | None]:
        """The :func:`~smroute.routing.validate.walk` options ``(turns,
        max_hops)`` of the destinations whose routes may turn (detours, mode
        ``tree+orient``); ``(None, None)`` for up*/down* routes."""
        if self.lanes is None and self.oriented is None:
            return None, None
        turns = np.zeros(len(self.dest.lid), dtype=bool)
        hops = 0
        if self.lanes is not None:
            turns |= np.isin(self.dest.lid, self.lanes.lids)
            hops = self.lanes.max_hops
        if self.oriented is not None:
            turns |= self.oriented
            hops = max(hops, orient.turn_hops(self.graph), self.max_hops)
        return turns, hops

    @property
    def total_seconds(self) -> float:
        return float(sum(self.timings.values()))


def route(
    fabric: Fabric,
    *,
    algorithm: str = DEFAULT,
    lmc: int | None = None,
    pool: RoutePool | None = None,
    workers: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    labels: bool = True,
    roles: FabricRoles | None = None,
    overrides: GuidOverrides | None = None,
    max_vls: int = 1,
    all_ca_pairs: bool = False,
    progress: modes.ProgressHook | None = None,
) -> RoutingResult:
    """Compute forwarding tables for every switch and every destination LID.

    ``algorithm``: an engine of :data:`~smroute.routing.api.REGISTRY`.
    ``lmc``: route ``2**lmc`` LIDs per end-port (``None``: the LMC each port
    has in the fabric).  ``pool``: a live :class:`RoutePool` (else one with
    ``workers`` processes is made for this call).  ``labels``: attach per-LID
    GUIDs/descriptions for the OpenSM-format writer.  ``roles``: the fabric's
    roles if already known (else computed with ``overrides``).  ``max_vls``:
    the data VLs the subnet manager can program (1..15); 2 or more allows
    mode ``tree+detours`` where the tree would otherwise fall back to ``tree+orient``.
    ``all_ca_pairs``: every CA pair needs a route (else the roles' rule).
    ``progress``: as :func:`~smroute.routing.modes.chain`'s.
    Raises :class:`~smroute.errors.RoutingError` if the fabric cannot be routed.
    """
    eng = engine(algorithm)
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
    if eng.guarantees.trees_only and not roles.tree:
        raise RoutingError(f"{eng.title} routes fat-trees only; this fabric is no tree "
                           f"({roles.why_not_tree}): use --algorithm {DEFAULT}")
    g, mode, reason = modes.start(fabric, roles)
    if len(g.ep_row) == 0:
        raise RoutingError("no switch has an end-port attached: nothing to route")
    no_lid = np.flatnonzero(g.ep_lid == 0)
    if len(no_lid):
        raise RoutingError(
            f"{len(no_lid)} of {len(g.ep_lid)} end-ports have no LID (lid 0), e.g. "
            f"{fabric.describe_port(int(g.ep_row[no_lid[0]]))}: the capture was taken before a "
            "subnet manager assigned LIDs; run one (OpenSM) and capture the fabric again")
    needed = needed_pairs(fabric, roles, g.sw_node, fabric.port_node[g.ep_row].astype(np.int64),
                          every_ca=all_ca_pairs)
    t1 = clock()
    timings["rank"] = t1 - t0
    prep = eng.prepare(g, lmc, clock, timings)

    own = pool is None and eng.pooled
    p = pool if pool is not None else RoutePool(workers) if own else None
    try:
        t3 = clock()
        ports = eng.tables(fabric, prep, p)
        t4 = clock()
        timings["routes"] = t4 - t3

        out = modes.chain(fabric, roles, eng, prep, ports, mode, reason, max_vls, needed,
                          progress)
        if not out.complete and p is not None:
            out = _without_optional(fabric, roles, eng, prep, p, out, mode, reason, max_vls,
                                    needed, progress)
        if out.reason != reason:
            timings["turns"] = clock() - t4
    finally:
        if own and p is not None:
            p.close()

    prep, ports = out.prep, out.ports
    g = prep.graph
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
    return RoutingResult(eng.name, tables, g, prep.costs, prep.dividers, prep.nids, prep.dest,
                         timings, out.mode, out.reason, out.check, out.turn_lids, roles,
                         out.lanes, needed=needed, oriented=out.oriented,
                         max_hops=out.max_hops)


def _without_optional(fabric: Fabric, roles: FabricRoles, eng: Engine, prep: Prepared,
                      pool: RoutePool, out: modes.Outcome, mode: str, reason: str,
                      max_vls: int, needed: NeededPairs,
                      progress: modes.ProgressHook | None) -> modes.Outcome:
    """Where the chain left destinations no orientation serves (``out``),
    the engine's tables without its last optional pass (they only even
    loads), then without the last two, and so on, through the chain again:
    the first that serves every one is kept (tables the same as ones tried
    already, those with every pass included, are not tried again: a pass
    that changed nothing)."""
    passes = eng.passes(prep)
    optional = [q.name for q in passes if q.optional]
    if not optional:
        return out
    tried = {_digest(pool.run(eng, prep, passes=passes))}
    for k in range(1, len(optional) + 1):
        dropped = optional[-k:]
        plain = pool.run(eng, prep, passes=[q for q in passes if q.name not in dropped])
        key = _digest(plain)
        if key in tried:
            continue
        tried.add(key)
        again = modes.chain(fabric, roles, eng, prep, plain, mode, reason, max_vls, needed,
                            progress)
        if again.complete:
            return dataclasses.replace(again, reason=(
                f"{again.reason}; routed without the pass {', '.join(dropped)}: with it, "
                "some destinations no orientation served"))
    return out


def _digest(table: np.ndarray) -> bytes:
    """A table set's digest (which table sets the guard tried)."""
    return hashlib.blake2b(np.ascontiguousarray(table).tobytes(), digest_size=16).digest()


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


def commit_gaps(r: RoutingResult) -> int:
    """The commit gate: CA-to-CA pairs that cables join but ``r``'s tables
    leave unrouted.  An engine whose every route takes a group towards a
    switch with a path (:attr:`~smroute.routing.api.Guarantees.closer_groups`)
    routes every such pair by construction: the cheap first-hop check
    (:func:`unrouted_connected`) guards it (the background walk follows);
    other engines' tables are walked in full."""
    gaps = unrouted_connected(r)
    if not gaps and not engine(r.algorithm).guarantees.closer_groups:
        gaps = validate_result(r, max_failures=0).ca_pairs_unroutable
    return gaps
