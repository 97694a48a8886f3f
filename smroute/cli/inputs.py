"""Input files of the CLI commands, read with errors a user can act on.

Every reader turns a missing/unreadable file, a binary file or a parse error
into an :class:`~smroute.errors.InputError` naming the file (and the line
where the parser knows it), which the CLI prints without a traceback and
exits 2.  Lines a fabric parser skipped (terminal prompts, ibnetdiscover
diagnostics, ...) are printed to stderr as ``FILE:LINE: warning: skipped ...``;
``--strict`` (:func:`add_strict_option`) makes them errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from smroute.errors import InputError
from smroute.fabric.model import Fabric
from smroute.tables.lft import ForwardingTables

if TYPE_CHECKING:
    from smroute.fabric.ibtext import ParseWarning
    from smroute.fabric.roles import GuidOverrides

__all__ = ["add_strict_option", "load_fabric", "load_tables"]

T = TypeVar("T")


def _guarded(read: Callable[[str], T], path: str) -> T:
    try:
        return read(path)
    except InputError as err:
        raise err if err.source is not None else err.with_source(path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", source=path) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not a text file ({err.reason})", source=path) from None


def add_strict_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--strict`` (``args.strict``) to a command that reads a fabric file
    with :func:`load_fabric`."""
    parser.add_argument(
        "--strict", action="store_true",
        help="fail on any line of the fabric file that would be skipped with a warning "
        "(terminal prompts, ibnetdiscover diagnostics, text around the records, links "
        "to ports a ports report does not list, switches without a LID)",
    )


def load_fabric(path: str, *, strict: bool = False) -> Fabric:
    """The fabric of an ``ibnetdiscover`` file: topology text (also ibdiagnet's
    ``.ibnetdiscover``) or the ports report of ``ibnetdiscover -p``, told apart
    by its first meaningful line.

    Each skipped line is printed to stderr as a warning (``strict``: an error).
    A fabric without any switch (a partial discovery) is an error explaining it.
    """
    from smroute.fabric.ibnetdiscover import read_fabric, require_switches

    warnings: list[ParseWarning] = []
    try:
        fabric = _guarded(lambda p: read_fabric(p, strict=strict, warnings=warnings), path)
    finally:
        for w in warnings:
            print(w, file=sys.stderr)
    require_switches(fabric, path)
    return fabric


def load_tables(path: str) -> ForwardingTables:
    """Forwarding tables in any format :func:`smroute.tables.formats.read_tables`
    detects; a file with no table at all is an error."""
    from smroute.tables.formats import read_tables

    tables = _guarded(read_tables, path)
    if tables.n_switches == 0:
        raise InputError("no forwarding tables found (empty file?)", source=path)
    return tables


def add_role_options(parser: argparse.ArgumentParser) -> None:
    """The operator's overrides of the fabric's roles, in OpenSM's guid-file
    formats (see :func:`load_overrides`)."""
    g = parser.add_argument_group("roles (OpenSM guid files: one 0x-prefixed GUID per line)")
    g.add_argument("--root-guids", metavar="FILE",
                   help="root switches (OpenSM root_guid_file): ranks count down from them")
    g.add_argument("--cn-guids", metavar="FILE",
                   help="compute nodes (OpenSM cn_guid_file): their switches are the leaves")
    g.add_argument("--io-guids", metavar="FILE", help="I/O nodes (OpenSM io_guid_file)")


def load_overrides(args: argparse.Namespace) -> GuidOverrides | None:
    """The :class:`~smroute.fabric.roles.GuidOverrides` the options of
    :func:`add_role_options` name (``None`` if none)."""
    from smroute.fabric.roles import GuidOverrides, read_guid_file

    files = {k: getattr(args, k + "_guids", None) for k in ("root", "cn", "io")}
    if not any(files.values()):
        return None
    sets = {k: _guarded(read_guid_file, v) if v else frozenset() for k, v in files.items()}
    return GuidOverrides(roots=sets["root"], compute=sets["cn"], io=sets["io"])
