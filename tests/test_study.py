"""The degradation study: throw protocol, metric comparison, CSV, plots, executors.

The pure parts (amount law, seeding, CSV, bands, comparison of table sets)
run without tools; the small study runs the real ibsim + OpenSM (minhop)
through the CLI, and the Dask executor (a LocalCluster) must give the same
CSV as the local process pool for the same seed.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis.compare import CompareConfig, compare_tables, metric_names
from smroute.analysis.paths import routing_view
from smroute.analysis.patterns import topological_order
from smroute.cli.main import main
from smroute.errors import InputError
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route
from smroute.study.degrade import amount, equipment, parse_pgft, plan_throw, throw_rngs
from smroute.study.executors import run_unordered
from smroute.study.results import (
    COLUMNS,
    METRICS,
    band_of,
    band_table,
    bar_table,
    done_throws,
    format_rows,
    markdown_report,
    paired_table,
    parse_rows,
    read_rows,
    reproduces,
    sign_p,
    verdict_table,
)
from smroute.study.runner import plan_tasks, run_study
from smroute.tables.lft import NO_ROUTE, ForwardingTables

needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="the ibsim binary is not installed (Debian package ibsim-utils): "
    "the small study drives the real simulator and OpenSM",
)

SMALL = "2;4,8;1,4;1,1"  # 32 hosts, 8 leaves, 4 spines, 32 leaf-spine links
TIME_COLUMNS = {"routing_seconds", "wall_seconds"}


# --------------------------------------------------------------------------- protocol
def test_amount_follows_the_shifted_log_uniform_law() -> None:
    # a = floor(2^(m u) - 1), 2^m = M
    assert amount(0.0, 54) == 0
    assert amount(0.5, 64) == 7  # 2^3 - 1
    assert amount(0.999999, 64) == 62
    assert amount(0.25, 256) == 3
    assert amount(0.3, 1) == 0
    with pytest.raises(ValueError):
        amount(1.0, 10)
    # distribution: P(a = 0) = P(u < 1 / m) = 1 / log2(M)
    rng = np.random.default_rng(0)
    a = np.array([amount(float(u), 1024) for u in rng.random(20000)])
    assert abs((a == 0).mean() - 0.1) < 0.01
    assert a.max() <= 1022 and np.median(a) == pytest.approx(31, abs=3)


def test_equipment_counts() -> None:
    f = pgft(*_spec(SMALL))
    assert equipment(f, "switch") == 12
    assert equipment(f, "link") == 32
    with pytest.raises(InputError, match="mode"):
        equipment(f, "router")


def _spec(text: str) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    s = parse_pgft(text)
    return s.h, s.m, s.w, s.p


def test_parse_pgft() -> None:
    s = parse_pgft("PGFT(3;12,12,12;1,12,12;1,1,1)")
    assert (s.h, s.m, s.w, s.p) == (3, (12, 12, 12), (1, 12, 12), (1, 1, 1))
    assert s.label == "PGFT(3;12,12,12;1,12,12;1,1,1)"
    for bad in ("2;18,36;1,18", "2;18;1,18;1,1", "x;1;1;1", "2;18,0;1,18;1,1"):
        with pytest.raises(InputError, match="--pgft"):
            parse_pgft(bad)


def test_throws_are_seeded_per_index() -> None:
    f = pgft(*_spec(SMALL))
    a = plan_throw(f, "link", 7, 3)
    b = plan_throw(f, "link", 7, 3)
    assert (a.removed, a.u) == (b.removed, b.u)
    assert a.fabric.n_links == b.fabric.n_links == f.n_links - a.removed
    assert a.metrics_rng.random() == b.metrics_rng.random()
    # other indices differ (u is drawn independently per throw)
    us = {plan_throw(f, "switch", 7, i).u for i in range(10)}
    assert len(us) == 10
    # removed switches are really gone
    s = next(plan_throw(f, "switch", 7, i) for i in range(50)
             if plan_throw(f, "switch", 7, i).removed > 0)
    assert len(s.fabric.switches) == 12 - s.removed
    assert not set(s.removed_guids) & set(s.fabric.node_guid.tolist())
    d1, _ = throw_rngs(7, 3)
    d2, _ = throw_rngs(7, 4)
    assert d1.random() != d2.random()


# --------------------------------------------------------------------------- compare
def _broken(t: ForwardingTables, lid: int) -> ForwardingTables:
    ports = t.ports.copy()
    ports[:, lid] = NO_ROUTE
    return ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports)


def test_compare_tables_on_a_complete_tree() -> None:
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    r = route(f, workers=1)
    view = routing_view(f, r.tables)
    order = topological_order(view, r)
    ep_lid = int(view.ep_lid[order[5]])
    cfg = CompareConfig(rp_samples=50, random_orders=2)
    ms = compare_tables(f, {"dmodc": r.tables, "same": r.tables,
                            "broken": _broken(r.tables, ep_lid)},
                        order, np.random.default_rng(3), cfg)
    dm, same, broken = ms
    assert [m.name for m in ms] == ["dmodc", "same", "broken"]
    assert list(dm.values) == metric_names(cfg)
    # Zahavi Table 3 / Gliksberg: complete PGFT, topological order
    assert dm.values["sp"] == 1.0
    for c in ("shift", "ring", "binomial", "dissemination", "tournament"):
        assert dm.values[f"hsd_topo_{c}"] == 1.0
    assert dm.values["hsd_random_shift"] > 1.5
    assert dm.values["a2a"] == 4.0  # 4 hosts per leaf, 4 up-links: min(#src,#dst)
    assert dm.unroutable == {"pairs": 0, "rp": 0, "sp": 0}
    assert dm.hot_link
    # identical tables, identical flows: identical values
    assert same.values == dm.values
    # one destination unreachable: 63 sources cannot reach it
    assert broken.unroutable["pairs"] == 63
    assert broken.unroutable["sp"] == 63  # every shift has exactly one flow to it
    assert broken.unroutable["rp"] > 0


# --------------------------------------------------------------------------- CSV
def test_csv_roundtrip_and_errors(tmp_path: Path) -> None:
    rows = [{"fabric": "F", "mode": "link", "throw": 2, "seed": 1, "total": 16, "removed": 3,
             "hosts": 32, "engine": e, "status": "ok", "a2a": 4.0, "rp": 2.0, "sp": float(i),
             "hsd_topo": math.nan, "error": "x,\"y\"\nz"}
            for i, e in enumerate(("dmodc", "minhop"))]
    text = format_rows(rows)
    back = parse_rows(text.splitlines(), "s.csv")
    assert len(back) == 2 and back[1]["sp"] == 1.0 and back[0]["removed"] == 3
    assert math.isnan(float(str(back[0]["hsd_topo"])))
    assert back[0]["error"] == 'x,"y" z'
    assert done_throws(back, ["dmodc", "minhop"]) == {("F", "link", 1, 2)}
    assert done_throws(back, ["dmodc", "sssp"]) == set()
    # on resume a throw with a row that is not ok runs again; --keep-failed
    # (retry=("error",)) keeps engine failures, and retries only throws that broke
    for status in ("timeout", "failed", "error"):
        back[1]["status"] = status
        assert done_throws(back, ["dmodc", "minhop"]) == set()
        assert done_throws(back, ["dmodc", "minhop"], retry=("error",)) == (
            set() if status == "error" else {("F", "link", 1, 2)})
    with pytest.raises(InputError, match=r"s.csv:1: .*missing column"):
        parse_rows(["a,b", "1,2"], "s.csv")
    bad = text.splitlines()
    bad[2] = bad[2].replace(",3,", ",three,", 1)
    with pytest.raises(InputError, match=r"s.csv:3: column 'removed'"):
        parse_rows(bad, "s.csv")
    with pytest.raises(InputError, match="cannot read"):
        read_rows(tmp_path / "nope.csv")


def test_bands() -> None:
    assert [band_of(x) for x in (0, 1, 3, 4, 15, 16, 63, 64, 400)] == [
        "0", "1-3", "1-3", "4-15", "4-15", "16-63", "16-63", "64+", "64+"]
    rows = [{"fabric": "F", "mode": "switch", "throw": t, "removed": rem, "engine": e,
             "status": st, "sp": v}
            for t, rem, e, st, v in [(0, 0, "nmodc", "ok", 1.0), (0, 0, "ftree", "ok", 1.0),
                                     (1, 5, "nmodc", "ok", 2.0), (1, 5, "ftree", "failed", 0.0),
                                     (2, 7, "nmodc", "ok", 4.0), (2, 7, "ftree", "ok", 3.0)]]
    t = band_table(rows, "F", "switch", "sp", ["nmodc", "ftree"])
    assert t[0] == ["removed (throws)", "nmodc", "ftree"]
    assert t[1] == ["0 (1)", "1 / 1", "1 / 1"]
    assert t[2] == ["1-3 (0)", "-", "-"]
    assert t[3] == ["4-15 (2)", "3 / 4", "3 / 3 (1 failed)"]
    # paired: only throws where both are ok; throw 2 has nmodc worse by 1
    p = paired_table(rows, "F", "switch", "sp", ["nmodc", "ftree"])
    assert p == [["removed", "nmodc vs ftree"], ["0", "0/1/0"], ["1-3", "-"],
                 ["4-15", "1/0/0 (+1)"], ["16-63", "-"], ["64+", "-"]]
    # a routing that leaves pairs undelivered is not comparable: counted apart
    rows.append({"fabric": "F", "mode": "switch", "throw": 3, "removed": 20, "engine": "nmodc",
                 "status": "ok", "sp": 1.0, "unroutable_pairs": 36})
    rows.append({"fabric": "F", "mode": "switch", "throw": 3, "removed": 20, "engine": "ftree",
                 "status": "ok", "sp": 5.0, "unroutable_pairs": 0})
    t = band_table(rows, "F", "switch", "sp", ["nmodc", "ftree"])
    assert t[4] == ["16-63 (1)", "- (1 incomplete)", "5 / 5"]
    assert paired_table(rows, "F", "switch", "sp", ["nmodc", "ftree"])[4] == ["16-63", "-"]
    md = markdown_report(rows, ["nmodc", "ftree"], metrics=("sp",))
    assert md[0] == "#### F, switch degradation (4 throws)"
    assert "| 4-15 (2) | 3 / 4 | 3 / 3 (1 failed) |" in md
    assert "| 4-15 | 1/0/0 (+1) |" in md


# --------------------------------------------------------------------------- real study
def _metric_rows(path: Path) -> list[dict[str, object]]:
    out = []
    for r in read_rows(path):
        out.append({k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
                    for k, v in r.items() if k not in TIME_COLUMNS})
    return out


@pytest.mark.real
@needs_ibsim
def test_small_study_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["study", "degrade", "--pgft", SMALL, "--mode", "switch,link", "--throws", "3",
            "--seed", "17", "--engines", "dmodc,minhop", "--rp-samples", "100",
            "--workers", "2", "--workdir", str(tmp_path / "work"), "--out", str(out)]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert cap.err.count(" throw ") == 6  # one progress line per throw
    assert "minhop" in cap.out and "dmodc" in cap.out  # summary table
    rows = read_rows(out / "study.csv")
    assert len(rows) == 2 * 3 * 2
    assert {(r["mode"], r["throw"], r["engine"]) for r in rows} == {
        (m, t, e) for m in ("switch", "link") for t in range(3) for e in ("dmodc", "minhop")}
    with open(out / "study.csv") as fh:
        assert fh.readline().rstrip("\n").split(",") == list(COLUMNS)
    # throw 0 of both modes removes nothing with seed 17 (u < 1/m); 2-17 removed in the others
    zero = [r for r in rows if r["removed"] == 0]
    assert {(r["mode"], r["throw"]) for r in zero} >= {("switch", 0), ("link", 0)}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["order"] == "nmodc"  # the default's topological order
        assert 0 <= int(str(r["removed"])) < int(str(r["total"]))
        assert float(str(r["routing_seconds"])) >= 0
    for r in zero:
        assert r["hosts"] == 32
        assert r["unroutable_pairs"] == 0
        if r["engine"] == "dmodc":
            assert (r["sp"], r["a2a"], r["hsd_topo_shift"]) == (1.0, 4.0, 1.0)
    for e in ("dmodc", "minhop"):
        for r in rows:
            if r["engine"] == e and int(str(r["removed"])) > 0 and r["mode"] == "link":
                assert float(str(r["sp"])) >= 1.0
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted([
        "risk-pgft-2-4-8-1-4-1-1-switch.png", "risk-pgft-2-4-8-1-4-1-1-link.png",
        "hsd-pgft-2-4-8-1-4-1-1-switch.png", "hsd-pgft-2-4-8-1-4-1-1-link.png",
        "routing-time.png"])
    for p in out.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000

    # resume: more throws only computes the missing ones
    argv[argv.index("--throws") + 1] = "4"
    argv[argv.index("--mode") + 1] = "link"
    assert main(argv + ["--no-plots"]) == 0
    cap = capsys.readouterr()
    assert cap.err.count(" throw ") == 1 and "link throw 3" in cap.err
    assert len(read_rows(out / "study.csv")) == 2 * 3 * 2 + 2

    # plot subcommand redraws from the CSV
    assert main(["study", "plot", str(out / "study.csv"), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "routing-time.png").is_file()


@pytest.mark.real
@needs_ibsim
def test_dask_executor_gives_the_same_csv(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    kw = {"rp_samples": 50, "random_orders": 1}
    tasks = plan_tasks(f"pgft:{SMALL}", "small", ["link"], 3, 11, ["dmodc", "minhop"],
                       str(tmp_path / "w"), **kw)
    run_study(tasks, tmp_path / "pool.csv", workers=2)
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                   dashboard_address=None) as cluster,
          distributed.Client(cluster) as client):
        run_study(tasks, tmp_path / "dask.csv", scheduler=client)
        # the CLI's --scheduler ADDRESS path, same cluster
        argv = ["study", "degrade", "--pgft", SMALL, "--label", "small", "--mode", "link",
                "--throws", "3", "--seed", "11", "--engines", "dmodc,minhop",
                "--rp-samples", "50", "--random-orders", "1", "--no-plots",
                "--scheduler", cluster.scheduler_address, "--out", str(tmp_path / "cli")]
        assert main(argv) == 0
    pool, dask = _metric_rows(tmp_path / "pool.csv"), _metric_rows(tmp_path / "dask.csv")
    assert len(pool) == 6
    assert pool == dask
    assert _metric_rows(tmp_path / "cli" / "study.csv") == pool


def test_executor_records_task_errors() -> None:
    # math.sqrt(-1) raises in the worker: recorded as that item's error
    got = {it: (res, err) for it, res, err in run_unordered(math.sqrt, [4.0, -1.0], workers=2)}
    assert got[4.0] == (2.0, None)
    assert got[-1.0][0] is None and got[-1.0][1] == "ValueError: math domain error"
    assert list(run_unordered(math.sqrt, [], workers=2)) == []


@pytest.mark.real
@needs_ibsim
def test_study_of_an_ibnetdiscover_file(tmp_path: Path) -> None:
    # the committed capture carries OpenSM's LIDs; the study strips them and
    # lets OpenSM assign its own in every throw
    topo = Path(__file__).resolve().parent.parent / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo"
    argv = ["study", "degrade", "--fabric", str(topo), "--mode", "link", "--throws", "2",
            "--seed", "4", "--engines", "dmodc,minhop", "--rp-samples", "20",
            "--random-orders", "0", "--no-plots", "--out", str(tmp_path)]
    assert main(argv) == 0
    rows = read_rows(tmp_path / "study.csv")
    assert {r["fabric"] for r in rows} == {"pgft-3-2.2.3-1.2.2-1.2.1"}
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert all(r["total"] == 36 for r in rows)  # switch-to-switch links (parallel ones too)
    assert all(math.isnan(float(str(r["hsd_random"]))) for r in rows)  # no random orders


def test_cli_rejects_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["study", "degrade", "--pgft", SMALL, "--out", str(tmp_path)]
    assert main(base + ["--mode", "spine"]) == 2
    assert "--mode" in capsys.readouterr().err
    assert main(base + ["--engines", "dmodc,dor"]) == 2  # (dor: meshes, not compared)
    assert main(base + ["--throws", "0"]) == 2
    assert main(["study", "degrade", "--pgft", "2;8", "--out", str(tmp_path)]) == 2
    assert main(["study", "degrade", "--fabric", str(tmp_path / "no.topo"),
                 "--out", str(tmp_path)]) == 2
    assert "No such file" in capsys.readouterr().err


@pytest.mark.real
@needs_ibsim
def test_resume_adds_engines_beside_cached_rows(tmp_path: Path) -> None:
    """A study that grows by dmodc and an OpenSM engine (dnup) runs those
    (and the default, Nmodc, checked) alone beside the cached rows; a cached Nmodc row
    that does not reproduce marks the throw ``error``, and the next resume
    runs it in full."""
    kw = {"rp_samples": 50, "random_orders": 1}
    csv_file = tmp_path / "study.csv"
    first = plan_tasks(f"pgft:{SMALL}", "small", ["link"], 3, 11, ["nmodc", "minhop"],
                       str(tmp_path / "w"), **kw)
    run_study(first, csv_file)
    cached = {(r["throw"], r["engine"]): r for r in read_rows(csv_file)}
    grown = plan_tasks(f"pgft:{SMALL}", "small", ["link"], 3, 11,
                       ["nmodc", "dmodc", "minhop", "dnup"], str(tmp_path / "w"), vls=2, **kw)
    rows = run_study(grown, csv_file)
    got = {(r["throw"], r["engine"]): r for r in rows}
    assert len(got) == 12 and all(r["status"] == "ok" for r in rows)
    for t in range(3):  # minhop's rows kept as they were (not rerun), Nmodc's reproduced
        assert got[(t, "minhop")] == cached[(t, "minhop")]
        assert {k: float(f"{got[(t, 'nmodc')][k]:.6g}") for k in METRICS} == \
            {k: cached[(t, "nmodc")][k] for k in METRICS}
        assert got[(t, "dmodc")]["routing_mode"] in ("tree", "tree+turns", "tree+detours")
        assert got[(t, "dnup")]["hosts"] == cached[(t, "minhop")]["hosts"]
    # a cached Nmodc row from other permutations: that throw's rows turn to error
    bad = [dict(r, a2a=float(r["a2a"]) + 1) if (r["throw"], r["engine"]) == (1, "nmodc")
           else r for r in rows if (r["throw"], r["engine"]) not in ((1, "dmodc"), (1, "dnup"))]
    csv_file.write_text(format_rows(bad))
    rows = run_study(grown, csv_file)
    t1 = {r["engine"]: r for r in rows if r["throw"] == 1}
    assert t1["nmodc"]["status"] == t1["dmodc"]["status"] == t1["dnup"]["status"] == "error"
    assert "do not reproduce" in str(t1["nmodc"]["error"])
    rows = run_study(grown, csv_file)  # in full, OpenSM too
    t1 = {r["engine"]: r for r in rows if r["throw"] == 1}
    assert {r["status"] for r in t1.values()} == {"ok"} and len(t1) == 4
    assert t1["minhop"]["wall_seconds"] != cached[(1, "minhop")]["wall_seconds"]
    # the default's rows dropped (computed again after a change): Dmodc is checked
    # instead, and OpenSM's rows stay as they were
    kept = {(r["throw"], r["engine"]): r for r in read_rows(csv_file)}
    csv_file.write_text(format_rows([r for r in kept.values() if r["engine"] != "nmodc"]))
    run_study(grown, csv_file)
    again = {(r["throw"], r["engine"]): r for r in read_rows(csv_file)}
    assert len(again) == 12 and {r["status"] for r in again.values()} == {"ok"}
    for t in range(3):
        assert again[(t, "minhop")] == kept[(t, "minhop")]
        assert again[(t, "dnup")] == kept[(t, "dnup")]
        assert {k: again[(t, "nmodc")][k] for k in METRICS} == \
            {k: kept[(t, "nmodc")][k] for k in METRICS}


def test_verdict_table_against_the_best_complete_rival() -> None:
    def row(t: int, e: str, a2a: float, removed: int = 5, **kw: object) -> dict[str, object]:
        return {"fabric": "f", "mode": "link", "throw": t, "seed": 1, "removed": removed,
                "engine": e, "status": "ok", "a2a": a2a, "unroutable_pairs": 0, **kw}

    rows = [row(0, "nmodc", 10), row(1, "nmodc", 12), row(2, "nmodc", 11),
            row(0, "dfsssp", 11), row(1, "dfsssp", 12), row(2, "dfsssp", 10),
            row(0, "minhop", 9), row(1, "minhop", 9), row(2, "minhop", 9, unroutable_pairs=4)]
    t = verdict_table(rows, "f", "link", "nmodc", ["dfsssp", "minhop"], metrics=("a2a",))
    # minhop has the lower median but is incomplete on throw 2: dfsssp is the rival
    assert t[1] == ["4-15 (3)", "a2a", "dfsssp 11", "11", "1/1/1", "0.75", "miss"]  # 1 of 3 worse
    t = verdict_table(rows, "f", "link", "nmodc", ["dfsssp", "minhop"], metrics=("a2a",),
                      tolerance=0.5)
    assert t[1][-1] == "ok"
    rows[2]["unroutable_pairs"] = 1  # nmodc itself incomplete on a throw: a miss
    t = verdict_table(rows, "f", "link", "nmodc", ["dfsssp", "minhop"], metrics=("a2a",),
                      tolerance=0.5)
    assert t[1][3:] == ["11 (1 incomplete or failed)", "0/1/1", "1", "miss"]


def test_bar_table_judges_every_engine_against_the_others() -> None:
    rows = [{"fabric": "f", "mode": "link", "throw": t, "seed": 1, "removed": 5, "engine": e,
             "status": "ok", "a2a": v + (t % 2 if e == "minhop" else 0), "unroutable_pairs": 0}
            for t in range(6) for e, v in (("dmodc", 10), ("dfsssp", 12), ("minhop", 10))]
    engines = ["dmodc", "dfsssp", "minhop"]
    t = bar_table(rows, "f", "link", engines, engines, metrics=("a2a",))
    # dfsssp is worse than dmodc on all 6 throws (p = 1/64); minhop worse
    # on 3 of 6 (p 0.125: a miss, not significant); dmodc is never worse
    assert t[1:] == [["dmodc", "1 / 1", "0"], ["dfsssp", "0 / 1", "1"], ["minhop", "0 / 1", "0"]]
    # in the report, against the OpenSM engines only: minhop's rival is dfsssp
    md = markdown_report(rows, engines, metrics=("a2a",))
    at = md.index("| engine | ok cells | significant misses |")
    assert md[at + 2:at + 5] == ["| dmodc | 1 / 1 | 0 |", "| dfsssp | 0 / 1 | 1 |",
                                 "| minhop | 1 / 1 | 0 |"]


def test_sign_p_counts_the_tails_of_even_odds() -> None:
    assert sign_p(0, 0) == 1.0  # no untied throw: no evidence
    assert sign_p(3, 0) == 1 / 8
    assert sign_p(30, 0) == 2.0 ** -30
    assert sign_p(0, 5) == 1.0
    assert sign_p(7, 9) == pytest.approx(sum(math.comb(16, k) for k in range(7, 17)) / 2 ** 16)
    assert sign_p(9, 7) < sign_p(8, 8) < sign_p(7, 9)


def test_rerun_drops_an_engines_rows_first(tmp_path: Path) -> None:
    """``--rerun nmodc`` recomputes Nmodc's rows (here of a study of smroute's
    engines alone: nothing simulated) and keeps the others; an engine not in
    ``--engines`` is bad input."""
    base = ["study", "degrade", "--pgft", SMALL, "--mode", "link", "--throws", "2",
            "--seed", "5", "--engines", "dmodc,nmodc", "--rp-samples", "20",
            "--random-orders", "1", "--no-plots", "-q", "--out", str(tmp_path)]
    assert main(base) == 0
    csv_file = tmp_path / "study.csv"
    good = read_rows(csv_file)
    assert len(good) == 4 and {r["status"] for r in good} == {"ok"}
    csv_file.write_text(format_rows([dict(r, a2a=999.0) if r["engine"] == "nmodc" else r
                                     for r in good]))
    assert main(base) == 0  # complete: nothing runs, the wrong values stay
    assert {r["a2a"] for r in read_rows(csv_file) if r["engine"] == "nmodc"} == {999.0}
    assert main([*base, "--rerun", "nmodc"]) == 0
    again = {(r["throw"], r["engine"]): r["a2a"] for r in read_rows(csv_file)}
    assert again == {(r["throw"], r["engine"]): r["a2a"] for r in good}
    assert main([*base, "--rerun", "sssp"]) == 2


def test_reproduces_compares_as_the_csv_stores() -> None:
    """A rerun row reproduces its cached row when every metric is equal at the
    CSV's six digits; a metric neither has is the same, one only one has is not."""
    old = {"a2a": 18.0, "hsd_random": 3.70735, "sp": math.nan}
    assert reproduces({"a2a": 18, "hsd_random": 3.7073512, "sp": math.nan}, old,
                      ("a2a", "hsd_random", "sp"))
    assert reproduces({"a2a": 18.0}, old, ("a2a", "sp", "rp"))  # sp NaN, rp absent in both
    assert not reproduces({"a2a": 18.0, "hsd_random": 3.70745}, old, ("a2a", "hsd_random"))
    assert not reproduces({"a2a": math.nan}, old, ("a2a",))
    assert not reproduces({"sp": 4.0}, old, ("sp",))


@needs_ibsim
def test_sigterm_stops_the_study_and_the_simulator_it_started(tmp_path: Path) -> None:
    """``kill`` (SIGTERM) to a running study: it stops as on Ctrl-C, the
    ibsim it started stopped with it, and exits 143 with "terminated"
    (before, the simulator was left running, a core busy for good)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "smroute", "study", "degrade", "--pgft", SMALL, "--throws", "50",
         "--engines", "updn,dfsssp", "--workers", "1", "--no-plots", "-q", "--workdir", str(work),
         "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def sims() -> list[int]:
        found = subprocess.run(["pgrep", "-f", f"ibsim .*{work}"], capture_output=True,
                               text=True).stdout.split()
        return [int(p) for p in found]

    deadline = time.monotonic() + 60
    while not sims() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert sims(), "the study never started ibsim"
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert "smroute: terminated" in err
    deadline = time.monotonic() + 10
    while sims() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sims()
