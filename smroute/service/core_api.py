"""The daemon core's public types: what its one state transaction
(:meth:`smroute.service.core.RoutingCore.change`) takes and gives (the
routing :class:`Settings`, a :class:`Change` request and its outcome
:class:`Changed`) and what it reports to (:class:`Metrics`, a log function).
Types only; the transaction itself lives in the core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from smroute.fabric.faults import DownSet, FaultEvent
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import GuidOverrides
from smroute.routing import api
from smroute.routing.validate import Validation
from smroute.service.epochs import Epoch, FaultRecord
from smroute.service.vlchoice import AUTO, MaxVls
from smroute.tables.diff import TableDiff

__all__ = ["CAUSES", "Change", "Changed", "LogFn", "Metrics", "Settings", "no_log", "records"]

LogFn = Callable[..., None]


def no_log(level: str, event: str, **fields: Any) -> None:
    """A log function that drops everything."""
    return None


class Metrics(Protocol):
    """What the core reports (implemented by smroute.service.metrics.ServiceMetrics)."""

    def observe_route(self, seconds: float, kind: str) -> None: ...
    def epoch_committed(self, epoch_id: int, table_bytes: int, mode: str = "tree",
                        turn_lids: int = 0, max_vls: int = 1) -> None: ...
    def faults_received(self, n: int, kind: str) -> None: ...
    def request(self, method: str, code: str) -> None: ...
    def stream_opened(self, method: str) -> None: ...
    def stream_closed(self, method: str) -> None: ...
    def reroute_failed(self, reason: str) -> None: ...
    def state_degraded(self, degraded: bool) -> None: ...
    def state_db_moved_aside(self) -> None: ...

#: Why an epoch changes, and what a failed route of each says it was.
CAUSES = {"route": "route", "faults": "reroute after {n} fault events",
          "sm": "routing the subnet manager's view", "dry_run": "dry run",
          "resume": "resume"}


@dataclass(frozen=True)
class Settings:
    """The routing settings: algorithm, LIDs per end-port = 2**lmc (``None``:
    each end-port's LMC in the fabric, as ``smroute route`` without
    ``--lmc``), the data VLs the subnet manager programs (2 or more lets a
    tree take detours over VLs: routing mode tree+detours; ``"auto"``: what
    the subnet manager's VL facts allow,
    :func:`~smroute.service.vlchoice.choose_vls`), the operator's overrides
    of the fabric's roles (OpenSM guid files), and whether every CA pair
    needs a route (``all_ca_pairs``; else the roles' rule,
    :func:`~smroute.fabric.roles.needed_pairs`).  The core
    replaces them on its sequencer thread only: with a committed change, or
    :meth:`~smroute.service.core.RoutingCore.configure` (a config reload)."""

    algorithm: str = api.DEFAULT
    lmc: int | None = None
    max_vls: MaxVls = AUTO
    overrides: GuidOverrides | None = None
    all_ca_pairs: bool = False


@dataclass(frozen=True)
class Change:
    """A change's request: ``cause`` (a :data:`CAUSES` key), the desired
    ``base`` fabric and ``down`` set, ``dry_run``, the fault events the epoch
    records, the settings adopted with the commit (``None``: those in force),
    a new base's ``source``, ``full`` (route from scratch; also: commit even if
    nothing changed), ``t_event`` (clock time of the first event: timings get
    ``event_to_commit``), ``timings`` of phases before the transaction, and
    ``resumed``: a stored epoch and its validation, taken as routed."""

    cause: str
    base: Fabric
    down: DownSet
    dry_run: bool = False
    faults: tuple[FaultRecord, ...] = ()
    settings: Settings | None = None
    source: str | None = None
    full: bool = False
    t_event: float | None = None
    timings: tuple[tuple[str, float], ...] = ()
    resumed: tuple[Epoch, Validation | str] | None = None


@dataclass(frozen=True)
class Changed:
    """What a change gives: the epoch serving after it (a dry run: the
    would-be epoch, id 0), the diff against the serving epoch it replaced
    (``None``: nothing to diff), whether an epoch was committed, and how it
    was routed (incrementally, or in full and why)."""

    epoch: Epoch
    diff: TableDiff | None
    committed: bool
    incremental: bool = False
    why_full: str = ""


def records(events: Sequence[FaultEvent]) -> tuple[FaultRecord, ...]:
    """What an epoch records of fault events."""
    return tuple(FaultRecord(e.kind, e.guid, e.port) for e in events)
