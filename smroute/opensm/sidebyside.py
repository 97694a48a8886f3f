"""OpenSM's routing engines and Dmodc side by side on one fabric (edge module).

:func:`run_side_by_side` boots the real ``ibsim`` on a fabric **once**, runs
the real OpenSM once per engine against it (each run dumps
``opensm-lfts.dump`` and logs its routing time), then discovers the fabric
with the real ``ibnetdiscover`` -- OpenSM assigned the LIDs, so Dmodc routes
this discovered view and every table set addresses the same LIDs -- routes
it with Dmodc and computes every metric of :mod:`smroute.analysis.compare`
for all of them.

An engine that fails (OpenSM exits with an error, times out, finds no route,
or falls back to another engine) is recorded as such in its
:class:`EngineRun` and gets no metrics; nothing is raised for it.

OpenSM keeps the LIDs it finds on the ports (its first run assigns them), so
all runs share one LID assignment; :func:`run_side_by_side` checks this by
comparing every dump's switch LIDs with the discovered ones.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from smroute.analysis.compare import CompareConfig, TableMetrics, compare_tables
from smroute.analysis.paths import routing_view
from smroute.analysis.patterns import topological_order_from
from smroute.errors import RoutingError, SmrouteError
from smroute.fabric.ibnetdiscover import parse_topology
from smroute.fabric.model import Fabric
from smroute.fabric.summary import components
from smroute.fabric.writers import write_ibsim_net
from smroute.fileio import read_lines
from smroute.opensm.sim import (
    DEFAULT_LOG_FLAGS,
    IbSim,
    ToolTimeoutError,
    ibnetdiscover,
    run_opensm,
)
from smroute.routing.engine import route
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import ForwardingTables

__all__ = [
    "OPENSM_ENGINES",
    "ENGINES",
    "EngineRun",
    "SideBySide",
    "sm_node",
    "strip_lids",
    "run_opensm_engines",
    "run_side_by_side",
]

#: OpenSM engines compared (those meant for fat-trees or any topology).
OPENSM_ENGINES = ("ftree", "updn", "minhop", "dfsssp", "sssp")
#: Every engine name :func:`run_side_by_side` accepts.
ENGINES = ("dmodc", *OPENSM_ENGINES)
#: OpenSM log flags used: 0x47 = ERROR | INFO | VERBOSE (routing-time
#: markers) | ROUTING (writes opensm-lfts.dump); includes the issue's 0x43.
LOG_FLAGS = DEFAULT_LOG_FLAGS


@dataclass
class EngineRun:
    """One engine's run.

    status: ``"ok"``, ``"failed"`` (error text in ``error``) or ``"timeout"``;
    routing_seconds: the routing phase (OpenSM: from its log; Dmodc: its
    timings); wall_seconds: the whole run (OpenSM: sweep under ibsim).
    """

    engine: str
    status: str = "ok"
    error: str = ""
    tables: ForwardingTables | None = None
    routing_seconds: float | None = None
    wall_seconds: float = 0.0


@dataclass
class SideBySide:
    """Result of :func:`run_side_by_side`.

    fabric: the discovered fabric (``None`` if discovery failed); runs:
    engine -> :class:`EngineRun` in the requested order; order: the node
    order (``(N,)`` int64 end-port indices) the patterns used and
    ``order_kind`` (``"dmodc"``: Dmodc's topological NIDs, ``"ports"``:
    end-port index order when Dmodc failed); metrics: engine ->
    :class:`~smroute.analysis.compare.TableMetrics` for engines with tables.
    """

    fabric: Fabric | None
    runs: dict[str, EngineRun]
    order: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    order_kind: str = ""
    metrics: dict[str, TableMetrics] = field(default_factory=dict)
    error: str = ""


def _first_line(text: str) -> str:
    """First line of an error, without the (deleted) scratch paths it names."""
    return re.sub(r"\s*\((?:log|see): [^)]*\)", "", text.splitlines()[0] if text else "")


def strip_lids(f: Fabric) -> Fabric:
    """``f`` without LIDs/LMCs, so that OpenSM assigns every LID itself."""
    z16, z8 = np.zeros_like(f.port_lid), np.zeros_like(f.port_lmc)
    z16.setflags(write=False)
    z8.setflags(write=False)
    return dataclasses.replace(f, port_lid=z16, port_lmc=z8, _cache={})


def sm_node(f: Fabric) -> int:
    """A CA node in the connected component holding the most CAs (where OpenSM
    and the diags attach), or the first node if there is no linked CA."""
    pn = f.port_node
    lab = components(f.n_nodes, pn[f.link_a], pn[f.link_b])
    cas = f.cas
    linked = np.zeros(f.n_nodes, dtype=bool)
    linked[pn[f.link_a]] = True
    linked[pn[f.link_b]] = True
    cas = cas[linked[cas]]
    if not len(cas):
        return 0
    vals, counts = np.unique(lab[cas], return_counts=True)
    best = vals[np.argmax(counts)]
    return int(cas[lab[cas] == best][0])


def _check_lids(tables: ForwardingTables, disc: Fabric) -> str:
    """'' if every switch LID of ``tables`` matches the discovered fabric."""
    sw = disc.switches
    lid_of = {int(g): int(disc.port_lid[disc.port_start[n]])
              for g, n in zip(disc.node_guid[sw].tolist(), sw.tolist(), strict=True)}
    for g, lid in zip(tables.switch_guid.tolist(), tables.switch_lid.tolist(), strict=True):
        if int(g) in lid_of and lid_of[int(g)] != int(lid):
            return (f"switch {int(g):#018x} has LID {int(lid)} in the dump but "
                    f"{lid_of[int(g)]} in ibnetdiscover: LIDs changed between runs")
    return ""


def run_opensm_engines(
    fabric: Fabric,
    workdir: str | Path,
    engines: Sequence[str],
    *,
    lmc: int = 0,
    timeout: float = 600.0,
    linear_cap: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Fabric, dict[str, EngineRun]]:
    """Boot ``ibsim`` on ``fabric`` once (LIDs stripped: OpenSM assigns them),
    run the real OpenSM once per engine of ``engines`` (OpenSM names, with
    ``lmc``), then discover the fabric with ``ibnetdiscover``.

    ``workdir`` receives the net file, ibsim's log and one directory per
    engine.  Returns the discovered fabric and engine -> :class:`EngineRun`
    (tables read from ``opensm-lfts.dump``; failures, time-outs and fallbacks
    to another engine recorded, not raised).  Raises
    :class:`~smroute.opensm.sim.ToolError` if ibsim or ibnetdiscover fail.
    """
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    net = wd / "fabric.net"
    write_ibsim_net(strip_lids(fabric), net, sm_node=sm_node(fabric))
    runs = {e: EngineRun(e) for e in engines}
    with IbSim(net, wd, linear_cap=linear_cap) as sim:
        for e, run in runs.items():
            t0 = clock()
            try:
                osm = run_opensm(sim, wd / e, engine=e, lmc=lmc, log_flags=LOG_FLAGS,
                                 timeout=timeout)
            except ToolTimeoutError as err:
                run.status, run.error = "timeout", str(err).splitlines()[0]
            except SmrouteError as err:
                run.status, run.error = "failed", _first_line(str(err))
            else:
                run.routing_seconds = osm.routing_seconds
                if osm.engine_used != e:
                    run.status = "failed"
                    run.error = f"OpenSM fell back to {osm.engine_used or 'no engine'}"
                else:
                    run.tables = parse_lft_dump(read_lines(osm.lfts), str(osm.lfts))
            run.wall_seconds = clock() - t0
        disc = parse_topology(ibnetdiscover(sim), "ibnetdiscover")
    return disc, runs


def run_side_by_side(
    fabric: Fabric,
    workdir: str | Path,
    rng: np.random.Generator,
    *,
    engines: Sequence[str] = ENGINES,
    config: CompareConfig | None = None,
    opensm_timeout: float = 600.0,
    clock: Callable[[], float] = time.monotonic,
) -> SideBySide:
    """Route ``fabric`` with every engine of ``engines`` and compare them.

    ``workdir`` receives the net file, ibsim's log and one directory per
    OpenSM engine (its conf, log and dumps).  ``rng`` draws the random
    permutations and orders of the metrics (shared by all engines).
    Raises :class:`~smroute.opensm.sim.ToolError` only if ibsim or
    ibnetdiscover fail (the fabric cannot be simulated); engine failures are
    recorded in the result.
    """
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        raise SmrouteError(f"unknown engine(s) {', '.join(bad)}; "
                           f"expected some of {', '.join(ENGINES)}")
    disc, osm_runs = run_opensm_engines(fabric, workdir, [e for e in engines if e != "dmodc"],
                                        timeout=opensm_timeout, clock=clock)
    runs = {e: osm_runs.get(e) or EngineRun(e) for e in engines}
    out = SideBySide(fabric=disc, runs=runs)
    for e in engines:
        t = runs[e].tables
        if t is not None:
            msg = _check_lids(t, disc)
            if msg:
                runs[e].status, runs[e].error, runs[e].tables = "failed", msg, None

    order: npt.NDArray[np.int64] | None = None
    try:
        t0 = clock()
        res = route(disc, workers=1, labels=False)
        dm_seconds = clock() - t0
    except SmrouteError as err:
        if "dmodc" in runs:
            runs["dmodc"].status, runs["dmodc"].error = "failed", str(err).splitlines()[0]
    else:
        if "dmodc" in runs:
            runs["dmodc"].tables = res.tables
            runs["dmodc"].routing_seconds = res.total_seconds
            runs["dmodc"].wall_seconds = dm_seconds
        view = routing_view(disc, res.tables)
        order = topological_order_from(view, res.graph.ep_row, res.nids)
        out.order_kind = "dmodc"
    tables = {e: r.tables for e, r in runs.items() if r.tables is not None}
    if order is None:
        any_t = next(iter(tables.values()), None)
        if any_t is None:
            out.error = "no engine produced tables"
            return out
        order = np.arange(routing_view(disc, any_t).n_endports, dtype=np.int64)
        out.order_kind = "ports"
    out.order = order
    try:
        metrics = compare_tables(disc, tables, order, rng, config)
    except (RoutingError, ValueError) as err:  # pragma: no cover - defensive
        out.error = f"analysis failed: {err}"
        return out
    out.metrics = {m.name: m for m in metrics}
    return out

