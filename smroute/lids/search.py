"""The local search of LMC LID selection (:mod:`smroute.lids.select`):
phase 1, descent, and phase 2, min-conflicts, both in :func:`local_search`,
vectorized across the stages of a :class:`~smroute.lids.paths.Batch`.
"""

from __future__ import annotations

import numpy as np

from smroute.lids.paths import Batch, pad

__all__ = ["local_search"]

_BIG = np.int64(1) << 40


def local_search(b: Batch, cur: np.ndarray, off: np.ndarray, movable: np.ndarray,
                 rng: np.random.Generator, max_rounds: int, movers: int,
                 sideways: float = 0.0) -> tuple[np.ndarray, int, int]:
    """Local search (:mod:`smroute.lids.select`).  ``cur`` ``(F, H)`` current links+1, ``off``
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
            cl = pad(cl.reshape(-1, cl.shape[2]), h).reshape(m, b.n_cand, h)
        if cur.shape[1] < h:
            cur = pad(cur, h)
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
