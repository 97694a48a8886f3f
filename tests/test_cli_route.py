"""``smroute route``: tables written in every format, the summary, progress
lines and the exit status (0 valid, 1 invalid, 2 bad input, 3 unroutable)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smroute.cli.main import main
from smroute.cli.route_cmd import hop_table
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.model.builder import FabricBuilder
from smroute.routing.engine import route, validate_result
from smroute.routing.validate import validate
from smroute.tables.diff import diff_tables
from smroute.tables.formats import read_tables
from smroute.tables.lft import NO_ROUTE


def _topo(fabric: Fabric, path: Path) -> Path:
    write_topology(fabric, path)
    return path


@pytest.fixture(scope="module")
def zahavi(tmp_path_factory: pytest.TempPathFactory) -> tuple[Fabric, Path]:
    f = pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1])
    return f, _topo(f, tmp_path_factory.mktemp("topo") / "zahavi.topo")


@pytest.mark.parametrize("fmt", ["opensm", "fdbs", "json"])
def test_route_writes_the_tables_of_the_engine(
    fmt: str, zahavi: tuple[Fabric, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fabric, topo = zahavi
    out = tmp_path / "out" / f"tables.{fmt}"
    out.parent.mkdir()  # route creates no directories
    rc = main(["route", str(topo), "--out", str(out), "--format", fmt, "--workers", "1"])
    assert rc == 0
    want = route(fabric, workers=1)
    assert diff_tables(want.tables, read_tables(out)).identical
    stdout = capsys.readouterr().out
    assert "16 switches, 12 CAs, 48 links" in stdout
    assert "validation: valid" in stdout
    if fmt == "fdbs":
        lst = out.with_name("opensm-subnet.lst")
        assert lst.is_file() and f"{out}, {lst}" in stdout
        hops = hop_table(want)
        t = want.tables
        for line in out.read_text().splitlines():
            m = re.match(r"dump_ucast_routes: Switch (0x[0-9a-f]+)", line)
            if m:
                row = t.row_of(int(m.group(1), 16))
            m = re.match(r"0x([0-9a-f]+) : (\d+)\s+: (\d+)", line)
            if m:
                assert int(m.group(3)) == hops[row, int(m.group(1), 16)]
        # CA LIDs: 1 hop from their leaf, 0 to the own LID
        own = t.ports[np.arange(t.n_switches), t.switch_lid]
        assert (own == 0).all() and (hops[np.arange(t.n_switches), t.switch_lid] == 0).all()
    elif fmt == "json":
        assert json.loads(out.read_text())["format"] == "smroute-lft/1"


def test_route_summary_and_progress(
    zahavi: tuple[Fabric, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, topo = zahavi
    out = tmp_path / "t.dump"
    assert main(["route", str(topo), "--out", str(out), "--algorithm", "dmodk",
                 "--workers", "2"]) == 0
    cap = capsys.readouterr()
    for phase in ("parse", "route", "validate", "write"):
        assert re.search(rf"^smroute:   {phase} done in \d+\.\d{{3}} s", cap.err, re.M), phase
    assert "routing:    dmodk, 28 destination LIDs (12 end-port LIDs, 16 switch LIDs)" in cap.out
    assert re.search(r"^time: .*rank .*costs .*nids .*routes .*validate .*write .*total",
                     cap.out, re.M)
    assert main(["route", str(topo), "--out", str(out), "-q", "--no-validate",
                 "--workers", "1"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and "validation: skipped" in cap.out


def test_route_lmc_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = pgft(2, [4, 3], [1, 2], [1, 2], lmc=2)
    topo = _topo(f, tmp_path / "lmc.topo")
    out = tmp_path / "t.json"
    assert main(["route", str(topo), "--out", str(out), "--format", "json", "--lmc", "1",
                 "--workers", "1"]) == 0
    t = read_tables(out)
    base = f.port_lid[(f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0)]
    assert (t.ports[:, base] != NO_ROUTE).all() and (t.ports[:, base + 1] != NO_ROUTE).all()
    assert (t.widened(int(base.max()) + 4)[:, base + 2] == NO_ROUTE).all()
    assert "24 end-port LIDs" in capsys.readouterr().out


def test_route_invalid_tables_exit_1_and_name_the_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f, _ = degrade(pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1]), np.random.default_rng(0), links=6)
    # D-mod-K's closed form assumes a complete tree: on this degraded one it
    # leaves connected pairs unrouted (Dmodc routes them all)
    r = route(f, workers=1, algorithm="dmodk")
    v = validate(r.walk_graph, r.tables.ports, r.dest, r.costs, switch_desc=r.tables.switch_desc,
                 lid_desc=r.tables.lid_desc, max_failures=3)
    assert not v.ok  # precondition: this degradation leaves unroutable pairs
    assert validate_result(route(f, workers=1)).ok
    topo = _topo(f, tmp_path / "deg.topo")
    out = tmp_path / "deg.dump"
    rc = main(["route", str(topo), "--out", str(out), "--max-failures", "3", "--workers", "1",
               "--algorithm", "dmodk"])
    assert rc == 1
    stdout = capsys.readouterr().out
    assert f"validation: {v.summary()}" in stdout
    assert f"unroutable (first 3 of {v.pairs - v.delivered}):" in stdout
    for failure in v.failures:
        assert f"  {failure}" in stdout
    assert not out.exists()  # an invalid table set is never published
    assert "not written" in stdout
    assert "hint:" not in stdout  # (not a one-VL orientation)


def test_route_unroutable_fabric_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = FabricBuilder()
    s1 = b.add_node(NodeType.SWITCH, 0x10, 4, "sw1")
    s2 = b.add_node(NodeType.SWITCH, 0x20, 4, "sw2")
    b.set_port(s1, 0, guid=0x10, lid=1)
    b.set_port(s2, 0, guid=0x20, lid=2)
    b.add_link(s1, 1, s2, 1)
    topo = _topo(b.build(), tmp_path / "no-hosts.topo")
    assert main(["route", str(topo), "--out", str(tmp_path / "x.dump")]) == 3
    err = capsys.readouterr().err
    assert "smroute: error:" in err and "end-port" in err
    assert not (tmp_path / "x.dump").exists()


@pytest.mark.parametrize("args,message", [
    (["MISSING"], "cannot read"),
    (["GARBAGE"], "GARBAGE"),
    (["TOPO", "--lmc", "9"], "--lmc"),
    (["TOPO", "--workers", "0"], "--workers"),
    (["TOPO", "--out-dir"], "directory"),
])
def test_route_bad_input_exit_2(
    args: list[str], message: str, zahavi: tuple[Fabric, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    garbage = tmp_path / "garbage.topo"
    garbage.write_text("Switch 4 nonsense\n[1] nothing\n")
    subs = {"MISSING": str(tmp_path / "missing.topo"), "GARBAGE": str(garbage),
            "TOPO": str(zahavi[1])}
    argv = ["route", *(subs.get(a, a) for a in args if a != "--out-dir")]
    argv += ["--out", str(tmp_path) if "--out-dir" in args else str(tmp_path / "o.dump")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and message.replace("GARBAGE", "garbage.topo") in err


def test_route_cli_process_exit_codes(zahavi: tuple[Fabric, Path], tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "smroute", "route", *args],
                              capture_output=True, text=True, timeout=300)

    ok = run(str(zahavi[1]), "--out", str(tmp_path / "a.dump"))  # default worker pool
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.topo"
    bad.write_bytes(b"\x00\xffnot a topology\n")
    r = run(str(bad), "--out", str(tmp_path / "b.dump"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "bad.topo" in r.stderr
