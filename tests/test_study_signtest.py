"""The study's bar: the two-sided sign test, its tables, the random-order
HSD's standard error and the ``--orders`` pass that refines it.

The pure parts run on made-up rows; the precision pass runs a small study
under the real ibsim + OpenSM (minhop) and reruns it with more orders.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from smroute.analysis.compare import TableMetrics
from smroute.cli.main import main
from smroute.study.precision import FIXED, precision_tasks, run_precision
from smroute.study.results import Row, format_rows, parse_rows, read_rows
from smroute.study.runner import hsd_precision_cells, plan_tasks, run_study
from smroute.study.signtest import (
    hsd_precision,
    loss_summary,
    paired_counts,
    resolved,
    sign_markdown,
    sign_table,
    sign_test,
    significant_losses,
)

needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="the ibsim binary is not installed (Debian package ibsim-utils): "
    "the precision pass drives the real simulator and OpenSM",
)
SMALL = "2;4,8;1,4;1,1"


def test_sign_test_known_p_values() -> None:
    # two-sided exact binomial with p = 1/2: 2 * P(X <= min) over n = wins + losses
    assert sign_test(0, 10) == pytest.approx(2 / 1024)
    assert sign_test(1, 9) == pytest.approx(22 / 1024)
    assert sign_test(9, 1) == pytest.approx(22 / 1024)  # symmetric
    assert sign_test(2, 8) == pytest.approx(0.109375)
    assert sign_test(0, 5) == pytest.approx(0.0625)  # five of five: not significant
    assert sign_test(0, 6) == pytest.approx(0.03125)
    assert sign_test(3, 17) == pytest.approx(0.0025768, rel=1e-4)  # scipy.stats.binomtest
    assert sign_test(5, 5) == sign_test(0, 0) == 1.0
    assert sign_test(4, 5) == 1.0  # capped at 1
    with pytest.raises(ValueError):
        sign_test(-1, 2)


def _row(throw: int, engine: str, removed: int, **metrics: float) -> Row:
    base: Row = {"fabric": "F", "mode": "link", "seed": 1, "throw": throw, "removed": removed,
                 "engine": engine, "status": "ok", "unroutable_pairs": 0}
    return {**base, **metrics}


def _rows(diffs: list[float], removed: int = 5, **rival_extra: float) -> list[Row]:
    """``me`` (dmodc) and ``rival`` (minhop) on one throw per difference
    (``me`` minus ``rival`` in SP)."""
    out = []
    for t, d in enumerate(diffs):
        out.append(_row(t, "dmodc", removed, sp=10.0 + d, hsd_random=3.0 + d))
        out.append(_row(t, "minhop", removed, sp=10.0, hsd_random=3.0, **rival_extra))
    return out


def test_ties_are_dropped() -> None:
    # 5 losses among 20 ties: p = 0.0625, no loss; a sixth loss makes it one
    rows = _rows([0.0] * 20 + [1.0] * 5)
    p = paired_counts(rows, "F", "link", "4-15", "sp", "dmodc", "minhop")
    assert (p.wins, p.ties, p.losses) == (0, 20, 5)
    assert p.p == pytest.approx(0.0625) and not p.loss
    p = paired_counts(_rows([0.0] * 20 + [1.0] * 6), "F", "link", "4-15", "sp", "dmodc",
                      "minhop")
    assert p.loss and not p.win and p.p == pytest.approx(0.03125)
    # the other way round: the rival's significant loss
    assert paired_counts(_rows([-1.0] * 6), "F", "link", "4-15", "sp", "minhop",
                         "dmodc").loss


def test_a_throw_only_one_engine_completes_counts_against_the_other() -> None:
    rows = _rows([0.0, 0.0, 0.0])
    rows[0]["unroutable_pairs"] = 4  # dmodc incomplete on throw 0: a loss
    rows[3]["status"] = "failed"  # minhop failed on throw 1: a win
    rows[4]["status"] = rows[5]["status"] = "failed"  # neither on throw 2: a tie
    p = paired_counts(rows, "F", "link", "4-15", "sp", "dmodc", "minhop")
    assert (p.wins, p.ties, p.losses) == (1, 1, 1)


def test_sign_table_marks_significant_losses_and_states_the_se() -> None:
    rows = _rows([0.5] * 7, hsd_random_orders=100, hsd_random_se=0.01)
    rows += [_row(10 + t, e, 0, sp=1.0, hsd_random=2.0) for t in range(2)
             for e in ("dmodc", "minhop")]
    for r in rows:
        if r["engine"] == "dmodc":
            r.update(hsd_random_orders=100, hsd_random_se=0.02)
    tab = sign_table(rows, "F", "link", "dmodc", ["minhop"], ("sp", "hsd_random"))
    assert tab[0] == ["removed", "rival", "SP", "HSD random"]
    band0, band4 = tab[1], tab[2]
    assert band0[:3] == ["0 (2)", "minhop", "0/2/0 p 1"]
    assert band0[3] == "0/2/0 p 1; Δ 0 (the same values)"  # resolved at any error
    assert band4[0] == "4-15 (7)"
    assert band4[2] == "0/0/7 p 0.016 **loss**"
    # Δ 0.5 with SE sqrt(7 * (0.02^2 + 0.01^2)) / 7 = 0.0085: resolved
    assert band4[3] == "0/0/7 p 0.016 **loss**; Δ +0.5 SE 0.0085 (100 orders)"
    # paired SE on the same orders wins over the independent bound
    for r in rows:
        if r["engine"] == "minhop":
            r.update(hsd_random_paired_se=1.5, hsd_random_paired_with="dmodc")
    diff, se, orders = hsd_precision(rows, "F", "link", "4-15", "dmodc", "minhop")
    assert (diff, orders) == (pytest.approx(0.5), 100) and se == pytest.approx(1.5 / math.sqrt(7))
    assert "unresolved" in sign_table(rows, "F", "link", "dmodc", ["minhop"],
                                      ("hsd_random",))[2][2]
    # rows without an error: unknown, unresolved
    assert "SE ? (? orders) unresolved" in sign_table(_rows([0.5] * 3), "F", "link", "dmodc",
                                                     ["minhop"], ("hsd_random",))[1][2]


def test_resolved() -> None:
    assert resolved(0.01, 0.005) and not resolved(0.01, 0.01) and not resolved(0.01, math.nan)
    assert resolved(0.0, 0.0) and not resolved(0.0, 0.001) and resolved(math.nan, math.nan)


def test_summary_and_markdown_count_losses_both_ways() -> None:
    rows = _rows([1.0] * 6) + [
        _row(20 + t, e, 20, sp=10.0 + (e != "dmodc"), hsd_random=3.0 + (e != "dmodc"))
        for t in range(7) for e in ("dmodc", "minhop")]
    assert significant_losses(rows, "dmodc", "minhop", ("sp",)) == [("F", "link", "4-15", "sp")]
    assert significant_losses(rows, "minhop", "dmodc", ("sp",)) == [("F", "link", "16-63", "sp")]
    summ = loss_summary(rows, "dmodc", ["minhop"], ("sp",))
    assert summ[1] == ["minhop", "1", "1", "F link 4-15 SP"]
    md = "\n".join(sign_markdown(rows, ["dmodc", "minhop"], "dmodc"))
    assert "#### F, link degradation" in md
    assert "| minhop | 2 | 2 | F link 4-15 SP; F link 4-15 HSD random |" in md
    assert "head to head it loses significantly more often than the OpenSM engine in 0 of 1" in md
    assert md.rstrip().endswith("Bar met.")
    worse = _rows([1.0] * 6)
    assert "Bar not met." in "\n".join(sign_markdown(worse, ["dmodc", "minhop"], "dmodc"))
    assert sign_markdown(rows, ["minhop"], "dmodc") == []  # nothing to judge


def test_precision_cells_give_the_standard_error_over_the_orders() -> None:
    assert hsd_precision_cells([3.0], None) == {"hsd_random_orders": 1}
    own = hsd_precision_cells([1.0, 2.0, 3.0, 4.0], None)
    assert own == {"hsd_random_orders": 4,
                   "hsd_random_se": pytest.approx(math.sqrt(5 / 3) / 2)}
    ref = TableMetrics("dmodc", 4, {}, {}, random_order_hsd=(0.5, 1.5, 2.5, 3.5))
    paired = hsd_precision_cells([1.0, 2.0, 3.0, 4.0], ref)
    assert paired["hsd_random_paired_se"] == 0.0 and paired["hsd_random_paired_with"] == "dmodc"


def test_precision_columns_roundtrip_through_the_csv() -> None:
    row = _row(0, "minhop", 3, sp=2.0, hsd_random=3.5, hsd_random_orders=200,
               hsd_random_se=0.004, hsd_random_paired_se=0.002)
    row["hsd_random_paired_with"] = "dmodc"
    back = parse_rows(format_rows([row]).splitlines())[0]
    assert (back["hsd_random_orders"], back["hsd_random_se"], back["hsd_random_paired_se"],
            back["hsd_random_paired_with"]) == (200, 0.004, 0.002, "dmodc")


@pytest.mark.real
@needs_ibsim
def test_orders_pass_refines_the_unresolved_throws(tmp_path: Path) -> None:
    """Rows of a 3-order study are rerun with 12 orders: the order-free
    metrics stay and the precision columns appear; a second pass finds
    nothing to do, and a resumed study still takes the refined rows as its
    own."""
    kw = {"rp_samples": 30, "random_orders": 3}
    csv_file = tmp_path / "study.csv"
    tasks = plan_tasks(f"pgft:{SMALL}", "small", ["link"], 3, 5, ["dmodc", "minhop"],
                       str(tmp_path / "w"), **kw)
    before = {(r["throw"], r["engine"]): r for r in run_study(tasks, csv_file)}
    for r in before.values():  # a study that did not record the error
        for c in ("hsd_random_orders", "hsd_random_se", "hsd_random_paired_se",
                  "hsd_random_paired_with"):
            r.pop(c, None)
    csv_file.write_text(format_rows(before.values()))
    before = {(r["throw"], r["engine"]): r for r in read_rows(csv_file)}  # as stored
    todo = precision_tasks(read_rows(csv_file), tasks[0], 12, "dmodc")
    assert todo and all(t.random_orders == 12 and t.engines == ("dmodc", "minhop")
                        for t in todo)
    res = run_precision(todo, csv_file, workers=1)
    assert res.differ == res.broke == 0 and res.updated == 2 * len(todo)
    after = {(r["throw"], r["engine"]): r for r in read_rows(csv_file)}
    for t in {t.index for t in todo}:
        for e in ("dmodc", "minhop"):
            old, new = before[(t, e)], after[(t, e)]
            assert all(old[m] == new[m] for m in FIXED)
            assert new["hsd_random_orders"] == 12 and float(str(new["hsd_random_se"])) >= 0
        assert after[(t, "minhop")]["hsd_random_paired_with"] == "dmodc"
    assert precision_tasks(read_rows(csv_file), tasks[0], 12, "dmodc") == []
    rows = run_study(tasks, csv_file)  # nothing to run: the refined rows stay
    assert {(r["throw"], r["engine"]): r["hsd_random_orders"] for r in rows} == \
        {k: r["hsd_random_orders"] for k, r in after.items()}


@pytest.mark.real
@needs_ibsim
def test_cli_orders_and_report_sign_table(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["study", "degrade", "--pgft", SMALL, "--mode", "link", "--throws", "2",
            "--seed", "5", "--engines", "dmodc,minhop", "--rp-samples", "30",
            "--random-orders", "2", "--orders", "6", "--reference", "dmodc", "--no-plots",
            "--workers", "1", "--workdir", str(tmp_path / "work"), "--out", str(out)]
    assert main(argv) == 0
    assert "random-order HSD over 6 orders" in capsys.readouterr().err
    rows = read_rows(out / "study.csv")
    assert all(r["hsd_random_orders"] in (2, 6) for r in rows)
    report = tmp_path / "report.md"
    assert main(["study", "report", str(out / "study.csv"), "--reference", "dmodc",
                 "--out", str(report)]) == 0
    text = report.read_text()
    assert "## The bar: Dmodc against each engine" in text and "| removed | rival | SP |" in text
    assert main(argv[:-2] + ["--orders-bands", "5-9", "--out", str(out)]) == 2
    assert "--orders-bands" in capsys.readouterr().err


def test_precision_tasks_rerun_every_complete_engine_of_a_throw() -> None:
    """An unresolved rival (minhop, no error known) brings its throws back
    with every engine complete there, the resolved one (dnup, the same
    values) too, so the rows of a throw keep averaging the same orders; a
    failed row stays out, and a band with nothing unresolved is skipped."""
    rows = _rows([0.5, 0.5])
    rows += [_row(t, "dnup", 5, sp=10.5, hsd_random=3.5) for t in range(2)]
    rows += [_row(t, "dmodc", 0, sp=1.0, hsd_random=2.0) for t in (7, 8)]
    rows += [_row(t, "dnup", 0, sp=1.0, hsd_random=2.0) for t in (7, 8)]
    rows[1]["status"] = "failed"  # minhop on throw 0
    template = plan_tasks("pgft:2;2,2;1,2;1,1", "F", ["link"], 1, 1,
                          ["dmodc", "dnup", "minhop"], "/nonexistent")[0]
    tasks = precision_tasks(rows, template, 50, "dmodc")
    assert [(t.index, t.engines, t.random_orders, t.reference) for t in tasks] == [
        (1, ("dmodc", "dnup", "minhop"), 50, "dmodc")]
