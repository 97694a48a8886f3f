"""Validation before a ``RouteSubnet`` answer: only a validated, valid epoch
goes to the subnet manager.

The full validation walk (every switch to every LID) takes seconds on large
fabrics, and a subnet manager waits for the answer inside its routing pass.
An epoch that follows a validated, valid parent differs from it in few
places, so :func:`delta_validation` walks only the (switch, LID) pairs whose
walk or verdict can differ, and combines their counts with the parent's into
exactly the :class:`~smroute.routing.validate.Validation` the full walk
gives:

* an entry is *dirty* when its port changed, or its port now leads elsewhere
  (a cable gone or moved);
* a walk that never reads a dirty entry reads the same entries and cables in
  both epochs: the same verdict.  The walks that read one are found backwards
  from the dirty entries in the new tables (the switches whose next hop, for
  that LID, is a switch already found);
* which pairs must be delivered depends on the target's cost column, the
  physical components and the switches with end-ports: LIDs whose target's
  costs changed are walked from every switch; other differences (switch set,
  ranks, components, end-ports, destinations) fall back to the full walk, as
  does a change touching more than half of the pairs.

Those pairs are walked one by one (vectorized over pairs) under the rules of
:func:`smroute.routing.validate.validate` in both epochs; every count is a sum
over pairs.  ``tests/test_route_subnet.py`` checks it against the full walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from smroute.routing.dmodc import INF, NO_ROUTE, hop_counts
from smroute.routing.engine import RoutingResult, validate_result
from smroute.routing.topology import next_switch
from smroute.routing.validate import DEAD_END, LOOP, OK, REASONS, UPDOWN, Failure, Validation
from smroute.service.epochs import Epoch

if TYPE_CHECKING:
    from smroute.service.core import RoutingCore

__all__ = ["affected_pairs", "answer_validation", "delta_validation", "pair_validation"]

_COUNTS = ("pairs", "delivered", "dead_ends", "loops", "updown_violations", "non_minimal",
           "ca_pairs_unroutable", "switch_pairs_no_updown", "ca_pairs_disconnected")
_DEST = ("lid", "target", "local_port", "is_switch")
#: Beyond this share of all pairs the full walk is as fast.
MAX_SHARE = 0.5


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b))


def affected_pairs(prev: RoutingResult, new: RoutingResult) -> np.ndarray | None:
    """The (switch, destination) pairs whose walk or verdict can differ
    between ``prev`` and ``new`` (module doc), as flat indices
    ``switch * D + destination`` into ``(S, D)`` (D = ``len(new.dest.lid)``),
    sorted, ``(K,)`` int64; ``None`` if the epochs cannot be compared pair by pair."""
    g0, g1 = prev.walk_graph, new.walk_graph
    d0, d1 = prev.dest, new.dest
    p0, p1 = prev.tables.ports, new.tables.ports
    if not (_same(g0.sw_guid, g1.sw_guid) and _same(g0.rank, g1.rank)
            and _same(g0.component, g1.component) and _same(g0.ep_switch, g1.ep_switch)
            and p0.shape == p1.shape and prev.costs.shape == new.costs.shape
            and all(_same(getattr(d0, f), getattr(d1, f)) for f in _DEST)):
        return None
    s, d = g1.n_switches, len(d1.lid)
    n0, n1 = next_switch(g0), next_switch(g1)
    col = np.full(p1.shape[1], -1, dtype=np.int64)  # LID -> destination index
    col[d1.lid] = np.arange(d)
    seen = np.zeros((s, d), dtype=bool)
    xs, ls = np.nonzero(p0 != p1)  # changed entries (by LID)
    keep = col[ls] >= 0
    seen[xs[keep], col[ls[keep]]] = True
    for x in np.flatnonzero((n0 != n1).any(axis=1)).tolist():  # a cable moved at x
        q = p0[x, d1.lid]
        seen[x] |= n0[x, q] != n1[x, q]
    fx, fj = np.nonzero(seen)
    # in-neighbours of every switch: y -> x for each group of y leading to x
    order = np.argsort(g1.grp_remote, kind="stable")
    src, dst = g1.grp_switch[order], g1.grp_remote[order]
    start = np.searchsorted(dst, np.arange(s + 1))
    while len(fx):
        cnt = start[fx + 1] - start[fx]
        tot = int(cnt.sum())
        if not tot:
            break
        at = np.repeat(start[fx] - np.cumsum(cnt) + cnt, cnt) + np.arange(tot)
        ys, js, xs = src[at], np.repeat(fj, cnt), np.repeat(fx, cnt)
        p = p1[ys, d1.lid[js]]
        hit = (p != NO_ROUTE) & (n1[ys, np.minimum(p, n1.shape[1] - 1)] == xs) & ~seen[ys, js]
        flat = np.unique(ys[hit] * d + js[hit])
        fx, fj = flat // d, flat % d
        seen[fx, fj] = True
    moved = (prev.costs != new.costs).any(axis=0)  # (S,) by target switch
    seen[:, moved[d1.target]] = True
    seen[g1.rank < 0] = False  # not walked (validate's sources)
    return np.flatnonzero(seen.ravel())


def pair_validation(r: RoutingResult, pairs: np.ndarray, max_failures: int = 0) -> Validation:
    """:func:`~smroute.routing.validate.validate`'s counts over the given
    pairs only (flat ``switch * D + destination``, routed switches): each
    walk followed hop by hop, all pairs at once."""
    g, dest, ports = r.walk_graph, r.dest, r.tables.ports
    nd = len(dest.lid)
    sw, j = pairs // nd, pairs % nd
    nxt = next_switch(g)
    rank = np.append(g.rank, -1)
    max_hops = 2 * max(g.max_rank, 0) + 2
    status = np.full(len(pairs), -1, dtype=np.int8)
    hops = np.zeros(len(pairs), dtype=np.int64)
    down_then_up = np.zeros(len(pairs), dtype=bool)
    went_down = np.zeros(len(pairs), dtype=bool)
    lid, tgt, here_port = dest.lid[j], dest.target[j], dest.local_port[j]
    live = np.arange(len(pairs))
    x = sw.copy()
    for k in range(max_hops + 2):
        p = ports[x, lid[live]].astype(np.int64)
        here = (x == tgt[live]) & (p == here_port[live])
        nx = np.where(p == NO_ROUTE, -1, nxt[x, np.minimum(p, nxt.shape[1] - 1)])
        dr = np.sign(rank[nx] - rank[x])
        term = np.where(here, OK, np.where(nx < 0, DEAD_END, np.where(dr == 0, UPDOWN, -1)))
        done = term >= 0
        status[live[done]] = term[done]
        hops[live[done]] = k
        go = ~done
        live, x, dr = live[go], nx[go], dr[go]
        down_then_up[live] |= went_down[live] & (dr > 0)
        went_down[live] |= dr < 0
        if not len(live):
            break
    status[live] = LOOP
    status[(status == OK) & down_then_up] = UPDOWN
    cost = r.costs[sw, tgt]
    ep_count = np.bincount(g.ep_switch, minlength=g.n_switches)[sw]
    same_comp = g.component[sw] == g.component[tgt]
    ca = ~dest.is_switch[j]
    cabled = (ep_count > 0) & same_comp & ca
    if r.needed is not None:  # the pairs that need a route
        cabled &= r.needed.pairs(sw, tgt, r.needed.agg[np.where(ca, dest.owner[j], 0)] & ca)
    required = (cost < INF) | cabled
    exempt = ~required & (status == DEAD_END)
    status[exempt] = OK
    ok = status == OK
    bad = np.flatnonzero(~ok)[:max_failures].tolist()
    failures = [Failure(int(g.sw_guid[sw[b]]), r.tables.switch_desc[sw[b]], int(lid[b]),
                        r.tables.lid_desc[int(lid[b])] if r.tables.lid_desc is not None
                        and int(lid[b]) < len(r.tables.lid_desc) else "",
                        REASONS[int(status[b])]) for b in bad]
    return Validation(
        pairs=len(pairs), delivered=int(ok.sum()), dead_ends=int((status == DEAD_END).sum()),
        loops=int((status == LOOP).sum()), updown_violations=int((status == UPDOWN).sum()),
        non_minimal=int((ok & (cost < INF) & (hops > hop_counts(cost))).sum()),
        ca_pairs_unroutable=int(ep_count[ca & ~ok].sum()),
        switch_pairs_no_updown=int(exempt.sum()),
        ca_pairs_disconnected=int(ep_count[ca & ~same_comp].sum()), failures=failures)


def delta_validation(prev: RoutingResult, pv: Validation, new: RoutingResult,
                     max_failures: int = 10) -> Validation | None:
    """The validation of ``new`` from its parent ``prev``'s valid one ``pv``,
    walking only :func:`affected_pairs`; ``None`` if that does not apply
    (``pv`` invalid, the epochs not comparable, or too many pairs)."""
    if not pv.ok or any(x.lanes is not None or x.oriented is not None for x in (prev, new)):
        return None  # detours and turns: the full walk knows which LIDs may turn
    pairs = affected_pairs(prev, new)
    if pairs is None or len(pairs) > MAX_SHARE * new.tables.n_switches * len(new.dest.lid):
        return None
    if not len(pairs):
        return pv
    before = pair_validation(prev, pairs)
    after = pair_validation(new, pairs, max_failures)
    counts = {f: getattr(pv, f) - getattr(before, f) + getattr(after, f) for f in _COUNTS}
    return Validation(**counts, failures=list(after.failures))


def _kept(core: RoutingCore, epoch_id: int) -> Epoch | None:
    try:
        return core.store.get(epoch_id) if epoch_id else None
    except KeyError:
        return None


def answer_validation(core: RoutingCore, ep: Epoch, timeout: float) -> Validation | str:
    """The validation of ``ep`` a ``RouteSubnet`` answer needs: the store's if
    known; else from a valid parent (:func:`delta_validation`, recorded in the
    store); else the background walk's, waited for up to ``timeout`` seconds
    (``"pending"`` if it did not finish), or walked here if it was skipped."""
    v = core.store.validation(ep.id)
    if isinstance(v, Validation):
        return v
    parent = _kept(core, ep.parent_id)
    if parent is not None:
        pv = core.store.wait_validation(parent.id, timeout)
        if isinstance(pv, Validation):
            d = delta_validation(parent.result, pv, ep.result)
            if d is not None:
                if core.store.validation(ep.id) == "pending":
                    core.store.set_validation(ep.id, d)
                core.log("debug", "epoch_validated", epoch=ep.id, summary=d.summary(),
                         delta_of=parent.id)
                return d
    core.validator.soon(ep)
    v = core.store.wait_validation(ep.id, timeout)
    if isinstance(v, str) and v.startswith("skipped"):
        v = validate_result(ep.result, max_failures=10)
    return v
