"""LMC LID selection: per (source rank, destination rank), which of the
destination's ``2**LMC`` LIDs to use so that no link carries more than one
flow in any stage of a communication pattern (hot-spot avoidance).

Naruse et al. (``naruse-lmc-hotspot-avoidance-all-to-all.txt``) do this for
K-ary-2-trees: per shift stage they count, per (leaf, root switch), the flows
going up and down, and move a flow whose root switch is busy to an idle one.
Here the same idea is generalized to any forwarding tables (Dmodc on
multi-level PGFTs and degraded trees, or OpenSM's tables):

* **Candidates.** Flow ``s -> d`` may use any LID ``base(d) + i``,
  ``0 <= i < 2**LMC``.  Its path depends only on (source leaf, LID), and is
  found by walking the real tables (:func:`smroute.analysis.paths.walk_from_switches`),
  so whatever the routing engine made of the extra LIDs is what is scored.
* **Counters.** Per stage and per directed switch -> switch link, the flows
  crossing it (Naruse's ``up_path_cnt`` / ``dn_path_cnt`` for every level).
  Injection and delivery links do not depend on the choice.
* **Local search** (vectorized across all stages of a batch).  Phase 1,
  descent: every round, in every stage, up to ``movers`` flows on congested
  links (load >= 2, the most loaded first) score all their candidates against
  the counters and move if some candidate's links would all stay below the
  flow's current worst link.  Each accepted move strictly lowers
  ``sum(B**load)``, so it ends; it starts from the base LIDs, so it is never
  worse than them.  Phase 2, min-conflicts (as for graph colouring): a
  congested flow moves to the candidate that changes the stage's excess
  ``sum(max(0, load - 1))`` the least, also when that keeps the excess
  (sideways, to leave the plateaus phase 1 ends on), but never above the
  stage's current maximum; it stops when no stage has left the congested set
  for a dozen rounds.  In both phases a flow with nothing to do waits until
  its stage changes, and movers of one stage that would add to the same link
  in one round are deferred.
* **Exact colouring on 2-level trees.** Where every candidate path is
  leaf -> top -> leaf (one link per (leaf, top)), a stage is a bipartite
  multigraph between source and destination leaves whose proper edge
  colourings by top switch are exactly the LID choices with HSD 1.  Stages
  phase 1 leaves above 1 are finished with Kempe-chain swaps (before phase 2)
  (König's theorem): if every flow can reach every top switch (``2**LMC >=``
  top switches on a complete tree) and no leaf sends or receives more flows
  than there are tops, HSD 1 is always reached.

Pairs that occur in several stages get one LID (the first stage that has the
pair decides; later occurrences follow it; a pair that occurs twice within
one batch of stages keeps the LID it starts with: base, or the first LID
that is delivered).

Everything here is pure: arrays in, arrays out; randomness (tie-breaking)
comes from a passed ``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.analysis.paths import OK, RoutingView, walk_from_switches
from smroute.analysis.patterns import Pattern
from smroute.errors import InputError

__all__ = [
    "MAX_RANKS",
    "LidSelection",
    "job_lmc",
    "select_lids",
]

IntArray = npt.NDArray[np.int64]

#: Largest job: the offset matrix is ``(n, n)`` int16 (128 MiB at 8,192 ranks).
MAX_RANKS = 8192
_CHUNK_ENTRIES = 1 << 23  # (stage, link) load counters per batch of stages
_BIG = np.int64(1) << 40
_PAIR_KEYS = 1 << 22  # largest (job leaf, destination) pair table walked up front


@dataclass(frozen=True, eq=False)
class LidSelection:
    """The LIDs chosen for a job under a pattern, and the hot-spot degrees.

    ranks: ``(n,)`` int64 end-port indices of the view, rank order.
    base_lid: ``(n,)`` int64 base LID of each rank's port.
    offset: ``(n, n)`` int16 LID offset ``i`` (``0 <= i < 2**lmc``) chosen for
        ``src rank -> dst rank`` (0 on the diagonal and for pairs the pattern
        never uses: the base LID).
    hsd: ``(K,)`` int64 per stage, max flows on one link with the chosen LIDs.
    hsd_base: ``(K,)`` int64 the same with base LIDs only.
    unroutable: ``(K,)`` int64 flows of the stage that no LID delivers.
    labels: stage labels; moves / rounds: search statistics; exact_stages:
        stages finished by Kempe-chain colouring.
    """

    pattern: str
    ranks: IntArray
    lmc: int
    base_lid: IntArray
    offset: np.ndarray
    hsd: IntArray
    hsd_base: IntArray
    unroutable: IntArray
    labels: tuple[str, ...] = ()
    moves: int = 0
    rounds: int = 0
    exact_stages: int = 0

    @property
    def n(self) -> int:
        """Ranks of the job."""
        return int(self.ranks.shape[0])

    @property
    def dlids(self) -> IntArray:
        """``(n, n)`` int64: the DLID rank ``s`` uses to reach rank ``d`` (0 on
        the diagonal)."""
        d = self.base_lid[None, :] + self.offset.astype(np.int64)
        np.fill_diagonal(d, 0)
        return d

    @staticmethod
    def _avg(a: IntArray) -> float:
        return float(a.mean()) if len(a) else 0.0

    @property
    def hsd_avg(self) -> float:
        """HSD with the selected LIDs, averaged over the stages (0 if none)."""
        return self._avg(self.hsd)

    @property
    def hsd_max(self) -> int:
        """HSD with the selected LIDs, worst stage (0 if none)."""
        return int(self.hsd.max()) if len(self.hsd) else 0

    @property
    def hsd_base_avg(self) -> float:
        """HSD with base LIDs only, averaged over the stages (0 if none)."""
        return self._avg(self.hsd_base)

    @property
    def hsd_base_max(self) -> int:
        """HSD with base LIDs only, worst stage (0 if none)."""
        return int(self.hsd_base.max()) if len(self.hsd_base) else 0


def job_lmc(view: RoutingView, ranks: npt.ArrayLike) -> int:
    """The LMC every rank's port has in the fabric (the smallest one): how many
    LIDs (``2**lmc``) each destination offers.  ``ranks``: ``(n,)`` end-port
    indices."""
    r = np.asarray(ranks, dtype=np.int64)
    if not len(r):
        return 0
    return int(view.fabric.port_lmc[view.ep_row[r]].min())


def _core_paths(view: RoutingView, start: IntArray, dst: IntArray,
                lids: IntArray) -> tuple[np.ndarray, np.ndarray]:
    """Walk flows from switch ``start`` to end-port ``dst`` addressed to
    ``lids`` (``(F,)`` each).  Returns ``(links, ok)``: ``(F, H)`` int32
    switch -> switch link ids **plus one** (0 = padding) of delivered flows
    (undelivered rows are all 0), and ``(F,)`` bool delivered."""
    st, hp, steps = walk_from_switches(view, start, dst, lids)
    ok = st == OK
    h = max(1, int(hp[ok].max()) - 1) if ok.any() else 1
    links = np.zeros((len(start), h), dtype=np.int32)
    for k, (fi, lk) in enumerate(steps[:h]):
        keep = ok[fi] & (lk < view.n_core)
        links[fi[keep], k] = lk[keep] + 1
    return links, ok


def _pad(a: np.ndarray, h: int) -> np.ndarray:
    if a.shape[1] >= h:
        return a
    out = np.zeros((a.shape[0], h), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


class _PathCache:
    """Paths of ``K`` keys, each a (source leaf switch, destination end-port,
    base LID) triple: the base LID's path walked for every key up front, the
    ``C`` candidates' paths walked on first use and kept.  With a shift
    pattern the keys are the job's (source leaf, destination rank) pairs,
    shared by every stage; otherwise the flows of one batch of stages."""

    def __init__(self, view: RoutingView, start: IntArray, dst_ep: IntArray, base: IntArray,
                 n_cand: int) -> None:
        self.view = view
        self.start, self.dst_ep, self.base = start, dst_ep, base
        self.n_cand = n_cand
        self.base_links, self.base_ok = _core_paths(view, start, dst_ep, base)
        self.slot = np.full(len(start), -1, dtype=np.int64)
        self.c_links = np.zeros((0, n_cand, 1), dtype=np.int32)
        self.c_ok = np.zeros((0, n_cand), dtype=bool)
        self.used = 0

    def candidates(self, keys: IntArray) -> tuple[np.ndarray, np.ndarray]:
        """All ``C`` candidate paths of ``keys``: ``(M, C, H)`` links+1 and
        ``(M, C)`` delivered."""
        c = self.n_cand
        new = np.unique(keys[self.slot[keys] < 0])
        if len(new):
            r = np.repeat(new, c)
            off = np.tile(np.arange(c, dtype=np.int64), len(new))
            links, ok = _core_paths(self.view, self.start[r], self.dst_ep[r],
                                    self.base[r] + off)
            h = max(links.shape[1], self.c_links.shape[2])
            need = self.used + len(new)
            if need > len(self.c_ok) or h > self.c_links.shape[2]:
                cap = max(need, 2 * len(self.c_ok))
                grown = np.zeros((cap, c, h), dtype=np.int32)
                grown[: self.used, :, : self.c_links.shape[2]] = self.c_links[: self.used]
                ok_g = np.zeros((cap, c), dtype=bool)
                ok_g[: self.used] = self.c_ok[: self.used]
                self.c_links, self.c_ok = grown, ok_g
            self.c_links[self.used:need, :, : links.shape[1]] = links.reshape(len(new), c, -1)
            self.c_ok[self.used:need] = ok.reshape(len(new), c)
            self.slot[new] = np.arange(self.used, need)
            self.used = need
        sl = self.slot[keys]
        return self.c_links[sl], self.c_ok[sl]


class _Batch:
    """Local search state for the flows of a batch of ``k`` stages: flow ``i``
    is path key ``key[i]`` of ``cache`` in local stage ``stg[i]``."""

    def __init__(self, view: RoutingView, k: int, stg: IntArray, cache: _PathCache,
                 key: IntArray) -> None:
        self.view = view
        self.k = k
        self.nl = view.n_core + 1
        self.stg = stg
        self.cache = cache
        self.key = key
        self.n_cand = cache.n_cand
        self.loads = np.zeros(k * self.nl, dtype=np.int32)

    def keys(self, rows: IntArray, links: np.ndarray) -> IntArray:
        """(stage, link) counter index of every valid link, flattened."""
        kk = (self.stg[rows] * self.nl)[:, None] + links.astype(np.int64)
        return kk[links > 0]

    def add(self, rows: IntArray, links: np.ndarray, sign: int) -> None:
        """Add (``sign`` +1) or remove (-1) flows ``rows`` on ``links`` (links+1)."""
        kk = self.keys(rows, links)
        if len(kk) > len(self.loads) // 8:
            self.loads += sign * np.bincount(kk, minlength=len(self.loads)).astype(np.int32)
        else:
            ku, kc = np.unique(kk, return_counts=True)
            self.loads[ku] += sign * kc.astype(np.int32)

    def candidates(self, rows: IntArray) -> tuple[np.ndarray, np.ndarray]:
        return self.cache.candidates(self.key[rows])

    def stage_core_max(self) -> IntArray:
        return self.loads.reshape(self.k, self.nl).max(axis=1).astype(np.int64)


def _search(b: _Batch, cur: np.ndarray, off: np.ndarray, movable: np.ndarray,
            rng: np.random.Generator, max_rounds: int, movers: int,
            sideways: float = 0.0) -> tuple[np.ndarray, int, int]:
    """Local search (module doc).  ``cur`` ``(F, H)`` current links+1, ``off``
    ``(F,)`` current offsets (modified), ``movable`` ``(F,)`` bool.  Returns
    ``(cur, moves, rounds)``.

    ``sideways == 0`` (phase 1, descent): a congested flow moves if every
    link it adds stays below its current worst link.  ``sideways > 0``
    (phase 2, min-conflicts): a congested flow moves to the candidate that
    changes the stage's excess ``sum(max(0, load - 1))`` the least, never
    above the stage's current maximum; moves that keep the excess are taken
    with probability ``sideways`` (to leave plateaus).

    A stage stays active while it has a congested flow that has not failed
    to move since the stage last changed, and (phase 2) its maximum is above
    1; only moves in a stage change its counters."""
    f = len(off)
    nl = b.nl
    loads = b.loads
    version = np.zeros(b.k, dtype=np.int64)
    stuck_at = np.full(f, -1, dtype=np.int64)
    active = np.ones(b.k, dtype=bool)
    if sideways > 0:
        active &= b.stage_core_max() > 1
    sbase = b.stg * nl
    moves = rounds = 0
    best_left, since, patience = b.k + 1, 0, 12
    for rounds in range(1, max_rounds + 1):  # noqa: B007
        cr = np.flatnonzero(movable & active[b.stg])
        if not len(cr):
            break
        # worst load on each flow's path, column by column (pads hit slot 0 = 0)
        lk = cur[cr]
        sb = sbase[cr]
        pmax = loads[sb + lk[:, 0]]
        for j in range(1, lk.shape[1]):
            np.maximum(pmax, loads[sb + lk[:, j]], out=pmax)
        hot = (pmax >= 2) & (stuck_at[cr] != version[b.stg[cr]])
        h_rows, h_max = cr[hot], pmax[hot].astype(np.int64)
        still = np.zeros(b.k, dtype=bool)
        still[b.stg[h_rows]] = True
        active &= still
        if not len(h_rows):
            break
        # at most `movers` per stage, most loaded first, random tie-break
        tie = rng.random(len(h_rows))
        o = np.lexsort((tie, -h_max, b.stg[h_rows]))
        h_rows, h_max = h_rows[o], h_max[o]
        st = b.stg[h_rows]
        first = np.r_[0, np.flatnonzero(st[1:] != st[:-1]) + 1]
        rank_in = np.arange(len(st)) - np.repeat(first, np.diff(np.r_[first, len(st)]))
        keep = rank_in < movers
        m_rows, m_max = h_rows[keep], h_max[keep]
        m = len(m_rows)
        ar = np.arange(m)
        cl, cok = b.candidates(m_rows)
        h = max(cl.shape[2], cur.shape[1])
        if cl.shape[2] < h:
            cl = _pad(cl.reshape(-1, cl.shape[2]), h).reshape(m, b.n_cand, h)
        if cur.shape[1] < h:
            cur = _pad(cur, h)
        p = cur[m_rows]  # (M, H)
        msb = sbase[m_rows]
        # candidate links hop-major, (H, M, C): reductions over hops are then
        # over the leading axis, which numpy does fast
        clk = np.ascontiguousarray(cl.transpose(2, 0, 1)).astype(np.int64)
        in_p = clk == p[:, 0][None, :, None]
        for j in range(1, h):
            in_p |= clk == p[:, j][None, :, None]
        ld = loads[msb[None, :, None] + clk]
        add = (clk > 0) & ~in_p
        new = ld + add  # loads after the move, on the candidate's links
        val = new.max(axis=0).astype(np.int64)  # (M, C)
        noise = rng.integers(0, 4096, size=val.shape)
        if sideways <= 0:
            tot = new.sum(axis=0, dtype=np.int64)
            score = val * _BIG + tot * 4096 + noise
            score = np.where(cok, score, np.iinfo(np.int64).max)
            best = score.argmin(axis=1)
            good = cok[ar, best] & (val[ar, best] < m_max)
            possible = good
        else:
            us, ui = np.unique(b.stg[m_rows], return_inverse=True)
            smax = loads.reshape(b.k, nl)[us].max(axis=1)[ui].astype(np.int64)
            gained = (add & (ld >= 1)).sum(axis=0, dtype=np.int64)
            pl = loads[msb[:, None] + p]  # (M, H) loads on the current path
            lost = np.zeros(val.shape, dtype=np.int64)
            for j in range(h):
                in_q = (clk == p[:, j][None, :, None]).any(axis=0)
                lost += ((p[:, j] > 0) & (pl[:, j] >= 2))[:, None] & ~in_q
            delta = gained - lost
            same = np.arange(b.n_cand)[None, :] == off[m_rows][:, None]
            allowed = cok & ~same & (val <= smax[:, None])
            score = np.where(allowed, delta * _BIG + val * 4096 + noise, np.iinfo(np.int64).max)
            best = score.argmin(axis=1)
            d_best = delta[ar, best]
            coin = rng.random(m) < sideways
            possible = allowed[ar, best] & (d_best <= 0)
            good = possible & ((d_best < 0) | coin)
        # two movers of a stage must not add to the same link in one round
        gi = np.flatnonzero(good)
        acc = gi
        if len(gi):
            nlk = clk[:, gi, best[gi]].T  # (G, H)
            added = (nlk > 0) & ~in_p[:, gi, best[gi]].T
            kk = (msb[gi][:, None] + nlk)[added]
            mover = np.broadcast_to(np.arange(len(gi))[:, None], nlk.shape)[added]
            if len(kk):
                _, first_m, inv = np.unique(kk, return_index=True, return_inverse=True)
                clash = mover != mover[first_m][inv]
                owner = np.ones(len(gi), dtype=bool)
                owner[mover[clash]] = False
                acc = gi[owner]
        # movers without an acceptable candidate wait until their stage changes
        bad = m_rows[~good] if sideways <= 0 else m_rows[~possible]
        stuck_at[bad] = version[b.stg[bad]]
        if len(acc):
            rows = m_rows[acc]
            newp = cl[acc, best[acc]]
            b.add(rows, cur[rows], -1)
            b.add(rows, newp, +1)
            cur[rows] = newp
            off[rows] = best[acc]
            version[np.unique(b.stg[rows])] += 1
            moves += len(acc)
            if sideways > 0:
                done = np.unique(b.stg[rows])
                active[done[loads.reshape(b.k, nl)[done].max(axis=1) <= 1]] = False
        if sideways > 0:
            # stop when the number of congested stages has not dropped lately
            left = int(active.sum())
            if left < best_left:
                best_left, since = left, 0
            else:
                since += 1
                if since >= patience:
                    break
    return cur, moves, rounds


def _kempe(src: list[int], dst: list[int], avail: list[list[int]],
           colour: list[int]) -> list[int] | None:
    """Proper edge colouring of a bipartite multigraph (``src[e]`` on one side,
    ``dst[e]`` on the other) with colours ``0 .. T-1``; edge ``e`` may take
    colour ``c`` if ``avail[e][c] >= 0``.  Starts from ``colour`` (-1 = none),
    keeping every edge that does not clash; Kempe chains (alternating α/β
    paths) free a colour at both ends of the others (König).  Returns the
    colours, or None if the graph or the availabilities do not allow it."""
    col = list(colour)
    n_col = len(avail[0]) if avail else 0
    at_u: dict[tuple[int, int], int] = {}
    at_v: dict[tuple[int, int], int] = {}
    todo: list[int] = []
    for e, c in enumerate(col):
        if c >= 0 and avail[e][c] >= 0 and (src[e], c) not in at_u and (dst[e], c) not in at_v:
            at_u[src[e], c] = e
            at_v[dst[e], c] = e
        else:
            col[e] = -1
            todo.append(e)
    for e in todo:
        u, v = src[e], dst[e]
        ok_e = avail[e]
        fu = [c for c in range(n_col) if ok_e[c] >= 0 and (u, c) not in at_u]
        both = [c for c in fu if (v, c) not in at_v]
        if both:
            c = both[0]
        else:
            fv = [c for c in range(n_col) if ok_e[c] >= 0 and (v, c) not in at_v]
            done = False
            for a in fu:
                for bcol in fv:
                    chain: list[int] = []
                    x, side = v, 1  # at a destination vertex, follow its α edge
                    while True:
                        nxt = at_v.get((x, a)) if side else at_u.get((x, bcol))
                        if nxt is None:
                            break
                        chain.append(nxt)
                        x, side = (src[nxt], 0) if side else (dst[nxt], 1)
                    if all(avail[y][a] >= 0 and avail[y][bcol] >= 0 for y in chain):
                        for y in chain:
                            del at_u[src[y], col[y]]
                            del at_v[dst[y], col[y]]
                        for y in chain:
                            col[y] = bcol if col[y] == a else a
                            at_u[src[y], col[y]] = y
                            at_v[dst[y], col[y]] = y
                        done = True
                        break
                if done:
                    break
            if not done:
                return None
            c = a
        col[e] = c
        at_u[u, c] = e
        at_v[v, c] = e
    return col


def _exact_stage(b: _Batch, rows: IntArray, cur: np.ndarray) -> np.ndarray | None:
    """Kempe colouring of one stage's inter-leaf flows ``rows`` on a 2-level
    fabric; returns the new offsets ``(len(rows),)`` or None if the candidate
    paths are not leaf -> top -> leaf with one link per (leaf, top)."""
    cl, cok = b.candidates(rows)
    m, c = cok.shape
    if cl.shape[2] < 2:
        return None
    up, dn = cl[:, :, 0].astype(np.int64) - 1, cl[:, :, 1].astype(np.int64) - 1
    n_links = (cl[:, :, 0] > 0).astype(np.int64)
    for j in range(1, cl.shape[2]):
        n_links += cl[:, :, j] > 0
    two = cok & (n_links == 2)
    if not two.any(axis=1).all():
        return None
    view = b.view
    top = np.where(two, view.link_switch[np.maximum(dn, 0)], -1)
    sleaf = b.cache.start[b.key[rows]]
    # the up link must be a function of (source leaf, top), the down link of
    # (top, destination): then colour = top switch
    keys_u = (np.repeat(sleaf, c) * (view.n_switches + 1) + top.ravel())[two.ravel()]
    ups = up.ravel()[two.ravel()]
    dleaf = view.ep_leaf[b.cache.dst_ep[b.key[rows]]]
    keys_v = (top.ravel() * (view.n_switches + 1) + np.repeat(dleaf, c))[two.ravel()]
    dns = dn.ravel()[two.ravel()]
    for kk, ll in ((keys_u, ups), (keys_v, dns)):
        o = np.lexsort((ll, kk))
        ks, ls = kk[o], ll[o]
        if ((ks[1:] == ks[:-1]) & (ls[1:] != ls[:-1])).any():
            return None
    # colours = top switches, compacted; avail[i, colour] = the smallest
    # offset of flow i turning there (-1: none)
    tops, tidx = np.unique(top[two], return_inverse=True)
    colour_of = np.full(top.shape, -1, dtype=np.int64)
    colour_of[two] = tidx
    avail = np.full((m, len(tops)), -1, dtype=np.int64)
    for j in range(c - 1, -1, -1):
        have = colour_of[:, j] >= 0
        avail[np.flatnonzero(have), colour_of[have, j]] = j
    cd = cur[rows]
    if cd.shape[1] < 2:
        return None
    two_now = (cd[:, 1] > 0) & ((cd[:, 2] == 0) if cd.shape[1] > 2 else True)
    last = np.where(two_now, cd[:, 1] - 1, 0)
    cur_top = np.where(two_now, view.link_switch[last], -1)
    pos = np.minimum(np.searchsorted(tops, cur_top), len(tops) - 1)
    cur_col = np.where(two_now & (tops[pos] == cur_top), pos, -1)
    col = _kempe(sleaf.tolist(), dleaf.tolist(), avail.tolist(), cur_col.tolist())
    if col is None:
        return None
    return avail[np.arange(m), np.asarray(col, dtype=np.int64)]


def _edge_max(view: RoutingView, r: IntArray, src: IntArray, dst: IntArray, stg: IntArray,
              ok: np.ndarray, k: int, permutation: bool) -> IntArray:
    """Per stage, the most flows on one injection or delivery link, ``(k,)``."""
    if permutation:
        return (np.bincount(stg[ok], minlength=k) > 0).astype(np.int64)
    ends = np.concatenate([view.inj_link[r[src[ok]]], view.deliver_link[r[dst[ok]]]])
    sk = np.concatenate([stg[ok], stg[ok]]) * view.n_links + ends
    edge = np.zeros(k, dtype=np.int64)
    ku, kc = np.unique(sk, return_counts=True)
    np.maximum.at(edge, ku // view.n_links, kc)
    return edge


def select_lids(
    view: RoutingView,
    ranks: npt.ArrayLike,
    pattern: Pattern,
    *,
    rng: np.random.Generator,
    lmc: int | None = None,
    max_rounds: int = 400,
    movers: int = 64,
    exact: bool = True,
    sideways_rounds: int = 100,
    sideways: float = 0.9,
    chunk_entries: int = _CHUNK_ENTRIES,
) -> LidSelection:
    """Choose a LID per (source rank, destination rank) for ``pattern``.

    ``view``: the fabric with tables that route every LID of the job's ports
    (e.g. Dmodc with LMC, or OpenSM's dump); ``ranks`` ``(n,)`` end-port
    indices in rank order (``n == pattern.n``, at most :data:`MAX_RANKS`);
    ``lmc``: LIDs per destination ``2**lmc`` (default :func:`job_lmc`; must
    not exceed it).  ``rng`` breaks ties.  ``max_rounds`` bounds the local
    search (phase 1) per batch of stages, ``movers`` the flows moved per
    stage and round; ``sideways_rounds`` bounds phase 2 (0 = off) and
    ``sideways`` is the probability of taking a move that keeps the excess;
    ``exact`` enables Kempe colouring on 2-level fabrics.

    Raises :class:`~smroute.errors.InputError` for bad ranks, a pattern of
    another size, or an LMC the ports or tables do not have.
    """
    r = np.asarray(ranks, dtype=np.int64)
    n = len(r)
    if r.ndim != 1:
        raise InputError("ranks: a 1-D array of end-port indices")
    if n > MAX_RANKS:
        raise InputError(f"job of {n} ranks: at most {MAX_RANKS} are supported")
    if n and (int(r.min()) < 0 or int(r.max()) >= view.n_endports):
        raise InputError(f"ranks: end-port index out of 0..{view.n_endports - 1}")
    if len(np.unique(r)) != n:
        raise InputError("ranks: an end-port is listed twice")
    if pattern.n != n:
        raise InputError(f"pattern {pattern.name!r} has {pattern.n} participants, job {n}")
    have = job_lmc(view, r)
    if lmc is None:
        lmc = have
    if not 0 <= lmc <= 7:
        raise InputError(f"LMC must be 0..7, got {lmc}")
    if lmc > have:
        raise InputError(
            f"LMC mismatch: {2 ** lmc} LIDs per port asked (LMC {lmc}) but the job's ports "
            f"have LMC {have} in the fabric")
    n_cand = 1 << lmc
    base_lid = view.ep_lid[r].astype(np.int64)
    if n and int(base_lid.min()) <= 0:
        raise InputError("a job port has no LID: run the subnet manager first")
    if n and int(base_lid.max()) + n_cand > view.lft.shape[1]:
        raise InputError(
            f"the tables stop at LID {view.lft.shape[1] - 1:#x}: they do not route the "
            f"{n_cand} LIDs per port of LMC {lmc} (route with the same LMC)")
    # every LID of a rank must at least be delivered by the rank's own leaf
    lid_all = base_lid[:, None] + np.arange(n_cand)[None, :]
    at_leaf = view.lft[view.ep_leaf[r][:, None], lid_all]
    wrong = at_leaf != view.ep_leaf_port[r][:, None]
    if wrong.any():
        i, j = (int(x[0]) for x in np.nonzero(wrong))
        raise InputError(
            f"the tables do not route LID {int(lid_all[i, j]):#x} of "
            f"{view.describe_endport(int(r[i]))} to it (LMC {lmc} asked): route with the "
            "same LMC, or pass a smaller LMC")

    k_all = pattern.n_stages
    offset = np.zeros((n, n), dtype=np.int16)
    decided = np.zeros((n, n), dtype=bool)
    hsd = np.zeros(k_all, dtype=np.int64)
    hsd_base = np.zeros(k_all, dtype=np.int64)
    unroutable = np.zeros(k_all, dtype=np.int64)
    moves = rounds = exact_n = 0
    step = max(1, chunk_entries // (view.n_core + 1))
    sd = pattern.shift_dist
    unique_pairs = sd is not None and len(np.unique(sd % max(n, 1))) == len(sd)
    # shift patterns use every (source leaf, destination) pair: walk them once
    leaves_j, job_leaf = np.unique(view.ep_leaf[r], return_inverse=True)
    pair_cache: _PathCache | None = None
    if unique_pairs and len(leaves_j) * n <= _PAIR_KEYS:
        kl = np.repeat(leaves_j, n)
        kd = np.tile(np.arange(n, dtype=np.int64), len(leaves_j))
        pair_cache = _PathCache(view, kl, r[kd], base_lid[kd], n_cand)
    for a in range(0, k_all, step):
        e = min(a + step, k_all)
        src, dst, stg = pattern.batch(a, e)
        net = src != dst
        src, dst, stg = src[net], dst[net], stg[net]
        if pair_cache is not None:
            cache, key = pair_cache, job_leaf[src] * n + dst
        else:
            key = np.arange(len(src), dtype=np.int64)
            cache = _PathCache(view, view.ep_leaf[r[src]], r[dst], base_lid[dst], n_cand)
        b = _Batch(view, e - a, stg, cache, key)
        rows_all = np.arange(len(src), dtype=np.int64)
        # base LIDs
        cur, ok = cache.base_links[key], cache.base_ok[key]
        b.add(rows_all[ok], cur[ok], +1)
        base_core = b.stage_core_max()
        ok_base = ok.copy()
        # pairs: the first occurrence decides; later ones (in this batch or in
        # later batches) follow it
        pair = src * n + dst
        if unique_pairs:
            first_idx = inv = np.arange(len(pair), dtype=np.int64)
            uniq = np.ones(len(pair), dtype=bool)
        else:
            _, first_idx, inv, cnt = np.unique(pair, return_index=True, return_inverse=True,
                                              return_counts=True)
            uniq = cnt[inv] == 1
        home = np.zeros(len(pair), dtype=bool)
        home[first_idx] = True
        home &= ~decided.ravel()[pair]
        off = offset.ravel()[pair].astype(np.int64)
        bad = np.flatnonzero(~ok & home)
        if len(bad):  # the base LID is not delivered: take the first LID that is
            _, cok = b.candidates(bad)
            off[bad] = np.where(cok.any(axis=1), cok.argmax(axis=1), 0)
        off = off[first_idx[inv]]
        redo = np.flatnonzero(off != 0)
        if len(redo):
            fr = key[redo]
            lk2, ok2 = _core_paths(view, cache.start[fr], cache.dst_ep[fr],
                                   cache.base[fr] + off[redo])
            h = max(lk2.shape[1], cur.shape[1])
            cur, lk2 = _pad(cur, h), _pad(lk2, h)
            was = redo[ok[redo]]
            b.add(was, cur[was], -1)
            cur[redo] = lk2
            ok[redo] = ok2
            b.add(redo[ok2], lk2[ok2], +1)
        # a pair that occurs more than once in the batch keeps that LID (moving
        # it would change several stages at once)
        movable = home & ok & uniq
        if n_cand > 1:
            cur, mv, rd = _search(b, cur, off, movable, rng, max_rounds, movers)
            moves += mv
            rounds += rd
            core = b.stage_core_max()
            if exact and int(view.sw_level.max()) == 1:
                # flows are stage-major; inter-leaf flows cross core links
                net_flow = ok & (cur[:, 0] > 0)
                bounds = np.searchsorted(stg, np.arange(e - a + 1))
                for s_ in np.flatnonzero(core > 1).tolist():
                    lo_, hi_ = int(bounds[s_]), int(bounds[s_ + 1])
                    rows = lo_ + np.flatnonzero(net_flow[lo_:hi_])
                    if not movable[rows].all():
                        continue
                    newoff = _exact_stage(b, rows, cur)
                    if newoff is None:
                        continue
                    fr = key[rows]
                    lk3, ok3 = _core_paths(view, cache.start[fr], cache.dst_ep[fr],
                                           cache.base[fr] + newoff)
                    if not ok3.all():
                        continue
                    lk3 = _pad(lk3, cur.shape[1])
                    b.add(rows, cur[rows], -1)
                    b.add(rows, lk3, +1)
                    cur[rows] = lk3
                    off[rows] = newoff
                    exact_n += 1
            if sideways_rounds > 0 and int(b.stage_core_max().max(initial=0)) > 1:
                cur, mv, rd = _search(b, cur, off, movable, rng, sideways_rounds, movers,
                                      sideways=sideways)
                moves += mv
                rounds += rd
        core = b.stage_core_max()
        # injection / delivery links (the same for every LID; undelivered flows
        # load nothing): one flow each in a permutation stage
        k = e - a
        hsd[a:e] = np.maximum(core, _edge_max(view, r, src, dst, stg, ok, k,
                                               pattern.permutation))
        hsd_base[a:e] = np.maximum(base_core, _edge_max(view, r, src, dst, stg, ok_base, k,
                                                         pattern.permutation))
        unroutable[a:e] = np.bincount(stg[~ok], minlength=k)
        hm = np.flatnonzero(home)
        offset.ravel()[pair[hm]] = off[hm].astype(np.int16)
        decided.ravel()[pair[hm]] = True
    labels = tuple(pattern.label(i) for i in range(k_all)) if pattern.labels else ()
    return LidSelection(pattern.name, r, int(lmc), base_lid, offset, hsd, hsd_base,
                        unroutable, labels, moves, rounds, exact_n)
