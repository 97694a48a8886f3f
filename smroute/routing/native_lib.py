"""The compiled kernels' libraries: where ``scripts/setup.sh`` builds them and
how they are loaded (ctypes).  A library older than its source, absent or
unloadable is not used: the numpy code runs instead (the reference, the
same results)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

__all__ = ["BUILD", "NATIVE", "load"]

#: The C sources (``smroute/routing/native``).
NATIVE = Path(__file__).resolve().parent / "native"
#: The repository's build tree, where scripts/setup.sh puts the libraries.
BUILD = Path(__file__).resolve().parents[2] / "build"


def load(source: Path, default: Path, env: str, path: str | None = None) -> ctypes.CDLL | None:
    """The library built from ``source`` at ``path`` (default: the
    environment variable ``env``, else ``default``), or ``None`` if it is
    absent, unloadable or older than ``source``."""
    lib_path = Path(path or os.environ.get(env) or default)
    try:
        if source.exists() and lib_path.stat().st_mtime < source.stat().st_mtime:
            return None  # stale: built from an older source
        return ctypes.CDLL(str(lib_path))
    except OSError:
        return None
