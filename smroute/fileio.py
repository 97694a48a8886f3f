"""Atomic file output: write to a temporary file in the same directory, then rename."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_file_mode(target: Path) -> int:
    """Mode for the replacement of ``target``: the old file's, else what
    ``open()`` would give a new file (0666 minus the umask)."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


class NotRegularFileError(OSError):
    """:func:`atomic_writer`'s target exists and is not a regular file."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What an ``lstat`` ``st_mode`` is, for a message (``"a FIFO"``, ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def non_regular_mode(path: str | os.PathLike[str]) -> int | None:
    """The ``lstat`` mode of what is at ``path`` if that is not a regular file
    (a directory, device, FIFO, socket, symbolic link); ``None`` if ``path``
    is a regular file or does not exist."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return None if stat.S_ISREG(mode) else mode


def _check_replaceable(target: Path) -> None:
    mode = non_regular_mode(target)
    if mode is not None:
        raise NotRegularFileError(errno.EEXIST, f"{file_kind(mode)}, not a regular file "
                                  "(only regular files are replaced)", str(target))


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success fsync and rename it over
    ``path``; on error remove it, leaving any previous ``path`` untouched.
    The file gets the permissions of the file it replaces, or those of a new
    file under the umask (not ``mkstemp``'s private 0600).  Only a regular
    file is ever replaced: a directory, device, FIFO, socket or symbolic link
    at ``path`` raises :class:`NotRegularFileError` (before writing, and again
    just before the rename); no directory is created."""
    target = Path(path)
    _check_replaceable(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        os.fchmod(fd, _new_file_mode(target))
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _check_replaceable(target)  # again: it may have changed while we wrote
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)


#: Magic bytes of the compressed files :func:`read_bytes` opens.
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"


def decompressed(data: bytes, source: str, max_bytes: int | None = None) -> bytes:
    """``data`` itself, or decompressed when it is gzip or xz data (told by
    its magic bytes, whatever the file's name); corrupt compressed data is
    an :class:`~smroute.errors.InputError` naming ``source``.  ``max_bytes``:
    decompress at most one byte more than that (the caller refuses the rest;
    a small file cannot expand without bound)."""
    import lzma
    import zlib

    from smroute.errors import InputError

    if not data.startswith((GZIP_MAGIC, XZ_MAGIC)):
        return data
    gz = data.startswith(GZIP_MAGIC)
    cap = -1 if max_bytes is None else max_bytes + 1
    out: list[bytes] = []
    n = 0
    try:
        rest = data
        while rest and (cap < 0 or n < cap):  # gzip and xz files may hold several members
            d: Any = zlib.decompressobj(wbits=31) if gz else lzma.LZMADecompressor()
            left = cap - n if cap >= 0 else (0 if gz else -1)  # zlib: 0, lzma: -1 = all
            chunk = d.decompress(rest, left)
            out.append(chunk)
            n += len(chunk)
            if not d.eof:
                if cap >= 0 and n >= cap:
                    break
                raise EOFError("compressed data ends early")
            rest = d.unused_data.lstrip(b"\0")
    except (EOFError, zlib.error, lzma.LZMAError) as err:
        kind = "gzip" if gz else "xz"
        raise InputError(f"cannot decompress ({kind} data cut short or corrupt: {err})",
                         source=source) from None
    return b"".join(out)


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The content of a file, decompressed when it is gzip or xz data
    (:func:`decompressed`); ``OSError`` if it cannot be read."""
    with open(path, "rb") as fh:
        return decompressed(fh.read(), os.fspath(path))


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """Lines of a text file (universal newlines, so CRLF files read as LF)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read().splitlines()
