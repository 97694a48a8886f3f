"""Input files of the CLI commands, read with errors a user can act on.

Every reader turns a missing/unreadable file, a binary file or a parse error
into an :class:`~smroute.errors.InputError` naming the file (and the line
where the parser knows it), which the CLI prints without a traceback and
exits 2.  Lines a fabric parser skipped (terminal prompts, ibnetdiscover
diagnostics, ...) are printed to stderr as ``FILE:LINE: warning: skipped ...``;
``--strict`` (:func:`add_strict_option`) makes them errors.

Numeric options are checked by argparse itself, with the types below
(:func:`int_range`, :func:`float_range`, :data:`SEED`, :func:`add_workers_option`):
a bad value exits 2 with ``argument --seed: expected an integer 0..2^63-1,
got '-1'`` before any work starts.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric
from smroute.tables.lft import ForwardingTables

if TYPE_CHECKING:
    from smroute.fabric.ibnetdiscover.text import ParseWarning
    from smroute.fabric.roles import GuidOverrides

__all__ = [
    "MAX_WORKERS",
    "SEED",
    "SEED_MAX",
    "add_strict_option",
    "add_workers_option",
    "float_range",
    "int_range",
    "load_fabric",
    "load_tables",
    "read_capture_text",
    "require_regular_file",
]

T = TypeVar("T")

#: Worker processes a command may start at most (as the daemon's ``workers``).
MAX_WORKERS = 256
#: Largest seed: numpy takes any non-negative integer; one that fits a signed
#: 64-bit integer (a CSV cell, a JSON number) is plenty.
SEED_MAX = 2**63 - 1


def _bound_text(lo: float | None, hi: float | None) -> str:
    def num(v: float) -> str:
        return "2^63-1" if v == SEED_MAX else str(v) if isinstance(v, int) else f"{v:g}"

    if hi is None:
        return f">= {num(lo)}" if lo is not None else ""
    return f"{num(lo)}..{num(hi)}" if lo is not None else f"<= {num(hi)}"


def int_range(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """argparse ``type`` of an integer option in ``lo..hi`` (either end open
    when ``None``); a bad value is a usage error naming the option, the range
    and the value given (escaped, bounded)."""
    from smroute.text import excerpt

    def parse(text: str) -> int:
        try:
            v = int(text.strip(), 10)
        except ValueError:
            v = None
        if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
            bound = _bound_text(lo, hi)
            raise argparse.ArgumentTypeError(
                f"expected an integer{' ' + bound if bound else ''}, got {excerpt(text)}")
        return v

    parse.__name__ = "integer"
    return parse


def float_range(lo: float | None = None, hi: float | None = None, *,
                above: bool = False) -> Callable[[str], float]:
    """argparse ``type`` of a finite number in ``lo..hi`` (``above``: strictly
    greater than ``lo``); errors as :func:`int_range`."""
    from smroute.text import excerpt

    def parse(text: str) -> float:
        try:
            v = float(text.strip())
        except ValueError:
            v = math.nan
        bad = (not math.isfinite(v) or (lo is not None and (v <= lo if above else v < lo))
               or (hi is not None and v > hi))
        if bad:
            if above and lo is not None:
                bound = f"> {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
            else:
                bound = _bound_text(lo, hi)
            raise argparse.ArgumentTypeError(f"expected a number {bound}, got {excerpt(text)}")
        return v

    parse.__name__ = "number"
    return parse


#: argparse ``type`` of a random seed: an integer ``0..2^63-1``.
SEED = int_range(0, SEED_MAX)


def add_workers_option(parser: argparse.ArgumentParser | Any, *, default: int | None = None,
                       help: str = "worker processes", default_text: str | None = None) -> None:
    """``--workers N`` (``args.workers``), ``1..``:data:`MAX_WORKERS`; the help
    names one default: ``default_text`` where given, else ``default``'s."""
    what = default_text or (f"default {default}" if default is not None
                            else "default: CPU count")
    parser.add_argument("--workers", type=int_range(1, MAX_WORKERS), default=default,
                        metavar="N", help=f"{help}, 1..{MAX_WORKERS} ({what})")


def guarded(read: Callable[[str], T], path: str) -> T:
    """``read(path)``; an InputError that names no file gets ``path``."""
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


def require_regular_file(path: str | os.PathLike[str], what: str) -> None:
    """``path`` must be a readable regular file: :class:`InputError` (exit 2)
    naming ``what`` and the path otherwise -- never a FIFO to block on, a
    device or a directory (for a daemon: an error a restart cannot cure)."""
    from smroute.fileio import file_kind

    try:
        st = os.stat(path)
    except OSError as err:
        raise InputError(f"{what}: cannot read: {err.strerror or err}", source=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what}: {file_kind(st.st_mode)}, not a regular file",
                         source=str(path))
    if not os.access(path, os.R_OK):
        raise InputError(f"{what}: cannot read: permission denied", source=str(path))


def load_fabric(path: str, *, strict: bool = False) -> Fabric:
    """The fabric of an ``ibnetdiscover`` file: topology text (also ibdiagnet's
    ``.ibnetdiscover``) or the ports report of ``ibnetdiscover -p``, told apart
    by its first meaningful line; gzip or xz compressed (``.gz``, ``.xz``) too.

    Each skipped line is printed to stderr as a warning (``strict``: an error).
    A fabric without any switch (a partial discovery) is an error explaining it.
    """
    from smroute.fabric.ibnetdiscover.parse import read_fabric, require_switches

    warnings: list[ParseWarning] = []
    try:
        fabric = guarded(lambda p: read_fabric(p, strict=strict, warnings=warnings), path)
    finally:
        for w in warnings:
            print(w, file=sys.stderr)
    require_switches(fabric, path)
    return fabric


def read_capture_text(path: str) -> str:
    """The text of a capture file (gzip or xz compressed too), for sending
    it as it is (``smroute ctl load``); errors as :func:`load_fabric`."""
    from smroute.fabric.ibnetdiscover.text import read_text_lines

    require_regular_file(path, "fabric")
    return "\n".join(guarded(read_text_lines, path)) + "\n"


def load_tables(path: str, fabric: Fabric | None = None,
                fabric_path: str | None = None) -> ForwardingTables:
    """Forwarding tables in any format :func:`smroute.tables.formats.read_tables`
    detects (a file cut short is an error naming its line); a file with no
    table at all is an error.  Given the ``fabric`` (read from
    ``fabric_path``) they are to route, tables that cannot be its are an error
    (:func:`smroute.tables.match.check_tables_fit`), and fabric switches
    without a table are noted on stderr."""
    from smroute.tables.formats import read_tables
    from smroute.tables.match import check_tables_fit

    tables = guarded(read_tables, path)
    if tables.n_switches == 0:
        raise InputError("no forwarding tables found (empty file?)", source=path)
    if fabric is not None:
        note = check_tables_fit(fabric, tables, tables_source=path,
                                fabric_source=fabric_path or "<fabric>")
        if note:
            print(f"{path}: warning: {note}", file=sys.stderr)
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
    sets = {k: guarded(read_guid_file, v) if v else frozenset() for k, v in files.items()}
    return GuidOverrides(roots=sets["root"], compute=sets["cn"], io=sets["io"])
