"""Structured log lines (``json`` or ``key=value`` text) for the daemon and the bridge.

Kept apart from :mod:`smroute.service.rpc.server` so that the OpenSM bridge can log
the same way without importing the server (gRPC health, reflection, metrics).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["Logger"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


class Logger:
    """Structured log lines on ``stream``: ``json`` (one object per line with
    ``ts``, ``level``, ``event`` and the fields) or ``text`` (``key=value``).
    Thread-safe; :meth:`configure` changes format and level live."""

    def __init__(self, stream: TextIO = sys.stderr, *, fmt: str = "json",
                 level: str = "info") -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self.configure(fmt, level)

    def configure(self, fmt: str, level: str) -> None:
        """Set the format (``json`` / ``text``) and the lowest level written."""
        self.fmt = fmt
        self.level = _LEVELS.get(level, 20)

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        if _LEVELS.get(level, 20) < self.level:
            return
        rec = {"ts": round(time.time(), 3), "level": level, "event": event, **fields}
        if self.fmt == "json":
            line = json.dumps(rec, default=str, separators=(",", ":"))
        else:
            line = " ".join(f"{k}={_text(v)}" for k, v in rec.items())
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def _text(v: Any) -> str:
    """``v`` as one ``key=value`` token: JSON for non-strings, JSON-quoted if
    empty or containing a space, quote, ``=`` or newline."""
    if isinstance(v, str):
        s = v
    else:
        s = json.dumps(v, default=str, separators=(",", ":"))
        if s.startswith('"'):  # an object shown by its str() (a Path, ...): quote once
            s = json.loads(s)
    return json.dumps(s) if (not s or any(c in s for c in ' "=\n')) else s
