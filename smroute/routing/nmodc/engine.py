"""The Nmodc engine: Dmodc's costs with the nominal dividers, NIDs with wrap
gaps, the nominal kernel, then its whole-table passes in order: redirects by
load, then the routes inside the pods that lost an upper switch (both in
parts of whole sibling groups of leaves, which share no upper switch:
:mod:`~smroute.routing.nmodc.balance`, :mod:`~smroute.routing.nmodc.pod_routes`),
even up cables.  Where
nothing is lost or uneven (:mod:`smroute.routing.nmodc.as_dmodc`: every
complete PGFT), it routes with Dmodc's dividers and NIDs, Dmodc's kernel
and no pass: the same tables, in Dmodc's time.  Elsewhere the switches its
kernel would route as Dmodc's does (:func:`~smroute.routing.nmodc.as_dmodc.dmodc_rows`:
most of a damaged tree's) take Dmodc's kernel, and a first pass ("partial")
gives them the nominal kernel's entries towards the targets some but not
all of their up groups lead closer to.  A whole-table route (:data:`WHOLE`)
computes those entries in the kernel phase instead, once per group of
switches with the same such targets and one switch of each set of twins
(:mod:`smroute.routing.nmodc.twins`), and gives the pool's kernel tasks the
nominal kernel's rows together (:meth:`Nmodc.kernel_parts`): the same
tables, in less time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.routing import dmodc, kernel
from smroute.routing.api import (
    Arrays,
    Engine,
    Guarantees,
    Pass,
    Prepared,
    Runner,
    dest_from,
    engine,
    graph_from,
    subset,
)
from smroute.routing.dmodc import UP_PHASE, Destinations
from smroute.routing.nmodc import (
    balance,
    bundles,
    entries,
    even_cables,
    nominal,
    shortcuts,
    slot_tables,
)
from smroute.routing.nmodc.as_dmodc import AS_DMODC, AsDmodc, as_dmodc, dmodc_rows
from smroute.routing.nmodc.cables import counted_cables
from smroute.routing.nmodc.descent import apply_descent, descent_keys
from smroute.routing.nmodc.incremental import NmodcIncremental
from smroute.routing.nmodc.pod_routes import pod_routes
from smroute.routing.nmodc.slot_tables import AlternativesMemo
from smroute.routing.nmodc.turns import apply_turns, turn_tables
from smroute.routing.nmodc.twins import twin_rows
from smroute.routing.nmodc.wrap import wrap_gaps
from smroute.routing.reroute import IncrementalHook
from smroute.routing.topology import SwitchGraph

__all__ = ["Nmodc", "balance_pass", "group_parts", "partial_parts", "partial_pass"]

#: what :meth:`Nmodc.arrays` found of a routing's switches
#: (:func:`~smroute.routing.nmodc.as_dmodc.dmodc_rows`), for its pass's parts
_ROWS: WeakKeyDictionary[Prepared, tuple[np.ndarray, np.ndarray, np.ndarray]] = (
    WeakKeyDictionary())


def balance_pass(a: Arrays, leaves: np.ndarray | None) -> None:
    """The redirects by load of whole sibling groups of ``leaves`` (``None``:
    every nominal leaf) in ``a["table"]`` (:mod:`smroute.routing.nmodc.balance`),
    then the routes inside their pods (:mod:`smroute.routing.nmodc.pod_routes`)."""
    g, dest, slots = graph_from(a), dest_from(a), nominal.unpacked_slots(a["n_slots"])
    balance.balance_redirects(g, a["c"], a["pi"], dest, a["table"], slots, leaves,
                              n_eps=int(a["n_eps"][0]), redirect=_redirect(a, g))
    pod_routes(g, a["c"], a["pi"], dest, a["table"], slots, leaves)


def _redirect(a: Arrays, g: SwitchGraph) -> np.ndarray:
    """The redirect dividers (:func:`~smroute.routing.nmodc.nominal.redirect_dividers`):
    ``a["n_rd"]`` where :meth:`Nmodc.arrays` made them (once for every task)."""
    if "n_rd" in a:
        return a["n_rd"]
    return nominal.redirect_dividers(g, a["pi"], int(a["n_eps"][0]))


#: A leaf that lost a nominal slot weighs as many leaves in the parts of the
#: pass "balance" (:func:`group_parts`; the 11,664-host tree with 50 links
#: or 5 switches removed: the parts' times within 4% of each other).
LOST_SLOT_WEIGHT = 6


def group_parts(g: SwitchGraph, slots: nominal.NominalSlots, k: int) -> list[np.ndarray]:
    """The nominal leaves in at most ``k`` parts of whole sibling groups
    (:func:`smroute.routing.nmodc.balance.sibling_groups`), about even in
    work: a leaf that lost a nominal slot (partial towards every target)
    weighs :data:`LOST_SLOT_WEIGHT` leaves."""
    leaves = balance.nominal_leaves(g, slots)
    if not len(leaves):
        return []
    label = balance.sibling_groups(g, slots, leaves)
    order = np.argsort(label, kind="stable")
    start = np.r_[True, label[order][1:] != label[order][:-1]]
    width = slots.slot_grp.shape[1]
    lost = ((slots.slot_grp[leaves, :width] < 0)
            & (np.arange(width)[None, :] < slots.arity[leaves][:, None])).any(axis=1)
    weight = np.concatenate([[0], np.cumsum(np.where(lost[order], LOST_SLOT_WEIGHT, 1))])
    # cut between groups, at the group boundary nearest each k-th of the weight
    bounds = np.flatnonzero(start)
    at = np.searchsorted(weight[bounds], np.linspace(0, weight[-1], k + 1)[1:-1])
    cuts = np.unique(bounds[np.minimum(at, len(bounds) - 1)])
    return [p for p in np.split(leaves[order], cuts) if len(p)]


def _mask_groups(rows: np.ndarray, partial: np.ndarray,
                 targets: np.ndarray) -> list[np.ndarray]:
    """The switches of ``rows`` (``(S,)`` bool) with partial targets,
    grouped by the same targets (:func:`~smroute.routing.nmodc.as_dmodc.dmodc_rows`)."""
    sw = np.flatnonzero(rows & (partial >= 0))
    sw = sw[np.asarray(targets.any(axis=1))[partial[sw]]]
    if not len(sw):
        return []
    sets, set_of = np.unique(partial[sw], return_inverse=True)
    # the masks' packed bits in their order (big-endian bits: the rows' order)
    mask_of = kernel.dedupe_rows(np.packbits(targets[sets], axis=1))[0]
    group = mask_of[set_of.ravel()]
    order = np.argsort(group, kind="stable")
    return np.split(sw[order], np.flatnonzero(np.diff(group[order])) + 1)


def partial_parts(rows: np.ndarray, partial: np.ndarray, targets: np.ndarray,
                  k: int) -> list[np.ndarray]:
    """At most ``k`` parts of whole groups (:func:`_mask_groups`) for
    :func:`partial_pass`, about even in entries."""
    groups = _mask_groups(rows, partial, targets)
    load = [len(grp) * int(targets[partial[grp[0]]].sum()) for grp in groups]
    parts: list[list[np.ndarray]] = [[] for _ in range(max(k, 1))]
    sums = [0] * len(parts)
    for i in np.argsort(load)[::-1].tolist():
        j = sums.index(min(sums))
        parts[j].append(groups[i])
        sums[j] += load[i]
    return [np.concatenate(p) for p in parts if p]


def partial_pass(a: Arrays, part: np.ndarray | None) -> None:
    """Nmodc's kernel's entries, in ``a["table"]``, of the switches Dmodc's
    kernel routed (``n_dmodc``) towards their partial targets
    (``n_partial``, ``n_targets``; ``part``: only those switches, whole
    groups of :func:`partial_parts`), a kernel call per group of switches
    with the same partial targets.  They share nothing by capacity, so an
    entry reads its own column only: the entries of the targets alone are
    the kernel's on the whole row."""
    rows = a["n_dmodc"]
    if part is not None:
        rows = np.zeros_like(rows)
        rows[part] = True
    groups = _mask_groups(rows, a["n_partial"], a["n_targets"])
    if not groups:
        return
    g, dest = graph_from(a), dest_from(a)
    memo, rd = AlternativesMemo(), _redirect(a, g)
    for sw in groups:
        sel, out = _partial_entries(a, [sw], g, dest, memo, rd)[0]
        a["table"][sw[:, None], dest.lid[sel][None, :]] = out


#: Entries a kernel call costs about as much as (its fixed part): groups of
#: switches with the same partial targets are routed in one call where the
#: entries it adds stay below this many per call saved (:func:`_partial_entries`).
CALL_ENTRIES = 30_000


def _partial_entries(a: Arrays, groups: list[np.ndarray], g: SwitchGraph, dest: Destinations,
                     memo: AlternativesMemo, rd: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group of switches with the same partial targets (:func:`_mask_groups`),
    ``(sel, out)``: the destinations (indices into ``dest``) on its partial
    targets, and Nmodc's kernel's entries of its switches towards them
    ``(len(group), len(sel))`` uint8 (``memo`` / ``rd``: as
    :func:`~smroute.routing.nmodc.nominal.route_block`'s), routed for one
    switch of each set of twins.  The groups' twins in one kernel call
    towards all their partial targets where that adds fewer entries than
    :data:`CALL_ENTRIES` per call saved: an entry reads its own column only
    (no share by capacity), so each group's are the same."""
    sels, twins = [], []
    for grp in groups:
        mask = a["n_targets"][a["n_partial"][grp[0]]]
        sels.append(np.flatnonzero(mask[dest.target]))
        # one switch of each set of twins (the same entries by construction)
        twins.append(twin_rows(g, a["c"], a["n_slots"], a["pi"], rd, grp, np.flatnonzero(mask)))
    n_f, n_d = [len(t[0]) for t in twins], [len(x) for x in sels]
    alone = sum(f * d for f, d in zip(n_f, n_d, strict=True))
    if sum(n_f) * sum(n_d) <= alone + CALL_ENTRIES * (len(groups) - 1):
        batches = [list(range(len(groups)))]
    else:
        batches = [[i] for i in range(len(groups))]
    got: list[tuple[np.ndarray, np.ndarray]] = [(sels[0], sels[0])] * len(groups)
    for batch in batches:
        union = np.zeros(len(dest.lid), dtype=bool)  # (sorted and distinct, no sort)
        union[np.concatenate([sels[i] for i in batch])] = True
        sel = np.flatnonzero(union)
        rows = np.concatenate([groups[i][twins[i][0]] for i in batch])
        out = np.empty((len(rows), len(sel)), dtype=np.uint8)
        nominal.route_block(g, a["c"], a["pi"], subset(dest, sel), rows, out, a["n_slots"],
                            memo=memo, capacity=False, redirect=rd)
        at = 0
        for i in batch:
            first, row_of = twins[i]
            cols = np.searchsorted(sel, sels[i])
            got[i] = (sels[i], np.take(out[at + row_of], cols, axis=1))
            at += len(first)
    return got


def _kernel_partial(a: Arrays, switches: np.ndarray, out: np.ndarray,
                    cache: dict[str, Any]) -> None:
    """The pass "partial" (:func:`partial_pass`) in the kernel phase: the
    entries of ``switches`` (Dmodc's rows ``out``, in place) towards their
    partial targets, for the groups of switches with the same ones
    (:func:`_mask_groups`) a block meets first, each group whole
    (:func:`_partial_entries`; the pool's parts hold whole groups,
    :meth:`Nmodc.kernel_parts`)."""
    if "p_group" not in cache:
        groups = _mask_groups(a["n_dmodc"], a["n_partial"], a["n_targets"])
        of = np.full(len(a["n_dmodc"]), -1, dtype=np.int64)
        for i, grp in enumerate(groups):
            of[grp] = i
        cache.update(p_group=of, p_groups=groups, p_done={})
    at = cache["p_group"][switches]
    dest, done = cache["dest"], cache["p_done"]
    seen = np.unique(at[at >= 0]).tolist()
    todo = [i for i in seen if i not in done]
    if todo:  # the block's groups not seen yet, together
        done.update(zip(todo, _partial_entries(a, [cache["p_groups"][i] for i in todo],
                                               cache["g"], dest, cache["memo"], cache["rd"]),
                        strict=True))
    for i in seen:
        grp = cache["p_groups"][i]
        sel, ent = done[i]
        rows = np.flatnonzero(at == i)
        got = ent[np.searchsorted(grp, switches[rows])]
        if len(rows) == len(switches):  # (whole rows by a slice: 6x faster than by pairs)
            out[:, dest.lid[sel]] = got
        else:
            part = out[rows]
            part[:, dest.lid[sel]] = got
            out[rows] = part


def dmodc_engine() -> Engine:
    """Dmodc (:mod:`smroute.routing.builtin`): the engine Nmodc routes a tree
    with where it routes as Dmodc does (:mod:`smroute.routing.nmodc.as_dmodc`)."""
    return engine("dmodc")


class Nmodc:
    """Nmodc (:mod:`smroute.routing.nmodc.nominal`): Dmodc's tables on a complete
    PGFT (Dmodc's kernel, :mod:`smroute.routing.nmodc.as_dmodc`), nominal
    slots on a degraded one."""

    name = "nmodc"
    title = "Nmodc"
    guarantees = Guarantees(closer_groups=True, incremental=True, dmodc_tables=True,
                            detours_by_load=True)
    incremental: IncrementalHook | None = NmodcIncremental()
    pooled = True
    #: the entries of the pass "partial" computed in the kernel phase instead
    #: (:data:`WHOLE`, :meth:`tables`' whole-table route: every row is routed,
    #: so the kernel tasks give each its own; an incremental reroute's pool
    #: routes some rows and runs the pass over all)
    partial_in_kernel = False

    def prepare(self, g: SwitchGraph, lmc: int | None, clock: Callable[[], float],
                timings: dict[str, float], costs: np.ndarray | None = None) -> Prepared:
        """Dmodc's costs, dividers, NIDs and destinations where the tree
        routes as Dmodc (``aux``: :data:`~smroute.routing.nmodc.as_dmodc.AS_DMODC`),
        else the nominal slots (``aux``), the nominal dividers and the NIDs
        with wrap gaps."""
        t = clock()
        c, pi = dmodc.costs_and_dividers(g) if costs is None else (costs, dmodc.dividers(g))
        t2 = clock()
        timings["costs"] = t2 - t
        nids = dmodc.topological_nids(g, c)
        gapped = wrap_gaps(g, nids)
        dest = dmodc.destinations(g, gapped, lmc=lmc)
        if gapped is nids and not as_dmodc(g, c, dest):
            timings["nids"] = clock() - t2
            return Prepared(g, c, pi, nids, dest, AS_DMODC)
        slots = nominal.nominal_slots(g)
        pi = nominal.nominal_dividers(g, slots.arity)
        timings["nids"] = clock() - t2
        return Prepared(g, c, pi, nids, dest, slots)

    def tables(self, fabric: Fabric, prep: Prepared, pool: Runner | None) -> np.ndarray:
        assert pool is not None
        if isinstance(prep.aux, AsDmodc):
            return dmodc_engine().tables(fabric, prep, pool)
        return pool.run(WHOLE, prep)

    def arrays(self, prep: Prepared, share: np.ndarray | None = None) -> Arrays:
        """Dmodc's arrays (:func:`~smroute.routing.api.base_arrays`), the
        packed nominal slots ``n_slots``, the switches that may share by
        capacity ``n_share`` (default
        :func:`~smroute.routing.nmodc.slot_tables.sharing`), the cables
        the shares count ``n_cables``
        (:func:`~smroute.routing.nmodc.cables.counted_cables`) and those whose
        rows Dmodc's kernel computes ``n_dmodc``
        (:func:`~smroute.routing.nmodc.as_dmodc.dmodc_rows`); Dmodc's arrays
        alone where the tree routes as Dmodc."""
        if isinstance(prep.aux, AsDmodc):
            return dmodc_engine().arrays(prep)
        a = dmodc_engine().arrays(prep)
        a["n_slots"] = nominal.packed_slots(prep.aux)
        a["n_eps"] = np.array([len(prep.nids)], dtype=np.int64)  # every end-port's
        a["n_rd"] = nominal.redirect_dividers(prep.graph, prep.dividers, len(prep.nids))
        a["n_cables"] = counted_cables(prep.graph)
        a["n_share"] = (slot_tables.sharing(prep.graph, prep.costs, prep.dest, a["n_cables"])
                        if share is None else share)
        # the switches at or below each (read by both of these)
        below = (prep.costs < UP_PHASE).sum(axis=1, dtype=np.int32)
        rows, partial, targets = dmodc_rows(prep.graph, prep.costs, prep.aux, a["n_share"],
                                            below)
        a["n_dmodc"], a["n_partial"] = rows, partial
        a["n_targets"] = targets if len(targets) else np.zeros((1, len(rows)), dtype=bool)
        a["n_desc"] = descent_keys(prep.graph, prep.costs, prep.aux, prep.dividers, prep.dest,
                                   below)
        _ROWS[prep] = (rows, partial, a["n_targets"])
        return a

    def kernel(self, a: Arrays, switches: np.ndarray, out: np.ndarray,
               cache: dict[str, Any]) -> None:
        """Nmodc's rows of ``switches``: Dmodc's kernel's where ``n_dmodc``
        says they are the same (every row, with Dmodc's arrays alone); the
        pass "partial" (:func:`partial_pass`) then gives them Nmodc's entries
        towards their partial targets (with :attr:`partial_in_kernel`, this
        kernel, last).  The entries :mod:`~smroute.routing.nmodc.descent`
        names take the destination's own up-route down, and the cables down
        into a switch the turn of its rank's tables
        (:mod:`~smroute.routing.nmodc.turns`)."""
        if "n_slots" not in a:  # Dmodc's arrays: a tree routed as Dmodc
            dmodc_engine().kernel(a, switches, out, cache)
            return
        self._rows(a, switches, out, cache)
        if len(a.get("n_desc", ())):
            apply_descent(cache["g"], a["c"], nominal.unpacked_slots(a["n_slots"]), a["pi"],
                          a["n_desc"], cache["dest"], switches, out)
        if self.partial_in_kernel and "n_dmodc" in a:  # (after the descent, as the pass)
            _kernel_partial(a, switches, out, cache)
        if "turns" not in cache:  # (the graph and destinations: set by the rows)
            cache["turns"] = turn_tables(cache["g"], nominal.unpacked_slots(a["n_slots"]))
        apply_turns(cache["g"], cache["turns"], a["pi"], cache["dest"], switches, out)

    def _rows(self, a: Arrays, switches: np.ndarray, out: np.ndarray,
              cache: dict[str, Any]) -> None:
        """The kernel's rows before the descent (:meth:`kernel`)."""
        if "g" not in cache:
            g, dest = graph_from(a), dest_from(a)
            cache.update(g=g, dest=dest, ctx=kernel.route_context(a["c"], dest),
                         memo=AlternativesMemo(),
                         rd=_redirect(a, g))
        plain = a["n_dmodc"][switches] if "n_dmodc" in a else np.zeros(len(switches), bool)
        if not plain.any():
            nominal.route_block(cache["g"], a["c"], a["pi"], cache["dest"], switches, out,
                                a["n_slots"], cache["ctx"], memo=cache["memo"],
                                capacity=a["n_share"], redirect=cache["rd"],
                                cables=a["n_cables"])
            return
        # Dmodc's kernel on the whole block (compiled: cheaper than a copy of
        # its rows; the same graph, context), then the nominal rows over theirs
        dmodc_engine().kernel(a, switches, out, cache)
        if not plain.all():
            rows = np.flatnonzero(~plain)
            part = np.empty((len(rows), out.shape[1]), dtype=out.dtype)
            self._rows({k: v for k, v in a.items() if k != "n_dmodc"}, switches[rows], part,
                       cache)
            out[rows] = part

    def kernel_parts(self, a: Arrays, rows: np.ndarray, workers: int) -> list[np.ndarray]:
        """``rows`` in parts for the pool's kernel tasks
        (:func:`smroute.routing.pool.kernel_parts`): the rows of the nominal
        kernel (not ``n_dmodc``) first, in one part per worker (a kernel call
        costs them about as much for one row as for dozens); with
        :attr:`partial_in_kernel`, each group of switches with the same
        partial targets (:func:`_mask_groups`, whose entries a process
        computes once) whole, the largest first: one larger than a ``4 *
        workers``-th of the rows in parts of its own of at most a
        ``workers``-th of the rows, the others together in parts up to a ``4 *
        workers``-th (fewer tasks, each with a kernel call per block); then
        Dmodc's other rows in ``4 * workers`` parts (one part each for one
        worker)."""
        if "n_dmodc" not in a:
            nominal_rows, plain = rows[:0], rows
        else:
            dm = a["n_dmodc"][rows]
            nominal_rows, plain = rows[~dm], rows[dm]
        groups: list[np.ndarray] = []
        if self.partial_in_kernel and len(plain):
            # each group with the same partial targets whole, the largest first
            mask = np.zeros(len(a["n_dmodc"]), dtype=bool)
            mask[plain] = True
            groups = sorted(_mask_groups(mask, a["n_partial"], a["n_targets"]), key=len,
                            reverse=True)
            if groups:
                mask[np.concatenate(groups)] = False
                plain = np.flatnonzero(mask)
        k = 1 if workers == 1 else 4 * workers
        most, per_worker = -(-len(rows) // k), -(-len(rows) // workers)
        # (a large group in as few parts as a worker's share allows: each
        # process routing a part of it computes the group's entries)
        chunks = [c for grp in groups if len(grp) > most
                  for c in np.array_split(grp, -(-len(grp) // per_worker))]
        # the smaller groups together, whole, up to as many rows a part
        small: list[np.ndarray] = []
        for grp in (grp for grp in groups if len(grp) <= most):
            if small and sum(map(len, small)) + len(grp) > most:
                chunks.append(np.sort(np.concatenate(small)))
                small = []
            small.append(grp)
        if small:
            chunks.append(np.sort(np.concatenate(small)))
        return [*np.array_split(nominal_rows, min(workers, max(len(nominal_rows), 1))),
                *chunks, *np.array_split(plain, min(k, max(len(plain), 1)))]

    def passes(self, prep: Prepared) -> Sequence[Pass]:
        """The passes "partial" (none where the kernel computes its entries,
        :attr:`partial_in_kernel`), "balance" (in mode
        ``tree``), "even cables", "bundles" and "through the deal" (in mode
        ``tree`` where some leaf has a shortcut:
        :func:`~smroute.routing.nmodc.bundles.balance_bundles`,
        :func:`~smroute.routing.nmodc.bundles.through_the_deal`) and
        "entries" (in mode ``tree`` where some leaf is ranked apart:
        :func:`~smroute.routing.nmodc.entries.enter_dealt`); the last three
        optional: they only even loads."""
        if isinstance(prep.aux, AsDmodc):
            return ()
        g, c, dest, slots = prep.graph, prep.costs, prep.dest, prep.aux

        def cables(a: Arrays, _: np.ndarray | None) -> None:
            even_cables.deal_up_cables(g, dest, a["table"], a["n_share"])

        leaves = (shortcuts.shortcut_leaves(g, c) if g.mode == "tree"
                  else np.zeros(0, dtype=np.int64))

        def uneven(a: Arrays, _: np.ndarray | None) -> None:
            bundles.balance_bundles(g, c, dest, a["table"], leaves)

        def through(a: Arrays, _: np.ndarray | None) -> None:
            bundles.through_the_deal(g, dest, a["table"], leaves)

        apart = entries.apart_leaves(g) if g.mode == "tree" else np.zeros(0, dtype=np.int64)

        def enter(a: Arrays, _: np.ndarray | None) -> None:
            entries.up_skewed(g, c, dest, a["table"], apart, prep.dividers)
            entries.enter_dealt(g, c, dest, a["table"], apart, prep.dividers)

        def parts(k: int) -> list[np.ndarray]:
            rows, partial, targets = (_ROWS[prep] if prep in _ROWS else
                                      dmodc_rows(g, c, slots, slot_tables.sharing(g, c, dest)))
            return partial_parts(rows, partial, targets, k)

        out = [] if self.partial_in_kernel else [Pass("partial", partial_pass, parts)]
        if g.mode == "tree":
            out.append(Pass("balance", balance_pass, lambda k: group_parts(g, slots, k)))
        out.append(Pass("even cables", cables))
        if len(leaves):
            out += [Pass("bundles", uneven, optional=True),
                    Pass("through the deal", through, optional=True)]
        if len(apart):
            out.append(Pass("entries", enter, optional=True))
        return out


#: Nmodc routing a whole table (:meth:`Nmodc.tables`): the pass "partial"'s
#: entries in the kernel phase (:attr:`Nmodc.partial_in_kernel`)
WHOLE = Nmodc()
WHOLE.partial_in_kernel = True
