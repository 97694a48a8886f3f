"""The worker count of a one-shot routing follows the fabric's size; a
``--workers`` the user gives decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from smroute.cli.main import main
from smroute.routing import pool as pool_mod
from smroute.routing.workers import IN_PROCESS_ENTRIES, workers_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pgft-2level-648.topo"


def test_workers_for_by_size_and_given() -> None:
    assert workers_for(54, 703) == 1  # the 648-host fixture: in-process
    assert workers_for(1620, 13285) == 1  # the 11,664-host tree: 21.5M entries
    assert workers_for(3584, 44545, cpus=2) == 2  # the 40,960-host tree: 160M
    assert workers_for(IN_PROCESS_ENTRIES, 1, cpus=4) == 1
    assert workers_for(IN_PROCESS_ENTRIES + 1, 1, cpus=4) == 4
    assert workers_for(54, 703, given=3) == 3
    assert workers_for(3584, 44545, given=1, cpus=8) == 1


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The worker counts of the pools started (the real pool, observed)."""
    seen: list[int] = []
    real = pool_mod.RoutePool.__init__

    def spy(self: pool_mod.RoutePool, workers: int | None = None) -> None:
        real(self, workers)
        seen.append(self.workers)

    monkeypatch.setattr(pool_mod.RoutePool, "__init__", spy)
    return seen


def test_small_fabric_routes_in_process(tmp_path: Path, pools: list[int]) -> None:
    assert main(["route", str(FIXTURE), "-q", "--out", str(tmp_path / "t.lfts")]) == 0
    assert pools in ([], [1])  # no worker process started


def test_given_workers_decide(tmp_path: Path, pools: list[int]) -> None:
    assert main(["route", str(FIXTURE), "-q", "--workers", "2",
                 "--out", str(tmp_path / "t.lfts")]) == 0
    assert pools == [2]
    one = (tmp_path / "t.lfts").read_bytes()
    assert main(["route", str(FIXTURE), "-q", "--out", str(tmp_path / "t1.lfts")]) == 0
    assert (tmp_path / "t1.lfts").read_bytes() == one  # the same tables either way
