"""Typed errors shared by the library and the CLI.

Every user mistake (bad file, bad option, bad request) raises a subclass of
:class:`SmrouteError`; the CLI prints its message and exits with ``exit_code``
(2 for bad input) without a traceback.
"""

from __future__ import annotations


class SmrouteError(Exception):
    """Base of all expected errors. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class InputError(SmrouteError, ValueError):
    """Bad input: names the source (file) and line where known.

    ``str(err)`` reads ``SOURCE:LINE: MESSAGE`` (parts omitted when unknown).
    """

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.source is not None:
            where = f"{self.source}:"
        if self.line is not None:
            where += f"{self.line}:" if where else f"line {self.line}:"
        return f"{where} {self.message}" if where else self.message

    def with_source(self, source: str) -> InputError:
        """The same error, naming ``source`` (e.g. the file path)."""
        err = type(self).__new__(type(self))
        err.message, err.source, err.line = self.message, source, self.line
        Exception.__init__(err, err._format())
        return err


class LmcMismatchError(InputError):
    """The fabric's LIDs do not fit the LMC asked (a base LID not aligned to
    2**LMC, or LIDs of two ports overlapping): bad input, as in every command."""


class RoutingError(SmrouteError):
    """The fabric cannot be routed as asked (e.g. LIDs do not fit, disconnected)."""

    exit_code = 3


class DaemonUnreachableError(SmrouteError):
    """The routing daemon cannot be reached (nothing listens at its address,
    the connection or TLS is refused): the client commands exit 4."""

    exit_code = 4
