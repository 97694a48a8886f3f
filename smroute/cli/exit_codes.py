"""The exit statuses of every ``smroute`` command: one table, used by the
CLI (:func:`smroute.cli.main.main`, the ``--help`` epilog) and documented
in deploy/OPERATORS.md.  :class:`~smroute.errors.InputError` exits
:data:`BAD_INPUT`, :class:`~smroute.errors.RoutingError`
:data:`CANNOT_ROUTE`."""

from __future__ import annotations

import signal

__all__ = ["BAD_INPUT", "BROKEN_PIPE", "CANNOT_ROUTE", "EXIT_CODES", "FINDINGS", "INTERRUPTED",
           "OK", "TERMINATED", "describe"]

OK = 0
#: routed but invalid, differences found, undeliverable pairs; or a failure
#: a retry may cure: a real tool that failed (Graphviz, ibnetdiscover),
#: ``serve``'s port in use or state database held
FINDINGS = 1
#: bad input: a file, option, config, request or fabric that is wrong -- an
#: unparseable file, an LMC the fabric's LIDs do not fit, a partial discovery
#: (CAs, no switch), a table file cut short.  ``serve``: not restarted by
#: systemd (RestartPreventExitStatus=2)
BAD_INPUT = 2
#: a good fabric that cannot be routed as asked (disconnected, LIDs beyond
#: the unicast range, no route the validation accepts)
CANNOT_ROUTE = 3
#: SIGINT (Ctrl-C), after a clean stop
INTERRUPTED = 130
#: SIGTERM (``kill``), after the same clean stop (``serve``: 0, its own shutdown)
TERMINATED = 128 + signal.SIGTERM
#: the reader of stdout went away (``smroute ... | head``)
BROKEN_PIPE = 128 + signal.SIGPIPE

EXIT_CODES: dict[int, str] = {
    OK: "success",
    FINDINGS: "done, with findings: routed but invalid, differences, undeliverable pairs; "
              "or a failure a retry may cure (a tool that failed, serve's port in use)",
    BAD_INPUT: "bad input: file, option, config or request (LMC mismatch and partial "
               "discovery included); serve is not restarted by systemd",
    CANNOT_ROUTE: "the fabric cannot be routed",
    INTERRUPTED: "interrupted (SIGINT)",
    TERMINATED: "terminated (SIGTERM; serve: 0, a clean shutdown)",
    BROKEN_PIPE: "output pipe closed",
}


def describe() -> str:
    """The table as text (``smroute --help``)."""
    return "exit status:\n" + "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES.items())
