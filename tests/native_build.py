"""Build a compiled routing library (``smroute/routing/native/*.c``) for a
test, with the flags scripts/setup.sh uses and warnings as errors."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest


def build(tmp: Path, source: Path, name: str, opt: str, what: str) -> Path:
    """``source`` compiled into ``tmp/name``; skips the test (saying that
    only the numpy ``what`` runs) where no C compiler is installed."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip(f"no C compiler: the compiled {what} cannot be built (numpy {what} only)")
    out = tmp / name
    subprocess.run([cc, opt, "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(out),
                    str(source)], check=True)
    return out


def loaded(module: Any, path: Path) -> Any:
    """``module.library(path)``, which must load."""
    got = module.library(str(path))
    assert got is not None
    return got


def refuses_stale_and_foreign(module: Any, lib: Any, tmp: Path) -> None:
    """``module.library`` ignores a library older than its source and one
    built from another source (without its symbols): the numpy code runs."""
    old = tmp / "old.so"
    shutil.copy(lib._name, old)
    src = module.SOURCE.stat().st_mtime
    os.utime(old, (src - 10, src - 10))
    assert module.library.__wrapped__(str(old)) is None
    other = tmp / "other.so"
    subprocess.run([shutil.which("cc") or "gcc", "-O0", "-shared", "-fPIC", "-o", str(other),
                    str(module.SOURCE.parent / "walk.c")], check=True)
    assert module.library.__wrapped__(str(other)) is None
