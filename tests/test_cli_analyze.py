"""``smroute analyze``: the CLI over the analysis package, on our tables and on
the real OpenSM's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.cli.main import main
from smroute.fabric.export.writers import write_ibsim_net, write_topology
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route
from smroute.tables.formats import write_tables
from smroute.tables.lft import NO_ROUTE, ForwardingTables

FABRIC = pgft(2, [4, 8], [1, 4], [1, 1])  # 32 hosts, 8 leaves, 4 spines


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("analyze")
    topo, lfts = d / "f.topo", d / "t.lfts"
    write_topology(FABRIC, topo)
    write_tables(route(FABRIC, workers=1).tables, lfts, "opensm")
    return topo, lfts


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    rc = main(["analyze", *argv, "--json", "--quiet"])
    out = capsys.readouterr().out
    return rc, json.loads(out) if out.strip() else {}


def test_shift_risk_is_one_in_topological_order_only(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = files
    rc, r = _run(capsys, str(lfts), "--fabric", str(topo), "--pattern", "sp")
    assert rc == 0
    assert r["congestion_risk"] == 1 and r["stages"] == 31 and r["flows"] == 32 * 31
    rc, r = _run(capsys, str(lfts), "--fabric", str(topo), "--pattern", "sp",
                 "--order", "random", "--seed", "3")
    assert rc == 0 and r["congestion_risk"] > 1


def test_unidirectional_cps_hsd_one_and_a2a_risk(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = files
    for name in ("shift", "ring", "binomial", "dissemination", "tournament"):
        rc, r = _run(capsys, str(lfts), "--fabric", str(topo), "--pattern", f"cps:{name}",
                     "--per-stage")
        assert rc == 0 and r["hsd_max"] == 1, name
        assert len(r["per_stage"]) == r["stages"]
    rc, r = _run(capsys, str(lfts), "--fabric", str(topo), "--pattern", "cps:shift",
                 "--order", "random", "--orders", "4")
    assert r["orders"] == 4 and r["hsd_avg"] > 1
    # A2A: a leaf's up-link carries its 4 hosts' flows to the 28 others spread over
    # 4 spines: risk = min(4 sources, 7 destinations) = 4.
    rc, r = _run(capsys, str(lfts), "--fabric", str(topo), "--pattern", "a2a")
    assert rc == 0 and r["congestion_risk"] == 4 and r["hot_link"]


def test_job_file_order_and_its_errors(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = files
    hosts = [d for d, t in zip(FABRIC.node_desc, FABRIC.node_type.tolist(), strict=True)
             if t == 1][:8]
    job = tmp_path / "job"
    job.write_text("# job 17\n" + "\n".join(hosts) + "\n")
    rc, r = _run(capsys, str(lfts), "--fabric", str(topo), "--pattern", "rp",
                 "--order", str(job), "--samples", "50")
    assert rc == 0 and r["participants"] == 8 and r["stages"] == 50
    job.write_text("# job 17\n" + hosts[0] + "\nno-such-host\n")
    assert main(["analyze", str(lfts), "--fabric", str(topo), "--pattern", "sp",
                 "--order", str(job), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{job}:3" in err and "no-such-host" in err and "Traceback" not in err


def test_bad_pattern_and_bad_tables_exit_2(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = files
    assert main(["analyze", str(lfts), "--fabric", str(topo), "--pattern", "cps:nope"]) == 2
    assert "expected a2a, rp, sp or cps:NAME" in capsys.readouterr().err
    bad = tmp_path / "bad.lfts"
    bad.write_text("Unicast lids [0-3] of switch Lid 1 guid 0x1 ('x'):\n0x0001 banana\n")
    assert main(["analyze", str(bad), "--fabric", str(topo), "--pattern", "a2a",
                 "--quiet"]) == 2
    assert str(bad) in capsys.readouterr().err


def test_dead_end_is_reported_with_exit_1(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo, _ = files
    t = route(FABRIC, workers=1).tables
    ports = t.ports.copy()
    spine = int(np.flatnonzero(np.char.startswith(np.asarray(t.switch_desc), "pgft L1"))[0])
    ports[spine, 1:][ports[spine, 1:] != NO_ROUTE] = NO_ROUTE  # a black-hole spine
    broken = ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports)
    path = tmp_path / "broken.lfts"
    write_tables(broken, path, "opensm")
    rc, r = _run(capsys, str(path), "--fabric", str(topo), "--pattern", "sp")
    assert rc == 1 and r["unroutable"] > 0


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None or shutil.which("opensm") is None,
                    reason="ibsim / opensm not installed (Debian ibsim-utils, opensm)")
def test_analyzes_real_opensm_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OpenSM's own opensm-lfts.dump on the same simulated fabric: every flow is
    delivered, and minhop is no better than Dmodc on the shift permutations."""
    from smroute.lab.sim import IbSim, ibnetdiscover, run_opensm

    net = tmp_path / "f.net"
    write_ibsim_net(FABRIC, net)
    with IbSim(net, tmp_path / "sim") as sim:
        osm = run_opensm(sim, tmp_path / "osm", engine="minhop")
        topo = tmp_path / "live.topo"
        topo.write_text("\n".join(ibnetdiscover(sim)) + "\n")
    rc, theirs = _run(capsys, str(osm.lfts), "--fabric", str(topo), "--pattern", "sp")
    assert rc == 0 and theirs["unroutable"] == 0 and theirs["flows"] == 32 * 31
    ours = tmp_path / "ours.lfts"
    assert main(["route", str(topo), "--out", str(ours)]) == 0
    capsys.readouterr()
    rc, mine = _run(capsys, str(ours), "--fabric", str(topo), "--pattern", "sp")
    assert rc == 0 and mine["congestion_risk"] == 1
    assert theirs["congestion_risk"] >= mine["congestion_risk"]
