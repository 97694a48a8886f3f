"""``-q/--quiet`` on every command: progress and information lines on stderr
are dropped, errors and warnings still shown.

:func:`add_quiet_options` gives every (sub)command that has no ``--quiet`` of
its own the option, and :class:`QuietStream` is stderr while such a command
runs with it (``quiet_stream`` set).  The commands with their own ``--quiet``
(route, lids, analyze, study, fabric generate) turn off their progress
themselves and keep their result summary.
A line is kept when it names an error or a warning (``smroute: error: ...``,
``FILE: warning: ...``, a JSON log record of level warning or error).
"""

from __future__ import annotations

import argparse
import re
from typing import TextIO

__all__ = ["QuietStream", "add_quiet_options"]

_KEEP = re.compile(r"\berror\b|\bwarning\b|\binterrupted\b|\bcritical\b", re.IGNORECASE)
_HELP = "quiet: no progress or information lines on stderr (errors and warnings still shown)"


def add_quiet_options(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet`` to each command under ``parser`` (recursively) that
    has neither."""
    for action in parser._actions:  # argparse keeps its subparsers there
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                if sub._subparsers is None and not ({"-q", "--quiet"}
                                                    & set(sub._option_string_actions)):
                    sub.add_argument("-q", "--quiet", action="store_true", help=_HELP)
                    sub.set_defaults(quiet_stream=True)
                add_quiet_options(sub)


class QuietStream:
    """A text stream passing on only the whole lines that name an error or a
    warning (see the module doc) to ``inner``."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._part = ""

    def write(self, text: str) -> int:
        lines = (self._part + text).split("\n")
        self._part = lines.pop()
        for line in lines:
            line = line.rsplit("\r", 1)[-1]  # what a terminal would show
            if _KEEP.search(line):
                self.inner.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def finish(self) -> TextIO:
        """Pass on a last unterminated line if it is kept; returns ``inner``."""
        last = self._part.rsplit("\r", 1)[-1]
        if _KEEP.search(last):
            self.inner.write(last + "\n")
        self._part = ""
        self.inner.flush()
        return self.inner

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.inner, "encoding", "utf-8")
