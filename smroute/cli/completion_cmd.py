"""``smroute completion bash|zsh|fish``: a shell completion script for the whole
command line, generated from the argparse parser by
`shtab <https://github.com/iterative/shtab>`_ (commands, subcommands, options
and choices; file names where an argument is a file, directories where it is a
directory).

    source <(smroute completion bash)                      # this shell
    smroute completion bash > /etc/bash_completion.d/smroute
    smroute completion zsh > "${fpath[1]}/_smroute"         # then compinit
    smroute completion fish > ~/.config/fish/completions/smroute.fish
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["SHELLS", "register", "cmd_completion", "completion_script"]

SHELLS = ("bash", "zsh", "fish")
#: Metavars (and, without one, destinations) of arguments that name a file or a directory.
_FILE_NAMES = frozenset({
    "FILE", "FABRIC", "TABLES", "OLD", "NEW", "HOSTS", "CSV", "PATH", "F", "ORIGINAL",
    "CONFIG", "HOSTFILE", "fabric", "file", "tables", "old", "new", "job", "config", "csv",
    "out", "lfts_file", "tls_ca", "tls_cert", "tls_key", "removed", "host_map",
    "PEM", "REFERENCE", "CURRENT", "LANES", "lanes", "hosts_file",
})
_DIR_NAMES = frozenset({"DIR", "workdir", "state_dir"})


def register(subparsers: Any) -> None:
    """Add the ``completion`` command to ``subparsers``."""
    p = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh or fish)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete for")
    p.set_defaults(func=cmd_completion)


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    """Tell shtab which arguments complete as file or directory names."""
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _mark_paths(sub)
            continue
        if action.choices is not None or action.nargs == 0:
            continue
        names = {str(action.metavar), action.dest}
        if names & _DIR_NAMES:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif names & _FILE_NAMES:
            action.complete = shtab.FILE  # type: ignore[attr-defined]


def completion_script(shell: str) -> str:
    """The completion script of the ``smroute`` command for ``shell``."""
    import shtab

    from smroute.cli.main import build_parser

    parser = build_parser()
    _mark_paths(parser)
    return str(shtab.complete(parser, shell=shell))


def cmd_completion(args: argparse.Namespace) -> int:
    sys.stdout.write(completion_script(args.shell))
    return 0
