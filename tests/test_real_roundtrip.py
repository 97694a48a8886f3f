"""Real tools round trip: generator -> ibsim -> OpenSM + ibnetdiscover -> parser.

These tests boot the real ``ibsim`` (ibsim-utils), run the real OpenSM and
infiniband-diags under ``ibsim-run`` and parse the real ``ibnetdiscover`` text.
They are skipped only when the ``ibsim`` binary is not installed; a missing
``opensm``/``ibnetdiscover`` next to it is a failure (install what
scripts/setup.sh installs).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from smroute.errors import SmrouteError
from smroute.fabric.export.writers import write_ibsim_net
from smroute.fabric.generate.trees import degrade, kary_ntree, parse_tuple, pgft
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.summary import components, summarize
from smroute.lab.sim import (
    IbSim,
    ToolError,
    ToolMissingError,
    ToolTimeoutError,
    dump_switch_routes,
    ibnetdiscover,
    net_limits,
    parse_routing_seconds,
    run_opensm,
)

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(
        shutil.which("ibsim") is None,
        reason="the ibsim binary is not installed (Debian package ibsim-utils): "
        "these tests drive the real simulator",
    ),
]


def _strip_lids(f: Fabric) -> Fabric:
    """``f`` without LIDs/LMCs, so OpenSM assigns every LID itself."""
    z16, z8 = np.zeros_like(f.port_lid), np.zeros_like(f.port_lmc)
    z16.setflags(write=False)
    z8.setflags(write=False)
    return dataclasses.replace(f, port_lid=z16, port_lmc=z8, _cache={})


def _degraded_three_level() -> Fabric:
    full = pgft(3, [3, 3, 4], [1, 3, 3], [1, 1, 1])
    tops = [n for n in full.switches.tolist() if (parse_tuple(full.node_desc[n]) or (0,))[0] == 3]
    rng = np.random.default_rng(11)
    minus_top = full.with_removed(nodes=[int(rng.choice(tops))])
    deg, _ = degrade(minus_top, rng, links=4)
    return deg


SHAPES: dict[str, object] = {
    # Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1): parallel links between levels 1 and 2
    "zahavi-pgft": lambda: pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]),
    # 2-level with p_2 = 3: three parallel cables per leaf-spine pair
    "two-level-p3": lambda: pgft(2, [4, 3], [1, 2], [1, 3]),
    # partially populated leaves (free leaf ports)
    "partial-leaves": lambda: pgft(2, [8, 6], [1, 4], [1, 1], hosts_per_leaf=5),
    "kary-4-3": lambda: kary_ntree(4, 3),
    # one top switch and four links gone
    "degraded-3-level": _degraded_three_level,
}


def _boot(tmp_path: Path, fabric: Fabric, *, keep_lids: bool = False) -> IbSim:
    tmp_path.mkdir(parents=True, exist_ok=True)
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric if keep_lids else _strip_lids(fabric), net)
    return IbSim(net, tmp_path / "sim")


def _port_guids(f: Fabric) -> dict[tuple[int, int], int]:
    """(node GUID, port) -> port GUID for linked CA ports and switch port 0:
    what ibnetdiscover shows."""
    rows = np.flatnonzero(
        ((f.node_type[f.port_node] == NodeType.SWITCH) & (f.port_num == 0))
        | ((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0))
    )
    return {
        (int(f.node_guid[f.port_node[r]]), int(f.port_num[r])): int(f.port_guid[r])
        for r in rows.tolist()
    }


def _by_guid(f: Fabric) -> dict[int, tuple[int, int, str]]:
    return {
        int(g): (int(t), int(n), d)
        for g, t, n, d in zip(f.node_guid, f.node_type, f.num_ports, f.node_desc, strict=True)
    }


def _linked_port_attrs(f: Fabric) -> dict[tuple[int, int], tuple[int, int]]:
    rows = np.flatnonzero(f.port_peer >= 0)
    return {
        (int(f.node_guid[f.port_node[r]]), int(f.port_num[r])):
            (int(f.port_width[r]), int(f.port_speed[r]))
        for r in rows.tolist()
    }


def assert_same_graph(got: Fabric, want: Fabric) -> None:
    """Same nodes (GUID, type, port count, description), links, port GUIDs,
    and widths/speeds of linked ports."""
    assert sorted(got.node_guid.tolist()) == sorted(want.node_guid.tolist())
    assert _by_guid(got) == _by_guid(want)
    assert got.link_set() == want.link_set()
    assert _port_guids(got) == _port_guids(want)
    assert _linked_port_attrs(got) == _linked_port_attrs(want)


def assert_lids_assigned(f: Fabric, lmc: int) -> None:
    """Every switch and linked CA port has a LID, CA ports carry ``lmc``,
    and no two ports share a LID range."""
    sw_rows = f.port_start[f.switches]
    ca_rows = np.flatnonzero((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0))
    assert (f.port_lid[sw_rows] > 0).all()
    assert (f.port_lid[ca_rows] > 0).all()
    assert (f.port_lmc[ca_rows] == lmc).all()
    if lmc:
        assert (f.port_lid[ca_rows] % (1 << lmc) == 0).all()
    # lid_to_port maps every LID of every range to one port: ranges must not overlap
    rows = np.concatenate([sw_rows, ca_rows])
    sizes = np.left_shift(1, f.port_lmc[rows].astype(np.int64))
    assert int((f.lid_to_port >= 0).sum()) == int(sizes.sum())


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_roundtrip_through_real_tools(shape: str, tmp_path: Path) -> None:
    want: Fabric = SHAPES[shape]()  # type: ignore[operator]
    assert summarize(want).component_sizes == (want.n_nodes,), "test fabric must be connected"
    with _boot(tmp_path, want) as sim:
        osm = run_opensm(sim, tmp_path / "opensm")
        lines = ibnetdiscover(sim)
    got = parse_topology(lines, f"{shape}.topo")
    assert_same_graph(got, want)
    assert_lids_assigned(got, 0)
    assert osm.engine_used == "minhop"


def test_roundtrip_with_lmc2_and_opensm_outputs(tmp_path: Path) -> None:
    want = pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1])
    with _boot(tmp_path, want) as sim:
        osm = run_opensm(sim, tmp_path / "opensm", lmc=2)
        lines = ibnetdiscover(sim)
        fts = dump_switch_routes(sim)
    got = parse_topology(lines, "lmc2.topo")
    assert_same_graph(got, want)
    assert_lids_assigned(got, 2)
    # OpenSM's dumps exist and cover every switch
    for path in (osm.lfts, osm.fdbs, osm.subnet_lst, osm.log):
        assert path.is_file() and path.stat().st_size > 0, path
    lfts = osm.lfts.read_text()
    assert len(re.findall(r"^Unicast lids \[", lfts, re.M)) == len(want.switches)
    assert len(re.findall(r"^dump_ucast_routes: Switch ", osm.fdbs.read_text(), re.M)) == len(
        want.switches
    )
    assert osm.routing_seconds is not None and 0 <= osm.routing_seconds < 60
    assert osm.engine_used == "minhop" and osm.lmc == 2
    # what the switches really hold: one block per switch, and every CA LID
    # range (4 LIDs per CA port) routed on each: dump_fts names the base LID's
    # port and marks the other three "path #k out of 4"
    blocks = re.findall(r"^Unicast lids \[0x0-0x[0-9a-f]+\] of switch .*guid (0x[0-9a-f]+)", fts,
                        re.M)
    assert sorted(int(g, 16) for g in blocks) == sorted(want.node_guid[want.switches].tolist())
    ca_lines = re.findall(r"^0x[0-9a-f]{4} \d{3} : \(Channel Adapter", fts, re.M)
    extra = re.findall(r"^0x[0-9a-f]{4} \d{3} : \(path #[234] out of 4: ", fts, re.M)
    assert len(ca_lines) == len(want.switches) * len(want.cas)
    assert len(extra) == len(want.switches) * len(want.cas) * 3


def test_preset_lids_survive_opensm(tmp_path: Path) -> None:
    """ibsim presets the generator's LIDs; OpenSM keeps valid ones."""
    want = pgft(2, [4, 3], [1, 2], [1, 1])
    with _boot(tmp_path, want, keep_lids=True) as sim:
        run_opensm(sim, tmp_path / "opensm")
        got = parse_topology(ibnetdiscover(sim), "preset.topo")
    assert_same_graph(got, want)
    lid = {int(g): int(x) for g, x in zip(want.node_guid, want.node_lid, strict=True)}
    assert {int(g): int(x) for g, x in zip(got.node_guid, got.node_lid, strict=True)} == lid


def test_ibnetdiscover_sees_only_the_plane_of_its_port(tmp_path: Path) -> None:
    """Hosts with two ports (w_1 = 2) wire a PGFT as two planes joined only
    through CAs.  The real ibnetdiscover does not route through CAs, so it
    shows the plane of the port it runs on and, on each CA, only the port in
    that plane."""
    want = pgft(2, [3, 4], [2, 2], [1, 1])
    with _boot(tmp_path, want) as sim:
        run_opensm(sim, tmp_path / "opensm")
        got = parse_topology(ibnetdiscover(sim), "plane.topo")
    # the plane of the first CA's port 1 (the attach point)
    is_sw = want.node_type == NodeType.SWITCH
    na, nb = want.port_node[want.link_a], want.port_node[want.link_b]
    ss = is_sw[na] & is_sw[nb]
    labels = components(want.n_nodes, na[ss], nb[ss])
    ca0 = int(want.cas[0])
    leaf = int(want.port_node[want.port_peer[want.port_row(ca0, 1)]])
    plane = labels == labels[leaf]
    in_plane = plane[na] | plane[nb]
    ga = want.node_guid[na[in_plane]].tolist()
    gb = want.node_guid[nb[in_plane]].tolist()
    pa = want.port_num[want.link_a[in_plane]].tolist()
    pb = want.port_num[want.link_b[in_plane]].tolist()
    expect = {tuple(sorted([(x, p), (y, q)])) for x, p, y, q in zip(ga, pa, gb, pb, strict=True)}
    assert got.link_set() == expect
    assert len(got.switches) == int(plane.sum()) == len(want.switches) // 2
    assert len(got.cas) == len(want.cas)
    ca_linked = (got.node_type[got.port_node] == NodeType.CA) & (got.port_peer >= 0)
    assert set(got.port_num[ca_linked].tolist()) == {1}


# --------------------------------------------------------------------------- IbSim behaviour
def test_console_unlink_and_relink_change_what_ibnetdiscover_sees(tmp_path: Path) -> None:
    want = pgft(2, [3, 3], [1, 2], [1, 1])
    # the first leaf's first up-link: leaf port 4 (3 down-ports + 1)
    leaf = int(want.switches[0])
    row = want.port_row(leaf, 4)
    peer = int(want.port_peer[row])
    link = tuple(sorted([(int(want.node_guid[leaf]), 4),
                         (int(want.node_guid[want.port_node[peer]]), int(want.port_num[peer]))]))
    node_id = f"S-{int(want.node_guid[leaf]):016x}"
    with _boot(tmp_path, want) as sim:
        assert sim.unlink(node_id, 4) == ""
        cut = parse_topology(ibnetdiscover(sim), "cut.topo")
        assert cut.link_set() == want.link_set() - {link}
        sim.relink(node_id, 4)
        back = parse_topology(ibnetdiscover(sim), "back.topo")
        assert back.link_set() == want.link_set()
        assert "not found" in sim.console('Unlink "no-such-node"[1]')


def test_console_route_follows_opensm_tables(tmp_path: Path) -> None:
    want = pgft(2, [3, 3], [1, 2], [1, 1])
    with _boot(tmp_path, want) as sim:
        run_opensm(sim, tmp_path / "opensm")
        got = parse_topology(ibnetdiscover(sim), "r.topo")
        a, b = int(got.node_lid[got.cas[0]]), int(got.node_lid[got.cas[-1]])
        text = sim.route(a, b)
    assert f"lid {b}" in text.splitlines()[-1]
    assert "no route" not in text


def test_two_simulators_run_side_by_side(tmp_path: Path) -> None:
    small = pgft(2, [2, 2], [1, 1], [1, 1])
    other = pgft(2, [3, 2], [1, 2], [1, 1])
    with _boot(tmp_path / "a", small) as a, _boot(tmp_path / "b", other) as b:
        assert a.sockname != b.sockname
        ga = parse_topology(ibnetdiscover(a), "a.topo")
        gb = parse_topology(ibnetdiscover(b), "b.topo")
    assert ga.link_set() == small.link_set()
    assert gb.link_set() == other.link_set()


def test_timeout_kills_the_tool_and_frees_the_sm_slot(tmp_path: Path) -> None:
    want = pgft(2, [2, 2], [1, 1], [1, 1])
    with _boot(tmp_path, want) as sim:
        t = time.monotonic()
        with pytest.raises(ToolTimeoutError, match="timed out"):
            sim.run(["sleep", "30"], timeout=0.3)
        assert time.monotonic() - t < 10
        with pytest.raises(ToolTimeoutError):
            run_opensm(sim, tmp_path / "o1", timeout=0.01)
        # a killed OpenSM left no client (nor SM flag) behind: a new one runs
        osm = run_opensm(sim, tmp_path / "o2")
        assert osm.lfts.is_file()
        assert sim.attached() == []


def test_missing_tool_names_the_package(tmp_path: Path) -> None:
    with _boot(tmp_path, pgft(2, [2, 2], [1, 1], [1, 1])) as sim:
        with pytest.raises(ToolMissingError, match="install"):
            sim.run(["smroute-no-such-tool"])
        res = sim.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
        assert (res.returncode, res.stdout, res.stderr.strip().splitlines()[-1]) == (
            3, "out\n", "err")
        with pytest.raises(ToolError, match="status 3") as info:
            sim.run(["sh", "-c", "echo boom >&2; exit 3"])
        assert "boom" in info.value.stderr_tail


def test_bad_net_file_is_a_tool_error_with_stderr(tmp_path: Path) -> None:
    net = tmp_path / "bad.net"
    net.write_text('Switch\t4 "sw"\n[1]\t"nowhere"[1]\n')
    with pytest.raises(ToolError) as info, IbSim(net, tmp_path / "sim"):
        pass
    assert "nowhere" in str(info.value)
    assert isinstance(info.value, SmrouteError)


def test_ibsim_is_stopped_on_exit(tmp_path: Path) -> None:
    sim = _boot(tmp_path, pgft(2, [2, 2], [1, 1], [1, 1]))
    with sim:
        assert sim.running
        pid = sim._proc.pid if sim._proc else -1
    assert not sim.running
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_net_limits_and_big_fabric_limits(tmp_path: Path) -> None:
    f = pgft(2, [18, 36], [1, 18], [1, 1])
    net = tmp_path / "f.net"
    write_ibsim_net(f, net)
    lim = net_limits(net)
    assert (lim.nodes, lim.switches) == (702, 54)
    assert lim.ports == 54 * 37 + 648
    cmd = IbSim(net, tmp_path).command_line()
    assert cmd[cmd.index("-N") + 1] == "2048"


def test_parse_routing_seconds() -> None:
    log = [
        "Nov 21 23:59:51 175030 [43FEB740] 0x02 -> osm_vendor_init: 1000 pending umads",
        "Dec 31 23:59:59 900000 [40FE46C0] 0x04 -> ucast_mgr_route: building routing with "
        "'minhop' routing algorithm...",
        "Jan  1 00:00:01 150000 [40FE46C0] 0x02 -> osm_ucast_mgr_process: minhop tables "
        "configured on all switches",
    ]
    secs, engine = parse_routing_seconds(log)
    assert engine == "minhop"
    assert secs == pytest.approx(1.25)
    assert parse_routing_seconds(log[2:]) == (None, "minhop")
    assert parse_routing_seconds(log[:1]) == (None, None)
