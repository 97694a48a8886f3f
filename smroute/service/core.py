"""The routing daemon's state and operations, without gRPC (:class:`RoutingCore`).

State: the base fabric, the desired down set, the routing :class:`Settings`,
an :class:`~smroute.service.epochs.EpochStore`, one
:class:`~smroute.routing.pool.RoutePool` living as long as the daemon, and a
:class:`~smroute.service.sequencer.Sequencer` that runs every state change on one
thread (loads, routes, fault batches, subnet views, dry runs, resume and
setting changes are totally ordered).  What is served changes through one
transaction, :meth:`RoutingCore.change` (degrade, route, gate, commit,
metrics); an :class:`~smroute.service.validator.EpochValidator` then walks
committed epochs in the background, newest first.

Errors: every expected failure raises :class:`~smroute.service.errors.ServiceError`
with a :class:`~smroute.service.errors.Status` and a precise message; the gRPC
servicer (:mod:`smroute.service.rpc.servicer`) maps it to the RPC's status.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from smroute.errors import InputError, RoutingError
from smroute.fabric.ibnetdiscover.text import ParseWarning
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import GuidOverrides
from smroute.routing import api
from smroute.routing.engine import RoutingResult, route
from smroute.routing.pool import RoutePool
from smroute.routing.reroute import Reroute, reroute
from smroute.routing.validate import Validation
from smroute.service import sources, subnet
from smroute.service.config import LimitsConfig
from smroute.service.core_api import Change, Changed, LogFn, Metrics, Settings, no_log, records
from smroute.service.degraded import ENDS, Degraded
from smroute.service.dryrun import FaultOutcome, would_be
from smroute.service.epochs import Epoch, EpochStore, own_tables
from smroute.service.errors import ServiceError, Status, echo
from smroute.service.helper_process import HelperProcess
from smroute.service.refusals import gate, route_failed
from smroute.service.sequencer import (
    DownSet,
    FaultEvent,
    FaultEventError,
    FaultJob,
    Sequencer,
    apply_events,
    degraded_fabric,
)
from smroute.service.state.durable import Durable, lmc_text
from smroute.service.state.resume import Resumed, read_state
from smroute.service.streams import StreamCounter
from smroute.service.validator import EpochValidator
from smroute.service.vlchoice import AUTO, MaxVls, VlFacts, choose_vls
from smroute.tables.diff import TableDiff, diff_tables

__all__ = ["Change", "Changed", "FaultOutcome", "Metrics", "RoutingCore", "Settings"]

#: Changed entries a Diff / dry run lists at most, whatever the request asks.
MAX_LISTED_ENTRIES = 100_000

T = TypeVar("T")


class RoutingCore:
    """The daemon's state machine (no gRPC here; see module doc).

    ``clock`` (monotonic seconds) times phases; ``wallclock`` stamps commits.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        algorithm: str = api.DEFAULT,
        lmc: int | None = None,
        epoch_history: int = 8,
        coalesce_s: float = 0.02,
        limits: LimitsConfig | None = None,
        fabric_dirs: Sequence[str | os.PathLike[str]] = (),
        log: LogFn = no_log,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wallclock: Callable[[], float] = time.time,
        validate_epochs: bool = True,
        incremental: bool = True,
        overrides: GuidOverrides | None = None,
        durable: Durable | None = None,
        max_vls: MaxVls = AUTO,
        all_ca_pairs: bool = False,
    ) -> None:
        if algorithm not in api.names():
            raise InputError(f"unknown algorithm {algorithm!r}; expected one of {api.names()}")
        self._settings = Settings(algorithm, lmc, max_vls, overrides, all_ca_pairs)
        self.limits = limits or LimitsConfig()
        #: Directories LoadFabric(path=...) may read from (empty: none; replaced on SIGHUP).
        self.fabric_dirs: tuple[str, ...] = tuple(os.fspath(d) for d in fabric_dirs)
        self.log = log
        self.metrics = metrics
        self.clock = clock
        self.wallclock = wallclock
        self.store = EpochStore(epoch_history)
        #: the state database (smroute.service.state.durable) and this start's instance id
        self.durable = durable or Durable(None)
        self.store.on_validation = self.durable.validation
        self.pool = RoutePool(workers)
        self.base: Fabric | None = None
        self._epoch_base: Fabric | None = None
        self.incremental = incremental
        self.base_source = ""
        self.vl_facts: VlFacts | None = None  # the base's subnet manager's (max_vls auto)
        self.down = DownSet()
        self.shutting_down = threading.Event()
        #: the degraded state: acknowledged state lost, no tables served
        self.state_loss = Degraded(self.log, self.metric)
        #: GetTables and Watch streams open, counted against the limits.
        self.streams = StreamCounter()
        #: The helper process for analyses and large validation walks.
        self.helper = HelperProcess()
        #: The background validation of committed epochs.
        self.validator = EpochValidator(self.store, self.helper.executor, self.log,
                                        validate_epochs, self.shutting_down)
        self.seq = Sequencer(self._run_batch, self._dry_run, coalesce_s=coalesce_s)

    # ------------------------------------------------------------ settings
    @property
    def settings(self) -> Settings:
        """The routing settings in force (:class:`Settings`)."""
        return self._settings

    @property
    def degraded(self) -> str:
        """What of the acknowledged state was lost (``""``: nothing; :mod:`.degraded`)."""
        return self.state_loss.lost

    def configure(self, **changes: Any) -> Settings:
        """Replace some routing settings (:class:`Settings` fields), in order
        with every other change on the sequencer; they apply from the next
        route or reroute.  Returns the settings in force after."""
        new = dataclasses.replace(self._settings, **changes)
        if new.algorithm not in api.names():
            raise ServiceError(Status.INVALID_ARGUMENT,
                               f"unknown algorithm {echo(new.algorithm)}; expected one of "
                               f"{api.names()}")

        def do() -> Settings:
            self._settings = dataclasses.replace(self._settings, **changes)
            return self._settings
        return self._wait(self.seq.call(do))

    # ------------------------------------------------------------ helpers
    def metric(self, name: str, *args: Any) -> None:
        """Report to :attr:`metrics` (``name``: a :class:`Metrics` method);
        a failing metrics sink is logged, never raised."""
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

    def _on_sequencer(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the sequencer thread (at once if already there), waited for."""
        return fn() if self.seq.on_thread() else self._wait(self.seq.call(fn))

    def close(self) -> None:
        """Stop the sequencer (after its queued jobs), the validator and the pool."""
        self.shutting_down.set()
        self.store.close()
        self.seq.close()
        self.validator.close()
        self.durable.close()
        self.helper.close()
        self.pool.close()

    # ------------------------------------------------------------ load
    def parse_fabric_text(self, text: str, source: str,
                          skipped: list[ParseWarning] | None = None) -> Fabric:
        """Parse ibnetdiscover text (bounded by ``limits.max_topology_bytes``)."""
        return sources.parse_fabric_text(text, source, self.limits.max_topology_bytes,
                                         skipped=skipped)

    def read_fabric_path(self, path: str) -> Fabric:
        """The operator's configured topology file (:func:`sources.read_fabric_path`)."""
        return sources.read_fabric_path(path)

    def read_request_path(self, path: str, skipped: list[ParseWarning] | None = None
                          ) -> Fabric:
        """The file a ``LoadFabric(path=...)`` request names, inside
        :attr:`fabric_dirs` only (:func:`sources.read_request_path`)."""
        return sources.read_request_path(path, self.fabric_dirs,
                                         self.limits.max_topology_bytes, skipped=skipped)

    def discover_fabric(self, ca: str, port: int, timeout: float) -> Fabric:
        """Live discovery (:func:`sources.discover_fabric`)."""
        return sources.discover_fabric(ca, port, timeout)

    def load_fabric(self, fabric: Fabric, source: str, skipped_lines: int = 0) -> Fabric:
        """Make ``fabric`` the base fabric (clears down items); does not route."""
        def do() -> Fabric:
            self.durable.fabric_loaded(fabric, source)  # durable before it is answered
            self.base = fabric
            self.base_source, self.vl_facts = source, None
            self.down = DownSet()
            self.state_loss.leave("LoadFabric")
            self.log("warning" if skipped_lines else "info", "fabric_loaded", source=source,
                     hash=fabric.content_hash, switches=len(fabric.switches),
                     cas=len(fabric.cas), links=fabric.n_links, skipped_lines=skipped_lines)
            return fabric
        return self._wait(self.seq.call(do))

    def need_base(self) -> Fabric:
        """The base fabric; FAILED_PRECONDITION when none is loaded."""
        if self.base is None:
            raise ServiceError(Status.FAILED_PRECONDITION,
                               "no fabric loaded: call LoadFabric first (or set fabric: in "
                               "the config)")
        return self.base

    # ------------------------------------------------------------ the transaction
    def change(self, c: Change) -> Changed:
        """The one state transaction: bring the daemon to ``c.base`` minus
        ``c.down`` (:class:`~smroute.service.core_api.Change`).

        Steps: adopt the desired state (base, its source if new, down set;
        not for a dry run), degrade, route (incrementally from the serving
        epoch when it routed the same base, in full if ``c.full`` or nothing
        serves; a resumed epoch is taken as routed), gate (tables that leave
        CA pairs that cables join unrouted are refused), then commit (the
        settings adopted with it; durable, metrics, log, background
        validation) or, for a dry run, the would-be epoch (id 0) and nothing
        else.  When the base and down set are what serves already (and not
        ``c.full``), nothing is routed or committed.  A route that fails or a
        gate that refuses raises FAILED_PRECONDITION saying why; the last
        good epoch keeps serving.  Runs on the sequencer thread (called from
        another thread, it is queued and waited for)."""
        return self._on_sequencer(lambda: self._transact(c))

    def _transact(self, c: Change) -> Changed:
        t0, cpu0 = self.clock(), time.thread_time()
        cur = self.store.current
        s = c.settings or self._settings
        vc = choose_vls(s.max_vls, self.vl_facts)
        if not c.dry_run:  # the desired state, even if routing it fails below
            self.base, self.down = c.base, c.down
            if c.source is not None:
                self.base_source = c.source
        if (cur is not None and not c.full and not c.dry_run and c.resumed is None
                and cur.base_hash == c.base.content_hash
                and c.down.items() == cur.down_items and vc.vls == cur.max_vls):
            if c.cause == "sm":  # the subnet manager's view is what serves
                self.state_loss.leave(ENDS[c.cause])
            return Changed(cur, None, False)
        timings = dict(c.timings)
        if c.resumed is not None:
            fabric, res, diff, why = c.resumed[0].fabric, c.resumed[0].result, None, "resumed"
        else:
            fabric = degraded_fabric(c.base, c.down)
            t1 = self.clock()
            res, diff, why, more = self._route_step(c, cur, fabric, s, vc.vls)
            timings.update({"degrade": t1 - t0, **more})
        # CPU seconds of this thread (the incremental path runs here only): the
        # figure that does not depend on how busy the machine is
        timings["cpu"] = time.thread_time() - cpu0
        gate(c, res, cur, self.metric, self.log)
        lmc = s.lmc if s.lmc is not None else int(res.graph.ep_lmc.max(initial=0))
        if c.dry_run:
            return Changed(would_be(cur, fabric, c.base, c.down, res, lmc, timings,
                                    c.faults, diff, self.durable.instance),
                           diff, False, not why, why)
        if c.t_event is not None:
            timings["event_to_commit"] = self.clock() - c.t_event
        self._settings = s
        # an older base's resumed epoch: the next route is a full one
        same = c.resumed is None or c.resumed[0].base_hash == c.base.content_hash
        self._epoch_base = c.base if same else None
        if c.resumed is not None:
            return Changed(self._resume_epoch(*c.resumed), None, True, False, why)
        ep = self.store.commit(
            cause=c.cause, fabric=fabric, base_hash=c.base.content_hash, result=res,
            algorithm=res.algorithm, lmc=lmc, timings=timings, faults=c.faults,
            down=c.down.counts, committed_at=self.wallclock(), diff=diff,
            down_items=c.down.items(), instance=self.durable.instance, max_vls=vc.vls,
            max_vls_reason=vc.reason)
        self.durable.committed(ep, c.base, s.lmc)
        self.metric("epoch_committed", ep.id, ep.tables.nbytes(), res.mode, res.turn_lids, vc.vls)
        self.metric("observe_route", self.clock() - t0, "reroute" if cur and not c.full
                    else "route")
        self.log("info", "epoch_committed", epoch=ep.id, cause=c.cause, mode=res.mode,
                 fabric_hash=fabric.content_hash, faults=len(c.faults),
                 diff=diff.summary() if diff is not None else "", max_vls=vc.vls,
                 max_vls_reason=vc.reason, seconds={k: round(v, 4) for k, v in timings.items()})
        self.validator.later(ep)
        if c.cause in ENDS:  # (a Route only gets here confirmed, while degraded)
            self.state_loss.leave(ENDS[c.cause])
        return Changed(ep, diff, True, not why, why)

    def _route_step(self, c: Change, cur: Epoch | None, fabric: Fabric, s: Settings, vls: int
                    ) -> tuple[RoutingResult, TableDiff | None, str, dict[str, float]]:
        """Route ``fabric``: the result, its diff against ``cur``, why it was
        routed in full (``""``: incrementally), the phases' timings; a
        RoutingError becomes FAILED_PRECONDITION naming the serving epoch."""
        try:
            if c.full or cur is None:
                res = own_tables(route(fabric, algorithm=s.algorithm, lmc=s.lmc, pool=self.pool,
                                       clock=self.clock, overrides=s.overrides,
                                       max_vls=vls, all_ca_pairs=s.all_ca_pairs))
                t = self.clock()
                diff = diff_tables(cur.tables, res.tables) if cur is not None else None
                why = "full route" if c.full else "no serving epoch"
                return res, diff, why, {**res.timings, "diff": self.clock() - t}
            rr = self._reroute(cur, c.base, fabric, s, vls)
        except RoutingError as err:
            raise route_failed(c, cur, self.base_source, err, self.metric, self.log) from None
        self.log("debug", "rerouted", incremental=rr.incremental, why_full=rr.reason or None,
                 rows=rr.rows, lids=rr.lids)
        return rr.result, rr.diff, "" if rr.incremental else rr.reason, dict(rr.timings)

    def _reroute(self, cur: Epoch, base: Fabric, fabric: Fabric, s: Settings, vls: int) -> Reroute:
        """Route ``fabric`` (``base`` minus down items) knowing the serving epoch:
        incrementally when ``cur`` routed the same loaded fabric (see
        smroute.routing.reroute), else in full."""
        same = base is self._epoch_base
        rr = reroute(cur.result, fabric, lmc=s.lmc, algorithm=s.algorithm, pool=self.pool,
                     clock=self.clock, incremental=same and self.incremental,
                     max_vls=vls, all_ca_pairs=s.all_ca_pairs)
        return rr if rr.incremental else dataclasses.replace(rr, result=own_tables(rr.result))

    # ------------------------------------------------------------ route
    def route(self, algorithm: str = "", lmc: int | None = None, *,
              confirm_state_loss: bool = False) -> Epoch:
        """Route the base fabric minus down items in full and commit (cause
        ``route``); the algorithm and LMC become the settings with the commit.
        Refused while :attr:`degraded` unless ``confirm_state_loss``."""
        if algorithm and algorithm not in api.names():
            raise ServiceError(Status.INVALID_ARGUMENT, f"unknown algorithm {echo(algorithm)}; "
                               f"expected one of {api.names()}")
        if lmc is not None and not 0 <= lmc <= 7:
            raise ServiceError(Status.INVALID_ARGUMENT, f"lmc must be 0..7, got {lmc}")

        def do() -> Epoch:
            if not confirm_state_loss:
                self.state_loss.check(self.down)
            s = dataclasses.replace(self._settings, algorithm=algorithm or self._settings.algorithm,
                                    lmc=self._settings.lmc if lmc is None else lmc)
            return self._transact(Change("route", self.need_base(), self.down, settings=s,
                                         full=True)).epoch
        return self._wait(self.seq.call(do))

    def resume(self) -> Resumed | None:
        """Before serving: take in the state database's last epoch, base
        fabric, down set and settings (:func:`smroute.service.state.resume.read_state`)
        through the transaction (the epoch gated, committed with its id);
        degraded, serving nothing, when part of what was acknowledged is lost."""
        def do() -> Resumed | None:
            t0, d = time.perf_counter(), self.durable
            if d.store is not None and d.store.moved_aside is not None:
                self.metric("state_db_moved_aside")
            st = read_state(d, self.pool, choose_vls(self._settings.max_vls, None).vls, self.log)
            if st is None:
                return None
            d.resumed(st.stored_base, st.journal_seq)
            self.store.continue_after(st.last_id)
            self.vl_facts = st.vl_facts  # max_vls auto reroutes with the VLs it was allowed
            s = (dataclasses.replace(self._settings, algorithm=st.settings[0],
                                     lmc=st.settings[1]) if st.settings else self._settings)
            ep = st.epoch
            if ep is not None and st.base is not None:
                try:
                    self._transact(Change("resume", st.base, st.down, settings=s,
                                          source=st.base_source, resumed=(ep, st.validation)))
                except ServiceError as err:
                    self.log("error", "resume_refused", epoch=ep.id, error=err.message)
                    ep = None
            if ep is None:  # what was rebuilt is kept: routed by the catch-up or a Route
                self.base, self.down, self.base_source = st.base, st.down, st.base_source
                self._settings = s
            if st.lost:
                self.state_loss.enter("; ".join(st.lost), st.down)
            # no stored epoch (all lost, or none committed): the state in force is routed
            behind = not st.lost and (st.journal_events > 0 or st.last_id > ep.id
                                      if ep is not None else
                                      st.last_id > 0 or d.configured is not None)
            out = Resumed(ep, behind, st.journal_events, time.perf_counter() - t0, st.lost,
                          st.last_id)
            self.log("error" if st.lost else "info", "resumed", epoch=ep.id if ep else None,
                     instance=d.instance, down=st.down.summary(),
                     journal_events=st.journal_events, last_committed=st.last_id,
                     algorithm=self._settings.algorithm, lmc=lmc_text(self._settings.lmc),
                     seconds=round(out.seconds, 4), moved_aside=st.moved_aside or None,
                     damage=st.damage or None, lost="; ".join(st.lost) or None)
            return out
        return self._wait(self.seq.call(do))

    def _resume_epoch(self, ep: Epoch, validation: Validation | str) -> Epoch:
        """Serve the stored epoch ``ep`` again, with its id and validation."""
        self.store.resume(ep, validation, self.store.next_id())  # ids never reused
        if validation == "pending":
            self.validator.later(ep)
        return ep

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
        self.state_loss.check(self.down)
        base = self.need_base()
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
        for k, n in kinds.items() if not dry_run else ():  # a dry run is no fault event
            self.metric("faults_received", n, k)
        job = FaultJob(tuple(events), dry_run=dry_run, received=self.clock(),
                       journaled=journaled)
        return self._wait(self.seq.submit(job))  # type: ignore[no-any-return]

    def _dry_run(self, job: FaultJob) -> None:
        """Resolve a dry-run job with the would-be epoch of its events."""
        base, cur = self.need_base(), self.store.current
        if cur is None:
            raise ServiceError(Status.FAILED_PRECONDITION,
                               "no epoch committed yet: call Route first")
        down = apply_events(base, self.down, job.events)
        ch = self._transact(Change("dry_run", base, down, dry_run=True,
                                    faults=records(job.events)))
        job.future.set_result(FaultOutcome(ch.epoch, ch.diff, len(job.events), False))

    def _run_batch(self, jobs: list[FaultJob]) -> None:
        t0 = min(j.received for j in jobs)
        t_start = self.clock()
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
            ch = self._transact(Change(
                "faults", base, down, faults=records([e for j in ok for e in j.events]),
                t_event=t0, timings=(("queued", t_start - t0),)))
        except ServiceError as err:
            for j in ok:
                j.future.set_exception(err)
            return
        for j in ok:
            j.future.set_result(FaultOutcome(ch.epoch, ch.diff, n_events, ch.committed))

    # ------------------------------------------------------------ subnet manager
    def route_subnet(self, sm: Fabric, lmc: int, source: str, facts: VlFacts | None = None
                     ) -> tuple[Epoch, bool]:
        """Bring the daemon to a subnet manager's view ``sm`` (LMC ``lmc``, VL
        ``facts`` for max_vls auto; cause ``sm``; :mod:`smroute.service.subnet`): its
        down items against the base when it is the base minus some links, switches
        or CAs (rerouted incrementally where possible), else ``sm`` becomes the
        base, routed in full.  Returns the serving epoch and whether committed now."""
        def do() -> tuple[Epoch, bool]:
            t0, self.vl_facts = self.clock(), facts
            self.durable.vl_facts(facts)  # kept for a restart (logged if it cannot be)
            down, why, events = subnet.plan(self.base, self.down, self._settings.lmc, sm, lmc)
            if down is None:
                self.log("info", "fabric_loaded", source=source, why=why, hash=sm.content_hash,
                         switches=len(sm.switches), cas=len(sm.cas), links=sm.n_links)
            for kind in sorted({e.kind for e in events}):
                self.metric("faults_received", sum(e.kind == kind for e in events), kind)
            ch = self._transact(Change(
                "sm", self.base if self.base is not None and down is not None else sm,
                down if down is not None else DownSet(), faults=records(events),
                settings=dataclasses.replace(self._settings, lmc=lmc),
                source=None if down is not None else source, full=down is None,
                t_event=t0, timings=(("compare", self.clock() - t0),)))
            if not ch.committed:
                self.log("debug", "subnet_unchanged", source=source, epoch=ch.epoch.id)
            return ch.epoch, ch.committed
        return self._wait(self.seq.call(do))

    # ------------------------------------------------------------ analysis
    def analyze(self, ep: Epoch, order: str, seed: int, samples: int) -> dict[str, Any]:
        """Congestion metrics of ``ep``, computed in the helper process
        (:meth:`HelperProcess.analyze`)."""
        return self.helper.analyze(ep, order, seed, samples)

    def epoch(self, epoch_id: int) -> Epoch:
        """Epoch ``epoch_id`` (0 = current); NOT_FOUND if not kept."""
        self.state_loss.check(self.down)
        try:
            return self.store.get(epoch_id)
        except KeyError as err:
            code = (Status.FAILED_PRECONDITION if self.store.current is None
                    else Status.NOT_FOUND)
            raise ServiceError(code, str(err.args[0])) from None

