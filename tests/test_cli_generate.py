"""``smroute fabric generate``: every generator and transform from the command
line; the text written parses back (smroute.fabric.ibnetdiscover.parse) to the fabric
the library builds, in both output formats; bad parameters exit 2."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fabric_compare import assert_same_fabric

from smroute.cli.main import main
from smroute.fabric.export.writers import chassis_ext_ports, format_topology
from smroute.fabric.generate import shapes
from smroute.fabric.generate import trees as gen
from smroute.fabric.ibnetdiscover.parse import parse_topology, read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- helpers


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def top_switch(f: Fabric) -> int:
    lv = gen.fabric_tuples(f)[0]
    return int(np.flatnonzero(lv == lv.max())[0])


def host_switches(f: Fabric) -> np.ndarray:
    rows = np.flatnonzero((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0))
    return np.unique(f.port_node[f.port_peer[rows]]).astype(np.int64)


# --------------------------------------------------------------------------- generators
#: argv after "fabric generate" -> the fabric the library builds for it
CASES: dict[str, tuple[list[str], Callable[[], Fabric]]] = {
    "pgft": (["pgft", "3;2,2,3;1,2,2;1,2,1"], lambda: gen.pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1])),
    "pgft-rlft-hdr-lmc": (
        ["pgft", "PGFT(2;4,8;1,4;1,1)", "--rlft", "--speed", "HDR", "--lmc", "2"],
        lambda: gen.pgft(2, [4, 8], [1, 4], [1, 1], speed="HDR", lmc=2)),
    "pgft-partial-40port": (
        ["pgft", "2;4,6;1,4;1,1", "--hosts-per-leaf", "3", "--switch-ports", "40", "--width", "2"],
        lambda: gen.pgft(2, [4, 6], [1, 4], [1, 1], hosts_per_leaf=3, switch_ports=40,
                         width=2)),
    "xgft": (["xgft", "2;3,4;1,3"], lambda: gen.xgft(2, [3, 4], [1, 3])),
    "kary-ntree": (["kary-ntree", "2", "3", "--switch-ports", "4"],
                   lambda: gen.kary_ntree(2, 3, switch_ports=4)),
    "thin-tree": (["thin-tree", "4", "2", "3"], lambda: gen.thin_tree(4, 2, 3)),
    "slender-tree": (["slender-tree", "4", "2", "3"], lambda: gen.slender_tree(4, 2, 3)),
    "navaridas": (["navaridas", "4:2,3-slender-tree"],
                  lambda: gen.navaridas_tree("4:2,3-slender-tree")),
    "navaridas-fat": (["navaridas", "3,2-fat-tree"], lambda: gen.navaridas_tree("3,2-fat-tree")),
    "ring": (["ring", "5", "--hosts", "3", "--parallel", "2"],
             lambda: shapes.ring(5, 3, parallel=2)),
    "ring-uneven": (["ring", "3", "--hosts", "1,2,3"], lambda: shapes.ring(3, [1, 2, 3])),
    "two-switch": (["two-switch", "--hosts", "2,5", "--parallel", "3"],
                   lambda: shapes.two_switch((2, 5), parallel=3)),
    "director": (["director", "--hosts-per-asic", "3"], lambda: shapes.director(hosts_per_asic=3)),
    "director-is4": (
        ["director", "--system", "core01", "--model", "IS5100", "--line-cards", "6",
         "--spine-cards", "3", "--hosts-per-asic", "2", "--device-id", "0xbd36"],
        lambda: shapes.director("core01", model="IS5100", line_cards=6, spine_cards=3,
                                hosts_per_asic=2, device_id=shapes.IS4_DEVICE_ID)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generator_round_trips(case: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    argv, build = CASES[case]
    want = build()
    out = tmp_path / f"{case}.topo"
    rc, stdout, err = run(["fabric", "generate", *argv, "--out", str(out)], capsys)
    assert rc == 0, err
    assert stdout == ""
    assert f"{len(want.switches)} switches, {len(want.cas)} CAs, {want.n_links} links" in err
    text = out.read_text()
    assert text.splitlines() == format_topology(want)  # exactly the library's writer
    assert_same_fabric(read_topology(out), want)
    # stdout, quiet, and the ibsim net file (read back by the same parser)
    rc, stdout, err = run(["fabric", "generate", *argv, "-q"], capsys)
    assert (rc, stdout, err) == (0, text, "")
    rc, net, err = run(["fabric", "generate", *argv, "--format", "ibsim", "-q"], capsys)
    assert rc == 0 and net.startswith("# ibsim net file written by smroute")
    assert_same_fabric(parse_topology(net, f"{case}.net"), want)


def test_ext_ports_on_a_director(capsys: pytest.CaptureFixture[str]) -> None:
    want = shapes.director(hosts_per_asic=2)
    rc, text, _ = run(["fabric", "generate", "director", "--hosts-per-asic", "2",
                       "--ext-ports", "-q"], capsys)
    assert rc == 0 and "[1][ext 1]" in text
    assert text.splitlines() == format_topology(want, ext_ports=chassis_ext_ports(want))
    assert_same_fabric(parse_topology(text), want)


# --------------------------------------------------------------------------- transforms
def test_transforms_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    base = gen.pgft(2, [4, 6], [1, 4], [1, 1], switch_ports=40, speed="HDR")
    want, removed = gen.degrade(base, np.random.default_rng(7), switches=1, links=3)
    top = top_switch(want)
    want = shapes.attach_cas(want, [top, top], ["service01 HCA-1", "service02 HCA-1"])
    want = shapes.with_split_ports(want, host_switches(want))
    want = shapes.with_aggregation_nodes(want)
    rc, text, err = run(["fabric", "generate", "pgft", "2;4,6;1,4;1,1", "--switch-ports", "40",
                         "--speed", "HDR", "--seed", "7", "--remove-switches", "1",
                         "--remove-links", "3", "--spine-hosts", "2", "--split-ports", "--agg"],
                        capsys)
    assert rc == 0, err
    got = parse_topology(text)
    assert_same_fabric(got, want)
    assert "removed 1 switches and 3 links (seed 7)" in err
    assert "2 service hosts on" in err and "aggregation nodes" in err
    assert len(shapes.aggregation_nodes(got)) == len(got.switches) == 9
    descs = got.node_desc
    assert descs.count("service01 HCA-1") == 1 and descs.count("service02 HCA-1") == 1
    # the service hosts hang off a top switch (level 2)
    svc = descs.index("service01 HCA-1")
    sw = int(got.port_node[got.port_peer[got.port_start[svc] + 1]])
    assert got.node_desc[sw].startswith("pgft L2 ")
    # split-ready: a host port of a leaf is 2x and at an odd port number
    h = descs.index(next(d for d in descs if d.startswith("host ")))
    peer = int(got.port_peer[got.port_start[h] + 1])
    assert int(got.port_width[peer]) == 2 and int(got.port_num[peer]) % 2 == 1


def test_degradation_is_seeded(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fabric", "generate", "kary-ntree", "3", "3", "--remove-switches", "2",
            "--remove-links", "4", "-q"]
    a = run([*argv, "--seed", "1"], capsys)[1]
    assert run([*argv, "--seed", "1"], capsys)[1] == a
    assert run([*argv, "--seed", "2"], capsys)[1] != a
    want, _ = gen.degrade(gen.kary_ntree(3, 3), np.random.default_rng(1), switches=2, links=4)
    assert_same_fabric(parse_topology(a), want)
    f = parse_topology(a)
    assert len(f.switches) == 27 - 2


def test_agg_on_a_ring_routes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo = tmp_path / "ring.topo"
    assert run(["fabric", "generate", "ring", "4", "--hosts", "2", "--agg", "--out", str(topo),
                "-q"], capsys)[0] == 0
    rc, out, err = run(["route", str(topo), "--out", str(tmp_path / "t.dump"), "-q",
                        "--workers", "1"], capsys)
    assert rc == 0, err
    assert "validation: valid" in out


# --------------------------------------------------------------------------- bad parameters
@pytest.mark.parametrize(("argv", "message"), [
    (["pgft", "2;4,6;1,4;1,2", "--rlft"], "is not a Real Life Fat-Tree: constant CBB"),
    (["pgft", "2;4,8;1,4;1,1", "--rlft"], None),  # an RLFT: ok
    (["pgft", "2;4,6;1,4"], "bad PGFT tuple"),
    (["pgft", "3;4,6;1,4;1,1"], "h=3 needs h positive values"),
    (["pgft", "2;0,6;1,4;1,1"], "bad PGFT tuple"),
    (["pgft", "2;4,6;1,4;1,1", "--hosts-per-leaf", "9"], "hosts_per_leaf=9 not in 1..m_1=4"),
    (["pgft", "2;4,6;1,4;1,1", "--switch-ports", "3"], "switch_ports=3 is below"),
    (["pgft", "3;1000,1000,1000;1,1000,1000;1,1,1"], "more than the"),
    (["pgft", "2;4,6;1,4;1,1", "--lmc", "9"], "argument --lmc: expected an integer 0..7, got '9'"),
    (["pgft", "2;4,6;1,4;1,1", "--speed", "FAST"], "unknown link speed 'FAST'"),
    (["pgft", "2;4,6;1,4;1,1", "--width", "3"], "link width 3x is not an IB width"),
    (["pgft", "2;4,6;1,4;1,1", "--remove-switches", "99"], "cannot remove 99 of 10 switches"),
    (["pgft", "2;4,6;1,4;1,1", "--remove-links", "-1"],
     "argument --remove-links: expected an integer >= 0, got '-1'"),
    (["pgft", "2;4,6;1,4;1,1", "--remove-links", "25"], "cannot remove 25 of 24 switch-to-switch"),
    (["xgft", "2;3,4"], "bad XGFT tuple"),
    (["kary-ntree", "0", "3"], "needs k >= 1"),
    (["thin-tree", "4", "5", "3"], "thin-tree needs 1 <= k' <= k"),
    (["slender-tree", "4", "3", "3"], "slender-tree needs k' < k and k' | k"),
    (["navaridas", "8-thin"], "not a Navaridas tree spec"),
    (["navaridas", "8,4-thin-tree"], "thin-tree needs k:k',n"),
    (["ring", "0"], "a ring needs k >= 1"),
    (["ring", "3", "--hosts", "1,2"], "--hosts: expected one number or 3, got 2"),
    (["ring", "3", "--hosts", "a"], "--hosts: expected comma-separated integers"),
    (["two-switch", "--parallel", "0"], "parallel must be >= 1"),
    (["director", "--radix", "300"], "radix 300 > 255"),
    (["director", "--spine-cards", "5"], "do not spread over 5 spines"),
    (["director", "--ext-ports", "--format", "ibsim"], "--ext-ports applies to --format topology"),
])
def test_bad_parameters_exit_2(argv: list[str], message: str | None,
                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["fabric", "generate", *argv, "-q"], capsys)
    if message is None:
        assert rc == 0 and out
        return
    assert rc == 2, err
    assert out == ""
    assert err.startswith(("smroute: error: ", "usage: ")) and message in err, err


def test_usage_errors_and_unwritable_output(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "smroute", "fabric", "generate"]
    for extra in ([], ["nosuch"], ["kary-ntree", "2"], ["kary-ntree", "x", "2"]):
        r = subprocess.run(cmd + extra, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and "usage:" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(cmd + ["ring", "3", "--out", str(tmp_path / "no" / "such" / "f.topo")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "does not exist (smroute creates no directories)" in r.stderr
    assert "Traceback" not in r.stderr
