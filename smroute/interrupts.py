"""SIGTERM as an interrupt: a command or a benchmark killed with ``kill``
stops as on Ctrl-C, its ``with`` blocks stopping what it started (ibsim,
OpenSM, the workers)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

__all__ = ["Terminated", "sigterm_interrupts"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program runs (:func:`sigterm_interrupts`)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated`.  Off the main
    thread, where no handler can be set, the caller's handlers stay."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
