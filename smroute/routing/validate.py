"""Validation of forwarding tables by walking them.

From every routed switch (every end-port's traffic enters at its switch, so
this covers every CA source) to every destination LID, follow the tables hop
by hop, all pairs at once (numpy, in column chunks), and classify each walk:
delivered, dead end (no route, unlinked port, or a port to the wrong
end-port), loop (more hops than any up*/down* path needs), up*/down*
violation (an up or sideways move after a down move, or a sideways move, in
the orientation of the graph walked), and whether the hop count is minimal
(equals the up*/down* cost).

Which pairs must be delivered: from a switch that carries end-ports, every
end-port destination in the same physical component that one of its
end-ports needs (:func:`~smroute.fabric.roles.needed_pairs`; every one
without that rule: a CA's traffic must reach every CA it is cabled to); from
any switch, every destination it has an up*/down* path to.  CA pairs left
unrouted that no traffic needs are counted apart (``ca_pairs_unneeded``).  A
switch LID without an up*/down* path from a switch is left unrouted there.
Other pairs are unused and may stay unrouted; pairs whose ends are in
different physical components are counted apart as *disconnected* (a
partitioned fabric), never as routing failures.

Routes with detours (:mod:`smroute.routing.detour`) turn up after going
down on purpose: for their destination LIDs (``turns``) the walk checks
delivery only; their freedom from credit loops rests on the virtual lanes,
checked by :mod:`smroute.routing.deadlock`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from smroute.fabric.roles import NeededPairs
from smroute.routing.dmodc import INF, UP_PHASE, Destinations
from smroute.routing.topology import NO_LINK, SwitchGraph, next_switch
from smroute.routing.walk_native import LIBRARY, native_walk

__all__ = ["Validation", "Failure", "validate", "walk"]

OK, DEAD_END, LOOP, UPDOWN = 0, 1, 2, 3
#: A hop count no walk reaches (no up*/down* path).
NO_PATH = np.iinfo(np.int16).max
REASONS = {DEAD_END: "no route (dead end)", LOOP: "forwarding loop",
           UPDOWN: "not an up*/down* path"}
_CHUNK = 2048


@dataclass(frozen=True)
class Failure:
    """One unroutable (source switch, destination LID) pair, by name."""

    source_guid: int
    source_desc: str
    lid: int
    dest_desc: str
    reason: str

    def __str__(self) -> str:
        return (f'{self.source_guid:#018x} "{self.source_desc}" -> LID {self.lid} '
                f'"{self.dest_desc}": {self.reason}')


@dataclass(frozen=True)
class Validation:
    """Result of :func:`validate`.

    pairs: (switch, LID) pairs walked; delivered / dead_ends / loops /
    updown_violations / non_minimal: counts; ca_pairs_unroutable: CA-to-CA
    pairs the routing failed to connect although cables join them (each CA
    source enters at its switch); ca_pairs_disconnected: CA-to-CA pairs in
    different physical components (not a routing failure); failures: the
    first ``max_failures`` failing pairs by name.
    """

    pairs: int
    delivered: int
    dead_ends: int
    loops: int
    updown_violations: int
    non_minimal: int
    ca_pairs_unroutable: int
    switch_pairs_no_updown: int = 0
    ca_pairs_disconnected: int = 0
    failures: list[Failure] = field(default_factory=list)
    #: delivered walks with detours (down->up turns on purpose, over VLs)
    detoured: int = 0
    #: walks towards destinations whose routes may turn on purpose (``turns``
    #: of :func:`validate`), checked for credit loops apart
    may_turn: int = 0
    #: CA pairs left unrouted that no traffic needs (aggregation nodes on
    #: switches not adjacent): counted, not a failure
    ca_pairs_unneeded: int = 0

    @property
    def ok(self) -> bool:
        return self.delivered == self.pairs and self.updown_violations == 0

    def summary(self) -> str:
        apart = (f"; {self.ca_pairs_disconnected} CA pairs physically disconnected "
                 "(partitioned fabric)" if self.ca_pairs_disconnected else "")
        if self.ca_pairs_unneeded:
            apart += (f"; {self.ca_pairs_unneeded} aggregation-node pairs on switches not "
                      "adjacent left unrouted (no traffic needs them)")
        if self.ok and self.detoured:
            return (f"valid: {self.pairs} switch-to-LID walks delivered, up*/down* but for "
                    f"{self.detoured} that turn on purpose (detours over virtual lanes, or "
                    "turns whose channel dependencies are acyclic) "
                    f"({self.switch_pairs_no_updown} unused pairs left unrouted), "
                    f"{self.non_minimal} non-minimal{apart}")
        if self.ok and self.may_turn:
            return (f"valid: {self.pairs} switch-to-LID walks delivered, {self.may_turn} of "
                    "them towards LIDs whose routes may turn up after coming down on purpose "
                    "(over virtual lanes, or up*/down* in another order of the switches) "
                    f"({self.switch_pairs_no_updown} unused pairs left unrouted), "
                    f"{self.non_minimal} non-minimal{apart}")
        if self.ok:
            return (f"valid: {self.pairs} switch-to-LID walks delivered up*/down* only "
                    f"({self.switch_pairs_no_updown} of them unused pairs without an up*/down* "
                    f"path, left unrouted), {self.non_minimal} non-minimal{apart}")
        return (f"INVALID: {self.pairs - self.delivered} of {self.pairs} walks fail "
                f"({self.dead_ends} dead ends, {self.loops} loops, "
                f"{self.updown_violations} up*/down* violations); "
                f"{self.ca_pairs_unroutable} CA pairs unroutable{apart}")


def walk(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, sources: np.ndarray | None = None,
    *, nxt: np.ndarray | None = None, turns: np.ndarray | None = None,
    max_hops: int | None = None, native: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Follow the tables from every switch to every destination.

    Dynamic programming over next hops instead of walking each pair: the walk
    from ``s`` to ``d`` continues the walk from ``next(s, d)``, so the status,
    hop count and "has an up move" flag of every (switch, destination) pair
    are looked up at the next hop once that pair is resolved.  The pairs
    whose next move goes down are resolved by ascending rank, then those
    whose next move goes up by descending rank (each once: every up*/down*
    walk); the others in rounds, each resolving the pairs whose next hop's
    pair is (walks longer than ``max_hops + 1`` moves, and cycles, are
    loops).  Done in chunks of destination columns.  ``turns`` ``(D,)``
    bool: destinations whose routes may turn up after going down (detours:
    a delivered walk is OK); ``max_hops``: the longest walk (default ``2 *
    max_rank + 2``).  ``native``: the compiled walk
    (:mod:`smroute.routing.walk_native`, the same results) where built
    (``None``, the default), always (``True``: an error without it) or never.

    Returns ``(status, hops)``, shape ``(S, D)`` (or ``(len(sources), D)``):
    status int8 (OK, DEAD_END, LOOP, UPDOWN), hops int16 (switch-to-switch
    moves; meaningful where OK).
    """
    n_sw, n_d = g.n_switches, len(dest.lid)
    status = np.empty((n_sw, n_d), dtype=np.int8)
    hops = np.zeros((n_sw, n_d), dtype=np.int16)
    for sl, st, hp in _walk_chunks(g, ports, dest, nxt, turns, max_hops, native):
        status[:, sl], hops[:, sl] = st, hp
    if sources is not None:
        return status[sources], hops[sources]
    return status, hops


def _walk_chunks(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, nxt: np.ndarray | None,
    turns: np.ndarray | None, max_hops: int | None, native: bool | None = None,
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """:func:`walk` per chunk of destination columns: ``(columns, status
    (S, k), hops (S, k))`` for every switch."""
    if nxt is None:
        nxt = next_switch(g)
    if nxt.shape[1] < 256:  # a port past the table leads nowhere
        nxt = np.pad(nxt, ((0, 0), (0, 256 - nxt.shape[1])), constant_values=NO_LINK)
    if max_hops is None:
        max_hops = 2 * max(g.max_rank, 0) + 2
    if native is not False and nxt.shape[1] == 256:
        compiled = native_walk(ports, dest.lid, dest.target, dest.local_port, nxt, g.rank,
                               turns, max_hops)
        if compiled is not None:
            yield from compiled
            return
    if native:
        raise RuntimeError(f"the compiled validation walk is not built ({LIBRARY}: "
                           "scripts/setup.sh builds it)")
    n_sw, n_d = g.n_switches, len(dest.lid)
    rank = np.append(g.rank, -1).astype(np.int8)  # index -1 (no switch): rank -1
    sw = np.arange(n_sw)[:, None]
    row = sw * nxt.shape[1]
    by_rank = [np.flatnonzero(g.rank == r) for r in range(max(g.max_rank, -1) + 1)]
    unknown = np.int8(-1)
    for c0 in range(0, n_d, _CHUNK):
        sl = slice(c0, min(c0 + _CHUNK, n_d))
        k = sl.stop - sl.start
        p = np.take(ports, dest.lid[sl], axis=1)  # (S, k) (np.take: C order)
        nx = np.take(nxt.ravel(), row + p)  # the next switch, or < 0
        st = np.where(nx < 0, DEAD_END, unknown).astype(np.int8)
        st[(sw == dest.target[sl][None, :]) & (p == dest.local_port[sl][None, :])] = OK
        dr = np.sign(np.take(rank, nx) - rank[:n_sw, None])  # +1 up, -1 down, 0 sideways
        free = turns[sl] if turns is not None else np.zeros(k, dtype=bool)
        st[(st == unknown) & (dr == 0) & ~free[None, :]] = UPDOWN
        hp = np.zeros((n_sw, k), dtype=np.int16)
        has_up = np.zeros((n_sw, k), dtype=bool)
        st_f, hp_f, up_f = st.ravel(), hp.ravel(), has_up.ravel()
        cell = nx.astype(np.int64)  # each pair's next hop's pair (flat index)
        cell *= k
        cell += np.arange(k)
        cell_f, dr_f = cell.ravel(), dr.ravel()
        # up*/down* walks once each: down moves by ascending rank (the next
        # hop's walk is then done), then up moves by descending rank
        for levels, move in ((by_rank, -1), (by_rank[::-1], 1)):
            for rows in levels:
                at = (rows[:, None] * k + np.arange(k)).ravel()
                at = at[(dr_f[at] == move) & (st_f[at] == unknown)]
                fn = cell_f[at]
                nst = st_f[fn]
                ok = nst != unknown
                at, fn = at[ok], fn[ok]
                st_f[at], hp_f[at], up_f[at] = nst[ok], hp_f[fn] + 1, move > 0
        # the other pairs in rounds: a pair resolves once its next hop has;
        # resolving it again gives the same values, so the pending lists
        # shrink only when half of them resolved
        todo = np.flatnonzero(st_f == unknown)
        nxt_at, d = np.take(cell, todo), np.take(dr, todo)
        for _ in range(max_hops + 1):
            nst = st_f[nxt_at]
            ready = np.flatnonzero(nst != unknown)
            at, fn, dd, res = (np.take(a, ready) for a in (todo, nxt_at, d, nst))
            nup = up_f[fn]
            bad = (res == OK) & (dd < 0) & nup
            if turns is not None:
                bad &= ~free[at % k]
            res[bad] = UPDOWN
            st_f[at] = res
            hp_f[at] = hp_f[fn] + 1
            up_f[at] = nup | (dd > 0)
            if len(ready) == len(todo):
                break
            if 2 * len(ready) >= len(todo):
                left = np.flatnonzero(nst == unknown)
                todo, nxt_at, d = (np.take(a, left) for a in (todo, nxt_at, d))
        st_f[todo[st_f[todo] == unknown]] = LOOP
        long = hp > max_hops + 1  # longer than the bound: a loop, as in the rounds alone
        st[long], hp[long] = LOOP, 0
        yield sl, st, hp


def validate(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, costs: np.ndarray,
    *, switch_desc: tuple[str, ...] = (), lid_desc: tuple[str, ...] | None = None,
    max_failures: int = 50,
    walked: tuple[np.ndarray, np.ndarray] | None = None,
    turns: np.ndarray | None = None, max_hops: int | None = None,
    needed: NeededPairs | None = None,
) -> Validation:
    """Walk all (routed switch, destination) pairs and report (see module doc).
    ``needed``: the pairs that need a route (default: every CA pair).

    ``turns`` ``(D,)`` bool: destinations routed with detours, whose walks
    may turn up after going down (or move sideways); ``max_hops``: the
    longest walk (default ``2 * max_rank + 2``).

    ``walked``: the ``(status, hops)`` that :func:`walk` returns for the routed
    switches (``g.rank >= 0``), when the caller needs them too (e.g. the hop
    counts of ``opensm.fdbs``); otherwise the walk is done here."""
    sources = np.flatnonzero(g.rank >= 0)
    ep_count = np.bincount(g.ep_switch, minlength=g.n_switches)[sources]
    agg_count = (np.bincount(g.ep_switch, weights=needed.agg, minlength=g.n_switches)[sources]
                 .astype(np.int64) if needed is not None else ep_count)
    src_cost, src_comp = np.take(costs, sources, axis=0), g.component[sources][:, None]
    # the up*/down* hop counts, NO_PATH where none: no walk is longer than that
    src_hop = np.where(src_cost < INF, (src_cost & np.uint8(UP_PHASE - 1)).astype(np.int16),
                       np.int16(NO_PATH))
    every = len(sources) == g.n_switches
    chunks: Iterator[tuple[slice, np.ndarray, np.ndarray]]
    if walked is not None:
        all_st, all_hp = walked
        chunks = ((sl, all_st[:, sl], all_hp[:, sl])
                  for sl in (slice(c, c + _CHUNK) for c in range(0, len(dest.lid), _CHUNK)))
    else:
        chunks = ((sl, st, hp) if every else (sl, st[sources], hp[sources])
                  for sl, st, hp in _walk_chunks(g, ports, dest, None, turns, max_hops))
    n = dict.fromkeys(("pairs", "delivered", "dead_ends", "loops", "updown_violations",
                       "non_minimal", "ca_pairs_unroutable", "switch_pairs_no_updown",
                       "ca_pairs_disconnected", "detoured", "ca_pairs_unneeded", "may_turn"), 0)
    failing: list[np.ndarray] = []  # (b, d, status) rows: each chunk's first max_failures
    n_src = len(sources)
    src_comp_1 = src_comp[:, 0]
    some_needed = needed is not None and not needed.every_ca
    for sl, status, hops in chunks:  # counted per chunk of destinations
        tgt = dest.target[sl]
        hop = np.take(src_hop, tgt, axis=1)  # (np.take: C order)
        ca = ~dest.is_switch[sl]
        k = status.shape[1]
        failed = np.flatnonzero(status)  # the walks not OK (OK is 0)
        n["pairs"] += status.size
        # over every pair: the delivered ones' hop counts against the up*/down* costs
        longer = hops > hop
        n["non_minimal"] += int(np.count_nonzero(longer)) - int(np.count_nonzero(
            longer.ravel()[failed]))
        no_path_f = hop.ravel()[failed] == NO_PATH
        if turns is not None:
            n["detoured"] += int(np.count_nonzero(hop == NO_PATH)) - int(np.count_nonzero(
                no_path_f))
            n["may_turn"] += status.shape[0] * int(np.count_nonzero(turns[sl]))
        # pairs in other physical components, from each source: by the CA columns'
        comp_ca, per_comp = np.unique(g.component[tgt][ca], return_counts=True)
        at = np.minimum(np.searchsorted(comp_ca, src_comp_1), max(len(comp_ca) - 1, 0))
        same = (per_comp[at] * (comp_ca[at] == src_comp_1) if len(comp_ca)
                else np.zeros(n_src, dtype=np.int64))
        n["ca_pairs_disconnected"] += int((int(np.count_nonzero(ca)) - same) @ ep_count)
        # the walks that failed: must they deliver?  an up*/down* path exists, or an
        # end-port's traffic enters here and cables join the destination
        bi, di = np.divmod(failed, k)
        st = status.ravel()[failed]
        ca_f = ca[di]
        cabled = (ep_count[bi] > 0) & (src_comp_1[bi] == g.component[tgt[di]]) & ca_f
        if some_needed:
            assert needed is not None
            need = needed.pairs(sources[bi], tgt[di],
                                needed.agg[np.where(ca_f, dest.owner[sl][di], 0)] & ca_f)
            unneeded = cabled & ~need & no_path_f & (st == DEAD_END)
            n["ca_pairs_unneeded"] += int(np.bincount(bi[unneeded], minlength=n_src)
                                          @ agg_count)
            cabled &= need
        exempt = no_path_f & ~cabled & (st == DEAD_END)
        st = np.where(exempt, np.int8(OK), st)
        n["delivered"] += status.size - len(failed) + int(np.count_nonzero(exempt))
        n["dead_ends"] += int(np.count_nonzero(st == DEAD_END))
        n["loops"] += int(np.count_nonzero(st == LOOP))
        n["updown_violations"] += int(np.count_nonzero(st == UPDOWN))
        n["switch_pairs_no_updown"] += int(np.count_nonzero(exempt))
        bad = st != OK
        # CA pairs: CA sources per switch x CA destinations failing from that switch
        n["ca_pairs_unroutable"] += int(np.bincount(bi[bad & ca_f], minlength=n_src)
                                        @ ep_count)
        failing.append(np.stack([bi[bad][:max_failures], di[bad][:max_failures] + sl.start,
                                 st[bad][:max_failures]], axis=1))
    # the first max_failures failing pairs by source, then destination
    fail = np.concatenate(failing) if failing else np.zeros((0, 3), dtype=np.int64)
    fail = fail[np.lexsort((fail[:, 1], fail[:, 0]))][:max_failures]
    failures = []
    for b, d, why in fail.tolist():
        s = int(sources[b])
        lid = int(dest.lid[d])
        failures.append(Failure(
            source_guid=int(g.sw_guid[s]),
            source_desc=switch_desc[s] if switch_desc else "",
            lid=lid,
            dest_desc=lid_desc[lid] if lid_desc is not None and lid < len(lid_desc) else "",
            reason=REASONS[int(why)],
        ))
    return Validation(failures=failures, **n)
