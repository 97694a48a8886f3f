"""The ``smroute`` command: one subcommand per module in :mod:`smroute.cli`.

Each command module exposes ``register(subparsers)`` which adds its parser and
sets ``func`` (taking the parsed ``argparse.Namespace``, returning an exit code).
Expected errors (:class:`smroute.errors.SmrouteError`) are printed without a
traceback and turned into their exit code; usage errors exit 2.  Every
command accepts ``-q/--quiet`` (:mod:`smroute.cli.quiet`).  Every
message is printed through :func:`smroute.text.printable` (control bytes
escaped, length bounded), and values argparse echoes are cut short.

A closed pipe (``smroute diff A B | head -1``) never changes the exit status
into a success nor prints a traceback:

* output a command writes through :mod:`smroute.cli.outputs` (its result)
  whose reader went away is dropped, and the command exits with its own
  status (diff: 1 if the tables differ, even when nobody read the diff);
* the flush at exit of what is still buffered: the same, the status stays;
* a write that breaks anywhere else (e.g. a progress line on a closed
  stderr) stops the command before it knows its status: exit 141
  (128 + SIGPIPE, what a shell reports for a command killed by SIGPIPE).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from smroute import __version__
from smroute.cli import exit_codes
from smroute.cli.outputs import drop_stdout
from smroute.cli.quiet import QuietStream, add_quiet_options
from smroute.errors import SmrouteError
from smroute.interrupts import Terminated, sigterm_interrupts
from smroute.text import printable

#: Each subcommand and the module under smroute.cli that registers it, in help order.
COMMANDS: dict[str, str] = {
    "fabric": "fabric_cmd",
    "discover": "discover_cmd",
    "route": "route_cmd",
    "diff": "diff_cmd",
    "analyze": "analyze_cmd",
    "trace": "trace_cmd",
    "lids": "lids_cmd",
    "order": "order_cmd",
    "study": "study_cmd",
    "serve": "serve_cmd",
    "ctl": "ctl_cmd",
    "check-config": "config_cmd",
    "opensm-bridge": "bridge_cmd",
    "slurm": "slurm_cmd",
    "completion": "completion_cmd",
}
#: Modules under smroute.cli that register subcommands, in help order.
COMMAND_MODULES: tuple[str, ...] = tuple(COMMANDS.values())

#: Exit status when the pipe broke before the command knew its status.
EXIT_BROKEN_PIPE = exit_codes.BROKEN_PIPE
#: Characters of one value argparse quotes in a usage error, at most.
_QUOTED_CHARS = 80
_QUOTED = re.compile(r"'(?:[^'\\]|\\.){" + str(_QUOTED_CHARS + 1) + ",}'")


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors that echo a value cut short and escaped."""

    def error(self, message: str) -> NoReturn:
        message = _QUOTED.sub(lambda m: m.group(0)[:_QUOTED_CHARS - 4] + "...'", message)
        super().error(printable(message))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``smroute`` parser; with ``command`` (one of :data:`COMMANDS`) only
    that subcommand is registered, so a command imports what it uses, not
    every other command's modules (grpc, plotting, the lab...)."""
    parser = _Parser(
        prog="smroute",
        description="Dmodc routing for InfiniBand fat-trees: ingest, route, analyze, serve.",
        epilog=exit_codes.describe(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"smroute {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    names = [COMMANDS[command]] if command in COMMANDS else COMMAND_MODULES
    for name in names:
        importlib.import_module(f"smroute.cli.{name}").register(sub)
    add_quiet_options(parser)
    return parser


def _drop_output() -> None:
    """A standard stream's reader went away: send both to /dev/null (the
    failed write is still buffered; the flush at exit must not raise)."""
    drop_stdout()
    with contextlib.suppress(AttributeError, OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stderr.fileno())
        os.close(null)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: the process's); returns its exit
    status, usage errors (2) and ``--help`` / ``--version`` (0) included."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as ex:  # argparse has printed the usage error or the help
        return ex.code if isinstance(ex.code, int) else 2
    quiet = (QuietStream(sys.stderr) if getattr(args, "quiet", False)
             and getattr(args, "quiet_stream", False) else None)
    if quiet is not None:  # -q: progress and information lines dropped
        sys.stderr = quiet  # type: ignore[assignment]
    try:
        return _run(args)
    finally:
        if quiet is not None:
            sys.stderr = quiet.finish()


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command (see :func:`main`); SIGTERM stops it as SIGINT
    does (``serve`` sets its own handlers: a graceful shutdown)."""
    try:
        with sigterm_interrupts():
            try:
                rc = int(args.func(args) or 0)
            except SmrouteError as err:
                print(f"smroute: error: {printable(str(err))}", file=sys.stderr)
                rc = err.exit_code
            except Terminated:
                print("smroute: terminated", file=sys.stderr)
                rc = exit_codes.TERMINATED
            except KeyboardInterrupt:
                print("smroute: interrupted", file=sys.stderr)
                rc = exit_codes.INTERRUPTED
    except BrokenPipeError:
        _drop_output()
        return EXIT_BROKEN_PIPE
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
    return rc


if __name__ == "__main__":
    sys.exit(main())
