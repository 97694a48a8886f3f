"""Reaching the daemon from a bridge that may start before it (edge module).

A bridge started while the daemon is down (both units start at boot, or the
daemon restarts) waits for it: each attempt that fails is logged
(``daemon_unreachable``, with the attempt and the delay before the next one)
and retried with exponential back-off (:class:`~smroute.opensm.backoff.Backoff`),
until the daemon answers or the bridge is stopped.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from smroute.errors import DaemonUnreachableError
from smroute.opensm.backoff import Backoff

__all__ = ["connect_with_retry"]


def connect_with_retry(bridge: Any, *, stop: threading.Event, attempt_s: float = 2.0,
                       backoff: Backoff | None = None,
                       clock: Callable[[], float] = time.monotonic) -> bool:
    """Connect ``bridge`` (a :class:`~smroute.opensm.bridge.Bridge`) to its
    daemon, retrying with ``backoff`` (default 1 s doubling up to 30 s) while
    it cannot be reached; each attempt waits at most ``attempt_s``.  True once
    connected, False if ``stop`` was set first."""
    retry = backoff if backoff is not None else Backoff(initial_s=1.0, max_s=30.0)
    while not stop.is_set():
        try:
            bridge.connect(timeout=attempt_s)
        except DaemonUnreachableError as err:
            with contextlib.suppress(Exception):
                bridge.client.close()
            delay = retry.failed(clock())
            bridge.log("warning", "daemon_unreachable", daemon=bridge.opts.daemon,
                       attempt=retry.failures, retry_in_s=f"{delay:g}", error=str(err))
            stop.wait(delay)
            continue
        if retry.total:
            bridge.log("info", "daemon_reached", daemon=bridge.opts.daemon,
                       attempts=retry.total + 1)
        retry.succeeded()
        return True
    return False
