"""The one progress display of the long commands (route, analyze, lids, study).

Phase lines, which scripts and tests read, on the given stream (stderr)::

    smroute: routing with nmodc...
    smroute:   route done in 0.351 s (rank 0.035 s, costs 0.026 s, ...)

and progress bars drawn by `tqdm <https://tqdm.github.io/>`_ on the same
stream when it is a terminal: redrawn in place (count, rate, elapsed and
remaining time).  When the stream is a file or a pipe (a log), there is no
bar to redraw: a plain line per update at most every :data:`LOG_INTERVAL`
seconds, and one when the work is complete, never the same count twice::

    smroute:   stages: 12/31 (39%)

Lines written while a bar is open (:meth:`Progress.write`) go above it.
``enabled=False`` (the commands' ``-q/--quiet``) prints nothing but keeps the
timings, which the route summary prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported where a bar is drawn: most commands draw none
    from tqdm import tqdm

__all__ = ["LOG_INTERVAL", "Progress"]

#: Seconds between bar refreshes when the stream is not a terminal.
LOG_INTERVAL = 10.0
_PREFIX = "smroute:"


class Progress:
    """Phase lines and progress bars on ``stream`` (module doc).

    ``clock`` is injected (``time.perf_counter`` by default); ``enabled=False``
    keeps the timings but prints nothing.  Usable as a context manager that
    closes any open bar.
    """

    def __init__(
        self, stream: TextIO, *, enabled: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.stream = stream
        self.enabled = enabled
        self.clock = clock
        self.timings: dict[str, float] = {}
        self._t0 = clock()
        self._bars: dict[str, tqdm[Any]] = {}
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        #: not a terminal: per label, the clock time, count and total of its last line
        self._logged: dict[str, tuple[float, int, int]] = {}

    # ---------------------------------------------------------------- lines
    def write(self, line: str) -> None:
        """One line on the stream, above any open bar (nothing if disabled)."""
        if not self.enabled:
            return
        if self._bars:  # above the open bars
            from tqdm import tqdm

            tqdm.write(line, file=self.stream)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def start(self, label: str) -> float:
        """Announce a phase; returns its start time."""
        self.write(f"{_PREFIX} {label}...")
        return self.clock()

    def done(self, name: str, started: float, note: str = "") -> None:
        """Record phase ``name`` as having started at ``started``; closes its bars."""
        dt = self.clock() - started
        self.timings[name] = self.timings.get(name, 0.0) + dt
        self.close()
        extra = f" ({note})" if note else ""
        self.write(f"{_PREFIX}   {name} done in {dt:.3f} s{extra}")

    def elapsed(self) -> float:
        return self.clock() - self._t0

    # ---------------------------------------------------------------- bars
    def bar(self, label: str, total: int, unit: str = "it", initial: int = 0) -> tqdm[Any]:
        """A new bar for ``total`` units of work, ``initial`` of them done
        (replacing any bar of that label)."""
        from tqdm import tqdm

        old = self._bars.pop(label, None)
        if old is not None:
            old.close()
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        b: tqdm[Any] = tqdm(
            total=total, initial=initial, desc=f"{_PREFIX}   {label}", unit=unit,
            file=self.stream, disable=not self.enabled, leave=True, dynamic_ncols=tty,
            ncols=None if tty else 100, ascii=not tty,
            mininterval=0.1 if tty else LOG_INTERVAL,
        )
        self._bars[label] = b
        return b

    def fraction(self, label: str, done: int, total: int) -> None:
        """``done`` of ``total`` units of work (a callback for long loops): the
        bar of ``label``, created on first use (or when ``total`` changes or
        ``done`` goes back), closed when ``done`` reaches ``total``."""
        if not self.enabled or total <= 0:
            return
        done = min(done, total)
        if not self._tty:
            self._log_line(label, done, total)
            return
        b = self._bars.get(label)
        if b is None or b.total != total or done < b.n:
            b = self.bar(label, total, initial=done)
        b.update(done - b.n)
        if done >= total:
            b.close()
            self._bars.pop(label, None)

    def _log_line(self, label: str, done: int, total: int) -> None:
        """A line for a log: the first update, then at most every
        :data:`LOG_INTERVAL` seconds, and the last (``done == total``)."""
        now = self.clock()
        last = self._logged.get(label)
        same_run = last is not None and last[2] == total and done >= last[1]
        if last is not None and same_run and (
                done == last[1] or (done < total and now - last[0] < LOG_INTERVAL)):
            return
        self.write(f"{_PREFIX}   {label}: {done}/{total} ({100 * done // total}%)")
        self._logged[label] = (now, done, total)

    def close(self) -> None:
        """Close every open bar (each leaves its last state on its own line)."""
        for b in self._bars.values():
            b.close()
        self._bars.clear()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
