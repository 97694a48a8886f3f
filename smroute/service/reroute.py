"""Incremental Dmodc rerouting after link events, with the diff of the change.

Dmodc's route of switch ``s`` to destination ``d`` (eq. 1-4) reads only
``s``'s port groups, its divider ``Pi[s]``, the NID of ``d``, and the cost
column of ``d``'s target switch at ``s`` and at ``s``'s neighbours.  So when
a fabric changes by links only (same switches, same ranks, same dividers and
the same destinations with the same NIDs), the new tables equal the old ones
except

* the rows of the switches whose port groups changed (they are recomputed in
  full), and
* the LID columns whose target switch's cost column changed anywhere; they
  are recomputed for the switches whose own cost, or a neighbour's, to such a
  target changed.

:func:`reroute` checks those conditions on the freshly computed graph, costs,
dividers and NIDs (cheap next to the route phase), recomputes only that part
with :func:`smroute.routing.dmodc.route_block`, and builds the
:class:`~smroute.tables.diff.TableDiff` from that region alone.  Anything else
(switch or CA events, rank or divider changes, Dmodk) falls back to a full
:func:`smroute.routing.engine.route` in the pool and :func:`diff_tables`.
Either way the tables equal a from-scratch route of the new fabric (tested).
Nmodc (:mod:`smroute.routing.nominal`) takes the same path with its nominal
dividers and kernel; a switch whose nominal slots changed (its siblings lost
or regained their last link to an up-neighbour) is recomputed in full too,
and so is every switch with a changed entry whose cables may be shared out
by capacity, before or after (:func:`smroute.routing.slot_tables.may_share`:
those shares read the switch's whole row).  Its redirects by load
(:mod:`smroute.routing.balance`) read every table and change only the
leaves' entries of their partial targets: those entries, before or after
the change, get the kernel's back (a leaf partial to more than a quarter
of the switches, its whole row), and the pass is rerun over the whole
tables.  What the next reroute reads of the previous routing (nominal
slots, switches that may share by capacity, partial pairs, down-cable
offsets) travels in the result (:class:`~smroute.routing.engine.NominalState`),
so a chain of reroutes computes each once; a full route's is computed by
the first reroute after it (:func:`nominal_state`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from smroute.fabric.model import Fabric
from smroute.fabric.roles import fabric_roles, needed_pairs
from smroute.routing import balance, dmodc, down_offsets, even_cables, nominal, slot_tables
from smroute.routing.dmodc import Destinations
from smroute.routing.engine import (
    NominalState,
    RoutingResult,
    route,
    route_destinations,
    turn_destinations,
)
from smroute.routing.pool import RoutePool
from smroute.routing.topology import SwitchGraph, switch_graph
from smroute.service.epochs import own_tables
from smroute.tables.diff import TableDiff, changed_blocks, diff_tables

__all__ = ["Reroute", "reroute", "diff_region", "new_costs", "nominal_state"]

_DEST_FIELDS = ("lid", "nid", "target", "local_port", "is_switch")
#: Algorithms rerouted incrementally (Nmodc: also the rows whose nominal slots changed).
_INCREMENTAL = ("dmodc", "nmodc")
_ROW_BLOCK = 64
#: Table entries a routed block may hold: a block of a subset of the
#: destinations takes more switches (the kernels' cost is mostly per block).
_BLOCK_CELLS = 1 << 20
#: Partial pairs from which Nmodc's whole rows and redirects by load run in
#: the pool's workers (a heavily damaged tree: 0.84 s in one process with
#: 1,000 links removed); below, they cost less than the table's trip there.
_POOL_PAIRS = 1 << 16


@dataclasses.dataclass(frozen=True, eq=False)
class Reroute:
    """Result of :func:`reroute`: the new routing (tables private, read-only),
    the diff against the previous tables, seconds per phase, and whether the
    incremental path was taken (``reason``: why not, if not)."""

    result: RoutingResult
    diff: TableDiff
    timings: dict[str, float]
    incremental: bool
    reason: str = ""
    rows: int = 0
    lids: int = 0


def _port_map(g: SwitchGraph) -> np.ndarray:
    """Remote switch behind every (switch, port), ``(S, 256)`` int32, -1 if none."""
    out = np.full((g.n_switches, 256), -1, dtype=np.int32)
    out[np.repeat(g.grp_switch, g.grp_port_count), g.grp_ports] = np.repeat(
        g.grp_remote, g.grp_port_count)
    return out


def changed_switches(g0: SwitchGraph, g1: SwitchGraph) -> np.ndarray:
    """Switch ids (same switch set) whose port groups differ, ``(R,)`` int64: a port
    leads elsewhere (or nowhere) now.  Groups are a function of the ports'
    remotes, so equal maps mean equal groups."""
    return np.flatnonzero((_port_map(g0) != _port_map(g1)).any(axis=1))


def new_costs(g0: SwitchGraph, c0: np.ndarray, g1: SwitchGraph) -> np.ndarray:
    """The encoded costs of ``g1`` (:func:`~smroute.routing.dmodc.costs_and_dividers`),
    knowing ``c0``, those of ``g0`` (same switches and ranks): the same where
    the same switch pairs are linked (cables added or lost beside others),
    :func:`~smroute.routing.dmodc.costs_after_link` where one pair gained
    or lost its last cable, else computed in full."""
    n = g1.n_switches
    (lo0, hi0), (lo1, hi1) = g0.up_pairs(), g1.up_pairs()
    diff = np.setxor1d(lo0 * n + hi0, lo1 * n + hi1, assume_unique=True)  # distinct pairs
    if len(diff) == 0:
        return c0.copy()
    if len(diff) == 1:
        return dmodc.costs_after_link(g1, c0, *divmod(int(diff[0]), n))
    return dmodc.costs_and_dividers(g1)[0]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _why_not(prev: RoutingResult, g: SwitchGraph) -> str:
    g0 = prev.graph
    if prev.algorithm not in _INCREMENTAL:
        return f"algorithm {prev.algorithm}"
    if not _same(g0.sw_guid, g.sw_guid):
        return "the switch set changed"
    if not _same(g0.rank, g.rank):
        return "switch ranks changed"
    if not _same(g0.sw_lid, g.sw_lid):
        return "switch LIDs changed"
    if not (_same(g0.ep_row, g.ep_row) and _same(g0.ep_switch, g.ep_switch)
            and _same(g0.ep_switch_port, g.ep_switch_port) and _same(g0.ep_lid, g.ep_lid)):
        return "end-ports changed"
    return ""


def nominal_state(res: RoutingResult) -> NominalState:
    """The :class:`~smroute.routing.engine.NominalState` of an Nmodc routing
    in mode ``tree``, computed from its graph, costs and tables."""
    g, c, dest = res.graph, res.costs, res.dest
    slots = nominal.nominal_slots(g)
    return NominalState(slots, slot_tables.may_share(g, c, dest),
                        balance.partial_pairs(g, c, dest, slots).leaf_target,
                        down_offsets.foreign_entries(g, c, res.dividers, dest, res.tables.ports,
                                                     slots))


def _route_subset(g: SwitchGraph, c: np.ndarray, pi: np.ndarray, dest: Destinations,
                  switches: np.ndarray, sel: np.ndarray,
                  slots: np.ndarray | None = None) -> np.ndarray:
    """Routes of ``switches`` to the destinations ``sel`` (indices into
    ``dest``), shape ``(len(switches), len(sel))`` uint8 (Nmodc's with its
    packed nominal ``slots``, else Dmodc's).  With Nmodc, a subset of the
    destinations is routed only for switches that cannot share their
    cables by capacity (:func:`~smroute.routing.slot_tables.may_share`)."""
    whole = len(sel) == len(dest.lid)
    sub = Destinations(
        lid=np.arange(len(sel), dtype=np.int64), nid=dest.nid[sel], target=dest.target[sel],
        local_port=dest.local_port[sel], is_switch=dest.is_switch[sel], owner=dest.owner[sel],
    )
    out = np.empty((len(switches), max(len(sel), 1)), dtype=np.uint8)
    ctx = dmodc.route_context(c, sub)
    rd = nominal.redirect_dividers(g, pi) if slots is not None else None
    step = max(_ROW_BLOCK, _BLOCK_CELLS // max(len(sel), 1))  # few columns: more rows a block
    for i in range(0, len(switches), step):
        blk = switches[i:i + step]
        if slots is None:
            dmodc.route_block(g, c, pi, sub, blk, out[i:i + len(blk)], ctx)
        else:
            nominal.route_block(g, c, pi, sub, blk, out[i:i + len(blk)], slots, ctx,
                                capacity=whole, redirect=rd)
    return out[:, :len(sel)]


def reroute(
    prev: RoutingResult,
    fabric: Fabric,
    *,
    lmc: int | None,
    algorithm: str | None = None,
    pool: RoutePool | None = None,
    clock: Callable[[], float] = time.perf_counter,
    incremental: bool = True,
    max_vls: int = 1,
    all_ca_pairs: bool | None = None,
) -> Reroute:
    """Route ``fabric`` (the previous fabric changed by some events) knowing
    ``prev``, its routing; see the module doc.  ``lmc`` as in
    :func:`~smroute.routing.engine.route`; ``algorithm``: default ``prev``'s;
    ``pool``: for the full path (``None``: route in this process).
    ``incremental=False`` forces the full route (for comparisons); ``max_vls``:
    as :func:`~smroute.routing.engine.route`'s (a routing with detours is
    always routed in full); ``all_ca_pairs``: as ``route``'s (``None``:
    ``prev``'s)."""
    alg = algorithm or prev.algorithm
    every = (all_ca_pairs if all_ca_pairs is not None
             else prev.needed is not None and prev.needed.every_ca)
    t0 = clock()
    overrides = prev.roles.overrides if prev.roles is not None else None
    roles = fabric_roles(fabric, overrides)
    g = switch_graph(fabric, roles)
    why = ("disabled" if not incremental
           else f"algorithm {alg}" if alg not in _INCREMENTAL or alg != prev.algorithm
           else f"routing mode {prev.mode}" if prev.mode != "tree"
           else f"no tree: {roles.why_not_tree}" if not roles.tree
           else _why_not(prev, g))
    t1 = clock()
    timings = {"rank": t1 - t0}
    nominal_slots = None
    if not why:
        nominal_slots = nominal.nominal_slots(g) if alg == "nmodc" else None
        c = new_costs(prev.graph, prev.costs, g)
        pi = (nominal.nominal_dividers(g, nominal_slots.arity) if nominal_slots is not None
              else dmodc.dividers(g))
        t2 = clock()
        timings["costs"] = t2 - t1
        if not _same(pi, prev.dividers):
            why = "dividers changed"
        else:
            nids, dest = route_destinations(alg, g, c, lmc)
            d0 = prev.dest
            if not all(_same(getattr(dest, f), getattr(d0, f)) for f in _DEST_FIELDS):
                why = "destination NIDs changed"
            elif turn_destinations(g, c, dest).any():
                why = "some end-port traffic needs the turn root"
            t3 = clock()
            timings["nids"] = t3 - t2
    if why:
        # without a pool, route in this process (not a new pool per call)
        res = own_tables(route(fabric, algorithm=alg, lmc=lmc, pool=pool,
                               workers=1 if pool is None else None, clock=clock, roles=roles,
                               max_vls=max_vls, all_ca_pairs=every))
        t4 = clock()
        d = diff_tables(prev.tables, res.tables)
        timings = {**res.timings, "diff": clock() - t4}
        return Reroute(res, d, timings, False, why)

    # rows whose port groups changed; targets whose cost column changed
    rows = changed_switches(prev.graph, g)
    slots = nominal.packed_slots(nominal_slots) if nominal_slots is not None else None
    dc = c != prev.costs
    changed_t = np.flatnonzero(dc.any(axis=0))
    # a switch's entries for those targets read its own cost and its
    # neighbours' costs to them: only switches where one of these changed
    # (or, in rows, whose groups changed) can get a new entry
    moved = dc[:, changed_t].any(axis=1)
    near = moved.copy()
    near[g.grp_switch[moved[g.grp_remote]]] = True
    col_sw = np.flatnonzero(near)
    red_sw = red_t = np.zeros(0, dtype=np.int64)
    if nominal_slots is not None:
        was = prev.nominal or nominal_state(prev)
        rows = np.union1d(rows, nominal.changed_slots(prev.graph, was.slots, g, nominal_slots))
        # Nmodc's shares by capacity read a switch's whole row
        new_share = slot_tables.may_share(g, c, dest)
        share = was.share | new_share
        # the redirects by load, before and after, change the leaves'
        # entries of their partial targets only: those leaves get the
        # kernel's entries back there (a leaf with more than a quarter of
        # the switches as partial targets, before and after together, its
        # whole row)
        pairs = balance.partial_pairs(g, c, dest, nominal_slots)
        pl, pt = (np.concatenate(a) for a in zip(was.pairs, pairs.leaf_target, strict=True))
        whole = np.bincount(pl, minlength=g.n_switches) > g.n_switches // 4
        whole[pl] |= share[pl]
        whole |= share & near
        rows = np.union1d(rows, np.flatnonzero(whole))
        keep = ~whole[pl]
        red_sw, red_t = np.unique(pl[keep]), np.unique(pt[keep])
        col_sw = col_sw[~whole[col_sw]]
    sel = np.flatnonzero(np.isin(dest.target, changed_t))
    red_sel = np.flatnonzero(np.isin(dest.target, red_t))
    old = prev.tables.ports
    ports = np.array(old, dtype=np.uint8, copy=True)
    offset_d = np.zeros(0, dtype=np.int64)  # destinations of down-cable offsets
    if nominal_slots is not None:  # the tables before the offsets, then routed anew
        down_offsets.move_entries(prev.graph, prev.dest, ports, was.offsets, undo=True)
        offset_d = was.offsets[1]
    for sw, cols in ((red_sw, red_sel), (col_sw, sel)):
        sw = np.setdiff1d(sw, rows)
        if len(sw) and len(cols):
            ports[sw[:, None], dest.lid[cols][None, :]] = _route_subset(g, c, pi, dest, sw,
                                                                        cols, slots)
    # a heavily damaged tree (Nmodc): its whole rows and the redirects by load
    # in the pool's workers
    heavy = pool is not None and nominal_slots is not None and len(pairs.pb) >= _POOL_PAIRS
    if len(rows) and not heavy:
        ports[rows[:, None], dest.lid[None, :]] = _route_subset(
            g, c, pi, dest, rows, np.arange(len(dest.lid)), slots)
    lids = dest.lid[np.union1d(sel, red_sel)]
    state = None
    if nominal_slots is not None:
        if heavy:
            assert pool is not None
            pool.rework(g, c, pi, dest, ports, nominal_slots, new_share, rows)
        else:
            ports = balance.balance_redirects(g, c, pi, dest, ports, nominal_slots, pairs=pairs)
        after = down_offsets.foreign_entries(g, c, pi, dest, ports, nominal_slots)
        ports = down_offsets.move_entries(g, dest, ports, after)
        # (the switches that share by capacity are whole rows above, or unchanged)
        even_cables.deal_up_cables(g, dest, ports, new_share)
        lids = np.union1d(lids, dest.lid[np.union1d(offset_d, after[1])])
        state = NominalState(nominal_slots, new_share, pairs.leaf_target, after)
    ports.setflags(write=False)
    t4 = clock()
    timings["routes"] = t4 - t3
    tables = dataclasses.replace(prev.tables, ports=ports, _index={})
    res = RoutingResult(prev.algorithm, tables, g, c, pi, nids, dest, dict(timings),
                        roles=roles, nominal=state, needed=needed_pairs(
                            fabric, roles, g.sw_node,
                            fabric.port_node[g.ep_row].astype(np.int64),
                            every_ca=every))
    d = diff_region(prev.tables.ports, ports, rows, lids, tables.switch_guid, tables.switch_lid,
                    tables.switch_desc)
    timings["diff"] = clock() - t4
    return Reroute(res, d, timings, True, rows=len(rows), lids=len(lids))


def diff_region(old: np.ndarray, new: np.ndarray, rows: np.ndarray, lids: np.ndarray,
                guid: np.ndarray, lid: np.ndarray, desc: tuple[str, ...]) -> TableDiff:
    """:func:`diff_tables` of two tables of the same switches (same row order,
    same width) that can differ only in ``rows`` (all LIDs) and ``lids`` (all
    switches): the same :class:`TableDiff`, computed on that region only.

    old / new ``(S, W)`` uint8; rows ``(R,)`` and lids ``(K,)`` int64;
    guid ``(S,)`` uint64, lid ``(S,)`` switch LIDs, desc S descriptions.
    """
    s, w = new.shape
    g = np.asarray(guid, dtype=np.uint64)
    order = np.argsort(g, kind="stable")
    pos = np.empty(s, dtype=np.int64)
    pos[order] = np.arange(s)
    rows = np.asarray(rows, dtype=np.int64)
    lids = np.unique(np.asarray(lids, dtype=np.int64))
    a, b = old[rows], new[rows]
    ne = a != b
    if w:
        ne[:, 0] = False
    r1, l1 = np.nonzero(ne)
    sw1, lid1, o1, n1 = rows[r1], l1.astype(np.int64), a[r1, l1], b[r1, l1]
    lids = lids[lids > 0]
    a2, b2 = old[:, lids], new[:, lids]
    ne2 = a2 != b2
    ne2[rows] = False
    r2, j2 = np.nonzero(ne2)
    sw = np.concatenate([sw1, r2.astype(np.int64)])
    el = np.concatenate([lid1, lids[j2]])
    eo = np.concatenate([o1, a2[r2, j2]]).astype(np.uint8)
    en = np.concatenate([n1, b2[r2, j2]]).astype(np.uint8)
    e_sw = pos[sw]
    o = np.lexsort((el, e_sw))
    e_sw, el, eo, en = e_sw[o], el[o], eo[o], en[o]
    block_switch, block = changed_blocks(e_sw, el, w)
    swl = np.asarray(lid, dtype=np.int64)[order]
    empty_g = np.zeros(0, dtype=np.uint64)
    return TableDiff(
        common_guid=g[order], common_desc=tuple(desc[i] for i in order.tolist()),
        old_lid=swl, new_lid=swl, entry_switch=e_sw, entry_lid=el, entry_old=eo,
        entry_new=en, block_switch=block_switch, block=block,
        only_old_guid=empty_g, only_old_desc=(), only_new_guid=empty_g, only_new_desc=(),
        width=w,
    )
