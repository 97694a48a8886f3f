"""OpenSM's routing engines and Dmodc side by side on one fabric (edge module).

:func:`run_side_by_side` boots the real ``ibsim`` on a fabric **once**, runs
the real OpenSM once per engine against it (each run dumps
``opensm-lfts.dump`` and logs its routing time), then discovers the fabric
with the real ``ibnetdiscover`` -- OpenSM assigned the LIDs, so Dmodc routes
this discovered view and every table set addresses the same LIDs -- routes
it with Dmodc (and Nmodc when asked) and computes every metric of
:mod:`smroute.analysis.compare` for all of them.

Any fabric: a generated one is written as an ibsim net file; a real capture
can be booted as it is (``capture=``), with a fall-back to the written file
when ibsim cannot read it or reads another fabric (see
:mod:`smroute.lab.simnet`).  What the subnet manager cannot reach (the
other parts of a partitioned fabric) is reported in
:attr:`SideBySide.partition`.

Failures are recorded, never raised: an engine that fails (OpenSM exits with
an error, times out, finds no route, or falls back to another engine -- with
OpenSM's ``ERR`` message saying why) is recorded in its :class:`EngineRun`
and gets no metrics; a fabric that cannot be simulated (no net file can be
written, ibsim or ibnetdiscover fail) gives every engine the status
``"error"`` and :attr:`SideBySide.error` the reason.

Hosts: the traffic patterns run between every linked end-port of the
discovered fabric except SHARP aggregation nodes
(:attr:`~smroute.fabric.roles.FabricRoles.hosts_mask`), in Dmodc's
topological order (its NIDs) when Dmodc routed the fabric, else in
port-GUID order.

OpenSM keeps the LIDs it finds on the ports (its first run assigns them), so
all runs share one LID assignment; :func:`run_side_by_side` checks this by
comparing every dump's switch LIDs with the discovered ones.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from smroute.analysis.compare import CompareConfig, TableMetrics, compare_tables
from smroute.analysis.paths import RoutingView, routing_view
from smroute.analysis.patterns import topological_order_from
from smroute.errors import RoutingError, SmrouteError
from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import fabric_roles
from smroute.fileio import read_lines
from smroute.lab.sim import (
    DEFAULT_LOG_FLAGS,
    IBSIM_DEFAULT_LINEAR_CAP,
    IbSim,
    ToolError,
    ToolTimeoutError,
    ibnetdiscover,
    run_opensm,
)
from smroute.lab.simnet import (
    capture_sim_host,
    discovery_gap,
    opensm_error,
    simulable,
    sm_node,
    sm_part,
    strip_lids,
)
from smroute.routing import api
from smroute.routing.engine import route
from smroute.tables.formats import parse_lft_dump
from smroute.tables.lft import ForwardingTables

__all__ = [
    "OPENSM_ENGINES",
    "SMROUTE_ENGINES",
    "ENGINES",
    "DEFAULT_ENGINES",
    "EngineRun",
    "SideBySide",
    "Simulation",
    "sm_node",
    "strip_lids",
    "simulate",
    "run_opensm_engines",
    "run_side_by_side",
]

#: OpenSM engines compared (those meant for fat-trees or any topology; not
#: dor and torus-2QoS, which are for meshes and tori).
OPENSM_ENGINES = ("ftree", "updn", "dnup", "minhop", "dfsssp", "sssp", "nue", "lash")
#: smroute's own engines (routed in-process on the discovered fabric): the
#: registry's, the default (the reference, one VL) first.
SMROUTE_ENGINES = (api.DEFAULT, *(e for e in api.names() if e != api.DEFAULT))
#: Every engine name :func:`run_side_by_side` accepts.
ENGINES = (*SMROUTE_ENGINES, *OPENSM_ENGINES)
#: The study's engines unless asked otherwise: smroute's (the default first,
#: then Dmodc, the paper, which the default must not lose against) and
#: OpenSM's; dnup, nue and lash on request (a light throw of the 1,728-host
#: study tree: lash 44 s, nue 17 s, dnup 4 s under ibsim).
DEFAULT_ENGINES = (*SMROUTE_ENGINES, "ftree", "updn", "minhop", "dfsssp", "sssp")
#: OpenSM log flags used: 0x47 = ERROR | INFO | VERBOSE (routing-time
#: markers) | ROUTING (writes opensm-lfts.dump); includes the issue's 0x43.
LOG_FLAGS = DEFAULT_LOG_FLAGS
#: ibsim's LFT size when a fabric needs LIDs above its default (all unicast LIDs).
_FULL_LINEAR_CAP = 0xC000


@dataclass
class EngineRun:
    """One engine's run.

    status: ``"ok"``, ``"failed"`` (error text in ``error``), ``"timeout"`` or
    ``"error"`` (not run: the fabric could not be simulated); fallback: the
    engine OpenSM fell back to (status ``"failed"``), else ``''``; note:
    Dmodc's routing mode and why (``"tree"``, ``"updown: <reason>"``);
    routing_seconds: the routing phase (OpenSM: from its log; Dmodc: its
    timings); wall_seconds: the whole run (OpenSM: sweep under ibsim).
    """

    engine: str
    status: str = "ok"
    error: str = ""
    tables: ForwardingTables | None = None
    routing_seconds: float | None = None
    wall_seconds: float = 0.0
    fallback: str = ""
    note: str = ""


@dataclass
class Simulation:
    """What :func:`simulate` did: the discovered fabric, the OpenSM runs, the
    net file used (``net_source``: ``"capture"``, ``"written"``, or ``"none"``
    when only smroute's engines ran and nothing was simulated), notes
    (e.g. why the capture was not used) and the unreachable part
    (``partition``, ``''`` if none; see :func:`~smroute.lab.simnet.discovery_gap`)."""

    fabric: Fabric
    runs: dict[str, EngineRun]
    net_source: str
    notes: list[str] = field(default_factory=list)
    partition: str = ""


@dataclass
class SideBySide:
    """Result of :func:`run_side_by_side`.

    fabric: the discovered fabric (``None`` if the fabric could not be
    simulated); runs: engine -> :class:`EngineRun` in the requested order;
    order: the hosts (``(N,)`` int64 end-port indices of the routing view)
    in the order the patterns used and ``order_kind`` (``"dmodc"``: Dmodc's
    topological NIDs, ``"guid"``: port-GUID order); metrics: engine ->
    :class:`~smroute.analysis.compare.TableMetrics` for engines with tables;
    net_source, notes, partition: see :class:`Simulation`; error: why there
    are no metrics.
    """

    fabric: Fabric | None
    runs: dict[str, EngineRun]
    order: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    order_kind: str = ""
    metrics: dict[str, TableMetrics] = field(default_factory=dict)
    error: str = ""
    net_source: str = ""
    notes: list[str] = field(default_factory=list)
    partition: str = ""


def _first_line(text: str) -> str:
    """First line of an error, without the (deleted) scratch paths it names."""
    return re.sub(r"\s*\((?:log|see): [^)]*\)", "", text.splitlines()[0] if text else "")


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


def _linear_cap(fabric: Fabric, lmc: int, capture: bool) -> int | None:
    """ibsim's ``-L`` when the LIDs may not fit its default LFT size."""
    f = fabric
    need = (len(f.cas) * 2 + len(f.routers)) * 2 ** lmc + len(f.switches) + 1
    if capture:
        need = max(need, int(f.port_lid.max(initial=0)) + 2 ** int(f.port_lmc.max(initial=0)))
    return _FULL_LINEAR_CAP if need >= IBSIM_DEFAULT_LINEAR_CAP else None


def _run_engines(net: Path, wd: Path, engines: Sequence[str], *, lmc: int, timeout: float,
                 linear_cap: int | None, sim_host: str | None,
                 clock: Callable[[], float]) -> tuple[Fabric, dict[str, EngineRun]]:
    runs = {e: EngineRun(e) for e in engines}
    with IbSim(net, wd, linear_cap=linear_cap) as sim:
        for e, run in runs.items():
            t0 = clock()
            try:
                osm = run_opensm(sim, wd / e, engine=e, lmc=lmc, log_flags=LOG_FLAGS,
                                 timeout=timeout, sim_host=sim_host)
            except ToolTimeoutError as err:
                run.status, run.error = "timeout", str(err).splitlines()[0]
            except SmrouteError as err:
                run.status, run.error = "failed", _first_line(str(err))
                why = opensm_error(wd / e / "opensm.log", e)
                run.error += f" ({why})" if why else ""
            else:
                run.routing_seconds = osm.routing_seconds
                if osm.engine_used != e:
                    run.status, run.fallback = "failed", osm.engine_used or ""
                    run.error = f"OpenSM fell back to {osm.engine_used or 'no engine'}"
                    why = opensm_error(osm.log, e)
                    run.error += f" ({why})" if why else ""
                else:
                    run.tables = parse_lft_dump(read_lines(osm.lfts), str(osm.lfts))
            run.wall_seconds = clock() - t0
        disc = parse_topology(ibnetdiscover(sim, sim_host=sim_host), "ibnetdiscover")
    return disc, runs


def simulate(
    fabric: Fabric,
    workdir: str | Path,
    engines: Sequence[str],
    *,
    lmc: int = 0,
    timeout: float = 600.0,
    linear_cap: int | None = None,
    capture: str | Path | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Simulation:
    """Boot ``ibsim`` on ``fabric`` once, run the real OpenSM once per engine
    of ``engines`` (OpenSM names, with ``lmc``), then discover the fabric
    with ``ibnetdiscover``.

    ``capture``: the ibnetdiscover file ``fabric`` was read from, booted as
    it is (OpenSM attached to :func:`sm_node` by ``SIM_HOST``); if ibsim
    cannot boot it or the discovered fabric differs from ``fabric``, the
    written net file is used instead (said in the notes).  Without it, the
    net file is written from :func:`~smroute.lab.simnet.simulable`
    (LIDs stripped: OpenSM assigns them).  ``linear_cap``: ibsim's ``-L``
    (``None``: sized from the fabric).  ``workdir`` receives the net file,
    ibsim's log and one directory per engine (``capture/`` for the capture's
    runs).  Raises :class:`~smroute.errors.SmrouteError` if the fabric cannot
    be simulated (no net file, ibsim or ibnetdiscover fail).
    """
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    sm = sm_node(fabric)
    notes: list[str] = []
    if capture is not None:
        text = Path(capture).read_text(errors="replace")
        host = capture_sim_host(text, fabric, sm)
        try:
            disc, runs = _run_engines(
                Path(capture), wd / "capture", engines, lmc=lmc, timeout=timeout,
                linear_cap=linear_cap or _linear_cap(fabric, lmc, True), sim_host=host,
                clock=clock)
        except ToolError as err:
            notes.append(f"ibsim could not run the capture as a net file "
                         f"({_first_line(str(err))}): used a written net file")
        else:
            mismatch, partition = discovery_gap(fabric, sm, disc)
            if not mismatch:
                return Simulation(disc, runs, "capture", notes, partition)
            notes.append(f"the capture as an ibsim net file: {mismatch}; "
                         "used a written net file")
    net = wd / "fabric.net"
    write_ibsim_net(simulable(fabric), net, sm_node=sm)
    disc, runs = _run_engines(net, wd, engines, lmc=lmc, timeout=timeout,
                              linear_cap=linear_cap or _linear_cap(fabric, lmc, False),
                              sim_host=None, clock=clock)
    mismatch, partition = discovery_gap(fabric, sm, disc)
    if mismatch:
        notes.append(mismatch)
    return Simulation(disc, runs, "written", notes, partition)


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
    """:func:`simulate` from a written net file (LIDs stripped: OpenSM
    assigns them); returns the discovered fabric and engine ->
    :class:`EngineRun` (tables read from ``opensm-lfts.dump``; failures,
    time-outs and fallbacks to another engine recorded, not raised).  Raises
    :class:`~smroute.lab.sim.ToolError` if ibsim or ibnetdiscover fail.
    """
    sim = simulate(fabric, workdir, engines, lmc=lmc, timeout=timeout,
                   linear_cap=linear_cap, clock=clock)
    return sim.fabric, sim.runs


def _hosts_order(disc: Fabric, view: RoutingView, topo: npt.NDArray[np.int64] | None
                 ) -> tuple[npt.NDArray[np.int64], str]:
    """The hosts (end-ports that are not aggregation nodes) in ``topo`` order
    (any host missing from it appended in port-GUID order), else port-GUID order."""
    is_host = fabric_roles(disc).hosts_mask[view.ep_node]
    by_guid = np.flatnonzero(is_host)
    by_guid = by_guid[np.argsort(view.ep_guid[by_guid], kind="stable")].astype(np.int64)
    if topo is None:
        return by_guid, "guid"
    first = topo[is_host[topo]]
    rest = by_guid[~np.isin(by_guid, first)]
    return np.concatenate([first, rest]).astype(np.int64), api.DEFAULT


def _route_in_process(disc: Fabric, algorithm: str, run: EngineRun,
                      clock: Callable[[], float]) -> None:
    """Route ``disc`` with one of smroute's algorithms into ``run``, on one VL."""
    try:
        t0 = clock()
        res = route(disc, algorithm=algorithm, workers=1, labels=False, max_vls=1)
    except SmrouteError as err:
        run.status, run.error = "failed", str(err).splitlines()[0]
        return
    run.tables, run.routing_seconds = res.tables, res.total_seconds
    run.wall_seconds = clock() - t0
    run.note = res.mode + (f": {res.mode_reason}" if res.mode_reason else "")


def run_side_by_side(
    fabric: Fabric,
    workdir: str | Path,
    rng: np.random.Generator,
    *,
    engines: Sequence[str] = ENGINES,
    config: CompareConfig | None = None,
    opensm_timeout: float = 600.0,
    capture: str | Path | None = None,
    order: str = "topo",
    max_vls: int = 1,
    clock: Callable[[], float] = time.monotonic,
) -> SideBySide:
    """Route ``fabric`` with every engine of ``engines`` and compare them.

    ``workdir`` receives the net file, ibsim's log and one directory per
    OpenSM engine (its conf, log and dumps).  ``capture``: see
    :func:`simulate`.  ``order``: ``"topo"`` (Dmodc's topological order of
    the hosts, port-GUID order if Dmodc fails) or ``"guid"``.  ``rng`` draws
    the random permutations and orders of the metrics (shared by all
    engines).  ``max_vls``: the data VLs the default engine (Nmodc) may
    use (2+: detours where the tree has no path); the others stay on one
    VL (Dmodc stays the paper's).  Without an OpenSM
    engine nothing is simulated: smroute's engines route the part of
    ``fabric`` a subnet manager would reach (:func:`sm_part`), with its LIDs.
    Nothing is raised for a fabric or engine that fails: see the module doc.
    """
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        raise SmrouteError(f"unknown engine(s) {', '.join(bad)}; "
                           f"expected some of {', '.join(ENGINES)}")
    if order not in ("topo", "guid"):
        raise SmrouteError(f"unknown order {order!r}; expected topo or guid")
    opensm = [e for e in engines if e not in SMROUTE_ENGINES]
    try:
        sim = (simulate(fabric, workdir, opensm, timeout=opensm_timeout, capture=capture,
                        clock=clock) if opensm else Simulation(sm_part(fabric), {}, "none", []))
    except (SmrouteError, OSError) as err:
        msg = f"cannot simulate the fabric: {_first_line(str(err))}"
        return SideBySide(fabric=None, error=msg,
                          runs={e: EngineRun(e, status="error", error=msg) for e in engines})
    disc = sim.fabric
    runs = {e: sim.runs.get(e) or EngineRun(e) for e in engines}
    out = SideBySide(fabric=disc, runs=runs, net_source=sim.net_source, notes=sim.notes,
                     partition=sim.partition)
    for e in engines:
        t = runs[e].tables
        if t is not None:
            msg = _check_lids(t, disc)
            if msg:
                runs[e].status, runs[e].error, runs[e].tables = "failed", msg, None

    res = None
    ref = api.DEFAULT  # the reference: its NIDs give the topological order
    try:
        t0 = clock()
        res = route(disc, workers=1, labels=False, max_vls=max_vls)
        dm_seconds = clock() - t0
    except SmrouteError as err:
        if ref in runs:
            runs[ref].status, runs[ref].error = "failed", str(err).splitlines()[0]
    else:
        if ref in runs:
            runs[ref].tables = res.tables
            runs[ref].routing_seconds = res.total_seconds
            runs[ref].wall_seconds = dm_seconds
            runs[ref].note = res.mode + (f": {res.mode_reason}" if res.mode_reason else "")
    for e in SMROUTE_ENGINES[1:]:  # the others on one VL
        if e in runs:
            _route_in_process(disc, e, runs[e], clock)
    tables = {e: r.tables for e, r in runs.items() if r.tables is not None}
    any_t = res.tables if res is not None else next(iter(tables.values()), None)
    if any_t is None:
        out.error = "no engine produced tables"
        return out
    view = routing_view(disc, any_t)
    topo = (topological_order_from(view, res.graph.ep_row, res.nids)
            if res is not None and order == "topo" else None)
    out.order, out.order_kind = _hosts_order(disc, view, topo)
    try:
        metrics = compare_tables(disc, tables, out.order, rng, config)
    except (RoutingError, ValueError) as err:  # pragma: no cover - defensive
        out.error = f"analysis failed: {err}"
        return out
    out.metrics = {m.name: m for m in metrics}
    return out
