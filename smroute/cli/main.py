"""The ``smroute`` command: one subcommand per module in :mod:`smroute.cli`.

Each command module exposes ``register(subparsers)`` which adds its parser and
sets ``func`` (taking the parsed ``argparse.Namespace``, returning an exit code).
Expected errors (:class:`smroute.errors.SmrouteError`) are printed without a
traceback and turned into their exit code; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from smroute import __version__
from smroute.errors import SmrouteError

#: Modules under smroute.cli that register subcommands, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "fabric_cmd",
    "discover_cmd",
    "route_cmd",
    "diff_cmd",
    "analyze_cmd",
    "lids_cmd",
    "order_cmd",
    "study_cmd",
    "serve_cmd",
    "config_cmd",
    "bridge_cmd",
    "slurm_cmd",
    "completion_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="smroute",
        description="Dmodc routing for InfiniBand fat-trees: ingest, route, analyze, serve.",
    )
    parser.add_argument("--version", action="version", version=f"smroute {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"smroute.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except SmrouteError as err:
        print(f"smroute: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("smroute: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
