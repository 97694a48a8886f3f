"""Atomic output: all or nothing, with ordinary permissions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smroute.fileio import atomic_write_text, atomic_writer


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "t.lfts"
    atomic_write_text(target, "old\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as fh:
        fh.write("half a tab")
        raise RuntimeError("crash")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.lfts"]


def test_new_file_follows_umask_and_replacement_keeps_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        target = tmp_path / "new.csv"
        atomic_write_text(target, "a\n")
        assert target.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
    target.chmod(0o604)
    atomic_write_text(target, "b\n")
    assert target.stat().st_mode & 0o777 == 0o604 and target.read_text() == "b\n"
