"""The routing daemon's state and operations, without gRPC (:class:`RoutingCore`).

State: the loaded base fabric, the desired :class:`~smroute.service.faults.DownSet`,
the current routing settings (algorithm, LMC, roles overrides), an
:class:`~smroute.service.epochs.EpochStore`, one
:class:`~smroute.routing.pool.RoutePool` living as long as the daemon, and a
:class:`~smroute.service.faults.Sequencer` that runs every state change on one
thread (so loads, routes and fault batches are totally ordered).  An
:class:`~smroute.service.validator.EpochValidator` validates committed epochs
in the background, newest first; superseded ones are marked skipped.

Errors: every expected failure raises
:class:`~smroute.service.errors.ServiceError` with a
:class:`~smroute.service.errors.Status` and a precise message; the gRPC
servicer (:mod:`smroute.service.servicer`) maps it to the RPC's status.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, Protocol, TypeVar

from smroute.analysis.compare import analyze_tables
from smroute.errors import InputError, RoutingError
from smroute.fabric.model import Fabric
from smroute.fabric.roles import GuidOverrides
from smroute.routing.engine import (
    ALGORITHMS,
    DMODC_LIKE,
    RoutingResult,
    route,
    unrouted_connected,
    validate_result,
)
from smroute.routing.pool import RoutePool
from smroute.service import sources, subnet
from smroute.service.config import LimitsConfig
from smroute.service.dryrun import FaultOutcome, run_dry
from smroute.service.durable import Durable
from smroute.service.epochs import Epoch, EpochStore, FaultRecord, own_tables
from smroute.service.errors import ServiceError, Status, echo
from smroute.service.faults import (
    DownSet,
    FaultEvent,
    FaultEventError,
    FaultJob,
    Sequencer,
    apply_events,
    degraded_fabric,
)
from smroute.service.reroute import Reroute, reroute
from smroute.service.resume import Resumed, resume
from smroute.service.validator import EpochValidator
from smroute.tables.diff import TableDiff, diff_tables

__all__ = ["FaultOutcome", "Metrics", "RoutingCore"]

#: Changed entries a Diff / dry run lists at most, whatever the request asks.
MAX_LISTED_ENTRIES = 100_000



class Metrics(Protocol):
    """What the core reports (implemented by smroute.service.metrics.ServiceMetrics)."""

    def observe_route(self, seconds: float, kind: str) -> None: ...
    def epoch_committed(self, epoch_id: int, table_bytes: int, mode: str = "tree",
                        turn_lids: int = 0) -> None: ...
    def faults_received(self, n: int, kind: str) -> None: ...
    def request(self, method: str, code: str) -> None: ...
    def stream_opened(self, method: str) -> None: ...
    def stream_closed(self, method: str) -> None: ...
    def reroute_failed(self, reason: str) -> None: ...


LogFn = Callable[..., None]


def _no_log(level: str, event: str, **fields: Any) -> None:
    return None


T = TypeVar("T")


class RoutingCore:
    """The daemon's state machine (no gRPC here; see module doc).

    ``clock`` (monotonic seconds) times phases; ``wallclock`` stamps commits.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        algorithm: str = "dmodc",
        lmc: int | None = None,
        epoch_history: int = 8,
        coalesce_s: float = 0.02,
        limits: LimitsConfig | None = None,
        fabric_dirs: Sequence[str | os.PathLike[str]] = (),
        log: LogFn = _no_log,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wallclock: Callable[[], float] = time.time,
        validate_epochs: bool = True,
        incremental: bool = True,
        overrides: GuidOverrides | None = None,
        durable: Durable | None = None,
        max_vls: int = 1,
        all_ca_pairs: bool = False,
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise InputError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
        self.algorithm = algorithm
        #: LIDs per end-port = 2**lmc; ``None``: each end-port's LMC in the fabric
        #: (as ``smroute route`` without ``--lmc``).
        self.lmc = lmc
        #: Operator overrides of the fabric's roles (OpenSM guid files); the
        #: daemon replaces them on SIGHUP; the next route uses them.
        self.overrides = overrides
        #: Data VLs the subnet manager programs (config max_vls); 2 or more
        #: lets a tree take detours over VLs (routing mode tree+detours).
        self.max_vls = max_vls
        #: Every CA pair needs a route (config route_all_ca_pairs); else the
        #: roles' rule (aggregation nodes: hosts and adjacent switches only).
        self.all_ca_pairs = all_ca_pairs
        self.limits = limits or LimitsConfig()
        #: Directories LoadFabric(path=...) may read from (empty: none); the
        #: daemon replaces the tuple on SIGHUP.
        self.fabric_dirs: tuple[str, ...] = tuple(os.fspath(d) for d in fabric_dirs)
        self.log = log
        self.metrics = metrics
        self.clock = clock
        self.wallclock = wallclock
        self.store = EpochStore(epoch_history)
        #: the state database (smroute.service.durable) and this start's instance id
        self.durable = durable or Durable(None)
        self.store.on_validation = self.durable.validation
        self.pool = RoutePool(workers)
        self.base: Fabric | None = None
        self._epoch_base: Fabric | None = None
        self.incremental = incremental
        self.base_source = ""
        self.down = DownSet()
        self.shutting_down = threading.Event()
        self._open = {"tables": 0, "watch": 0}  # streams open, by kind
        self._count_lock = threading.Lock()
        self._analyze_lock = threading.Lock()
        self._analyzer: ProcessPoolExecutor | None = None
        self._aux_lock = threading.Lock()
        #: The background validation of committed epochs.
        self.validator = EpochValidator(self.store, self._aux, self.log, validate_epochs,
                                        self.shutting_down)
        self.seq = Sequencer(self._run_batch, lambda job: run_dry(self, job),
                             coalesce_s=coalesce_s)

    # ------------------------------------------------------------ helpers
    def _metric(self, name: str, *args: Any) -> None:
        if self.metrics is not None:
            try:
                getattr(self.metrics, name)(*args)
            except Exception as err:  # noqa: BLE001 - metrics must never break serving
                self.log("warning", "metrics_error", metric=name, error=str(err))

    def _wait(self, fut: Future[T]) -> T:
        try:
            return fut.result()
        except ServiceError:
            raise
        except (RoutingError, FaultEventError) as err:
            code = (Status.INVALID_ARGUMENT if isinstance(err, InputError)
                    else Status.FAILED_PRECONDITION)
            raise ServiceError(code, str(err)) from None
        except RuntimeError as err:
            if self.shutting_down.is_set():
                raise ServiceError(Status.UNAVAILABLE, str(err)) from None
            raise

    def close(self) -> None:
        """Stop the sequencer (after its queued jobs), the validator and the pool."""
        self.shutting_down.set()
        self.store.close()
        self.seq.close()
        self.validator.close()
        self.durable.close()
        if self._analyzer is not None:
            self._analyzer.shutdown(cancel_futures=True)
        self.pool.close()

    # ------------------------------------------------------------ load
    def parse_fabric_text(self, text: str, source: str) -> Fabric:
        """Parse ibnetdiscover text (bounded by ``limits.max_topology_bytes``)."""
        return sources.parse_fabric_text(text, source, self.limits.max_topology_bytes)

    def read_fabric_path(self, path: str) -> Fabric:
        """The operator's configured topology file (:func:`sources.read_fabric_path`)."""
        return sources.read_fabric_path(path)

    def read_request_path(self, path: str) -> Fabric:
        """The file a ``LoadFabric(path=...)`` request names, inside
        :attr:`fabric_dirs` only (:func:`sources.read_request_path`)."""
        return sources.read_request_path(path, self.fabric_dirs,
                                         self.limits.max_topology_bytes)

    def discover_fabric(self, ca: str, port: int, timeout: float) -> Fabric:
        """Live discovery (:func:`sources.discover_fabric`)."""
        return sources.discover_fabric(ca, port, timeout)

    def load_fabric(self, fabric: Fabric, source: str) -> Fabric:
        """Make ``fabric`` the base fabric (clears down items); does not route."""
        def do() -> Fabric:
            self.durable.fabric_loaded(fabric, source)  # durable before it is answered
            self.base = fabric
            self.base_source = source
            self.down = DownSet()
            self.log("info", "fabric_loaded", source=source, hash=fabric.content_hash,
                     switches=len(fabric.switches), cas=len(fabric.cas), links=fabric.n_links)
            return fabric
        return self._wait(self.seq.call(do))

    # ------------------------------------------------------------ route
    def _route(self, fabric: Fabric, algorithm: str, lmc: int | None) -> RoutingResult:
        res = route(fabric, algorithm=algorithm, lmc=lmc, pool=self.pool, clock=self.clock,
                    overrides=self.overrides, max_vls=self.max_vls,
                    all_ca_pairs=self.all_ca_pairs)
        return own_tables(res)

    def route(self, algorithm: str = "", lmc: int | None = None) -> Epoch:
        """Route the base fabric minus down items and commit (cause ``route``)."""
        alg = algorithm or self.algorithm
        if alg not in ALGORITHMS:
            raise ServiceError(Status.INVALID_ARGUMENT,
                               f"unknown algorithm {echo(alg)}; expected one of {ALGORITHMS}")
        use_lmc = self.lmc if lmc is None else lmc
        if use_lmc is not None and not 0 <= use_lmc <= 7:
            raise ServiceError(Status.INVALID_ARGUMENT, f"lmc must be 0..7, got {lmc}")

        def do() -> Epoch:
            base = self._need_base()
            t0 = self.clock()
            fabric = degraded_fabric(base, self.down)
            t1 = self.clock()
            try:
                res = self._route(fabric, alg, use_lmc)
            except RoutingError as err:
                self._metric("reroute_failed", "route")
                raise ServiceError(Status.FAILED_PRECONDITION,
                                   f"cannot route {self.base_source}: {err}") from None
            t2 = self.clock()
            parent = self.store.current
            diff = diff_tables(parent.tables, res.tables) if parent is not None else None
            t3 = self.clock()
            kept = self.algorithm, self.lmc
            self.algorithm, self.lmc = alg, use_lmc
            timings = {"degrade": t1 - t0, **res.timings, "diff": t3 - t2}
            try:
                ep = self._commit("route", fabric, base, res, timings, (), diff)
            except ServiceError:
                self.algorithm, self.lmc = kept  # a refused route changes nothing
                raise
            self._metric("observe_route", t3 - t0, "route")
            return ep
        return self._wait(self.seq.call(do))

    def _reroute(self, cur: Epoch, base: Fabric, fabric: Fabric) -> Reroute:
        """Route ``fabric`` (``base`` minus down items) knowing the serving epoch:
        incrementally when ``cur`` routed the same loaded fabric (see
        smroute.service.reroute), else in full."""
        same = base is self._epoch_base
        return reroute(cur.result, fabric, lmc=self.lmc, algorithm=self.algorithm,
                       pool=self.pool, clock=self.clock,
                       incremental=same and self.incremental, max_vls=self.max_vls)

    def _lmc_of(self, res: RoutingResult) -> int:
        """The LMC ``res`` routed: the setting, or the fabric's largest."""
        return self.lmc if self.lmc is not None else int(res.graph.ep_lmc.max(initial=0))

    def _need_base(self) -> Fabric:
        if self.base is None:
            raise ServiceError(Status.FAILED_PRECONDITION,
                               "no fabric loaded: call LoadFabric first (or set fabric: in "
                               "the config)")
        return self.base

    def _commit(self, cause: str, fabric: Fabric, base: Fabric, res: RoutingResult,
                timings: dict[str, float], faults: tuple[FaultRecord, ...],
                diff: TableDiff | None, t_event: float | None = None) -> Epoch:
        """Commit; ``t_event``: clock time of the first event (timings then get
        ``event_to_commit``: everything up to the reference swap, which is O(1))."""
        # Dmodc and Nmodc route every pair that cables join by construction
        # (the cheap first-hop check guards it; the background walk follows);
        # other algorithms are walked in full now
        gaps = unrouted_connected(res)
        if not gaps and res.algorithm not in DMODC_LIKE:
            gaps = validate_result(res, max_failures=0).ca_pairs_unroutable
        if gaps:
            self._metric("reroute_failed", "unrouted_pairs")
            serving = self.store.current.id if self.store.current is not None else 0
            self.log("error", "epoch_refused", cause=cause, unrouted_ca_pairs=gaps,
                     serving=serving, mode=res.mode)
            raise ServiceError(
                Status.FAILED_PRECONDITION,
                f"refused to commit: the {res.algorithm} tables leave {gaps} CA pairs that "
                f"cables join unrouted; " + (f"epoch {serving} keeps serving" if serving
                                              else "no epoch is served"))
        if t_event is not None:
            timings["event_to_commit"] = self.clock() - t_event
        self._epoch_base = base
        ep = self.store.commit(
            cause=cause, fabric=fabric, base_hash=base.content_hash, result=res,
            algorithm=res.algorithm, lmc=self._lmc_of(res), timings=timings, faults=faults,
            down=self.down.counts, committed_at=self.wallclock(), diff=diff,
            down_items=self.down.items(), instance=self.durable.instance,
        )
        self.durable.committed(ep, base, self.lmc)
        self._metric("epoch_committed", ep.id, ep.tables.nbytes(), res.mode, res.turn_lids)
        self.log("info", "epoch_committed", epoch=ep.id, cause=cause, mode=res.mode,
                 fabric_hash=fabric.content_hash, faults=len(faults),
                 diff=diff.summary() if diff is not None else "",
                 seconds={k: round(v, 4) for k, v in timings.items()})
        self.validator.later(ep)
        return ep

    def resume(self) -> Resumed | None:
        """Before serving: resume the state database's last epoch (resume.resume)."""
        return self._wait(self.seq.call(lambda: resume(self)))

    # ------------------------------------------------------------ faults
    def check_events(self, events: Sequence[FaultEvent]) -> None:
        """Reject a bad batch now (INVALID_ARGUMENT / RESOURCE_EXHAUSTED)."""
        if not events:
            raise ServiceError(Status.INVALID_ARGUMENT,
                               "events is empty; expected at least one fault event")
        if len(events) > self.limits.max_fault_events:
            raise ServiceError(Status.RESOURCE_EXHAUSTED,
                               f"{len(events)} events; the limit (limits.max_fault_events) is "
                               f"{self.limits.max_fault_events}")
        base = self._need_base()
        if self.store.current is None:
            raise ServiceError(Status.FAILED_PRECONDITION,
                               "no epoch committed yet: call Route first")
        try:
            apply_events(base, DownSet(), events)
        except FaultEventError as err:
            raise ServiceError(Status.INVALID_ARGUMENT, str(err)) from None

    def apply_faults(self, events: Sequence[FaultEvent], *, dry_run: bool = False,
                     journaled: bool = False) -> FaultOutcome:
        """Queue the events; returns once the epoch including them is committed
        (or, ``dry_run``, once the would-be tables and diff are computed);
        ``journaled``: already durable (the catch-up), not journaled again."""
        self.check_events(events)
        kinds: dict[str, int] = {}
        for e in events:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        for k, n in kinds.items():
            self._metric("faults_received", n, k)
        job = FaultJob(tuple(events), dry_run=dry_run, received=self.clock(),
                       journaled=journaled)
        return self._wait(self.seq.submit(job))  # type: ignore[no-any-return]

    def route_subnet(self, sm: Fabric, lmc: int, source: str) -> tuple[Epoch, bool]:
        """A subnet manager's view, routed (cause ``sm``): :func:`smroute.service.subnet.sync`."""
        return subnet.route_subnet(self, sm, lmc, source)

    def _run_batch(self, jobs: list[FaultJob]) -> None:
        t0 = min(j.received for j in jobs)
        t_start = self.clock()
        cpu0 = time.thread_time()
        cur = self.store.current
        if self.base is None or cur is None:
            err = ServiceError(Status.FAILED_PRECONDITION,
                               "no routed fabric: call LoadFabric and Route first")
            for j in jobs:
                j.future.set_exception(err)
            return
        base = self.base
        down = self.down
        ok: list[FaultJob] = []
        for j in jobs:
            try:
                down = apply_events(base, down, j.events)
                ok.append(j)
            except FaultEventError as e:
                j.future.set_exception(ServiceError(Status.INVALID_ARGUMENT, str(e)))
        if not ok:
            return
        n_events = sum(len(j.events) for j in ok)
        try:  # durable before the reroute: an answered event survives kill -9
            self.durable.journal(base.content_hash,
                                 [e for j in ok if not j.journaled for e in j.events])
        except ServiceError as err:
            for j in ok:
                j.future.set_exception(err)
            return
        self.down = down  # the desired state, even if rerouting it fails below
        records = tuple(FaultRecord(e.kind, e.guid, e.port) for j in ok for e in j.events)
        if down.items() == cur.down_items and cur.base_hash == base.content_hash:
            for j in ok:
                j.future.set_result(FaultOutcome(cur, None, n_events, False))
            return
        fabric = degraded_fabric(base, down)
        t1 = self.clock()
        try:
            rr = self._reroute(cur, base, fabric)
        except RoutingError as err:
            msg = (f"reroute after {n_events} fault events failed; epoch {cur.id} keeps "
                   f"serving: {err}")
            self._metric("reroute_failed", "routing_error")
            self.log("error", "reroute_failed", events=n_events, serving=cur.id, error=str(err))
            for j in ok:
                j.future.set_exception(ServiceError(Status.FAILED_PRECONDITION, msg))
            return
        res, diff = rr.result, rr.diff
        timings = {"queued": t_start - t0, "degrade": t1 - t_start, **rr.timings}
        # CPU seconds of this thread (the incremental path runs here only): the
        # figure that does not depend on how busy the machine is
        timings["cpu"] = time.thread_time() - cpu0
        self.log("debug", "rerouted", incremental=rr.incremental, why_full=rr.reason or None,
                 rows=rr.rows, lids=rr.lids)
        try:
            ep = self._commit("faults", fabric, base, res, timings, records, diff, t_event=t0)
        except ServiceError as err:
            for j in ok:
                j.future.set_exception(err)
            return
        self._metric("observe_route", self.clock() - t_start, "reroute")
        for j in ok:
            j.future.set_result(FaultOutcome(ep, diff, n_events, True))

    # ------------------------------------------------------------ analysis
    def _aux(self) -> ProcessPoolExecutor:
        """The helper process for analyses and large validation walks (spawned
        on first use, kept for the daemon's life; jobs run one at a time)."""
        with self._aux_lock:
            if self._analyzer is None:
                self._analyzer = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
                self._analyzer.submit(int)  # start the process (its imports) now
            return self._analyzer

    def analyze(self, ep: Epoch, order: str, seed: int, samples: int) -> dict[str, Any]:
        """Congestion metrics of ``ep`` (see :func:`analyze_tables`), computed in
        a separate process (made on first use, kept for the daemon's life) so a
        long analysis does not hold this process's GIL against reroutes; one
        analysis at a time."""
        with self._analyze_lock:
            r = ep.result
            fut = self._aux().submit(analyze_tables, ep.fabric, ep.tables,
                                     r.graph.ep_row, r.nids, order, seed, samples)
            try:
                return fut.result()  # type: ignore[no-any-return]
            except BrokenProcessPool:
                with self._aux_lock:
                    self._analyzer = None
                raise ServiceError(Status.RESOURCE_EXHAUSTED,
                                   "the analysis process died (out of memory?); try a "
                                   "smaller rp_samples or raise the daemon's memory") from None

    # ------------------------------------------------------------ streams
    def acquire_stream(self, kind: str) -> None:
        """Count an open stream (``"tables"`` or ``"watch"``); RESOURCE_EXHAUSTED
        beyond ``limits.max_streams`` / ``limits.max_watchers`` (per-client
        limits and reserved capacity: :mod:`smroute.service.capacity`)."""
        what, key = ("Watch", "max_watchers") if kind == "watch" else ("GetTables", "max_streams")
        limit = getattr(self.limits, key)
        with self._count_lock:
            if self._open[kind] >= limit:
                raise ServiceError(Status.RESOURCE_EXHAUSTED,
                                   f"{self._open[kind]} {what} streams open; the limit "
                                   f"(limits.{key}) is {limit}")
            self._open[kind] += 1

    def release_stream(self, kind: str) -> None:
        """Undo :meth:`acquire_stream` of the same ``kind``."""
        with self._count_lock:
            self._open[kind] -= 1

    def epoch(self, epoch_id: int) -> Epoch:
        """Epoch ``epoch_id`` (0 = current); NOT_FOUND if not kept."""
        try:
            return self.store.get(epoch_id)
        except KeyError as err:
            code = (Status.FAILED_PRECONDITION if self.store.current is None
                    else Status.NOT_FOUND)
            raise ServiceError(code, str(err.args[0])) from None
