"""Incremental rerouting after fabric events, with the diff of the change:
the generic part, for every engine with an incremental hook
(:attr:`~smroute.routing.api.Engine.incremental`).

An engine's route of switch ``s`` to destination ``d`` on Dmodc's costs
(eq. 1-4) reads only ``s``'s port groups, its divider ``Pi[s]``, the NID
of ``d``, and the cost column of ``d``'s target switch at ``s`` and at
``s``'s neighbours.  So when a fabric changes by links only (same switches,
same ranks, same dividers and the same destinations with the same NIDs),
the new tables equal the old ones except

* the rows of the switches whose port groups changed (they are recomputed in
  full), and
* the LID columns whose target switch's cost column changed anywhere; they
  are recomputed for the switches whose own cost, or a neighbour's, to such a
  target changed.

:func:`reroute` checks those conditions on the freshly prepared graph,
costs, dividers and NIDs (cheap next to the route phase), recomputes only
that part with the engine's kernel, and builds the
:class:`~smroute.tables.diff.TableDiff` from that region alone.  The
engine's hook (:class:`IncrementalHook`) widens the region and redoes its
whole-table passes (Nmodc: :mod:`smroute.routing.nmodc.incremental`).
Anything else (switch or CA events, rank or divider changes, an engine
without a hook, a mode other than ``tree``) falls back to a full
:func:`smroute.routing.engine.route` and :func:`diff_tables`.  Either way
the tables equal a from-scratch route of the new fabric (tested for every
engine, tests/test_engines.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles, needed_pairs
from smroute.routing import dmodc
from smroute.routing.api import Arrays, Engine, Prepared, engine, subset
from smroute.routing.engine import RoutingResult, route
from smroute.routing.modes import turn_destinations
from smroute.routing.pool import ROW_BLOCK, RoutePool
from smroute.routing.topology import SwitchGraph, switch_graph
from smroute.tables.diff import TableDiff, changed_blocks, diff_tables

__all__ = ["IncrementalHook", "Region", "Reroute", "changed_switches", "diff_region",
           "new_costs", "reroute", "route_columns"]

_DEST_FIELDS = ("lid", "nid", "target", "local_port", "is_switch")
#: Table entries a kernel call may fill when routing a subset of the
#: destinations: a block of few columns takes more switches (the kernels'
#: cost is mostly per call), at most this many entries at once (memory).
BLOCK_CELLS = 1 << 20


@dataclasses.dataclass
class Region:
    """What an incremental reroute routes anew: ``rows`` ``(R,)`` whole
    rows; ``cols`` ``(C,)`` the switches routed anew for the changed targets
    ``targets`` ``(T,)``; ``extra``: further ``(switches, targets)`` parts
    (routed before ``cols``'s); ``near`` ``(S,)`` bool the switches whose
    own or a neighbour's cost to a changed target changed; ``data``: the
    hook's own, between its steps."""

    rows: np.ndarray
    cols: np.ndarray
    targets: np.ndarray
    near: np.ndarray
    extra: list[tuple[np.ndarray, np.ndarray]] = dataclasses.field(default_factory=list)
    data: Any = None


class IncrementalHook:
    """An engine's part of the incremental reroute; this base is an engine
    without whole-table passes (Dmodc): the generic region, nothing else."""

    def widen(self, prev: RoutingResult, prep: Prepared, region: Region) -> Region:
        """The region, widened where the engine's routes read more."""
        return region

    def column_arrays(self, eng: Engine, prep: Prepared, whole: bool) -> Arrays:
        """The kernel's arrays for ``prep`` whose destinations are a subset of
        the routing's columns (``whole``: all of them)."""
        return eng.arrays(prep)

    def undo(self, prev: RoutingResult, ports: np.ndarray, region: Region) -> np.ndarray:
        """Undo, in place in ``ports`` (a copy of ``prev``'s), what the passes
        moved that the kernel's entries do not say; the destination indices
        touched ``(K,)``."""
        return np.zeros(0, dtype=np.int64)

    def rows_in_pool(self, region: Region, pool: RoutePool | None) -> bool:
        """Whether the whole rows are routed in the pool by :meth:`redo`."""
        return False

    def redo(self, eng: Engine, prep: Prepared, ports: np.ndarray, region: Region,
             pool: RoutePool | None) -> tuple[np.ndarray, np.ndarray, Any]:
        """The engine's passes over ``ports`` (with the kernel's entries of the
        region): the tables, the destination indices the passes may have
        changed, and the state the next reroute reads (``RoutingResult.state``)."""
        return ports, np.zeros(0, dtype=np.int64), None


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


def changed_switches(g0: SwitchGraph, g1: SwitchGraph) -> np.ndarray:
    """Switch ids (same switch set) whose port groups differ, ``(R,)`` int64: a port
    leads elsewhere (or nowhere) now.  Groups are a function of the ports'
    remotes, so equal maps mean equal groups."""
    return np.flatnonzero((g0.behind() != g1.behind()).any(axis=1))


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


def route_columns(eng: Engine, prep: Prepared, switches: np.ndarray,
                  sel: np.ndarray) -> np.ndarray:
    """``eng``'s kernel entries of ``switches`` for the destinations ``sel``
    (indices into ``prep.dest``), ``(len(switches), len(sel))`` uint8, in
    this process (the engine's hook lays out the arrays of a subset of the
    columns, :meth:`IncrementalHook.column_arrays`)."""
    hook = eng.incremental if isinstance(eng.incremental, IncrementalHook) else IncrementalHook()
    sub = dataclasses.replace(prep, dest=subset(prep.dest, sel))
    a = hook.column_arrays(eng, sub, len(sel) == len(prep.dest.lid))
    out = np.empty((len(switches), max(len(sel), 1)), dtype=np.uint8)
    step = max(ROW_BLOCK, BLOCK_CELLS // max(len(sel), 1))  # few columns: more rows a call
    cache: dict[str, Any] = {}
    for i in range(0, len(switches), step):
        blk = switches[i:i + step]
        eng.kernel(a, blk, out[i:i + len(blk)], cache)
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
    ``prev``'s).  The full path's tables are the pool's (a caller that keeps
    them copies them)."""
    alg = algorithm or prev.algorithm
    every = (all_ca_pairs if all_ca_pairs is not None
             else prev.needed is not None and prev.needed.every_ca)
    eng = engine(alg)
    hook = eng.incremental if isinstance(eng.incremental, IncrementalHook) else None
    t0 = clock()
    overrides = prev.roles.overrides if prev.roles is not None else None
    roles = fabric_roles(fabric, overrides)
    g = switch_graph(fabric, roles)
    why = ("disabled" if not incremental
           else f"algorithm {alg}" if hook is None or alg != prev.algorithm
           else f"routing mode {prev.mode}" if prev.mode != "tree"
           else f"no tree: {roles.why_not_tree}" if not roles.tree
           else _why_not(prev, g))
    t1 = clock()
    timings = {"rank": t1 - t0}
    if not why:
        prep = eng.prepare(g, lmc, clock, timings, costs=new_costs(prev.graph, prev.costs, g))
        c, pi, dest = prep.costs, prep.dividers, prep.dest
        if not _same(pi, prev.dividers):
            why = "dividers changed"
        elif not all(_same(getattr(dest, f), getattr(prev.dest, f)) for f in _DEST_FIELDS):
            why = "destination NIDs changed"
        elif turn_destinations(g, c, dest).any():
            why = "some end-port traffic needs the turn root"
    if why:
        # without a pool, route in this process (not a new pool per call)
        res = route(fabric, algorithm=alg, lmc=lmc, pool=pool,
                    workers=1 if pool is None else None, clock=clock, roles=roles,
                    max_vls=max_vls, all_ca_pairs=every)
        t4 = clock()
        d = diff_tables(prev.tables, res.tables)
        timings = {**res.timings, "diff": clock() - t4}
        return Reroute(res, d, timings, False, why)
    t3 = clock()
    assert hook is not None
    # rows whose port groups changed; targets whose cost column changed
    dc = c != prev.costs
    changed_t = np.flatnonzero(dc.any(axis=0))
    # a switch's entries for those targets read its own cost and its
    # neighbours' costs to them: only switches where one of these changed
    # (or, in rows, whose groups changed) can get a new entry
    moved = dc[:, changed_t].any(axis=1)
    near = moved.copy()
    near[g.grp_switch[moved[g.grp_remote]]] = True
    region = hook.widen(prev, prep, Region(changed_switches(prev.graph, g),
                                           np.flatnonzero(near), changed_t, near))
    rows = region.rows
    ports = np.array(prev.tables.ports, dtype=np.uint8, copy=True)
    undone = hook.undo(prev, ports, region)
    sel = np.zeros(0, dtype=np.int64)
    for sw, targets in (*region.extra, (region.cols, region.targets)):
        cols = np.flatnonzero(np.isin(dest.target, targets))
        sel = np.union1d(sel, cols)
        sw = np.setdiff1d(sw, rows)
        if len(sw) and len(cols):
            ports[sw[:, None], dest.lid[cols][None, :]] = route_columns(eng, prep, sw, cols)
    if len(rows) and not hook.rows_in_pool(region, pool):
        ports[rows[:, None], dest.lid[None, :]] = route_columns(
            eng, prep, rows, np.arange(len(dest.lid)))
    ports, redone, state = hook.redo(eng, prep, ports, region, pool)
    lids = np.union1d(dest.lid[sel], dest.lid[np.union1d(undone, redone)])
    ports.setflags(write=False)
    t4 = clock()
    timings["routes"] = t4 - t3
    tables = dataclasses.replace(prev.tables, ports=ports, _index={})
    res = RoutingResult(prev.algorithm, tables, g, c, pi, prep.nids, dest, dict(timings),
                        roles=roles, state=state, needed=needed_pairs(
                            fabric, roles, g.sw_node,
                            fabric.port_node[g.ep_row].astype(np.int64), every_ca=every))
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
