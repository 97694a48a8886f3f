"""Where the CLI commands write their text output: a file, replaced atomically
(temporary file, then rename), or standard output for ``-`` (or no path)."""

from __future__ import annotations

import sys

from smroute.errors import InputError
from smroute.fileio import atomic_write_text

__all__ = ["write_output"]


def write_output(path: str | None, text: str) -> bool:
    """Write ``text`` to ``path`` (``None`` or ``-``: standard output);
    :class:`InputError` naming the path if it cannot be written.  Returns
    whether it went to standard output."""
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    try:
        atomic_write_text(path, text)
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror or err}", source=path) from None
    return False
