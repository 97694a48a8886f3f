"""Nmodc's part of the incremental reroute (:mod:`smroute.routing.reroute`).

Beside the generic region, a switch whose nominal slots changed (its
siblings lost or regained their last link to an up-neighbour) is recomputed
in full, and so is every switch with a changed entry whose cables may be
shared out by capacity, before or after
(:func:`smroute.routing.nmodc.slot_tables.sharing`: those shares read the
switch's whole row); every such switch where the usual cable count of some
group changed (:func:`~smroute.routing.nmodc.cables.usual_cables`: the
shares count no cable above it) or a switch lost or regained a cable up
(:func:`~smroute.routing.nmodc.cables.lost_up`: the tables towards it
count the cables down to it).  The redirects by load (:mod:`smroute.routing.nmodc.balance`)
read every table and change only the leaves' entries of their partial
targets: those entries, before or after the change, get the kernel's back
(a leaf partial to more than a quarter of the switches, its whole row), and
the pass is rerun over the whole tables, then the up cables are dealt
evenly again.  Where some leaf has a shortcut, before or after
(:mod:`smroute.routing.nmodc.bundles`: its passes read whole rows of
several ranks), every row is recomputed and they run again.  The
switches of the descent (:mod:`smroute.routing.nmodc.descent`), before and
after, are recomputed in full: a target's entries there read all of its
arrivals together.  What the next reroute reads of
the previous routing travels in its result (:class:`NominalState`), so a
chain of reroutes computes each once; a full route's is computed by the
first reroute after it (:func:`nominal_state`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np

from smroute.routing.api import Arrays, Engine, Prepared, base_arrays
from smroute.routing.engine import RoutingResult
from smroute.routing.nmodc import balance, bundles, even_cables, nominal, shortcuts, slot_tables
from smroute.routing.nmodc.cables import counted_cables, lost_up, usual_cables
from smroute.routing.nmodc.descent import descent_keys
from smroute.routing.nmodc.entries import apart_leaves, enter_dealt, up_skewed
from smroute.routing.nmodc.pod_routes import pod_routes
from smroute.routing.nmodc.turns import turn_tables
from smroute.routing.pool import RoutePool
from smroute.routing.reroute import IncrementalHook, Region
from smroute.routing.topology import SwitchGraph

__all__ = ["POOL_PAIRS", "NmodcIncremental", "NominalState", "nominal_state", "slots_of"]

#: Partial pairs from which the whole rows and the redirects by load run in
#: the pool's workers (a heavily damaged tree: 0.84 s in one process with
#: 1,000 links removed); below, they cost less than the table's trip there.
POOL_PAIRS = 1 << 16

#: The descent's keys (:func:`~smroute.routing.nmodc.descent.descent_keys`)
#: of the graph a reroute widened its region on, for its column blocks
#: (whose destinations are a subset: the keys read them all).
_DESCENT: WeakKeyDictionary[SwitchGraph, np.ndarray] = WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class NominalState:
    """What an incremental reroute of an Nmodc routing reads besides its
    tables: the nominal slots, the switches whose cables may be shared by
    capacity ``(S,)`` bool (:func:`~smroute.routing.nmodc.slot_tables.sharing`),
    the ``(leaf, target)`` pairs of the redirects by load, ``(K,)`` int64
    switch ids each (:attr:`~smroute.routing.nmodc.balance.PartialPairs.leaf_target`),
    the leaves with a shortcut ``(L,)`` int64
    (:func:`~smroute.routing.nmodc.shortcuts.shortcut_leaves`)."""

    slots: nominal.NominalSlots
    share: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray]
    shortcuts: np.ndarray


def nominal_state(res: RoutingResult) -> NominalState:
    """The :class:`NominalState` of an Nmodc routing in mode ``tree``,
    computed from its graph and costs."""
    g, c, dest = res.graph, res.costs, res.dest
    slots = nominal.nominal_slots(g)
    return NominalState(slots, slot_tables.sharing(g, c, dest),
                        balance.partial_pairs(g, c, dest, slots).leaf_target,
                        shortcuts.shortcut_leaves(g, c))


def slots_of(prep: Prepared) -> nominal.NominalSlots:
    """The nominal slots of ``prep``: its ``aux``, or computed where the
    engine prepared it to route as Dmodc (:mod:`smroute.routing.nmodc.as_dmodc`)."""
    if isinstance(prep.aux, nominal.NominalSlots):
        return prep.aux
    return nominal.nominal_slots(prep.graph)


@dataclass(frozen=True, eq=False)
class _Plan:
    was: NominalState
    share: np.ndarray
    pairs: balance.PartialPairs
    shortcuts: np.ndarray
    apart: np.ndarray


def _usual_changed(a: SwitchGraph, b: SwitchGraph) -> bool:
    """Whether a cable group of both graphs (the same two switches, by
    GUID) has another :func:`~smroute.routing.nmodc.cables.usual_cables`
    count in each."""
    def keyed(g: SwitchGraph) -> tuple[np.ndarray, np.ndarray]:
        pair = np.stack([g.sw_guid[g.grp_switch], g.sw_guid[g.grp_remote]], axis=1)
        return np.ascontiguousarray(pair).view(np.dtype((np.void, 16))).ravel(), usual_cables(g)
    (ka, ua), (kb, ub) = keyed(a), keyed(b)
    _, ia, ib = np.intersect1d(ka, kb, return_indices=True)
    return bool((ua[ia] != ub[ib]).any())


def _lost_changed(a: SwitchGraph, b: SwitchGraph) -> bool:
    """Whether the switches that lost a cable up
    (:func:`~smroute.routing.nmodc.cables.lost_up`) differ, by GUID."""
    return not np.array_equal(np.sort(a.sw_guid[lost_up(a)]), np.sort(b.sw_guid[lost_up(b)]))


def _turns_changed(a: SwitchGraph, sa: nominal.NominalSlots, b: SwitchGraph,
                   sb: nominal.NominalSlots) -> np.ndarray:
    """The upper switches of the turns of either graph (same switch ids)
    where they differ (:func:`~smroute.routing.nmodc.turns.turn_tables`)."""
    ta, tb = turn_tables(a, sa), turn_tables(b, sb)
    if ta is None and tb is None:
        return np.zeros(0, dtype=np.int64)
    if ta is not None and tb is not None and all(
            np.array_equal(getattr(ta, k), getattr(tb, k))
            for k in ("lower", "length", "slot", "occurrence", "key", "key_slot", "key_group")):
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate([t.key // len(gr.rank) for t, gr in ((ta, a), (tb, b))
                                     if t is not None]))


class NmodcIncremental(IncrementalHook):
    """Nmodc's incremental hook (module doc)."""

    def widen(self, prev: RoutingResult, prep: Prepared, region: Region) -> Region:
        g, c, dest, slots = prep.graph, prep.costs, prep.dest, slots_of(prep)
        was = prev.state if isinstance(prev.state, NominalState) else nominal_state(prev)
        rows = np.union1d(region.rows, nominal.changed_slots(prev.graph, was.slots, g, slots))
        # the shares by capacity read a switch's whole row
        new_share = slot_tables.sharing(g, c, dest)
        share = was.share | new_share
        # the redirects by load, before and after, change the leaves'
        # entries of their partial targets only: those leaves get the
        # kernel's entries back there (a leaf with more than a quarter of
        # the switches as partial targets, before and after together, its
        # whole row)
        pairs = balance.partial_pairs(g, c, dest, slots)
        pl, pt = (np.concatenate(a) for a in zip(was.pairs, pairs.leaf_target, strict=True))
        whole = np.bincount(pl, minlength=g.n_switches) > g.n_switches // 4
        whole[pl] |= share[pl]
        whole |= share & region.near
        if _usual_changed(prev.graph, g) or _lost_changed(prev.graph, g):
            # the shares count other cables everywhere, or the tables
            # towards a leaf that lost or regained a cable change
            whole |= share
        rows = np.union1d(rows, np.flatnonzero(whole))
        # the upper switches of the turns (:mod:`~smroute.routing.nmodc.turns`),
        # before and after, in full where the turns changed
        rows = np.union1d(rows, _turns_changed(prev.graph, was.slots, g, slots))
        # the descent's switches, before and after, in full (it reads every
        # arrival of a target together)
        keys = descent_keys(g, c, slots, prep.dividers, dest)
        _DESCENT[g] = keys
        n = g.n_switches
        before = descent_keys(prev.graph, prev.costs, was.slots, prev.dividers, prev.dest)
        rows = np.union1d(rows, np.union1d(keys // n, before // len(prev.graph.rank)))
        # where some leaf has a shortcut or is ranked apart, before or after, every row
        leaves, apart = shortcuts.shortcut_leaves(g, c), apart_leaves(g)
        if len(leaves) or len(was.shortcuts) or len(apart) or len(apart_leaves(prev.graph)):
            rows = np.arange(g.n_switches)
        keep = ~whole[pl]
        extra = [(np.unique(pl[keep]), np.unique(pt[keep]))]
        return Region(rows, region.cols[~whole[region.cols]], region.targets, region.near,
                      extra, _Plan(was, new_share, pairs, leaves, apart))

    def column_arrays(self, eng: Engine, prep: Prepared, whole: bool) -> Arrays:
        # a subset of the columns is routed only for switches that cannot
        # share their cables by capacity (the shares weigh the whole row)
        a = base_arrays(prep)
        a["n_slots"] = nominal.packed_slots(slots_of(prep))
        a["n_eps"] = np.array([len(prep.nids)], dtype=np.int64)  # not the columns'
        a["n_share"] = np.full(prep.graph.n_switches, whole)
        a["n_cables"] = counted_cables(prep.graph)
        a["n_desc"] = _DESCENT.get(prep.graph, np.zeros(0, dtype=np.int64))
        return a

    def rows_in_pool(self, region: Region, pool: RoutePool | None) -> bool:
        return pool is not None and len(region.data.pairs.pb) >= POOL_PAIRS

    def redo(self, eng: Engine, prep: Prepared, ports: np.ndarray, region: Region,
             pool: RoutePool | None) -> tuple[np.ndarray, np.ndarray, Any]:
        g, c, pi, dest, slots = prep.graph, prep.costs, prep.dividers, prep.dest, slots_of(prep)
        plan: _Plan = region.data
        if self.rows_in_pool(region, pool):
            assert pool is not None
            # the kernel's rows (Dmodc's where it can, then the partial
            # targets' entries), then the redirects by load
            steps = [p for p in eng.passes(prep) if p.name in ("partial", "balance")]
            pool.run(eng, prep, rows=region.rows, table=ports, passes=steps)
        else:
            ports = balance.balance_redirects(g, c, pi, dest, ports, slots, pairs=plan.pairs,
                                              n_eps=len(g.ep_switch))
            pod_routes(g, c, pi, dest, ports, slots)
        # (the switches that share by capacity are whole rows above, or unchanged)
        even_cables.deal_up_cables(g, dest, ports, plan.share)
        bundles.balance_bundles(g, c, dest, ports, plan.shortcuts)
        bundles.through_the_deal(g, dest, ports, plan.shortcuts)
        up_skewed(g, c, dest, ports, plan.apart, pi)
        enter_dealt(g, c, dest, ports, plan.apart, pi)
        return ports, np.zeros(0, dtype=np.int64), NominalState(
            slots, plan.share, plan.pairs.leaf_target, plan.shortcuts)
