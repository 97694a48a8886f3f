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

The candidate-path model is :mod:`smroute.lids.paths`, the local search
(phases 1 and 2) :mod:`smroute.lids.search`, the Kempe-chain colouring
:mod:`smroute.lids.colour`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.analysis.paths import RoutingView
from smroute.analysis.patterns import Pattern
from smroute.errors import InputError
from smroute.lids.colour import exact_stage, kempe
from smroute.lids.paths import Batch, PathCache, core_paths, pad
from smroute.lids.search import local_search

__all__ = [
    "MAX_RANKS",
    "LidSelection",
    "job_lmc",
    "select_lids",
]

IntArray = npt.NDArray[np.int64]

#: The Kempe-chain colouring under its former name (tests import it from here).
_kempe = kempe

#: Largest job: the offset matrix is ``(n, n)`` int16 (128 MiB at 8,192 ranks).
MAX_RANKS = 8192
_CHUNK_ENTRIES = 1 << 23  # (stage, link) load counters per batch of stages
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
    pair_cache: PathCache | None = None
    if unique_pairs and len(leaves_j) * n <= _PAIR_KEYS:
        kl = np.repeat(leaves_j, n)
        kd = np.tile(np.arange(n, dtype=np.int64), len(leaves_j))
        pair_cache = PathCache(view, kl, r[kd], base_lid[kd], n_cand)
    for a in range(0, k_all, step):
        e = min(a + step, k_all)
        src, dst, stg = pattern.batch(a, e)
        net = src != dst
        src, dst, stg = src[net], dst[net], stg[net]
        if pair_cache is not None:
            cache, key = pair_cache, job_leaf[src] * n + dst
        else:
            key = np.arange(len(src), dtype=np.int64)
            cache = PathCache(view, view.ep_leaf[r[src]], r[dst], base_lid[dst], n_cand)
        b = Batch(view, e - a, stg, cache, key)
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
            lk2, ok2 = core_paths(view, cache.start[fr], cache.dst_ep[fr],
                                  cache.base[fr] + off[redo])
            h = max(lk2.shape[1], cur.shape[1])
            cur, lk2 = pad(cur, h), pad(lk2, h)
            was = redo[ok[redo]]
            b.add(was, cur[was], -1)
            cur[redo] = lk2
            ok[redo] = ok2
            b.add(redo[ok2], lk2[ok2], +1)
        # a pair that occurs more than once in the batch keeps that LID (moving
        # it would change several stages at once)
        movable = home & ok & uniq
        if n_cand > 1:
            cur, mv, rd = local_search(b, cur, off, movable, rng, max_rounds, movers)
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
                    newoff = exact_stage(b, rows, cur)
                    if newoff is None:
                        continue
                    fr = key[rows]
                    lk3, ok3 = core_paths(view, cache.start[fr], cache.dst_ep[fr],
                                          cache.base[fr] + newoff)
                    if not ok3.all():
                        continue
                    lk3 = pad(lk3, cur.shape[1])
                    b.add(rows, cur[rows], -1)
                    b.add(rows, lk3, +1)
                    cur[rows] = lk3
                    off[rows] = newoff
                    exact_n += 1
            if sideways_rounds > 0 and int(b.stage_core_max().max(initial=0)) > 1:
                cur, mv, rd = local_search(b, cur, off, movable, rng, sideways_rounds,
                                           movers, sideways=sideways)
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
