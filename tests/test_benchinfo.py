"""The benchmarks' side-by-side runs (bench/benchinfo.py): each checkout's
warm routing process answers every run, the runs alternate, and the report
gives the medians and the now / before ratio."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_module import BENCH, load_script

ROOT = Path(__file__).resolve().parents[1]


def test_warm_runs_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    info = load_script("benchinfo", BENCH)
    codes = info.checkouts(ROOT, ROOT, "test")
    assert [c.label for c in codes] == ["now", "before"]
    cfg = {"shape": [2, [4, 4], [1, 2], [1, 1]], "workers": 1, "validate": True}
    order: list[str] = []
    with info.WarmRouter(codes, cfg) as warm:
        def one(c):  # type: ignore[no-untyped-def]
            order.append(c.label)
            return warm.one(c)
        got = info.alternate(codes, 3, one)
    # one uncounted run per code, then alternating
    assert order == ["now", "before", "now", "before", "before", "now", "now", "before"]
    for runs in got.values():
        assert len(runs) == 3
        for r in runs:
            assert r["route"] == pytest.approx(sum(r[k] for k in ("rank", "costs", "nids",
                                                                  "routes")) + r.get("turns", 0))
            assert r["cpu"] >= 0 and r["walk"] > 0 and r["walk_cpu"] >= 0
    info.report("title", got, ["route", "walk", "missing"], "cmd")
    out = capsys.readouterr().out
    assert "now/before" in out and "load average" in out
    line = next(s for s in out.splitlines() if s.strip().startswith("now/before"))
    assert line.split()[1].endswith("x") and line.split()[-1] == "-"


def test_before_must_be_a_checkout(tmp_path: Path) -> None:
    info = load_script("benchinfo", BENCH)
    with pytest.raises(SystemExit, match="no smroute checkout"):
        info.checkouts(ROOT, tmp_path, "test")


def test_ftree_figure(tmp_path: Path) -> None:
    info = load_script("benchinfo", BENCH)
    assert info.ftree_seconds(tmp_path) == (info.OPENSM_FTREE_11664_S,
                                            "DESIGN.md, measured on ibsim")
    (tmp_path / info.FTREE_FILE).write_text(
        '{"routing_s": 20.5, "measured": "2026-01-01 00:00 UTC", "load": 1.5}')
    secs, where = info.ftree_seconds(tmp_path)
    assert secs == 20.5 and "measured here" in where
