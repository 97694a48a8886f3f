"""Open server streams counted against the daemon's limits
(:class:`StreamCounter`); per-client limits and reserved capacity are
:mod:`smroute.service.rpc.capacity`'s."""

from __future__ import annotations

import threading

from smroute.service.config import LimitsConfig
from smroute.service.errors import ServiceError, Status

__all__ = ["StreamCounter"]


class StreamCounter:
    """Streams open by kind (``"tables"``: GetTables, ``"watch"``: Watch)."""

    def __init__(self) -> None:
        self._open = {"tables": 0, "watch": 0}
        self._lock = threading.Lock()

    def acquire(self, kind: str, limits: LimitsConfig) -> None:
        """Count an open stream of ``kind``; RESOURCE_EXHAUSTED beyond
        ``limits.max_streams`` / ``limits.max_watchers``."""
        what, key = ("Watch", "max_watchers") if kind == "watch" else ("GetTables", "max_streams")
        limit = getattr(limits, key)
        with self._lock:
            if self._open[kind] >= limit:
                raise ServiceError(Status.RESOURCE_EXHAUSTED,
                                   f"{self._open[kind]} {what} streams open; the limit "
                                   f"(limits.{key}) is {limit}")
            self._open[kind] += 1

    def release(self, kind: str) -> None:
        """Undo :meth:`acquire` of the same ``kind``."""
        with self._lock:
            self._open[kind] -= 1
