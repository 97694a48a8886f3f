"""Input files of the CLI commands, read with errors a user can act on.

Every reader turns a missing/unreadable file, a binary file or a parse error
into an :class:`~smroute.errors.InputError` naming the file (and the line
where the parser knows it), which the CLI prints without a traceback and
exits 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from smroute.errors import InputError
from smroute.fabric.model import Fabric
from smroute.tables.lft import ForwardingTables

__all__ = ["load_fabric", "load_tables"]

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


def load_fabric(path: str) -> Fabric:
    """The fabric of an ibnetdiscover topology file."""
    from smroute.fabric.ibnetdiscover import read_topology

    return _guarded(read_topology, path)


def load_tables(path: str) -> ForwardingTables:
    """Forwarding tables in any format :func:`smroute.tables.formats.read_tables`
    detects; a file with no table at all is an error."""
    from smroute.tables.formats import read_tables

    tables = _guarded(read_tables, path)
    if tables.n_switches == 0:
        raise InputError("no forwarding tables found (empty file?)", source=path)
    return tables
