"""Congestion metrics of forwarding tables under communication patterns.

Two metrics, both computed per directed link from the traced paths
(:mod:`smroute.analysis.paths`):

* **Congestion risk** (Gliksberg et al., HOTI 2019, section 4, after
  Rodriguez et al.): a link's risk is ``min(#distinct sources, #distinct
  destinations)`` of the flows crossing it.  Summaries: **A2A** = max over
  links for all-to-all (:func:`a2a_risk`); **RP** = median over random
  permutations (1,000 by default) of each permutation's max
  (:func:`rp_risk`); **SP** = max over the ``N - 1`` shift permutations of each
  shift's max (:func:`sp_risk`).  :func:`congestion_risk` computes all three.
* **Hot-spot degree** (Zahavi, section II): a link's HSD in a stage is the
  number of flows crossing it; per stage the max over links is kept and
  averaged over the stages (:func:`evaluate`), and over several random node
  orders (:func:`hsd_random_orders`).

In a (partial) permutation each source and each destination appears once, so
a link's risk equals its flow count: permutation stages are evaluated by one
``bincount`` over ``(stage, link)`` keys for many stages at once.  Stages that
are not permutations count distinct sources and destinations per link.

Every flow crosses its injection link (CA -> leaf) and the switch egress links
of its path, including the leaf port that delivers it.  Self flows (a
participant to itself) never enter the network and are skipped.  Flows the
tables do not deliver (dead ends, loops) load no link and are counted as
``unroutable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from smroute.analysis.paths import OK, PairPaths, RoutingView
from smroute.analysis.patterns import Pattern, random_permutations, shifts

__all__ = [
    "StageMetrics",
    "RandomOrderHSD",
    "A2ARisk",
    "CongestionRisk",
    "evaluate",
    "hsd_random_orders",
    "link_loads",
    "a2a_risk",
    "rp_risk",
    "sp_risk",
    "congestion_risk",
]

IntArray = npt.NDArray[np.int64]
_BATCH_ELEMS = 1 << 22  # link entries per bincount batch
_BATCH_BINS = 1 << 23  # (stage, link) bins per bincount batch


@dataclass(frozen=True, eq=False)
class StageMetrics:
    """Per-stage results of a pattern, arrays of shape ``(K,)`` (K stages).

    flows (int64 network flows: self flows excluded, unroutable included),
    max_flows (int64 HSD: max flows on one link), risk (int64 max congestion
    risk on one link; equals ``max_flows`` for permutation stages),
    unroutable (int64 flows not delivered).
    """

    pattern: str
    n: int
    labels: tuple[str, ...]
    flows: IntArray
    max_flows: IntArray
    risk: IntArray
    unroutable: IntArray

    @property
    def n_stages(self) -> int:
        return int(self.flows.shape[0])

    @property
    def hsd_avg(self) -> float:
        """Average over stages (with at least one delivered flow) of the max HSD."""
        used = (self.flows - self.unroutable) > 0
        return float(self.max_flows[used].mean()) if used.any() else 0.0

    @property
    def hsd_max(self) -> int:
        return int(self.max_flows.max()) if self.n_stages else 0

    @property
    def risk_max(self) -> int:
        return int(self.risk.max()) if self.n_stages else 0

    @property
    def risk_median(self) -> float:
        return float(np.median(self.risk)) if self.n_stages else 0.0

    @property
    def total_unroutable(self) -> int:
        return int(self.unroutable.sum())

    def summary(self) -> dict[str, object]:
        return {
            "pattern": self.pattern, "participants": self.n, "stages": self.n_stages,
            "flows": int(self.flows.sum()), "unroutable": self.total_unroutable,
            "hsd_avg": self.hsd_avg, "hsd_max": self.hsd_max,
            "risk_max": self.risk_max, "risk_median": self.risk_median,
        }


def _check_order(view: RoutingView, order: npt.ArrayLike) -> IntArray:
    o = np.asarray(order, dtype=np.int64)
    if o.ndim != 1:
        raise ValueError("an order is a 1-D array of end-port indices")
    if len(o) and (int(o.min()) < 0 or int(o.max()) >= view.n_endports):
        raise ValueError(f"end-port index out of 0..{view.n_endports - 1}")
    if len(np.unique(o)) != len(o):
        raise ValueError("an order lists each end-port at most once")
    return o


def _leaf_sort(view: RoutingView, ep: IntArray) -> IntArray | None:
    """Permutation grouping flows by source leaf (so the pair-table gather stays
    in one leaf's block, which fits in cache), or None if already grouped."""
    lr = view.ep_leaf_row[ep]
    if len(lr) < 2 or bool((lr[1:] >= lr[:-1]).all()):
        return None
    if view.n_leaves <= np.iinfo(np.uint16).max:
        return np.argsort(lr.astype(np.uint16), kind="stable")  # radix sort
    return np.argsort(lr, kind="stable")


def _max_core(links: np.ndarray, stage: np.ndarray | int, n_stg: int,
              n_core: int) -> IntArray:
    """Per stage, the max flows on one core link: ``links`` ``(F, H)`` core
    link ids (-1 padding), ``stage`` ``(F,)`` local stage (or a scalar)."""
    nl1 = n_core + 1
    keys = links.astype(np.int64)  # bincount is fastest on intp
    if isinstance(stage, int):
        keys += stage * nl1 + 1
    else:
        keys += (stage * nl1 + 1)[:, None]
    keys = keys.ravel()
    counts = np.bincount(keys, minlength=n_stg * nl1).reshape(n_stg, nl1)
    return counts[:, 1:].max(axis=1).astype(np.int64) if n_core else np.zeros(n_stg, np.int64)


def _stage_counts(
    view: RoutingView, paths: PairPaths, order: IntArray, src: IntArray, dst: IntArray,
    stg: IntArray, n_stg: int, permutation: bool,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Evaluate ``n_stg`` stages given as concatenated flows (participant
    indices ``src``/``dst`` and local stage ``stg``, ``(F,)`` each).  Returns
    per stage ``(flows, max_flows, risk, unroutable)``, ``(n_stg,)`` int64."""
    se, de = order[src], order[dst]
    net = se != de
    if not net.all():
        src, dst, stg, se, de = src[net], dst[net], stg[net], se[net], de[net]
    flows = np.bincount(stg, minlength=n_stg).astype(np.int64)
    pair = view.ep_leaf_row[se] * paths.n_endports + de
    if paths.all_ok:
        ok = np.ones(len(pair), dtype=bool)
        unroutable = np.zeros(n_stg, dtype=np.int64)
    else:
        ok = paths.status[pair] == OK
        unroutable = np.bincount(stg[~ok], minlength=n_stg).astype(np.int64)
    if permutation:
        # injection and delivery links carry exactly one flow each
        perm = _leaf_sort(view, se)
        p_s, s_s = (pair, stg) if perm is None else (pair[perm], stg[perm])
        max_flows = _max_core(paths.gather(p_s), s_s, n_stg, paths.n_core)
        delivered = np.bincount(stg[ok], minlength=n_stg) > 0
        max_flows = np.maximum(max_flows, delivered.astype(np.int64))
        return flows, max_flows, max_flows.copy(), unroutable
    # general stages: every link of every delivered flow, distinct src / dst
    nl = paths.n_links
    links = np.concatenate([
        view.inj_link[se][:, None], paths.gather(pair),
        np.where(ok, view.deliver_link[de], -1)[:, None],
    ], axis=1)
    links[~ok, 0] = -1
    fl = np.repeat(np.arange(len(src)), links.shape[1])
    lk = links.ravel().astype(np.int64)
    valid = lk >= 0
    fl, lk = fl[valid], lk[valid]
    key = stg[fl] * nl + lk
    ku, nflow = np.unique(key, return_counts=True)
    max_flows = np.zeros(n_stg, dtype=np.int64)
    np.maximum.at(max_flows, ku // nl, nflow)
    n = max(len(order), 1)
    ks, ns = np.unique(np.unique(key * n + src[fl]) // n, return_counts=True)
    _, nd = np.unique(np.unique(key * n + dst[fl]) // n, return_counts=True)
    risk = np.zeros(n_stg, dtype=np.int64)
    np.maximum.at(risk, ks // nl, np.minimum(ns, nd))  # same key set in both
    return flows, max_flows, risk, unroutable


def _shift_counts(
    view: RoutingView, paths: PairPaths, order: IntArray, dist: IntArray,
    perm: IntArray | None,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Shift stages ``i -> (i + dist[k]) mod N`` without generating flows: the
    pair rows of a stage are ``leaf(order[i]) * E + order[(i + d) mod N]``,
    rows grouped by source leaf (``perm``: participants in leaf order, None if
    ``order`` already is)."""
    n, b = len(order), len(dist)
    d = dist % n if n else dist
    lr = view.ep_leaf_row[order] * paths.n_endports
    order2 = np.concatenate([order, order])
    if perm is None:
        win = np.lib.stride_tricks.sliding_window_view(order2, n)
        pair = lr[None, :] + win[d]
    else:
        pair = lr[perm][None, :] + order2[perm[None, :] + d[:, None]]
    selfs = d == 0
    flows = np.where(selfs, 0, n).astype(np.int64)
    if paths.all_ok:
        unroutable = np.zeros(b, dtype=np.int64)
        delivered = ~selfs
    else:
        ok = paths.status[pair] == OK
        unroutable = np.where(selfs, 0, (~ok).sum(axis=1)).astype(np.int64)
        delivered = ~selfs & ok.any(axis=1)
    max_flows = _max_core(paths.gather(pair).reshape(b, -1), np.arange(b, dtype=np.int64),
                          b, paths.n_core)
    max_flows = np.where(selfs, 0, np.maximum(max_flows, delivered.astype(np.int64)))
    return flows, max_flows, max_flows.copy(), unroutable


def evaluate(view: RoutingView, paths: PairPaths, pattern: Pattern,
             order: npt.ArrayLike, *,
             progress: Callable[[int, int], None] | None = None) -> StageMetrics:
    """HSD and congestion risk of every stage of ``pattern`` with participant
    ``i`` on end-port ``order[i]`` (``(N,)`` int64 distinct end-ports,
    ``N = pattern.n``).

    Stages are processed in batches (one ``bincount`` over (stage, link) keys
    per batch); shift-type patterns do not even generate their flows, so the
    ``N - 1`` shifts of 11,664 participants take seconds.  ``progress(done,
    total)`` (stages) is called after each batch."""
    o = _check_order(view, order)
    if len(o) != pattern.n:
        raise ValueError(f"pattern has {pattern.n} participants, order {len(o)}")
    k = pattern.n_stages
    out = np.zeros((4, k), dtype=np.int64)
    h = paths.links.shape[1]
    per_stage = max(pattern.n, 1) * (h + 2)
    step = max(1, min(_BATCH_ELEMS // per_stage, _BATCH_BINS // (paths.n_links + 1)))
    fast = pattern.shift_dist is not None and pattern.permutation
    perm = _leaf_sort(view, o) if fast else None
    for a in range(0, k, step):
        b = min(a + step, k)
        if fast:
            assert pattern.shift_dist is not None
            res = _shift_counts(view, paths, o, pattern.shift_dist[a:b], perm)
        else:
            src, dst, stg = pattern.batch(a, b)
            res = _stage_counts(view, paths, o, src, dst, stg, b - a, pattern.permutation)
        for r, arr in enumerate(res):
            out[r, a:b] = arr
        if progress is not None:
            progress(b, k)
    labels = tuple(pattern.label(i) for i in range(k)) if pattern.labels else ()
    return StageMetrics(pattern.name, pattern.n, labels, out[0], out[1], out[2], out[3])


@dataclass(frozen=True, eq=False)
class RandomOrderHSD:
    """HSD of one pattern under ``R`` random node orders.

    per_order: ``(R,)`` float64 average HSD over stages per order;
    max_flows: ``(R, K)`` int64 per order and stage; unroutable: ``(R,)`` int64.
    """

    pattern: str
    n: int
    per_order: np.ndarray
    max_flows: np.ndarray
    unroutable: np.ndarray

    @property
    def mean(self) -> float:
        return float(self.per_order.mean()) if len(self.per_order) else 0.0

    @property
    def min(self) -> float:
        return float(self.per_order.min()) if len(self.per_order) else 0.0

    @property
    def max(self) -> float:
        return float(self.per_order.max()) if len(self.per_order) else 0.0


def hsd_random_orders(
    view: RoutingView, paths: PairPaths, pattern: Pattern, rng: np.random.Generator,
    *, orders: int = 25, participants: npt.ArrayLike | None = None,
) -> RandomOrderHSD:
    """Zahavi's "random ranking average HSD": :func:`evaluate` ``pattern``
    under ``orders`` random orders of ``participants`` (``(N,)`` end-port
    indices, default all end-ports; ``N`` must equal ``pattern.n``)."""
    base = (np.arange(view.n_endports, dtype=np.int64) if participants is None
            else np.asarray(participants, dtype=np.int64))
    per, mf, un = [], [], []
    for _ in range(orders):
        m = evaluate(view, paths, pattern, rng.permutation(base))
        per.append(m.hsd_avg)
        mf.append(m.max_flows)
        un.append(m.total_unroutable)
    return RandomOrderHSD(
        pattern.name, pattern.n, np.asarray(per, dtype=np.float64),
        np.asarray(mf, dtype=np.int64).reshape(orders, pattern.n_stages),
        np.asarray(un, dtype=np.int64),
    )


def link_loads(view: RoutingView, paths: PairPaths, src_ep: npt.ArrayLike,
               dst_ep: npt.ArrayLike) -> tuple[IntArray, int]:
    """Flows per directed link for flows ``src_ep[i] -> dst_ep[i]`` (end-port
    indices): ``((n_links,) int64, unroutable count)``; self flows skipped."""
    s = np.asarray(src_ep, dtype=np.int64)
    d = np.asarray(dst_ep, dtype=np.int64)
    net = s != d
    s, d = s[net], d[net]
    pair = view.ep_leaf_row[s] * paths.n_endports + d
    ok = paths.status[pair] == OK
    keys = np.concatenate([
        paths.gather(pair[ok]).ravel(), view.inj_link[s[ok]], view.deliver_link[d[ok]],
    ]).astype(np.int64) + 1
    loads = np.bincount(keys, minlength=paths.n_links + 1)[1:].astype(np.int64)
    return loads, int((~ok).sum())


# =========================================================================== A2A
@dataclass(frozen=True, eq=False)
class A2ARisk:
    """All-to-all congestion risk.

    n_src / n_dst / risk: ``(n_links,)`` int64 distinct sources, distinct
    destinations and ``min`` of both per link; value: max of ``risk``;
    link: a link id reaching it (-1 if none); flows: ``N (N-1)``;
    unroutable: flows not delivered.
    """

    n: int
    n_src: IntArray
    n_dst: IntArray
    risk: IntArray
    value: int
    link: int
    flows: int
    unroutable: int


def a2a_risk(view: RoutingView, paths: PairPaths,
             participants: npt.ArrayLike | None = None) -> A2ARisk:
    """A2A congestion risk among ``participants`` (end-port indices, default all).

    Vectorized over the (leaf, destination) paths: the sources of a link are
    the participants on the leaves whose path to some other participant
    crosses it; its destinations the participants whose path from some leaf
    with another participant crosses it.  Injection and delivery links have
    one source or one destination, so their risk is at most 1."""
    n_lv, n_ep, nl = paths.n_leaves, paths.n_endports, paths.n_links
    p = (np.arange(n_ep, dtype=np.int64) if participants is None
         else np.unique(np.asarray(participants, dtype=np.int64)))
    n = len(p)
    h = paths.links.shape[1]
    links3 = paths.links.reshape(n_lv, n_ep, h)
    leaf_of = view.ep_leaf_row[p]
    n_on = np.bincount(leaf_of, minlength=n_lv)
    single = np.full(n_lv, -1, dtype=np.int64)
    single[leaf_of] = p
    rows = np.flatnonzero(n_on > 0)
    # valid (leaf, dest) pairs: some participant on the leaf other than dest
    valid = ~((n_on[rows] == 1)[:, None] & (single[rows][:, None] == p[None, :]))
    st = paths.status.reshape(n_lv, n_ep)[np.ix_(rows, p)]
    ok = valid & (st == OK)
    on_leaf = leaf_of[None, :] == rows[:, None]  # dest sits on the source leaf
    senders = n_on[rows][:, None] - on_leaf  # sources on the leaf that send to d
    unroutable = int(np.where(valid & ~ok, senders, 0).sum())

    nsrc = np.zeros(nl + 1, dtype=np.int64)
    ndst = np.zeros(nl + 1, dtype=np.int64)
    # sources per link, by chunks of leaves
    cl = max(1, _BATCH_ELEMS // max(n * h, 1))
    for a in range(0, len(rows), cl):
        r = rows[a:a + cl]
        c = len(r)
        lk = np.where(ok[a:a + c, :, None], links3[np.ix_(r, p)], -1)
        keys = ((np.arange(c) * (nl + 1))[:, None, None] + lk + 1).ravel()
        cnt = np.bincount(keys, minlength=c * (nl + 1)).reshape(c, nl + 1)
        dsum = np.bincount(keys, weights=np.broadcast_to(
            p[None, :, None].astype(np.float64), lk.shape).ravel(),
            minlength=c * (nl + 1)).reshape(c, nl + 1)
        d1 = np.where(cnt == 1, dsum, 0).astype(np.int64)
        self_one = (cnt == 1) & (view.ep_leaf_row[d1] == r[:, None])
        contrib = np.where(cnt >= 1, n_on[r][:, None] - self_one, 0)
        nsrc += contrib.sum(axis=0)
    # destinations per link, by chunks of destinations
    cd = max(1, min(_BATCH_ELEMS // max(len(rows) * h, 1), _BATCH_BINS // (nl + 1)))
    for a in range(0, n, cd):
        cols = p[a:a + cd]
        c = len(cols)
        lk = np.where(ok[:, a:a + c, None], links3[np.ix_(rows, cols)], -1)
        mark = np.zeros((nl + 1) * c, dtype=bool)
        mark[((lk + 1) * c + np.arange(c)[None, :, None]).ravel()] = True
        ndst += mark.reshape(nl + 1, c).sum(axis=1)
    nsrc, ndst = nsrc[1:], ndst[1:]
    # delivery links: one destination, the sources that reach it
    reach = np.where(ok, senders, 0).sum(axis=0)
    dl = view.deliver_link[p]
    nsrc[dl] = reach
    ndst[dl] = (reach > 0).astype(np.int64)
    # injection links: one source, the destinations it reaches
    n_ok = ok.sum(axis=1)[np.searchsorted(rows, leaf_of)] - ok[
        np.searchsorted(rows, leaf_of), np.arange(n)]
    inj = view.inj_link[p]
    nsrc[inj] = (n_ok > 0).astype(np.int64)
    ndst[inj] = n_ok
    risk = np.minimum(nsrc, ndst)
    value = int(risk.max()) if len(risk) else 0
    return A2ARisk(
        n=n, n_src=nsrc, n_dst=ndst, risk=risk, value=value,
        link=int(np.argmax(risk)) if value > 0 else -1,
        flows=n * (n - 1), unroutable=unroutable,
    )


# =========================================================================== RP / SP
def rp_risk(view: RoutingView, paths: PairPaths, order: npt.ArrayLike,
            rng: np.random.Generator, *, samples: int = 1000,
            progress: Callable[[int, int], None] | None = None) -> StageMetrics:
    """Congestion risk of ``samples`` random permutations of the participants
    in ``order``; the RP value is ``.risk_median``."""
    o = _check_order(view, order)
    return evaluate(view, paths, random_permutations(len(o), rng, samples), o,
                    progress=progress)


def sp_risk(view: RoutingView, paths: PairPaths, order: npt.ArrayLike, *,
            progress: Callable[[int, int], None] | None = None) -> StageMetrics:
    """Congestion risk of the ``N - 1`` shift permutations of ``order``; the SP
    value is ``.risk_max``."""
    o = _check_order(view, order)
    return evaluate(view, paths, shifts(len(o)), o, progress=progress)


@dataclass(frozen=True, eq=False)
class CongestionRisk:
    """Gliksberg's three summary values with their details."""

    a2a: A2ARisk
    rp: StageMetrics
    sp: StageMetrics
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, float]:
        return {"A2A": float(self.a2a.value), "RP": self.rp.risk_median,
                "SP": float(self.sp.risk_max)}

    @property
    def unroutable(self) -> dict[str, int]:
        return {"A2A": self.a2a.unroutable, "RP": self.rp.total_unroutable,
                "SP": self.sp.total_unroutable}


def congestion_risk(view: RoutingView, paths: PairPaths, order: npt.ArrayLike,
                    rng: np.random.Generator, *, samples: int = 1000) -> CongestionRisk:
    """A2A (over the participants of ``order``), RP (``samples`` permutations,
    median) and SP (shifts of ``order``, max)."""
    o = _check_order(view, order)
    return CongestionRisk(
        a2a=a2a_risk(view, paths, o),
        rp=rp_risk(view, paths, o, rng, samples=samples),
        sp=sp_risk(view, paths, o),
    )
