"""Atomic file output: write to a temporary file in the same directory, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success fsync and rename it over
    ``path``; on error remove it, leaving any previous ``path`` untouched."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """Lines of a text file (universal newlines, so CRLF files read as LF)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read().splitlines()
