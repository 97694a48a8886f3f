"""MPI rank order for a job: the routing's topological order of its hosts.

Zahavi (Theorems 1-2, section V) shows that D-mod-K routing with the MPI ranks
placed in the tree's node-index order makes every shift permutation -- and so
every unidirectional collective permutation sequence (CPS) -- contention-free
on a complete fat-tree, and on contiguous allocations of ``i * prod(w)``
hosts; Dmodc's topological NIDs (Alg. 2) give that order on any tree.  So a
job's ranks are ordered by the NIDs of the routing
(:class:`~smroute.routing.engine.RoutingResult` ``nids``, aligned with
``graph.ep_row``), restricted to the job's hosts.

Hosts and end-ports
-------------------
A job lists one host per line (:func:`~smroute.analysis.patterns.parse_job`).
:func:`resolve_hosts` maps each line to one end-port:

* an exact CA node description, or a node / port GUID (``0x...``), names that
  CA's first port (or that port), as :func:`~smroute.analysis.patterns.resolve_job`;
* otherwise a **host name**: the CAs whose node description has rdma-ndd's
  form ``"HOST DEVICE"`` (two words, the device name starting with a letter:
  ``node7 mlx5_0``, ``node7 HCA-1``) belong to host ``HOST``.  A host with
  several HCAs is listed once and placed by its **first** HCA port: device
  names in natural order (``mlx5_2`` before ``mlx5_10``), then port number.
  That is the end-port an MPI rank uses by default, and the one the HSD is
  computed for.

:func:`host_label` gives the name written to a hostfile: ``HOST`` for a CA
whose description has that form, else the job line as written.

Choosing the order
------------------
:func:`rank_order` evaluates Zahavi's hot-spot degree (HSD: most flows on one
link in a stage) of the shift CPS under the input order and under the
topological order, by following the tables (:func:`~smroute.analysis.congestion.evaluate`
over the paths of the job's leaves to the job's end-ports only, see
:func:`job_paths`).  The **main metric** is the shift CPS's HSD averaged over
its ``n - 1`` stages (the metric of Zahavi's Table 3); ties are broken by the
shift's worst stage, then by the mean over the other CPS of their average HSD.
The topological order is taken unless it is worse by that key; then the input
order is kept (e.g. on a degraded fabric where the NIDs no longer match the
routes) and the result says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smroute.analysis.congestion import StageMetrics, evaluate
from smroute.analysis.jobs import host_finder
from smroute.analysis.paths import PairPaths, RoutingView, pair_paths
from smroute.analysis.patterns import CPS, cps
from smroute.errors import InputError

__all__ = [
    "MAIN_CPS",
    "RankOrder",
    "resolve_hosts",
    "host_label",
    "endport_nids",
    "nid_order",
    "job_paths",
    "cps_hsd",
    "rank_order",
]

IntArray = npt.NDArray[np.int64]

#: The CPS whose average HSD decides between the orders (the report's main metric).
MAIN_CPS = "shift"
_HOST_DEV = re.compile(r"^(\S+) ([A-Za-z][A-Za-z0-9_.-]*)$")
_EPS = 1e-9


# =========================================================================== hosts
def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting ``mlx5_2`` before ``mlx5_10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p)
                 for p in re.split(r"(\d+)", text) if p)


def _host_index(view: RoutingView) -> dict[str, int]:
    """Host name -> its first end-port, for CAs described ``"HOST DEVICE"``."""
    f = view.fabric
    best: dict[str, tuple[tuple[tuple[int, int | str], ...], int, int]] = {}
    for e, node in enumerate(view.ep_node.tolist()):
        m = _HOST_DEV.match(f.node_desc[node])
        if m is None:
            continue
        key = (_natural(m.group(2)), int(f.port_num[view.ep_row[e]]), e)
        host = m.group(1)
        if host not in best or key < best[host]:
            best[host] = key
    return {h: k[2] for h, k in best.items()}


def resolve_hosts(view: RoutingView, entries: Sequence[tuple[int, str]],
                  source: str = "<job>") -> IntArray:
    """End-port ``(n,)`` int64 of each ``(line, host)`` entry (module doc:
    node description, GUID, or host name), in the job's order.  Unknown and
    repeated hosts raise :class:`~smroute.errors.InputError` naming ``source``
    and the line."""
    find = host_finder(view)
    hosts: dict[str, int] | None = None
    seen: dict[int, int] = {}
    for no, h in entries:
        try:
            e = find(h)
        except InputError as err:
            if h.lower().startswith("0x"):
                raise InputError(err.message, source=source, line=no) from None
            if hosts is None:
                hosts = _host_index(view)
            if h not in hosts:
                raise InputError(f"no CA with node description or host name {h!r}",
                                 source=source, line=no) from None
            e = hosts[h]
        if e in seen:
            raise InputError(f"host {h!r} listed twice (first on line {seen[e]})",
                             source=source, line=no)
        seen[e] = no
    return np.fromiter(seen, dtype=np.int64, count=len(seen))


def host_label(view: RoutingView, ep: int, written: str) -> str:
    """The name of end-port ``ep``'s host for a hostfile: ``HOST`` if its CA
    is described ``"HOST DEVICE"``, else ``written`` (the job line)."""
    m = _HOST_DEV.match(view.fabric.node_desc[int(view.ep_node[ep])])
    return m.group(1) if m else written


# =========================================================================== order
def endport_nids(view: RoutingView, ep_row: npt.ArrayLike, nids: npt.ArrayLike) -> IntArray:
    """The NID ``(E,)`` int64 of every end-port of ``view`` from a routing's
    ``graph.ep_row`` and ``nids`` (-1 for an end-port the routing has no NID for)."""
    eps = view.endports_of_rows(ep_row)
    t = np.asarray(nids, dtype=np.int64)
    out = np.full(view.n_endports, -1, dtype=np.int64)
    keep = eps >= 0
    out[eps[keep]] = t[keep]
    return out


def nid_order(ports: npt.ArrayLike, nid_of: npt.ArrayLike) -> IntArray:
    """Positions ``(n,)`` int64 of the job's end-ports ``ports`` sorted by
    NID (``nid_of``, ``(E,)``); ports without a NID keep their relative order,
    after the others."""
    p = np.asarray(ports, dtype=np.int64)
    t = np.asarray(nid_of, dtype=np.int64)[p]
    key = np.where(t < 0, np.iinfo(np.int64).max, t)
    return np.argsort(key, kind="stable").astype(np.int64)


def job_paths(view: RoutingView, ports: npt.ArrayLike) -> tuple[RoutingView, PairPaths,
                                                                 IntArray]:
    """The view restricted to the job's end-ports ``ports`` ``(n,)`` and the
    paths of its leaves to them: ``(sub_view, paths, local)``, ``local``
    ``(n,)`` int64 the sub-view index of each port.

    Only the job's (leaf, end-port) pairs are walked (56 leaves x 1,000
    end-ports instead of 648 x 11,664 for a 1,000-host job on the 11,664-host
    tree).  Link ids are the full view's; the sub-view serves permutation
    patterns (:func:`~smroute.analysis.congestion.evaluate`), which read
    only the paths' core links."""
    p = np.asarray(ports, dtype=np.int64)
    sp = np.sort(p)  # end-port order = (leaf, leaf port) order, as in the view
    local = np.searchsorted(sp, p).astype(np.int64)
    leaf_u, leaf_row = np.unique(view.ep_leaf_row[sp], return_inverse=True)
    remap = np.full(view.n_endports + 1, -1, dtype=np.int32)
    remap[sp] = np.arange(len(sp), dtype=np.int32)
    ep_at = remap[view.ep_at]  # -1 stays -1 (the extra last slot)
    ep_at.setflags(write=False)
    sub = dataclasses.replace(
        view, ep_row=view.ep_row[sp], ep_node=view.ep_node[sp], ep_guid=view.ep_guid[sp],
        ep_lid=view.ep_lid[sp], ep_leaf=view.ep_leaf[sp], ep_leaf_port=view.ep_leaf_port[sp],
        ep_leaf_row=leaf_row.reshape(-1).astype(np.int64), inj_link=view.inj_link[sp],
        deliver_link=view.deliver_link[sp], leaves=view.leaves[leaf_u], ep_at=ep_at)
    return sub, pair_paths(sub), local


def cps_hsd(view: RoutingView, paths: PairPaths, order: npt.ArrayLike,
            names: Sequence[str] = CPS) -> dict[str, StageMetrics]:
    """HSD per stage of each CPS in ``names`` with participant ``i`` on
    end-port ``order[i]`` (indices of ``view``)."""
    o = np.asarray(order, dtype=np.int64)
    return {name: evaluate(view, paths, cps(name, len(o)), o) for name in names}


@dataclass(frozen=True, eq=False)
class RankOrder:
    """The order chosen for a job.

    ports: ``(n,)`` int64 end-ports of the job lines, in input order.
    order: ``(n,)`` int64 input positions in the chosen order (rank ``r``
        runs on line ``order[r]``).
    topological: ``(n,)`` int64 input positions in NID order (chosen or not).
    kept_input: the topological order was worse, the input order is kept.
    reason: one sentence saying which order and why.
    before / topo: per CPS name, :class:`StageMetrics` of the input order and
        of the topological order (``before`` has every CPS evaluated, ``topo``
        at least the main one; both the same names).
    missing_nids: job end-ports the routing gave no NID (placed last).
    """

    ports: IntArray
    order: IntArray
    topological: IntArray
    kept_input: bool
    reason: str
    before: dict[str, StageMetrics]
    topo: dict[str, StageMetrics]
    missing_nids: int = 0

    @property
    def after(self) -> dict[str, StageMetrics]:
        """Metrics of the chosen order."""
        return self.before if self.kept_input else self.topo

    @property
    def unroutable(self) -> int:
        """Job flows of the main CPS the tables do not deliver (any order: the
        shift CPS sends every ordered pair once)."""
        return self.before[MAIN_CPS].total_unroutable if MAIN_CPS in self.before else 0


def _other_mean(m: dict[str, StageMetrics]) -> float:
    vals = [v.hsd_avg for k, v in m.items() if k != MAIN_CPS]
    return float(np.mean(vals)) if vals else 0.0


def _worse(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether key ``a`` is lexicographically worse (larger) than ``b``."""
    for x, y in zip(a, b, strict=True):
        if x > y + _EPS:
            return True
        if x < y - _EPS:
            return False
    return False


def rank_order(view: RoutingView, ports: npt.ArrayLike, nid_of: npt.ArrayLike, *,
               report: bool = False) -> RankOrder:
    """Order the job's end-ports ``ports`` ``(n,)`` (input order) by the NIDs
    ``nid_of`` ``(E,)`` (:func:`endport_nids`) unless that is worse than the
    input order (module doc).  ``report``: evaluate every CPS for both orders
    (else only what the decision needs)."""
    p = np.asarray(ports, dtype=np.int64)
    n = len(p)
    topo = nid_order(p, nid_of)
    missing = int((np.asarray(nid_of, dtype=np.int64)[p] < 0).sum())
    ident = np.arange(n, dtype=np.int64)
    if n < 2:
        return RankOrder(p, ident, topo, False, "a single host: nothing to order", {}, {},
                         missing)
    sub, paths, local = job_paths(view, p)
    first = (MAIN_CPS,) + tuple(c for c in CPS if c != MAIN_CPS) if report else (MAIN_CPS,)
    before = cps_hsd(sub, paths, local, first)
    same = bool(np.array_equal(topo, ident))
    after = before if same else cps_hsd(sub, paths, local[topo], first)
    b, a = before[MAIN_CPS], after[MAIN_CPS]
    kb: tuple[float, ...] = (b.hsd_avg, float(b.hsd_max))
    ka: tuple[float, ...] = (a.hsd_avg, float(a.hsd_max))
    if not same and not _worse(ka, kb) and not _worse(kb, ka) and not report:
        rest = tuple(c for c in CPS if c != MAIN_CPS)
        before.update(cps_hsd(sub, paths, local, rest))
        after.update(cps_hsd(sub, paths, local[topo], rest))
    kb, ka = (*kb, _other_mean(before)), (*ka, _other_mean(after))
    keep = not same and _worse(ka, kb)
    fmt = f"{MAIN_CPS} HSD avg {{:.3f}} max {{}}"
    if same:
        reason = "the input is already in topological order"
    elif keep:
        reason = ("kept the input order: the topological order would be worse ("
                  + fmt.format(a.hsd_avg, a.hsd_max) + " against the input's "
                  + fmt.format(b.hsd_avg, b.hsd_max) + ")")
    else:
        reason = ("topological order: " + fmt.format(a.hsd_avg, a.hsd_max)
                  + " (input order: " + fmt.format(b.hsd_avg, b.hsd_max) + ")")
    if missing:
        reason += f"; {missing} hosts without a NID placed last"
    return RankOrder(p, ident if keep else topo, topo, keep, reason, before, after, missing)
