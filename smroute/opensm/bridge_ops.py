"""What the bridge's helpers (:mod:`smroute.opensm.dryrun`,
:mod:`smroute.opensm.resync`) use of :class:`smroute.opensm.bridge.Bridge`
(:class:`BridgeOps`), so that they need not import the bridge that calls
them."""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from smroute.fabric.faults import DownSet, FaultEvent
from smroute.fabric.model.arrays import Fabric
from smroute.opensm.bridge_state import BridgeOptions, BridgeState
from smroute.tables.lft import ForwardingTables

__all__ = ["BridgeOps"]


class BridgeOps(Protocol):
    """The bridge's state and calls its helpers use (see the module doc)."""

    opts: BridgeOptions
    base: Fabric | None
    state: BridgeState
    last_tables: ForwardingTables | None
    daemon_instance: str
    epoch_queue: queue.Queue[int]

    @property
    def client(self) -> Any: ...
    def log(self, level: str, event: str, **fields: Any) -> None: ...
    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any: ...
    def save_state(self) -> None: ...
    def events_pb(self, events: Sequence[FaultEvent]) -> list[Any]: ...
    def pending(self) -> tuple[list[FaultEvent], DownSet, list[str], float]: ...
    def fetch_tables(self, epoch: int) -> ForwardingTables: ...
    def initialize(self, lines: list[str] | None = None, *, reason: str = "start") -> int: ...
