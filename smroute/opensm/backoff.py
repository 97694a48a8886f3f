"""Exponential back-off for a failing operation (pure: the caller passes the time).

The OpenSM bridge retries writing the LFT file with it (a full or read-only
disk): after the n-th consecutive failure it waits ``initial_s * factor**(n-1)``
seconds, at most ``max_s``; a success starts again from ``initial_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass
class Backoff:
    """Back-off state.  ``failures``: consecutive failures; ``total``: every
    failure so far (a counter for logs and the state file); ``retry_at``: the
    time (same clock as ``now``, seconds) before which no retry is due."""

    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 60.0
    failures: int = 0
    total: int = 0
    retry_at: float = 0.0

    def failed(self, now: float) -> float:
        """Record a failure at ``now``; returns the delay (seconds) until the retry."""
        delay = min(self.max_s, self.initial_s * self.factor ** min(self.failures, 64))
        self.failures += 1
        self.total += 1
        self.retry_at = now + delay
        return delay

    def succeeded(self) -> None:
        """Record a success: the next failure waits ``initial_s`` again."""
        self.failures = 0
        self.retry_at = 0.0

    def due(self, now: float) -> bool:
        """True when a retry (or a first try) may run at ``now``."""
        return now >= self.retry_at
