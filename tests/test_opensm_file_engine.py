"""The real OpenSM loads our tables with its ``file`` routing engine and the
simulated switches end up holding exactly them.

Per fabric: route it with smroute, write the OpenSM file-engine text, boot
ibsim on the same fabric (its LIDs preset), run ``opensm -o -R file -U OURS``
once, then read every switch's LFT back with infiniband-diags' ``dump_fts``
(through ibsim-run) and compare every switch and every LID with ours.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.summary import summarize
from smroute.lab.sim import IbSim, OpenSMRun, dump_switch_routes, run_opensm
from smroute.routing.engine import route
from smroute.tables.diff import diff_tables
from smroute.tables.formats import parse_lft_dump, read_tables, write_tables
from smroute.tables.lft import NO_ROUTE, ForwardingTables

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("ibsim") is None,
                       reason="the ibsim binary is not installed (Debian package ibsim-utils)"),
]


def _degraded() -> Fabric:
    full = pgft(3, [4, 4, 4], [1, 4, 2], [1, 1, 1])
    deg, removed = degrade(full, np.random.default_rng(7), switches=1, links=6)
    assert len(removed.nodes) == 1 and len(removed.links) == 6
    return deg


SHAPES: dict[str, tuple[Callable[[], Fabric], int]] = {
    # Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1): parallel links between levels 1 and 2
    "zahavi-pgft": (lambda: pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]), 0),
    "degraded-3-level": (_degraded, 0),
    # two LIDs per host port: OpenSM must keep the LMC and our routes for both
    "lmc1-parallel": (lambda: pgft(2, [4, 3], [1, 2], [1, 2], lmc=1), 1),
}


def _load_into_opensm(
    fabric: Fabric, tables: ForwardingTables, tmp_path: Path, lmc: int,
    sm_node: int | None = None,
) -> tuple[OpenSMRun, ForwardingTables]:
    """Run ``opensm -R file -U`` with ``tables`` on ``fabric`` under ibsim
    (attached at ``sm_node``, default the first CA); return OpenSM's run and
    what ``dump_fts`` reads back from the switches."""
    assert summarize(fabric).component_sizes == (fabric.n_nodes,), "must be connected"
    lfts = tmp_path / "ours.lfts"
    write_tables(tables, lfts, "opensm")
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net, sm_node=sm_node)
    with IbSim(net, tmp_path / "sim") as sim:
        osm = run_opensm(sim, tmp_path / "opensm", engine="file", lfts_file=lfts, lmc=lmc,
                         timeout=300)
        text = dump_switch_routes(sim)
    (tmp_path / "dump_fts.txt").write_text(text)
    return osm, parse_lft_dump(text.splitlines(), "dump_fts")


def _subnet_lids(path: Path) -> dict[int, int]:
    """Port GUID -> LID from OpenSM's opensm-subnet.lst."""
    out: dict[int, int] = {}
    for m in re.finditer(r"PortGUID:([0-9a-f]{16}) .*? LID:([0-9A-F]{4}) PN:", path.read_text()):
        out[int(m.group(1), 16)] = int(m.group(2), 16)
    return out


def assert_switches_hold(got: ForwardingTables, want: ForwardingTables) -> None:
    """Every switch of ``want`` holds exactly ``want``'s port for every LID."""
    assert sorted(got.switch_guid.tolist()) == sorted(want.switch_guid.tolist())
    width = max(got.ports.shape[1], want.ports.shape[1])
    order = [got.row_of(g) for g in want.switch_guid.tolist()]
    g, w = got.widened(width)[order], want.widened(width)
    bad = np.argwhere(g != w)
    assert len(bad) == 0, [
        (f"{int(want.switch_guid[i]):#x}", lid, int(w[i, lid]), int(g[i, lid]))
        for i, lid in bad[:10].tolist()
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_switches_hold_exactly_our_tables(shape: str, tmp_path: Path) -> None:
    make, lmc = SHAPES[shape]
    fabric = make()
    ours = route(fabric, workers=1).tables
    assert (ours.ports[:, 1:] != NO_ROUTE).sum() > 0
    osm, held = _load_into_opensm(fabric, ours, tmp_path, lmc)
    assert osm.engine_used == "file"
    log = osm.log.read_text()
    assert "file tables configured on all switches" in log
    assert "PARSE ERROR" not in log and "Invalid port" not in log
    # OpenSM kept the preset LIDs: switch LIDs (its own dump) and every port's LID
    theirs = read_tables(osm.lfts)
    order = [theirs.row_of(g) for g in ours.switch_guid.tolist()]
    np.testing.assert_array_equal(theirs.switch_lid[order], ours.switch_lid)
    lids = _subnet_lids(osm.subnet_lst)
    ca_rows = np.flatnonzero((fabric.node_type[fabric.port_node] == NodeType.CA)
                             & (fabric.port_peer >= 0))
    assert {int(fabric.port_guid[r]): int(fabric.port_lid[r]) for r in ca_rows.tolist()} == {
        g: lids[g] for g in fabric.port_guid[ca_rows].tolist()}
    assert set(fabric.port_lmc[ca_rows].tolist()) == {lmc}
    # what OpenSM computed and what the switches hold: exactly our tables
    assert_switches_hold(theirs, ours)
    assert_switches_hold(held, ours)
    assert diff_tables(ours, held).identical


def test_a_changed_entry_shows_up_on_the_switch(tmp_path: Path) -> None:
    """Control: the read-back reflects the file, entry by entry."""
    fabric = pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1])
    ours = route(fabric, workers=1).tables
    ports = ours.ports.copy()
    # on the first leaf (2 host ports, then 4 up-ports), move one LID from the
    # last up-port to the one before
    leaf = 0
    up = sorted({int(p) for p in ports[leaf, 1:] if p not in (0, NO_ROUTE)})[-2:]
    assert up[0] > 2
    lid = next(x for x in range(1, ports.shape[1]) if int(ports[leaf, x]) == up[-1])
    ports[leaf, lid] = up[0]
    changed = ForwardingTables(ours.switch_guid, ours.switch_lid, ours.switch_desc, ports,
                               ours.lid_guid, ours.lid_kind, ours.lid_desc)
    _, held = _load_into_opensm(fabric, changed, tmp_path, 0)
    assert_switches_hold(held, changed)
    d = diff_tables(ours, held)
    assert (d.entries_changed, d.blocks_changed) == (1, 1)
    sd = next(d.switches())
    assert (sd.guid, sd.lids.tolist(), sd.new_ports.tolist()) == (
        int(ours.switch_guid[leaf]), [lid], [up[0]])


def test_cli_routes_real_ibnetdiscover_text_for_opensm_and_ibdmchk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end with LIDs OpenSM chose: ibsim (no preset LIDs) -> OpenSM minhop
    assigns LIDs -> real ibnetdiscover text -> ``smroute route`` (opensm and
    fdbs formats) -> ``opensm -R file -U`` -> dump_fts holds our tables, and
    ibdmchk accepts the fdbs output."""
    import dataclasses

    from smroute.cli.main import main
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.lab.sim import ibnetdiscover

    fabric = pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1])
    no_lids = dataclasses.replace(
        fabric, port_lid=np.zeros_like(fabric.port_lid), _cache={})
    net = tmp_path / "fabric.net"
    write_ibsim_net(no_lids, net)
    topo = tmp_path / "real.topo"
    lfts = tmp_path / "ours.lfts"
    fdbs = tmp_path / "fdbs" / "opensm.fdbs"
    fdbs.parent.mkdir()  # route creates no directories
    with IbSim(net, tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "minhop", engine="minhop")
        topo.write_text("\n".join(ibnetdiscover(sim)) + "\n")
        assert main(["route", str(topo), "--out", str(lfts), "--workers", "1", "-q"]) == 0
        assert main(["route", str(topo), "--out", str(fdbs), "--format", "fdbs",
                     "--workers", "1", "-q"]) == 0
        osm = run_opensm(sim, tmp_path / "file", engine="file", lfts_file=lfts)
        held = parse_lft_dump(dump_switch_routes(sim).splitlines(), "dump_fts")
    assert osm.engine_used == "file"
    ours = read_tables(lfts)
    assert ours.n_switches == len(fabric.switches)
    assert (ours.ports[:, 1:] != NO_ROUTE).sum() > 0
    assert_switches_hold(held, ours)
    rep = run_ibdmchk(fdbs, fdbs.with_name("opensm-subnet.lst"))
    assert rep.ok and rep.ca_paths == 12 * 11, rep.stdout[-2000:]
    assert "validation: valid" in capsys.readouterr().out
