"""Every routing-quality metric for several table sets on one fabric (pure core).

Given a fabric, named :class:`~smroute.tables.lft.ForwardingTables` (e.g.
Dmodc's and the ones OpenSM's engines dumped) and one node order,
:func:`compare_tables` computes for each table set:

* Gliksberg's congestion risk: A2A (max over links), RP (median over
  ``rp_samples`` random permutations of the per-permutation max) and SP (max
  over the ``N - 1`` shifts), with the flows each pattern could not deliver;
* Zahavi's hot-spot degree (HSD, most flows on one link per stage, averaged
  over the stages) of the collective permutation sequences
  (:data:`smroute.analysis.patterns.CPS`) in the given (topological) order
  and averaged over ``random_orders`` random orders.

Fairness: every table set sees exactly the same flows -- the same order, the
same random permutations and the same random orders, all drawn once from the
passed generator -- so differences come from the tables alone.  End-port
indices depend on the fabric only (:mod:`smroute.analysis.paths`), so one
order serves every view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from smroute.analysis import patterns as P
from smroute.analysis.congestion import a2a_risk, congestion_risk, evaluate
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.model.arrays import Fabric
from smroute.tables.lft import ForwardingTables

__all__ = ["CompareConfig", "TableMetrics", "analyze_tables", "compare_tables", "metric_names"]


@dataclass(frozen=True)
class CompareConfig:
    """What :func:`compare_tables` computes.

    rp_samples: random permutations for RP (Gliksberg: 1000);
    random_orders: random node orders the CPS HSD is averaged over (0: none);
    cps: names of the CPS whose HSD is reported (subset of ``patterns.CPS``).
    """

    rp_samples: int = 1000
    random_orders: int = 3
    cps: tuple[str, ...] = P.CPS

    def __post_init__(self) -> None:
        if self.rp_samples < 1:
            raise ValueError("rp_samples must be >= 1")
        if self.random_orders < 0:
            raise ValueError("random_orders must be >= 0")
        bad = [c for c in self.cps if c not in P.CPS]
        if bad:
            raise ValueError(f"unknown CPS {bad}; expected some of {P.CPS}")


def metric_names(config: CompareConfig) -> list[str]:
    """Names of the float metrics of :attr:`TableMetrics.values`, in order."""
    names = ["a2a", "rp", "sp", "hsd_topo", "hsd_random"]
    names += [f"hsd_topo_{c}" for c in config.cps]
    if config.random_orders:
        names += [f"hsd_random_{c}" for c in config.cps]
    return names


@dataclass(frozen=True)
class TableMetrics:
    """The metrics of one table set.

    name: the table set's name (e.g. ``"dmodc"``, ``"ftree"``);
    hosts: participants (end-ports in the order);
    values: metric name -> value (see :func:`metric_names`; ``hsd_topo`` and
    ``hsd_random`` are the averages over the CPS of the per-CPS averages;
    ``nan`` where undefined, e.g. no random orders);
    unroutable: ``pairs`` (ordered end-port pairs of the A2A not delivered:
    dead ends or loops), ``rp`` and ``sp`` (flows of those patterns not
    delivered, summed over their stages);
    hot_link: a description of a link reaching the A2A risk ('' if none);
    random_order_hsd: per random order, the HSD averaged over the CPS
    (``hsd_random`` is their mean; their spread gives its standard error).
    """

    name: str
    hosts: int
    values: dict[str, float]
    unroutable: dict[str, int]
    hot_link: str = ""
    random_order_hsd: tuple[float, ...] = ()


def compare_tables(
    fabric: Fabric,
    tables: Mapping[str, ForwardingTables],
    order: npt.ArrayLike,
    rng: np.random.Generator,
    config: CompareConfig | None = None,
) -> list[TableMetrics]:
    """Metrics of every table set in ``tables`` (in their mapping order).

    ``order``: ``(N,)`` int64 end-port indices of the fabric's routing view
    (e.g. :func:`smroute.analysis.patterns.topological_order_from` on Dmodc's
    NIDs); participants are those end-ports.  ``rng`` draws the RP
    permutations and the random orders once, shared by all table sets.
    """
    cfg = config or CompareConfig()
    o = np.asarray(order, dtype=np.int64)
    n = len(o)
    rp_pattern = P.random_permutations(n, rng, cfg.rp_samples)
    rand_orders = [rng.permutation(o) for _ in range(cfg.random_orders)]
    cps_patterns = {c: P.cps(c, n) for c in cfg.cps} if n >= 2 else {}
    out = []
    for name, t in tables.items():
        view = routing_view(fabric, t)
        paths = pair_paths(view)
        a2a = a2a_risk(view, paths, o)
        rp = evaluate(view, paths, rp_pattern, o)
        values: dict[str, float] = {"a2a": float(a2a.value), "rp": rp.risk_median}
        sp_unroutable = 0
        topo: dict[str, float] = {}
        rand: dict[str, float] = {}
        per_order: list[list[float]] = []
        for c, pat in cps_patterns.items():
            m = evaluate(view, paths, pat, o)
            topo[c] = m.hsd_avg
            if c == "shift":  # SP is the shift CPS in this order
                values["sp"] = float(m.risk_max)
                sp_unroutable = m.total_unroutable
            if rand_orders:
                per_order.append([evaluate(view, paths, pat, ro).hsd_avg for ro in rand_orders])
                rand[c] = float(np.mean(per_order[-1]))
        if "sp" not in values:
            sp = evaluate(view, paths, P.shifts(n), o) if n >= 2 else None
            values["sp"] = float(sp.risk_max) if sp is not None else 0.0
            sp_unroutable = sp.total_unroutable if sp is not None else 0
        values["hsd_topo"] = float(np.mean(list(topo.values()))) if topo else float("nan")
        values["hsd_random"] = float(np.mean(list(rand.values()))) if rand else float("nan")
        for c in cfg.cps:
            values[f"hsd_topo_{c}"] = topo.get(c, float("nan"))
            if cfg.random_orders:
                values[f"hsd_random_{c}"] = rand.get(c, float("nan"))
        out.append(TableMetrics(
            name=name, hosts=n, values={k: values[k] for k in metric_names(cfg)},
            unroutable={"pairs": a2a.unroutable, "rp": rp.total_unroutable,
                        "sp": sp_unroutable},
            hot_link=view.describe_link(a2a.link) if a2a.link >= 0 else "",
            random_order_hsd=tuple(np.mean(per_order, axis=0).tolist()) if per_order else (),
        ))
    return out


def analyze_tables(fabric: Fabric, tables: ForwardingTables, ep_row: np.ndarray,
                   nids: np.ndarray, order: str, seed: int, samples: int) -> dict[str, Any]:
    """Gliksberg's congestion risk (A2A, RP median over ``samples`` random
    permutations, SP max) and the SP hot-spot degree of ``tables`` on
    ``fabric``, participants in Dmodc's topological order (``ep_row`` /
    ``nids`` of the routing) or a random one; ``seed`` seeds the generator.
    Returns the daemon's AnalyzeResponse fields (it runs this in its analysis
    process)."""

    rng = np.random.default_rng(seed)
    view = routing_view(fabric, tables)
    paths = pair_paths(view)
    o = (P.topological_order_from(view, ep_row, nids) if order == "topological"
         else P.random_order(view, rng))
    risk = congestion_risk(view, paths, o, rng, samples=samples)
    return dict(
        end_ports=view.n_endports, a2a_risk=int(risk.a2a.value),
        rp_risk_median=risk.rp.risk_median, sp_risk_max=risk.sp.risk_max,
        sp_hsd_avg=risk.sp.hsd_avg, sp_hsd_max=risk.sp.hsd_max,
        unroutable_a2a=risk.unroutable["A2A"], unroutable_rp=risk.unroutable["RP"],
        unroutable_sp=risk.unroutable["SP"],
    )
