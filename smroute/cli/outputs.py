"""Where the CLI commands write: the one writer of every ``--out``.

``-`` (or no path where a command defaults to it) is standard output;
anything else must name a **regular file** to create or replace, in a
directory that exists:

* a directory, a device (``/dev/full``, ``/dev/null``), a FIFO, a socket or a
  symbolic link at the path is refused (exit 2) -- smroute never replaces
  them and follows no symlink (a link to a regular file is refused too: name
  the file itself), so a mistyped ``--out`` cannot turn ``/dev/sda`` into a
  table file or write through a link someone planted;
* no directory is created: a missing parent is an error naming it;
* the file is written to a temporary file in the same directory, fsynced and
  renamed over the path (:func:`smroute.fileio.atomic_writer`, which checks
  again just before the rename), so a reader never sees half a file and a
  failed write leaves the old file as it was.

:func:`check_output` runs these checks up front (a command calls it before
its expensive work, so a bad ``--out`` fails in a second, not after the
routing); :func:`write_output` runs them again and writes.

Standard output whose reader went away (``smroute diff A B | head -1``): the
rest of the output is dropped (:func:`drop_stdout`) and the command finishes
with its own exit status -- never a traceback, never a status turned into 0
or 1 by the closed pipe (see :mod:`smroute.cli.main`).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from smroute.errors import InputError
from smroute.fileio import atomic_writer, file_kind, non_regular_mode

__all__ = ["STDOUT", "check_output", "drop_stdout", "is_stdout", "write_output", "write_stdout"]

#: The ``--out`` value meaning standard output.
STDOUT = "-"

Data = str | bytes | Iterable[bytes | memoryview]


def is_stdout(path: str | None) -> bool:
    """True for ``None`` and ``-`` (standard output)."""
    return path is None or path == STDOUT


def check_output(path: str, option: str = "--out") -> Path:
    """``path`` as the name of a regular file a command may create or replace
    (module doc); :class:`InputError` (exit 2) naming ``option``, the path and
    what is expected otherwise."""
    p = Path(path)
    try:
        mode = non_regular_mode(p)
    except OSError as err:
        raise InputError(f"{option}: cannot use this path: {err.strerror or err}",
                         source=path) from None
    if mode is not None:
        if stat.S_ISLNK(mode):
            hint = (f" (to {os.readlink(p)}); smroute follows no symbolic link when it "
                    "writes: give the file's own path, or remove the link")
        elif stat.S_ISDIR(mode):
            hint = "; give a file name"
        else:
            hint = "; smroute writes only regular files (use - for standard output)"
        raise InputError(f"{option}: {file_kind(mode)}, not a regular file{hint}", source=path)
    parent = p.parent
    if not parent.is_dir():
        problem = "is not a directory" if parent.exists() else "does not exist"
        raise InputError(f"{option}: directory {parent} {problem} (smroute creates no "
                         "directories)", source=path)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot create files in directory {parent}: "
                         "permission denied", source=path)
    return p


def drop_stdout() -> None:
    """Standard output's reader went away (EPIPE): point file descriptor 1 at
    ``/dev/null``, so the rest of the output and the flush at exit vanish
    quietly instead of raising again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def _chunks(data: Data) -> Iterable[bytes | memoryview]:
    if isinstance(data, str):
        return (data.encode(),)
    if isinstance(data, bytes | bytearray):
        return (bytes(data),)
    return data


def write_stdout(data: Data) -> None:
    """Write ``data`` (text, bytes or byte chunks) to standard output; a
    closed pipe drops the rest (:func:`drop_stdout`)."""
    try:
        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.flush()
            out = sys.stdout.buffer
            for chunk in _chunks(data):
                out.write(chunk)
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()


def write_output(path: str | None, data: Data, option: str = "--out") -> bool:
    """Write ``data`` (text, bytes, or an iterable of byte chunks) to ``path``
    (``None`` or ``-``: standard output), checked and replaced atomically as
    the module doc says; :class:`InputError` naming the path if it cannot be.
    Returns whether it went to standard output."""
    if is_stdout(path):
        write_stdout(data)
        return True
    assert path is not None
    target = check_output(path, option)
    try:
        with atomic_writer(target, "wb") as fh:
            for chunk in _chunks(data):
                fh.write(chunk)
    except OSError as err:
        raise InputError(f"{option}: cannot write: {err.strerror or err}", source=path) from None
    return False
