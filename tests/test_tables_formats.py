"""Table formats (round trips of every writer/reader), the table diff and the
``smroute diff`` command; one real-tool test compares OpenSM's own
``opensm-lfts.dump`` with ours."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smroute.cli.main import main
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult, route
from smroute.tables.diff import diff_tables, format_diff
from smroute.tables.formats import (
    format_fdbs,
    format_json,
    format_opensm,
    parse_fdbs,
    parse_json,
    parse_lft_dump,
    read_tables,
    write_tables,
)
from smroute.tables.lft import BLOCK, NO_ROUTE, ForwardingTables


# --------------------------------------------------------------------------- fabrics
def _complete() -> Fabric:
    # Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1): parallel links between levels 1 and 2
    return pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1])


def _degraded() -> Fabric:
    full = pgft(3, [4, 4, 4], [1, 4, 2], [1, 1, 1])
    deg, removed = degrade(full, np.random.default_rng(7), switches=1, links=6)
    assert len(removed.nodes) == 1 and len(removed.links) == 6
    return deg


def _lmc1() -> Fabric:
    return pgft(2, [4, 3], [1, 2], [1, 2], lmc=1)


FABRICS = {"complete": _complete, "degraded": _degraded, "lmc1": _lmc1}
_ROUTED: dict[str, tuple[Fabric, RoutingResult]] = {}


def _routed_pair(name: str) -> tuple[Fabric, RoutingResult]:
    if name not in _ROUTED:
        f = FABRICS[name]()
        _ROUTED[name] = (f, route(f, workers=1))
    return _ROUTED[name]


def routed(name: str) -> RoutingResult:
    """Route a named fabric once per test session (in-process, one worker)."""
    return _routed_pair(name)[1]


def assert_same_tables(got: ForwardingTables, want: ForwardingTables) -> None:
    """Same switch GUIDs (any order) and, per switch, the same port for every LID
    (LIDs beyond a table's width count as no route)."""
    assert sorted(got.switch_guid.tolist()) == sorted(want.switch_guid.tolist())
    width = max(got.ports.shape[1], want.ports.shape[1])
    order = [got.row_of(g) for g in want.switch_guid.tolist()]
    np.testing.assert_array_equal(got.widened(width)[order], want.widened(width))


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_opensm_format_round_trip(name: str) -> None:
    t = routed(name).tables
    text = format_opensm(t)
    got = parse_lft_dump(text.splitlines(), "x.dump")
    assert_same_tables(got, t)
    np.testing.assert_array_equal(got.switch_lid, t.switch_lid)
    assert got.switch_desc == t.switch_desc
    # each switch reaches its own LID through port 0 (what the file engine requires)
    own = t.ports[np.arange(t.n_switches), t.switch_lid]
    assert (own == 0).all()


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_fdbs_round_trip(name: str) -> None:
    t = routed(name).tables
    got = parse_fdbs(format_fdbs(t).splitlines(), "x.fdbs")
    assert_same_tables(got, t)
    # the switch LID is recovered from the port-0 entry
    np.testing.assert_array_equal(got.switch_lid, t.switch_lid)


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_json_round_trip(name: str) -> None:
    t = routed(name).tables
    got = parse_json(format_json(t), "x.json")
    assert_same_tables(got, t)
    assert got.switch_desc == t.switch_desc
    np.testing.assert_array_equal(got.switch_lid, t.switch_lid)


@pytest.mark.parametrize("fmt", ["opensm", "fdbs", "json"])
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_write_then_read_detects_format(name: str, fmt: str, tmp_path: Path) -> None:
    fabric, r = _routed_pair(name)
    out = tmp_path / f"tables.{fmt}"
    written = write_tables(r.tables, out, fmt, fabric=fabric)
    assert written[0] == out
    if fmt == "fdbs":
        assert written[1] == tmp_path / "opensm-subnet.lst"
        assert written[1].read_text().startswith("{ ")
    assert_same_tables(read_tables(out), r.tables)
    assert diff_tables(r.tables, read_tables(out)).identical


def test_lmc_tables_route_every_lid_of_a_range() -> None:
    r = routed("lmc1")
    lids = r.dest.lid[~r.dest.is_switch]
    # 2 LIDs per CA port, all routed on every switch
    assert len(lids) == 2 * len(_routed_pair("lmc1")[0].cas)
    assert (r.tables.ports[:, lids] != NO_ROUTE).all()


# --------------------------------------------------------------------------- diff (pure)
def _tables(guids: list[int], ports: np.ndarray, lids: list[int] | None = None) -> ForwardingTables:
    return ForwardingTables(
        switch_guid=np.array(guids, dtype=np.uint64),
        switch_lid=np.array(lids or [0] * len(guids), dtype=np.int64),
        switch_desc=tuple(f"sw{g:x}" for g in guids),
        ports=np.asarray(ports, dtype=np.uint8),
    )


def test_diff_identical_tables() -> None:
    t = routed("complete").tables
    d = diff_tables(t, t)
    assert d.identical
    assert (d.entries_changed, d.lids_changed, d.blocks_changed, d.switches_changed) == (0, 0, 0, 0)
    assert d.switches_compared == t.n_switches
    assert format_diff(d)[0].startswith("identical")
    assert d.to_dict()["identical"] is True


def test_diff_one_changed_entry_is_one_lid_one_block() -> None:
    t = routed("degraded").tables
    ports = t.ports.copy()
    i, lid = 3, int(np.flatnonzero(t.ports[3] != NO_ROUTE)[-1])
    old_port = int(ports[i, lid])
    ports[i, lid] = old_port % 7 + 1 if old_port % 7 + 1 != old_port else old_port + 1
    new = ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports)
    d = diff_tables(t, new)
    assert not d.identical
    assert (d.entries_changed, d.lids_changed, d.blocks_changed, d.switches_changed) == (1, 1, 1, 1)
    sd = next(d.switches())
    assert sd.guid == int(t.switch_guid[i]) and sd.desc == t.switch_desc[i]
    assert sd.lids.tolist() == [lid]
    assert sd.old_ports.tolist() == [old_port] and sd.new_ports.tolist() == [int(ports[i, lid])]
    assert sd.blocks.tolist() == [lid // BLOCK]
    doc = json.loads(json.dumps(d.to_dict()))
    assert doc["totals"]["blocks_changed"] == 1
    assert doc["switches"][0]["changes"] == [[lid, old_port, int(ports[i, lid])]]
    text = "\n".join(format_diff(d))
    assert f"0x{lid:04x}: {old_port} -> {int(ports[i, lid])}" in text


def test_diff_matches_switches_by_guid_not_row_order() -> None:
    t = routed("complete").tables
    perm = np.random.default_rng(3).permutation(t.n_switches)
    shuffled = ForwardingTables(
        t.switch_guid[perm], t.switch_lid[perm], tuple(t.switch_desc[k] for k in perm),
        t.ports[perm],
    )
    assert diff_tables(t, shuffled).identical


def test_diff_blocks_entries_and_switch_sets() -> None:
    w = 200
    a = np.full((3, w), 1, dtype=np.uint8)
    b = a.copy()
    # switch 0x10: LIDs 1 and 63 (block 0) and 64 (block 1); switch 0x20: LID 130 -> no route
    b[0, [1, 63, 64]] = 2
    b[1, 130] = NO_ROUTE
    old = _tables([0x10, 0x20, 0x30], a)
    new = _tables([0x20, 0x10, 0x40], b[[1, 0, 2]])
    d = diff_tables(old, new)
    assert d.common_guid.tolist() == [0x10, 0x20]
    assert d.only_old_guid.tolist() == [0x30] and d.only_old_desc == ("sw30",)
    assert d.only_new_guid.tolist() == [0x40] and d.only_new_desc == ("sw40",)
    assert d.entries_changed == 4 and d.lids_changed == 4 and d.switches_changed == 2
    assert d.blocks_changed == 3
    s10, s20 = list(d.switches())
    assert s10.lids.tolist() == [1, 63, 64] and s10.blocks.tolist() == [0, 1]
    assert s20.lids.tolist() == [130] and s20.blocks.tolist() == [2]
    assert s20.new_ports.tolist() == [NO_ROUTE]
    doc = d.to_dict()
    assert doc["switches"][1]["changes"] == [[130, 1, None]]
    assert [s["guid"] for s in doc["only_new"]] == ["0x0000000000000040"]
    text = format_diff(d)
    assert any("only in old" in x and "0x0000000000000030" in x for x in text)
    assert "  0x0082: 1 -> none" in text
    # switch LIDs: unknown (0) in one table is not a change
    moved = _tables([0x10, 0x20, 0x30], b, lids=[7, 8, 9])
    lines = format_diff(diff_tables(_tables([0x10, 0x20, 0x30], a, lids=[7, 0, 5]), moved))
    assert any(x.startswith('switch 0x0000000000000010 "sw10" (LID 7): 3 LIDs') for x in lines)
    assert any(x.startswith('switch 0x0000000000000020 "sw20" (LID 8): 1 LIDs') for x in lines)
    assert not any("0x0000000000000030" in x for x in lines)
    # max_entries limits listed entries, not totals
    short = format_diff(d, max_entries=1)
    assert short[-1] == "... 3 more changed entries not listed"
    assert d.to_dict(max_entries=1)["truncated"] is True


def test_diff_different_widths_pad_with_no_route() -> None:
    a = np.full((1, 10), NO_ROUTE, dtype=np.uint8)
    a[0, 1:10] = 1
    b = np.full((1, 140), NO_ROUTE, dtype=np.uint8)
    b[0, 1:10] = 1
    old, new = _tables([5], a), _tables([5], b)
    assert diff_tables(old, new).identical
    b[0, 139] = 3
    d = diff_tables(old, _tables([5], b))
    assert d.entry_lid.tolist() == [139] and d.entry_old.tolist() == [NO_ROUTE]
    assert d.block.tolist() == [2]
    # and the other way round
    d2 = diff_tables(_tables([5], b), old)
    assert d2.entry_lid.tolist() == [139] and d2.entry_new.tolist() == [NO_ROUTE]


def test_diff_chunked_comparison_agrees_with_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    s, w = 37, 300
    a = rng.integers(0, 8, (s, w)).astype(np.uint8)
    b = a.copy()
    idx = rng.integers(0, s, 40), rng.integers(1, w, 40)
    b[idx] = (b[idx] + 1) % 8
    guids = list(range(100, 100 + s))
    want = np.argwhere(a[:, 1:] != b[:, 1:])
    monkeypatch.setattr("smroute.tables.diff.CHUNK_BYTES", w * 4)  # 4 rows per chunk
    d = diff_tables(_tables(guids, a), _tables(guids, b))
    got = np.stack([d.entry_switch, d.entry_lid - 1], axis=1)
    np.testing.assert_array_equal(got, want)
    assert d.blocks_changed == len({(r, (c + 1) // BLOCK) for r, c in want.tolist()})


# --------------------------------------------------------------------------- smroute diff
def _write(t: ForwardingTables, path: Path, fmt: str = "opensm") -> Path:
    write_tables(t, path, fmt)
    return path


def _changed_copy(t: ForwardingTables) -> tuple[ForwardingTables, int, int]:
    ports = t.ports.copy()
    i = 0
    lid = int(np.flatnonzero(t.ports[i] != NO_ROUTE)[0])
    ports[i, lid] = 1 if ports[i, lid] != 1 else 2
    return ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports), i, lid


def test_cli_diff_identical_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = routed("complete").tables
    a = _write(t, tmp_path / "a.dump")
    b = _write(t, tmp_path / "b.json", "json")  # any two supported formats
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "identical" in out


def test_cli_diff_one_change_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = routed("complete").tables
    new, i, lid = _changed_copy(t)
    a = _write(t, tmp_path / "a.dump")
    b = _write(new, tmp_path / "b.fdbs", "fdbs")
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "1 entries, 1 LIDs, 1 LFT blocks" in out
    assert t.lid_desc is not None  # the changed LID is named by its destination
    assert (f'0x{lid:04x} "{t.lid_desc[lid]}": {int(t.ports[i, lid])} -> '
            f'{int(new.ports[i, lid])}') in out
    assert main(["diff", "--json", str(a), str(b)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["identical"] is False
    assert doc["totals"]["entries_changed"] == 1 and doc["totals"]["blocks_changed"] == 1
    assert doc["switches"][0]["guid"] == f"{int(t.switch_guid[i]):#018x}"
    assert doc["switches"][0]["blocks"] == [lid // BLOCK]


@pytest.mark.parametrize("content", [
    "this is not a table\n",
    "Unicast lids [0-3] of switch Lid 1 guid 0x10 ('x'):\n0x0001 zz\n",
    '{"format": "smroute-lft/1", "switches": [{"guid": 5}]}\n',
    "",
])
def test_cli_diff_bad_input_exit_2(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(routed("complete").tables, tmp_path / "good.dump")
    bad = tmp_path / "bad.txt"
    bad.write_text(content)
    assert main(["diff", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.txt" in err and "Traceback" not in err
    assert main(["diff", str(tmp_path / "missing"), str(good)]) == 2


def test_cli_diff_subprocess_exit_codes_without_traceback(tmp_path: Path) -> None:
    t = routed("complete").tables
    a = _write(t, tmp_path / "a.dump")
    new, _, _ = _changed_copy(t)
    b = _write(new, tmp_path / "b.dump")
    bad = tmp_path / "bad.dump"
    bad.write_bytes(b"\x00\xff garbage\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "smroute", "diff", *args],
                              capture_output=True, text=True, timeout=120)

    assert run(str(a), str(a)).returncode == 0
    assert run(str(a), str(b)).returncode == 1
    r = run(str(a), str(bad))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "bad.dump" in r.stderr


# --------------------------------------------------------------------------- real OpenSM
@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None, reason="ibsim (ibsim-utils) not installed")
def test_opensm_own_lfts_dump_has_our_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parse the opensm-lfts.dump a real OpenSM minhop run writes and compare
    it with our tables for the same fabric: same switches, same switch LIDs
    (preset LIDs are kept), same routed LIDs, own LID on port 0; then diff."""
    from smroute.fabric.export.writers import write_ibsim_net
    from smroute.lab.sim import IbSim, run_opensm

    fabric = pgft(2, [4, 3], [1, 2], [1, 2])
    ours = route(fabric, workers=1).tables
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    with IbSim(net, tmp_path / "sim") as sim:
        osm = run_opensm(sim, tmp_path / "opensm", engine="minhop")
    theirs = read_tables(osm.lfts)
    assert sorted(theirs.switch_guid.tolist()) == sorted(ours.switch_guid.tolist())
    order = [theirs.row_of(g) for g in ours.switch_guid.tolist()]
    np.testing.assert_array_equal(theirs.switch_lid[order], ours.switch_lid)
    assert theirs.max_lid == ours.max_lid
    assert theirs.switch_desc[order[0]] == ours.switch_desc[0]
    tp = theirs.widened(ours.ports.shape[1])[order]
    # every LID we route, minhop routes too; CA LIDs are routed on every switch by
    # both (minhop also routes spine-to-spine LIDs through a leaf, down then up,
    # which up*/down* routing leaves out)
    assert (tp != NO_ROUTE)[ours.ports != NO_ROUTE].all()
    ca_lids = np.unique(fabric.port_lid[fabric.port_start[fabric.cas] + 1])
    assert (tp[:, ca_lids] != NO_ROUTE).all() and (ours.ports[:, ca_lids] != NO_ROUTE).all()
    assert (tp[np.arange(len(order)), ours.switch_lid] == 0).all()
    # the same on the real dump through the CLI: they differ (minhop vs dmodc) only in ports
    mine = tmp_path / "ours.dump"
    write_tables(ours, mine)
    rc = main(["diff", "--json", str(osm.lfts), str(mine)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == (0 if doc["identical"] else 1)
    assert doc["totals"]["switches_only_old"] == doc["totals"]["switches_only_new"] == 0
    d = diff_tables(theirs, ours)
    assert doc["totals"]["entries_changed"] == d.entries_changed
    ca_changes = np.isin(d.entry_lid, ca_lids)
    assert (d.entry_old[ca_changes] != NO_ROUTE).all()
    assert (d.entry_new[ca_changes] != NO_ROUTE).all()
