"""ibnetdiscover topology and ports-report parser (smroute.fabric.ibnetdiscover.parse).

Real fixtures in ``tests/data`` were captured from the real tools on ibsim (see
``tests/data/README``): ``ibsim -s NET``, ``ibsim-run opensm -o [-l 2]``,
``ibsim-run ibnetdiscover [-p|-f|-g]``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smroute.errors import InputError
from smroute.fabric.ibnetdiscover.parse import (
    TopologyError,
    parse_ports_report,
    parse_topology,
    read_ports_report,
    read_topology,
)
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import SPEEDS, NodeType

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parent.parent
FIXTURE_TOPOS = sorted((ROOT / "fixtures").glob("*.topo"))

SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR = (SPEEDS.index(s) for s in SPEEDS[1:])


def row(f: Fabric, guid: int, port: int) -> int:
    """Port row of ``port`` on the node with node GUID ``guid``."""
    return f.port_row(f.node_by_guid(guid), port)


def peer_of(f: Fabric, guid: int, port: int) -> tuple[int, int]:
    """(node GUID, port) at the other end of a port's link."""
    r = f.peer(row(f, guid, port))
    assert r >= 0, f"{guid:#x}[{port}] is not linked"
    return int(f.node_guid[f.port_node[r]]), int(f.port_num[r])


def raises_at(text: str | list[str], line: int | None) -> TopologyError:
    """Parse and require a TopologyError at ``line``; return it."""
    with pytest.raises(TopologyError) as info:
        parse_topology(text, "t.topo")
    assert info.value.line == line, str(info.value)
    assert info.value.source == "t.topo"
    return info.value


def line_of(lines: list[str], needle: str) -> int:
    """1-based number of the only line containing ``needle``."""
    hits = [i + 1 for i, ln in enumerate(lines) if needle in ln]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


# --------------------------------------------------------------------------
# Real output captured from ibsim
# --------------------------------------------------------------------------
SW1, SW2, HCA1, HCA2 = 0x200000, 0x200001, 0x100000, 0x100003


def test_real_2sw2path_parallel_links_and_2port_cas() -> None:
    f = read_topology(DATA / "ibsim_2sw2path_2port.topo")
    assert (f.n_nodes, len(f.switches), len(f.cas), f.n_links) == (4, 2, 2, 6)
    assert f.num_ports[f.node_by_guid(SW1)] == 8
    assert f.num_ports[f.node_by_guid(HCA1)] == 2
    assert f.node_desc[f.node_by_guid(SW2)] == "Switch2"
    assert f.node_desc[f.node_by_guid(HCA2)] == "Hca2"
    # parallel switch links 3-3 and 5-5
    assert peer_of(f, SW1, 3) == (SW2, 3)
    assert peer_of(f, SW1, 5) == (SW2, 5)
    assert peer_of(f, SW2, 5) == (SW1, 5)
    # both ports of each 2-port HCA are linked
    assert peer_of(f, HCA1, 1) == (SW1, 1)
    assert peer_of(f, HCA1, 2) == (SW1, 2)
    assert peer_of(f, HCA2, 2) == (SW2, 2)
    assert f.peer(row(f, SW1, 4)) == -1
    # GUIDs and LIDs (OpenSM assigned them)
    assert int(f.port_guid[row(f, HCA1, 1)]) == 0x100001
    assert int(f.port_guid[row(f, HCA2, 2)]) == 0x100005
    assert int(f.port_guid[row(f, SW1, 0)]) == SW1
    assert int(f.port_lid[row(f, SW1, 0)]) == 1
    assert int(f.port_lid[row(f, SW2, 0)]) == 3
    assert int(f.port_lid[row(f, HCA1, 1)]) == 2
    assert int(f.port_lid[row(f, HCA1, 2)]) == 4
    assert int(f.port_lid[row(f, HCA2, 1)]) == 5
    assert f.port_by_lid(6) == row(f, HCA2, 2)
    assert int(f.sysimg_guid[f.node_by_guid(HCA2)]) == HCA2
    linked = f.port_peer >= 0
    assert (f.port_width[linked] == 4).all() and (f.port_speed[linked] == SDR).all()
    assert f.port_lmc.max() == 0


LEAF1, LEAF2, SPINE1, SPINE2 = 0x200002, 0x200003, 0x200000, 0x200001
NODE1, NODE2, NODE3, NODE4 = 0x100000, 0x100002, 0x100005, 0x100007


def check_lmc2_fabric(f: Fabric) -> None:
    """Facts of tests/data/ibsim_lmc2_72port.* (LMC 2, a 72-port spine)."""
    assert (f.n_nodes, len(f.switches), len(f.cas), f.n_links) == (8, 4, 4, 9)
    assert f.num_ports[f.node_by_guid(SPINE1)] == 72
    assert peer_of(f, SPINE1, 70) == (LEAF1, 11)
    assert peer_of(f, LEAF1, 10) == (SPINE1, 1)  # parallel Leaf1-Spine1 links
    assert peer_of(f, LEAF2, 3) == (NODE4, 2)
    # CA LIDs with LMC 2; switch port 0 LIDs with LMC 0
    ca_rows = [row(f, NODE1, 1), row(f, NODE2, 1), row(f, NODE3, 1), row(f, NODE4, 2)]
    assert f.port_lid[ca_rows].tolist() == [4, 12, 20, 24]
    assert f.port_lmc[ca_rows].tolist() == [2, 2, 2, 2]
    assert int(f.port_lid[row(f, SPINE1, 0)]) == 1 and int(f.port_lmc[row(f, SPINE1, 0)]) == 0
    assert int(f.port_lid[row(f, LEAF2, 0)]) == 16
    for lid in (24, 25, 26, 27):
        assert f.port_by_lid(lid) == row(f, NODE4, 2)
    # a 2-port HCA cabled on port 2 only
    assert f.num_ports[f.node_by_guid(NODE4)] == 2
    assert f.peer(row(f, NODE4, 1)) == -1
    assert int(f.port_guid[row(f, NODE4, 2)]) == 0x100009
    # widths/speeds, stored on both ends
    for g, p, w, s in ((NODE3, 1, 1, SDR), (LEAF2, 1, 1, SDR), (NODE4, 2, 12, QDR),
                       (LEAF2, 3, 12, QDR), (NODE2, 1, 4, DDR), (SPINE2, 1, 4, QDR)):
        assert (int(f.port_width[row(f, g, p)]), int(f.port_speed[row(f, g, p)])) == (w, s)


def test_real_lmc2_72port_spine() -> None:
    f = read_topology(DATA / "ibsim_lmc2_72port.topo")
    check_lmc2_fabric(f)
    assert f.node_desc[f.node_by_guid(NODE4)] == "Node4 HCA-1"


@pytest.mark.parametrize("variant", ["full", "g"])
def test_real_full_info_and_grouped_output_parse_the_same(variant: str) -> None:
    """``ibnetdiscover -f`` (s= w= v= suffixes) and ``-g`` (Non-Chassis Nodes)."""
    plain = read_topology(DATA / "ibsim_lmc2_72port.topo")
    other = read_topology(DATA / f"ibsim_lmc2_72port.{variant}.topo")
    check_lmc2_fabric(other)
    assert other.content_hash == plain.content_hash


def test_real_extended_speeds_and_widths() -> None:
    f = read_topology(DATA / "ibsim_extspeeds.topo")
    swa, swb, hx, hy = 0x200000, 0x200001, 0x100000, 0x100002
    assert (f.n_nodes, f.n_links) == (4, 5)
    speeds = {p: int(f.port_speed[row(f, swa, p)]) for p in (1, 2, 3)}
    assert speeds == {1: FDR, 2: EDR, 3: HDR}
    assert int(f.port_speed[row(f, swb, 3)]) == HDR
    assert (int(f.port_width[row(f, hy, 1)]), int(f.port_speed[row(f, hy, 1)])) == (8, QDR)
    assert (int(f.port_width[row(f, hx, 1)]), int(f.port_speed[row(f, hx, 1)])) == (2, SDR)


# --------------------------------------------------------------------------
# Ports report (ibnetdiscover -p)
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["ibsim_2sw2path_2port", "ibsim_lmc2_72port", "ibsim_extspeeds"]
)
def test_ports_report_matches_topology(name: str) -> None:
    rep = read_ports_report(DATA / f"{name}.ports")
    topo = read_topology(DATA / f"{name}.topo")
    assert rep.link_set() == topo.link_set()
    # ibsim's port GUIDs follow node GUID + port, so node GUIDs are recovered
    assert sorted(rep.node_guid.tolist()) == sorted(topo.node_guid.tolist())
    order = rep.nodes_by_guid(topo.node_guid)
    assert (rep.node_type[order] == topo.node_type).all()
    assert [rep.node_desc[i] for i in order] == list(topo.node_desc)
    # switch LIDs and CA port LIDs, GUIDs, widths, speeds of linked ports
    linked = np.flatnonzero(topo.port_peer >= 0)
    rrows = rep.port_start[order[topo.port_node[linked]]] + topo.port_num[linked]
    for attr in ("port_lid", "port_guid", "port_width", "port_speed"):
        assert (getattr(rep, attr)[rrows] == getattr(topo, attr)[linked]).all(), attr
    sw = topo.switches
    assert (rep.port_lid[rep.port_start[order[sw]]] == topo.port_lid[topo.port_start[sw]]).all()
    assert (rep.num_ports[order[sw]] == topo.num_ports[sw]).all()  # switches list every port
    assert rep.port_lmc.max() == 0  # the report has no LMC


def test_ports_report_port_counts_are_the_highest_port_seen() -> None:
    rep = read_ports_report(DATA / "ibsim_lmc2_72port.ports")
    # Node2 HCA-1 has 2 ports, only port 1 is linked and reported
    assert rep.num_ports[rep.node_by_guid(NODE2)] == 1
    assert rep.num_ports[rep.node_by_guid(NODE4)] == 2
    assert rep.num_ports[rep.node_by_guid(SPINE1)] == 72
    assert int(rep.port_lid[rep.port_by_guid(0x100009)]) == 24


def test_ports_report_errors() -> None:
    lines = (DATA / "ibsim_2sw2path_2port.ports").read_text().splitlines()
    # drop the line of Switch1 port 3 -> Switch2 port 3's link is one-sided
    i = next(k for k, ln in enumerate(lines) if ln.startswith("SW     1  3 "))
    with pytest.raises(TopologyError) as info:
        parse_ports_report(lines[:i] + lines[i + 1:], "r")
    j = next(k for k, ln in enumerate(lines) if ln.startswith("SW     3  3 "))
    assert info.value.line == j + 1
    with pytest.raises(TopologyError) as info:
        parse_ports_report(["SW  1 1 0x1 4x SDR garbage"], "r")
    assert info.value.line == 1 and info.value.expected
    with pytest.raises(TopologyError):
        parse_ports_report([], "r")


# --------------------------------------------------------------------------
# Hand-written text: grammar corners
# --------------------------------------------------------------------------
LEAF, SPINE, HOST, ROUTER = 0x2C5EAB0300B87B40, 0x2C5EAB0300C26280, 0xE09D7303007A4BD8, 0x77

SMALL = [
    "#",
    "# Topology file: generated on Sat Nov 21 23:58:39 2026",
    "#",
    "",
    "vendid=0x2c9",
    "devid=0xd2f2",
    "sysimgguid=0x2c5eab0300b87b40",
    "switchguid=0x2c5eab0300b87b40(2c5eab0300b87b41)",
    'Switch\t66 "S-2c5eab0300b87b40"\t\t# "MF0;A09 "leaf" # [1](2) x" enhanced port 0 lid 73 lmc 0',
    '[1]\t"H-e09d7303007a4bd8"[1](e09d7303007a4bd9) \t\t# "a08 "dgx" mlx5_5" lid 647 4xNDR',
    '[65][ext 33]\t"S-2c5eab0300c26280"[32][ext 16]\t\t# "spine" lid 236 4xNDR',
    '[66][ext 34]\t"S-2c5eab0300c26280"[31][ext 15]\t\t# "spine" lid 236 ?????',
    "",
    "vendid=0x2c9",
    "devid=0xd2f2",
    "switchguid=0x2c5eab0300c26280(2c5eab0300c26280)",
    'Switch\t40 "S-2c5eab0300c26280"\t\t# "spine" base port 0 lid 236 lmc 0',
    '[31]\t"S-2c5eab0300b87b40"[66]\t\t# "MF0;A09 "leaf" # [1](2) x" lid 73 8xXDR',
    '[32]\t"S-2c5eab0300b87b40"[65]\t\t# "MF0;A09 "leaf" # [1](2) x" lid 73 4xNDR',
    '[40]\t"R-0000000000000077"[2](79) \t\t# "router r1" lid 900 2xHDR',
    "",
    "vendid=0x2c9",
    "devid=0x1021",
    "sysimgguid=0xe09d7303007a4bd8",
    "caguid=0xe09d7303007a4bd8",
    'Ca\t2 "H-e09d7303007a4bd8"\t\t# "a08 "dgx" mlx5_5"',
    '[1](e09d7303007a4bd9) \t"S-2c5eab0300b87b40"[1]\t\t# lid 647 lmc 1 '
    '"MF0;A09 "leaf" # [1](2) x" lid 73 4xNDR',
    "",
    "rtguid=0x77",
    'Rt\t2 "R-0000000000000077"\t\t# "router r1"',
    '[2](79) \t"S-2c5eab0300c26280"[40]\t\t# lid 900 lmc 0 "spine" lid 236 2xHDR',
]


def test_small_grammar_corners() -> None:
    f = parse_topology(SMALL, "small")
    assert (f.n_nodes, f.n_links) == (4, 4)
    leaf, host, router = f.node_by_guid(LEAF), f.node_by_guid(HOST), f.node_by_guid(ROUTER)
    assert f.node_type[router] == NodeType.ROUTER and f.node_type[host] == NodeType.CA
    assert f.routers.tolist() == [router]
    # descriptions with quotes, '#', brackets
    assert f.node_desc[leaf] == 'MF0;A09 "leaf" # [1](2) x'
    assert f.node_desc[host] == 'a08 "dgx" mlx5_5'
    # 66-port switch, [ext N] ports, parallel links 65/66 <-> 32/31
    assert f.num_ports[leaf] == 66
    assert peer_of(f, LEAF, 65) == (SPINE, 32)
    assert peer_of(f, LEAF, 66) == (SPINE, 31)
    assert peer_of(f, ROUTER, 2) == (SPINE, 40)
    assert f.peer(row(f, ROUTER, 1)) == -1
    # ids, port GUIDs, LIDs, LMC
    assert int(f.vendor_id[leaf]) == 0x2C9 and int(f.device_id[host]) == 0x1021
    assert int(f.sysimg_guid[leaf]) == LEAF and int(f.sysimg_guid[router]) == 0
    assert int(f.port_guid[row(f, LEAF, 0)]) == 0x2C5EAB0300B87B41
    assert int(f.port_lid[row(f, LEAF, 0)]) == 73
    assert (int(f.port_lid[row(f, HOST, 1)]), int(f.port_lmc[row(f, HOST, 1)])) == (647, 1)
    assert f.port_by_lid(648) == row(f, HOST, 1)
    assert f.port_by_guid(0x79) == row(f, ROUTER, 2)
    assert int(f.port_lid[row(f, ROUTER, 2)]) == 900
    # width/speed: '?????' on leaf[66] is filled from spine[31]'s 8xXDR
    assert (int(f.port_width[row(f, LEAF, 66)]), int(f.port_speed[row(f, LEAF, 66)])) == (8, XDR)
    assert (int(f.port_width[row(f, SPINE, 40)]), int(f.port_speed[row(f, SPINE, 40)])) == (2, HDR)
    assert int(f.port_speed[row(f, HOST, 1)]) == NDR
    # link_a is the end listed first
    a = f.link_a.tolist()
    assert row(f, LEAF, 1) in a and row(f, LEAF, 65) in a and row(f, SPINE, 40) in a


def test_crlf_tabs_spaces_and_whole_text_input() -> None:
    base = parse_topology(SMALL)
    crlf = [ln + "\r\n" for ln in SMALL]
    assert parse_topology(crlf).content_hash == base.content_hash
    text = "\r\n".join(SMALL) + "\r\n"
    assert parse_topology(text).content_hash == base.content_hash
    spaced = ["  " + ln.replace("\t", "   ") + " \t" for ln in SMALL]
    again = parse_topology(spaced)
    assert again.content_hash == base.content_hash
    assert again.node_desc == base.node_desc
    as_bytes = [ln.encode() for ln in SMALL]
    assert parse_topology(as_bytes).content_hash == base.content_hash  # type: ignore[arg-type]


def test_read_topology_crlf_file(tmp_path: Path) -> None:
    p = tmp_path / "crlf.topo"
    p.write_bytes(("\r\n".join(SMALL) + "\r\n").encode())
    assert read_topology(p).content_hash == parse_topology(SMALL).content_hash


def test_all_widths_and_speeds() -> None:
    combos = [(w, code) for w in (1, 2, 4, 8, 12, 0) for code in range(len(SPEEDS))]
    n = len(combos)
    text = [f'Switch\t{n} "S-00000000000000ff"\t\t# "sw" base port 0 lid 0 lmc 0']
    for k, (w, code) in enumerate(combos, 1):
        ws = f"{w}x" if w else "??"
        text.append(f'[{k}]\t"H-{k:016x}"[1]({k:x}) \t\t# "h" lid {k} {ws}{SPEEDS[code]}')
    for k in range(1, n + 1):
        text += ["", f'Ca\t1 "H-{k:016x}"\t\t# "h"',
                 f'[1]({k:x}) \t"S-00000000000000ff"[{k}]\t\t# lid {k} lmc 0 "sw" lid 0 ?????']
    f = parse_topology(text)
    for k, (w, code) in enumerate(combos, 1):
        r = row(f, 0xFF, k)
        assert (int(f.port_width[r]), int(f.port_speed[r])) == (w, code)
        # the CA line says ??/???: it takes the switch line's values
        rc = row(f, k, 1)
        assert (int(f.port_width[rc]), int(f.port_speed[rc])) == (w, code)


def test_65_port_and_255_port_switches() -> None:
    lines = ['Switch\t255 "S-0000000000000001"\t\t# "big" base port 0 lid 1 lmc 0']
    for p in (1, 64, 65, 128, 255):
        lines.append(f'[{p}]\t"S-0000000000000002"[{p - 1 if p > 1 else 65}]\t\t# "b" lid 2 4xEDR')
    lines += ["", 'Switch\t254 "S-0000000000000002"\t\t# "b" base port 0 lid 2 lmc 0']
    for p in (1, 64, 65, 128, 255):
        q = p - 1 if p > 1 else 65
        lines.append(f'[{q}]\t"S-0000000000000001"[{p}]\t\t# "big" lid 1 4xEDR')
    f = parse_topology(lines)
    assert f.num_ports.tolist() == [255, 254] and f.n_links == 5
    assert peer_of(f, 1, 255) == (2, 254)
    assert peer_of(f, 1, 65) == (2, 64)
    assert peer_of(f, 1, 1) == (2, 65)


def test_head_without_comment_and_port_lines_without_comment() -> None:
    f = parse_topology([
        'Switch 2 "S-0000000000000001"',
        '[1] "H-0000000000000010"[1](11)',
        "",
        'Ca 1 "H-0000000000000010"',
        '[1](11) "S-0000000000000001"[1]',
    ])
    assert f.node_desc == ("", "")
    assert f.n_links == 1 and int(f.port_width.max()) == 0


def test_hca_alias_and_group_mode_lines() -> None:
    f = parse_topology([
        "Chassis 1 (guid 0x5)",
        "",
        "# Spine Nodes",
        "",
        "sysimgguid=0x5\t\t# Chassis 1 (ISR9288) slot 1",
        "switchguid=0x1(1)\t# ISR9288/ISR9096 Spine 1 Chip 1",
        'Switch\t2 "S-0000000000000001"\t\t# "s" base port 0 lid 1 lmc 0',
        '[1][ext 1]\t"H-0000000000000010"[1](11) \t\t# "h" lid 2 4xSDR s=1 w=2 v=4 slot 1',
        "Non-Chassis Nodes",
        "",
        "Hostname: foo",
        'Hca\t1 "H-0000000000000010"\t\t# "h" (scp)',
        '[1](11) \t"S-0000000000000001"[1][ext 1]\t\t# lid 2 lmc 0 "s" lid 1 4xSDR s=1 w=2 v=4',
    ])
    assert f.n_links == 1 and int(f.sysimg_guid[0]) == 5
    assert f.node_type.tolist() == [NodeType.SWITCH, NodeType.CA]
    assert f.node_desc == ("s", "h")


# --------------------------------------------------------------------------
# Validation errors: line numbers and what was expected
# --------------------------------------------------------------------------
def test_one_sided_link_names_the_line() -> None:
    lines = list(SMALL)
    i = line_of(lines, '[40]\t"R-0000000000000077"')
    # the router's line no longer lists the link back
    j = line_of(lines, '[2](79) \t"S-2c5eab0300c26280"[40]')
    del lines[j - 1]
    e = raises_at(lines, i)
    assert "one-sided" in e.message and "does not list port 2" in e.message
    assert e.expected == "both ends of every link to list each other"


def test_link_back_to_the_wrong_port_is_one_sided() -> None:
    lines = list(SMALL)
    j = line_of(lines, '[2](79) \t"S-2c5eab0300c26280"[40]')
    lines[j - 1] = lines[j - 1].replace("[40]", "[39]")
    # spine[40] is listed first and points at router[2], which points elsewhere
    e = raises_at(lines, line_of(lines, '[40]\t"R-0000000000000077"'))
    assert "links to" in e.message and f"line {j}" in e.message


def test_dangling_reference_is_truncated_input() -> None:
    cut = SMALL.index("rtguid=0x77")
    lines = SMALL[:cut]  # the router record is missing
    e = raises_at(lines, line_of(lines, '[40]\t"R-0000000000000077"'))
    assert "has no record" in e.message and "R-0000000000000077" in e.message


def test_duplicate_guid() -> None:
    lines = [*SMALL, "", "caguid=0x77", 'Ca\t1 "H-0000000000000077"\t\t# "dup"']
    e = raises_at(lines, len(lines))
    assert "duplicate node GUID 0x0000000000000077" in e.message
    assert f"line {line_of(SMALL, 'Rt')}" in e.message


def test_duplicate_port_guid() -> None:
    i = line_of(SMALL, '[2](79) \t"S-')
    lines = list(SMALL)
    lines[i - 1] = lines[i - 1].replace("[2](79)", "[2](e09d7303007a4bd9)")
    e = raises_at(lines, i)
    assert "duplicate port GUID" in e.message


def test_port_above_port_count() -> None:
    lines = [ln.replace("Switch\t40 ", "Switch\t39 ") for ln in SMALL]
    e = raises_at(lines, line_of(lines, '[40]\t"R-'))
    assert "port 40 out of range" in e.message and e.expected == "a port number in 1..39"


def test_remote_port_above_its_port_count() -> None:
    lines = [ln.replace('"R-0000000000000077"[2]', '"R-0000000000000077"[3]') for ln in SMALL]
    e = raises_at(lines, line_of(lines, '"R-0000000000000077"[3]'))
    assert "out of range" in e.message


def test_remote_port_guid_mismatch() -> None:
    lines = [ln.replace('"R-0000000000000077"[2](79)', '"R-0000000000000077"[2](80)')
             for ln in SMALL]
    e = raises_at(lines, line_of(lines, "[2](80)"))
    assert "port GUID 0x79" in e.message


def test_wrong_type_letter_of_remote() -> None:
    lines = [ln.replace('"H-e09d7303007a4bd8"[1]', '"S-e09d7303007a4bd8"[1]') for ln in SMALL]
    e = raises_at(lines, line_of(lines, '"S-e09d7303007a4bd8"[1]'))
    assert "names a CA" in e.message


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('[1]\t"H-e09d', '[1]\t"H-e09d_', "malformed switch port line"),
        ("4xNDR", "3xNDR", "malformed switch port line"),
        ("lid 647 lmc 1", "lid 647 lmc 9", "LMC 9 out of range"),
        ("lid 647 lmc 1", "lid 99999 lmc 1", "LID 99999 out of range"),
        ("lid 647 lmc 1", "lid 647 lmc", "malformed CA/router port line"),
        ("lid 73 lmc 0", "lid 73 lmc 8", "LMC 8 out of range"),
        ("lid 73 lmc 0", "lid 73 lmc", "malformed switch head line"),
        ("port 0 lid 73", "port 1 lid 73", "it names another port than 0"),
        ("Switch\t66 ", "Switch\t0 ", "port count 0 out of range"),
        ("Switch\t66 ", "Switch\t256 ", "port count 256 out of range"),
        ('Ca\t2 "H-', 'Ca\t2 "S-', "CA record with node id"),
        ('Rt\t2 "R-', 'Rt\t2 "H-', "router record with node id"),
        ("devid=0x1021", "devid=0x1021x", "malformed devid line"),
        ("devid=0x1021", "devid=0x123456789", "out of range"),
        ("vendid=0x2c9", "vendid=2c9", "malformed vendid line"),
        ("sysimgguid=0xe09d7303007a4bd8", "sysimgguid=0x1(2)", "malformed sysimgguid line"),
        ("caguid=0xe09d7303007a4bd8", "caguid=0xe09d7303007a4bd8 # x", "malformed caguid line"),
        ("rtguid=0x77", "Topology file", "unrecognised line 'Topology file' between records"),
        ('R-0000000000000077"\t\t# "router r1"', 'R-0000000000000077"\t\t# "router r1" junk',
         "malformed CA/router head line"),
    ],
)
def test_malformed_lines(old: str, new: str, words: str) -> None:
    """The first line containing ``old`` is changed; the error names that line."""
    lines = list(SMALL)
    i = next(k for k, ln in enumerate(lines) if old in ln)
    lines[i] = lines[i].replace(old, new)
    e = raises_at(lines, i + 1)
    assert e.expected
    assert words in e.message, e.message


def test_guid_line_must_match_the_head() -> None:
    lines = [ln.replace("caguid=0xe09d7303007a4bd8", "caguid=0xe09d7303007a4bd9") for ln in SMALL]
    e = raises_at(lines, line_of(lines, 'Ca\t2 "H-'))
    assert "differs from the GUID line's" in e.message
    lines = [ln.replace("rtguid=0x77", "caguid=0x77") for ln in SMALL]
    e = raises_at(lines, line_of(lines, 'Rt\t2 "R-'))
    assert "router record after a CA GUID line" in e.message


def test_structure_errors() -> None:
    e = raises_at(['[1]\t"S-0000000000000001"[1]'], 1)
    assert "outside a node record" in e.message
    raises_at(["caguid=0x1", "", 'Ca\t1 "H-0000000000000001"'], 2)  # ids, then a blank line
    raises_at(["# only comments", "caguid=0x1"], 2)  # ids at the end
    raises_at(["caguid=0x1", "caguid=0x1", 'Ca\t1 "H-0000000000000001"'], 2)
    raises_at(["switchguid=0x1(1)", "caguid=0x1", 'Ca\t1 "H-0000000000000001"'], 2)
    e = raises_at([], None)
    assert "no node records" in e.message
    raises_at(["#", ""], None)
    # a port listed twice
    raises_at(['Switch 2 "S-0000000000000001"', '[1] "S-0000000000000001"[2]',
               '[2] "S-0000000000000001"[1]', '[1] "S-0000000000000001"[2]'], 4)
    # a port linked to itself
    raises_at(['Switch 2 "S-0000000000000001"', '[1] "S-0000000000000001"[1]'], 2)


def test_loopback_cable_between_two_ports_of_one_switch_is_allowed() -> None:
    f = parse_topology(['Switch 2 "S-0000000000000001"', '[1] "S-0000000000000001"[2]',
                        '[2] "S-0000000000000001"[1]'])
    assert f.n_links == 1 and peer_of(f, 1, 1) == (1, 2)


def test_error_type_exit_code_and_source() -> None:
    with pytest.raises(TopologyError) as info:
        parse_topology(["bogus"], "x.topo")
    e = info.value
    assert isinstance(e, InputError) and isinstance(e, ValueError) and e.exit_code == 2
    assert str(e).startswith(
        "x.topo:1: no node records found; unrecognised line 'bogus'; expected "
    )
    moved = e.with_source("y.topo")
    assert isinstance(moved, TopologyError) and moved.expected == e.expected
    assert str(moved).startswith("y.topo:1:")


def test_read_topology_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.topo"
    with pytest.raises(InputError) as info:
        read_topology(missing)
    assert info.value.source == str(missing) and "cannot read" in str(info.value)
    with pytest.raises(InputError):
        read_topology(tmp_path)  # a directory
    bad = tmp_path / "bad.topo"
    bad.write_text("\n".join(SMALL[:10]) + "\n")
    with pytest.raises(TopologyError) as info2:
        read_topology(bad)
    assert info2.value.source == str(bad) and info2.value.line is not None
    with pytest.raises(InputError):
        read_ports_report(missing)


def test_pathological_lines_fail_fast() -> None:
    """No catastrophic regex backtracking on long runs of blanks or quotes."""
    evil = [
        '[1] "S-1"[1]' + " " * 20000 + "x",
        '[1] "S-1"[1] # "' + '"' * 20000 + " lid",
        '[1](1)' + "\t" * 20000 + '"S-1"[1]' + " " * 20000 + "#",
        'Switch 1 "S-1" # "' + ' "' * 10000 + " x",
        "switchguid=0x1" + " " * 20000 + "(",
    ]
    for line in evil:
        for prefix in ([], ['Ca 1 "H-0000000000000009"'], ['Switch 9 "S-0000000000000009"']):
            t = time.perf_counter()
            with pytest.raises(TopologyError):
                parse_topology([*prefix, line])
            assert time.perf_counter() - t < 1.0


# --------------------------------------------------------------------------
# Round trip with the ibnetdiscover writer, and the committed fixtures
# --------------------------------------------------------------------------
def test_round_trip_of_the_writer() -> None:
    from smroute.fabric.export.writers import format_topology
    from smroute.fabric.generate.trees import pgft

    f = pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1], lmc=2, speed="HDR")
    g = parse_topology(format_topology(f))
    assert g.link_set() == f.link_set()
    order = g.nodes_by_guid(f.node_guid)
    assert (order >= 0).all()
    assert [g.node_desc[i] for i in order] == list(f.node_desc)
    for attr in ("node_type", "num_ports", "sysimg_guid", "vendor_id", "device_id"):
        assert (getattr(g, attr)[order] == getattr(f, attr)).all(), attr
    rows = g.port_start[order[f.port_node]] + f.port_num
    for attr in ("port_guid", "port_lid", "port_lmc", "port_width", "port_speed", "port_exists"):
        assert (getattr(g, attr)[rows] == getattr(f, attr)).all(), attr


@pytest.mark.skipif(not FIXTURE_TOPOS, reason="no fixtures/*.topo committed yet")
@pytest.mark.parametrize("path", FIXTURE_TOPOS, ids=[p.name for p in FIXTURE_TOPOS])
def test_committed_fixtures_parse(path: Path) -> None:
    lines = path.read_text().splitlines()
    f = read_topology(path)
    port_lines = sum(1 for ln in lines if ln.lstrip().startswith("["))
    assert 2 * f.n_links == port_lines  # every link listed from both ends
    assert f.n_nodes == sum(1 for ln in lines if ln.startswith(("Switch", "Ca", "Rt")))
    peers = f.port_peer[f.port_peer >= 0]
    assert (f.port_peer[peers] == np.flatnonzero(f.port_peer >= 0)).all()
    linked_ca = np.flatnonzero((f.port_peer >= 0) & (f.node_type[f.port_node] == NodeType.CA))
    assert (f.port_lid[linked_ca] > 0).all()  # OpenSM assigned every CA port a LID
    assert (f.port_lid[f.port_start[f.switches]] > 0).all()


# --------------------------------------------------------------------------
# Fuzzing: malformed, truncated and mutated input raises only TopologyError
# --------------------------------------------------------------------------
BASES = [
    SMALL,
    (DATA / "ibsim_2sw2path_2port.topo").read_text().splitlines(),
    (DATA / "ibsim_lmc2_72port.g.topo").read_text().splitlines(),
]
REPORT_BASE = (DATA / "ibsim_2sw2path_2port.ports").read_text().splitlines()
NASTY = '"[]()#-=x0123456789abcdefSHRxlidmc \t\r\x00é?\\'

mutation = st.tuples(
    st.sampled_from(["del", "dup", "cut", "char", "insert", "swap", "truncate", "drop_char"]),
    st.integers(0, 10_000),
    st.integers(0, 10_000),
    st.text(alphabet=NASTY, max_size=12),
)


def mutate(lines: list[str], ops: list[tuple[str, int, int, str]]) -> list[str]:
    out = list(lines)
    for op, a, b, text in ops:
        if not out:
            out.append(text)
            continue
        i = a % len(out)
        ln = out[i]
        k = b % (len(ln) + 1)
        if op == "del":
            del out[i]
        elif op == "dup":
            out.insert(i, ln)
        elif op == "cut":
            out[i] = ln[:k]
        elif op == "char":
            out[i] = ln[:k] + text + ln[k + 1:]
        elif op == "drop_char":
            out[i] = ln[:k] + ln[k + 1:]
        elif op == "insert":
            out.insert(i, text)
        elif op == "swap":
            j = b % len(out)
            out[i], out[j] = out[j], out[i]
        else:
            out = out[:i]
    return out


def parse_or_topology_error(lines: list[str], parser: object = parse_topology) -> None:
    try:
        f = parser(lines, "fuzz")  # type: ignore[operator]
    except TopologyError as e:
        assert e.source == "fuzz"
        assert e.line is None or 1 <= e.line <= max(len(lines), 1)
        return
    assert isinstance(f, Fabric)
    # whatever parses is a consistent fabric
    linked = np.flatnonzero(f.port_peer >= 0)
    assert (f.port_peer[f.port_peer[linked]] == linked).all()


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.sampled_from(range(len(BASES))), st.lists(mutation, min_size=1, max_size=4))
def test_fuzz_mutated_topologies(base: int, ops: list[tuple[str, int, int, str]]) -> None:
    parse_or_topology_error(mutate(BASES[base], ops))


@FUZZ
@given(st.lists(st.text(max_size=80), max_size=12))
def test_fuzz_random_lines(lines: list[str]) -> None:
    parse_or_topology_error(lines)
    parse_or_topology_error(lines, parse_ports_report)


@FUZZ
@given(st.lists(st.text(alphabet=NASTY + "[p]SwitchCaRtvendid=guid", max_size=60), max_size=10))
def test_fuzz_grammar_alphabet(lines: list[str]) -> None:
    parse_or_topology_error(['Switch 2 "S-0000000000000001"', *lines])
    parse_or_topology_error(['Ca 2 "H-0000000000000001"', *lines])


@settings(max_examples=200, deadline=None)
@given(st.lists(mutation, min_size=1, max_size=4))
def test_fuzz_mutated_ports_report(ops: list[tuple[str, int, int, str]]) -> None:
    parse_or_topology_error(mutate(REPORT_BASE, ops), parse_ports_report)


# --------------------------------------------------------------------------
# Performance: a 100,000-host fabric
# --------------------------------------------------------------------------
def synthetic_text(hosts: int, down: int = 48, up: int = 16, spine_ports: int = 254) -> list[str]:
    """ibnetdiscover text of ``hosts`` CAs on leaves (``down`` hosts and ``up``
    uplinks each) and as many 254-port spines as the uplinks need.  LIDs are
    assigned (hosts 1.., then leaves, then spines) when they fit the unicast
    range, else every LID is 0 (100k hosts do not fit: a fabric captured before
    a subnet manager ran)."""
    leaves = -(-hosts // down)
    spines = -(-(leaves * up) // spine_ports)
    with_lids = hosts + leaves + spines <= 0xBFFF

    def hl(i: int) -> int:
        return 1 + i if with_lids else 0

    def ll(i: int) -> int:
        return 1 + hosts + i if with_lids else 0

    def sl(i: int) -> int:
        return 1 + hosts + leaves + i if with_lids else 0

    def lg(i: int) -> int:
        return 0x0002C90300000000 + i

    def sg(i: int) -> int:
        return 0x0002C90310000000 + i

    def hg(i: int) -> int:
        return 0x0002C90320000000 + 2 * i

    out = ["#", "# Topology file: generated on Thu Jan  1 00:00:00 1970", "#"]
    spine_lines: list[list[str]] = [[] for _ in range(spines)]
    for leaf in range(leaves):
        g = lg(leaf)
        out += ["", "vendid=0x2c9", "devid=0xcb20", f"switchguid=0x{g:x}({g:x})",
                f'Switch\t{down + up} "S-{g:016x}"\t\t# "leaf {leaf}" enhanced port 0 '
                f"lid {ll(leaf)} lmc 0"]
        for k in range(min(down, hosts - leaf * down)):
            h = hg(leaf * down + k)
            out.append(f'[{k + 1}]\t"H-{h:016x}"[1]({h + 1:x}) \t\t# "host" '
                       f"lid {hl(leaf * down + k)} 4xEDR")
        for k in range(up):
            s, sp = divmod(leaf * up + k, spine_ports)
            out.append(f'[{down + k + 1}]\t"S-{sg(s):016x}"[{sp + 1}]\t\t# "spine" '
                       f"lid {sl(s)} 4xEDR")
            spine_lines[s].append(
                f'[{sp + 1}]\t"S-{g:016x}"[{down + k + 1}]\t\t# "leaf {leaf}" lid {ll(leaf)} 4xEDR'
            )
    for s in range(spines):
        out += ["", f"switchguid=0x{sg(s):x}({sg(s):x})",
                f'Switch\t{spine_ports} "S-{sg(s):016x}"\t\t# "spine" base port 0 '
                f"lid {sl(s)} lmc 0",
                *spine_lines[s]]
    for i in range(hosts):
        leaf, k = divmod(i, down)
        h = hg(i)
        out += ["", "vendid=0x2c9", "devid=0x1017", f"sysimgguid=0x{h:x}", f"caguid=0x{h:x}",
                f'Ca\t1 "H-{h:016x}"\t\t# "host"',
                f'[1]({h + 1:x}) \t"S-{lg(leaf):016x}"[{k + 1}]\t\t# lid {hl(i)} lmc 0 "leaf" '
                f"lid {ll(leaf)} 4xEDR"]
    return out


def test_synthetic_text_is_consistent() -> None:
    f = parse_topology(synthetic_text(1000))
    assert len(f.cas) == 1000 and len(f.switches) == 21 + 2
    assert f.n_links == 1000 + 21 * 16
    assert int(f.port_lid.max()) == 1000 + 21 + 2 and f.port_by_lid(1) >= 0


@pytest.mark.slow
def test_parse_100k_hosts_in_reasonable_time() -> None:
    lines = synthetic_text(100_000)
    t = time.perf_counter()
    f = parse_topology(lines)
    elapsed = time.perf_counter() - t
    assert len(f.cas) == 100_000 and len(f.switches) == 2084 + 132
    assert f.n_links == 100_000 + 2084 * 16
    # target < 10 s (about 4-6 s measured on the project's 2-core machines);
    # the bound is loose so that a loaded CI machine does not flake.
    assert elapsed < 30, f"parsing 100k hosts took {elapsed:.1f} s"


def test_back_to_back_cas_without_a_switch() -> None:
    topo = parse_topology([
        'Ca\t1 "H-0000000000000001"\t\t# "a"',
        '[1](2) \t"H-0000000000000003"[1] (4) \t\t# lid 1 lmc 0 "b" lid 2 4xEDR',
        "",
        'Ca\t1 "H-0000000000000003"\t\t# "b"',
        '[1](4) \t"H-0000000000000001"[1] (2) \t\t# lid 2 lmc 0 "a" lid 1 4xEDR',
    ])
    assert topo.n_links == 1 and peer_of(topo, 1, 1) == (3, 1)
    assert int(topo.port_guid[row(topo, 3, 1)]) == 4
    rep = parse_ports_report([
        "CA     2  1 0x0000000000000004 4x EDR - CA     1  1 0x0000000000000002 ( 'b' - 'a' )",
        "CA     1  1 0x0000000000000002 4x EDR - CA     2  1 0x0000000000000004 ( 'a' - 'b' )",
    ])
    assert rep.link_set() == topo.link_set()
    assert int(rep.port_lid[rep.port_by_guid(4)]) == 2
    # the remote's GUID must be the right port of it
    with pytest.raises(TopologyError) as info:
        parse_topology([
            'Ca\t1 "H-0000000000000001"\t\t# "a"',
            '[1](2) \t"H-0000000000000003"[1] (5) \t\t# lid 1 lmc 0 "b" lid 2 4xEDR',
            "",
            'Ca\t1 "H-0000000000000003"\t\t# "b"',
            '[1](4) \t"H-0000000000000001"[1] (2) \t\t# lid 2 lmc 0 "a" lid 1 4xEDR',
        ])
    assert info.value.line == 2
