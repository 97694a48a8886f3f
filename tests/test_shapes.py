"""Real-world shapes (smroute.fabric.generate.shapes): aggregation nodes, hosts on spines,
two-switch and ring fabrics, directors, split ports -- their structure, the
ibnetdiscover text written for them parsing back to the same fabric, and the
real tools (ibsim, OpenSM, ibnetdiscover) booting, routing and discovering them.
Also the shape fixtures of scripts/make_fixtures.py."""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from fabric_compare import assert_same_fabric, node_key, port_attrs
from script_module import load_script

from smroute.fabric.export.writers import (
    RDMA_CORE_CHASSIS_DEVICE_IDS,
    chassis_ext_ports,
    format_ibsim_net,
    format_topology,
    write_ibsim_net,
)
from smroute.fabric.generate.shapes import (
    AGGREGATION_NODE_DESC,
    AGGREGATION_NODE_DEVICE_ID,
    CONNECTX7_DEVICE_ID,
    IS4_DEVICE_ID,
    SERVICE_GUID_BASE,
    aggregation_nodes,
    attach_cas,
    director,
    port_labels,
    ring,
    two_switch,
    with_aggregation_nodes,
    with_split_ports,
)
from smroute.fabric.generate.trees import fabric_tuples, kary_ntree, pgft, xgft
from smroute.fabric.ibnetdiscover.parse import parse_topology, read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType, speed_code
from smroute.lab.sidebyside import strip_lids
from smroute.lab.sim import IbSim, ibnetdiscover, run_opensm

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
#: Real-tool tests are skipped only when the simulator itself is absent; a
#: missing opensm / ibnetdiscover next to it is a failure (scripts/setup.sh).
needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="the ibsim binary is not installed (Debian package ibsim-utils): "
    "these tests drive the real simulator",
)


# --------------------------------------------------------------------------- helpers
def _levels(f: Fabric) -> np.ndarray:
    return fabric_tuples(f)[0]


def _spines(f: Fabric) -> np.ndarray:
    lv = _levels(f)
    return np.flatnonzero(lv == lv.max())


def quantum_tree() -> Fabric:
    """40-port (Quantum-style) HDR PGFT(2; 4,6; 1,4; 1,1): 24 hosts, 6 leaves, 4 spines."""
    return pgft(2, [4, 6], [1, 4], [1, 1], switch_ports=40, speed="HDR")


def quantum_agg_spine_hosts() -> Fabric:
    """:func:`quantum_tree` with ufm01 and storage-gw01 on the first spine and an
    aggregation node on every switch."""
    t = quantum_tree()
    sp = int(_spines(t)[0])
    return with_aggregation_nodes(
        attach_cas(t, [sp, sp], ["ufm01 HCA-1", "storage-gw01 HCA-1"])
    )


def quantum2_split() -> Fabric:
    """64-port (Quantum-2-style) tree, leaf 0 and spine 0 split-ready with their
    host ports split, a host on a free split half, then aggregation nodes."""
    t = pgft(2, [3, 4], [1, 3], [1, 1], switch_ports=64, speed="HDR")
    leaf, sp = int(t.switches[0]), int(_spines(t)[0])
    t = attach_cas(t, [sp], ["ufm01 HCA-1"])  # spine port 5
    s = with_split_ports(t, [leaf, sp])  # ufm01 on 9, split; host ports 1, 3, 5 of the leaf
    s = attach_cas(s, [leaf, sp], ["split-host01 HCA-1", "storage-gw01 HCA-1"], ports=[2, 10])
    return with_aggregation_nodes(s)


def director_is4() -> Fabric:
    return director("dir01", model="IS5100", line_cards=6, spine_cards=3, hosts_per_asic=2,
                    device_id=IS4_DEVICE_ID)


def director_tree() -> Fabric:
    """A CS7500-style director (2 ASICs per card) with hosts and a UFM server on
    a spine ASIC, and aggregation nodes on every ASIC."""
    d = director("core01", line_cards=2, spine_cards=2, asics_per_card=2, radix=16,
                 hosts_per_asic=3, speed="HDR")
    spine = d.node_desc.index("MF0;core01:CS7500/S01/U1")
    return with_aggregation_nodes(attach_cas(d, [spine], ["ufm01 HCA-1"]))


SHAPES: dict[str, Callable[[], Fabric]] = {
    "quantum-agg-spine-hosts": quantum_agg_spine_hosts,
    "xgft-agg": lambda: with_aggregation_nodes(xgft(2, [3, 4], [1, 3])),
    "kary-2-3-agg": lambda: with_aggregation_nodes(kary_ntree(2, 3, switch_ports=4)),
    "two-switch": lambda: two_switch(4),
    "two-switch-uneven-p3": lambda: two_switch((2, 5), parallel=3),
    "ring-5-p2": lambda: ring(5, 3, parallel=2),
    "ring-3-agg": lambda: with_aggregation_nodes(ring(3, [1, 2, 3])),
    "director": lambda: director(hosts_per_asic=3),
    "director-is4": director_is4,
    "director-tree-agg": director_tree,
    "quantum2-split": quantum2_split,
}


def assert_same_nodes_and_links(got: Fabric, want: Fabric) -> None:
    """What ibsim reproduces: nodes (GUID, type, port count, description,
    vendor, device, system image GUID), links, port GUIDs, widths and speeds."""
    assert node_key(got) == node_key(want)
    assert got.link_set() == want.link_set()
    a, b = port_attrs(got), port_attrs(want)
    assert {k: (v[0], v[3], v[4]) for k, v in a.items()} == {
        k: (v[0], v[3], v[4]) for k, v in b.items()}


def assert_lids_unique(f: Fabric) -> None:
    """Every switch and linked CA port has a LID and no two LID ranges overlap."""
    sw_rows = f.port_start[f.switches]
    ca_rows = np.flatnonzero((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0))
    assert (f.port_lid[sw_rows] > 0).all()
    assert (f.port_lid[ca_rows] > 0).all()
    rows = np.concatenate([sw_rows, ca_rows])
    sizes = np.left_shift(1, f.port_lmc[rows].astype(np.int64))
    assert int((f.lid_to_port >= 0).sum()) == int(sizes.sum())


def assert_aggregation_on_every_switch(f: Fabric, switches: np.ndarray | None = None) -> None:
    """One aggregation node per switch, on the switch's top port, with the real
    conventions (description, device, GUIDs, system image GUID, link speed)."""
    sw = f.switches if switches is None else switches
    agg = aggregation_nodes(f)
    assert len(agg) == len(sw)
    rows = f.port_start[agg] + 1
    peer = f.port_peer[rows]
    assert (peer >= 0).all()
    on = f.port_node[peer].astype(np.int64)
    assert sorted(on.tolist()) == sorted(sw.tolist())
    assert (f.port_num[peer] == f.num_ports[on]).all(), "not on the switch's top port"
    assert (f.num_ports[agg] == 1).all()
    assert (f.device_id[agg] == AGGREGATION_NODE_DEVICE_ID).all()
    assert (f.vendor_id[agg] == 0x2C9).all()
    assert all(f.node_desc[i] == AGGREGATION_NODE_DESC for i in agg.tolist())
    assert (f.node_guid[agg] == f.node_guid[on] + np.uint64(8)).all()
    assert (f.port_guid[rows] == f.node_guid[agg] + np.uint64(1)).all()
    assert (f.sysimg_guid[agg] == f.sysimg_guid[on]).all()
    # the link runs at the switch's own width and speed
    sw_speed = np.zeros(f.n_nodes, dtype=np.int64)
    linked = np.flatnonzero(f.port_peer >= 0)
    np.maximum.at(sw_speed, f.port_node[linked], f.port_speed[linked].astype(np.int64))
    assert (f.port_speed[rows] == sw_speed[on]).all()


# --------------------------------------------------------------------------- aggregation nodes
def test_aggregation_nodes_on_a_quantum_tree() -> None:
    t = quantum_tree()
    f = with_aggregation_nodes(t)
    assert_aggregation_on_every_switch(f)
    assert (f.num_ports[f.switches] == 41).all()  # 40-port Quantum: port 41
    assert len(f.cas) == 24 + 10
    assert f.n_links == t.n_links + 10
    assert_lids_unique(f)
    # existing nodes keep index, GUID, LIDs and links
    assert np.array_equal(f.node_guid[: t.n_nodes], t.node_guid)
    assert np.array_equal(f.node_lid[: t.n_nodes], t.node_lid)
    assert t.link_set() <= f.link_set()
    # new LIDs above the old ones
    agg = aggregation_nodes(f)
    assert int(f.node_lid[agg].min()) > int(t.node_lid.max())
    assert (f.port_width[f.port_start[agg] + 1] == 4).all()
    assert (f.port_speed[f.port_start[agg] + 1] == speed_code("HDR")).all()


def test_aggregation_nodes_quantum2_port_65_and_conventions() -> None:
    t = pgft(2, [4, 4], [1, 2], [1, 1], switch_ports=64, speed="NDR")
    # +0x10 (the topograph site's convention) hits the next generated switch (GUID stride 0x10)
    with pytest.raises(FabricError, match="already used"):
        with_aggregation_nodes(t, guid_offset=0x10)
    f = with_aggregation_nodes(t, port_guid_offset=0)
    assert (f.num_ports[f.switches] == 65).all()
    agg = aggregation_nodes(f)
    on = f.port_node[f.port_peer[f.port_start[agg] + 1]]
    assert (f.node_guid[agg] == f.node_guid[on] + np.uint64(0x8)).all()
    # the real convention: port GUID = node GUID (ibsim cannot do it)
    assert (f.port_guid[f.port_start[agg] + 1] == f.node_guid[agg]).all()
    with pytest.raises(FabricError, match="GUID node GUID"):
        format_ibsim_net(f)
    assert_same_fabric(parse_topology(format_topology(f)), f)


def test_aggregation_nodes_on_chosen_switches_and_idempotent() -> None:
    t = kary_ntree(2, 3)
    lv = _levels(t)
    tops = np.flatnonzero(lv == 3)
    f = with_aggregation_nodes(t, tops)
    assert_aggregation_on_every_switch(f, tops)
    assert (f.num_ports[tops] == t.num_ports[tops] + 1).all()
    others = np.setdiff1d(t.switches, tops)
    assert np.array_equal(f.num_ports[others], t.num_ports[others])
    # the default skips switches that already carry one
    g = with_aggregation_nodes(f)
    assert_aggregation_on_every_switch(g)
    assert len(aggregation_nodes(g)) == len(g.switches)
    with pytest.raises(FabricError, match="already used"):
        with_aggregation_nodes(f, tops)
    with pytest.raises(FabricError, match="not a switch"):
        with_aggregation_nodes(t, [int(t.cas[0])])


def test_aggregation_nodes_without_lids_get_none() -> None:
    f = with_aggregation_nodes(strip_lids(quantum_tree()))
    assert (f.port_lid == 0).all()


def test_aggregation_nodes_on_a_parsed_real_shape() -> None:
    """The transform works on any fabric, e.g. one read back from text."""
    t = parse_topology(format_topology(ring(3, 2)))
    f = with_aggregation_nodes(t, speed="EDR", width=4)
    assert_aggregation_on_every_switch(f)


def test_aggregation_nodes_on_the_11664_host_tree_is_vectorized() -> None:
    big = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    t = time.perf_counter()
    f = with_aggregation_nodes(big)
    took = time.perf_counter() - t
    assert len(aggregation_nodes(f)) == 1620
    assert len(f.cas) == 11664 + 1620
    assert (f.num_ports[f.switches] == 37).all()
    assert int(f.node_lid.max()) == 11664 + 1620 + 1620
    assert took < 5.0, f"with_aggregation_nodes took {took:.2f} s"


# --------------------------------------------------------------------------- hosts on spines
def test_attach_cas_on_spines() -> None:
    t = quantum_tree()
    sp = _spines(t)
    f = attach_cas(t, [sp[0], sp[0], sp[1]],
                   ["ufm01 HCA-1", "storage-gw01 HCA-1", "storage-gw02 HCA-1"])
    new = np.arange(t.n_nodes, f.n_nodes)
    assert [f.node_desc[i] for i in new] == [
        "ufm01 HCA-1", "storage-gw01 HCA-1", "storage-gw02 HCA-1"]
    assert (f.node_type[new] == NodeType.CA).all()
    assert (f.device_id[new] == CONNECTX7_DEVICE_ID).all()
    assert (f.node_guid[new] == np.uint64(SERVICE_GUID_BASE)
            + (np.arange(3, dtype=np.uint64) << np.uint64(4))).all()
    rows = f.port_start[new] + 1
    assert (f.port_guid[rows] == f.node_guid[new] + np.uint64(1)).all()
    peer = f.port_peer[rows]
    # spines of PGFT(2;4,6;..) use ports 1..6: the CAs take the lowest free ones
    assert list(zip(f.port_node[peer].tolist(), f.port_num[peer].tolist(), strict=True)) == [
        (int(sp[0]), 7), (int(sp[0]), 8), (int(sp[1]), 7)]
    assert np.array_equal(f.num_ports, np.concatenate([t.num_ports, [1, 1, 1]]))
    assert (f.port_speed[rows] == speed_code("HDR")).all()
    assert_lids_unique(f)
    # a second call continues the GUIDs
    g = attach_cas(f, [sp[2]], ["ufm02 HCA-1"])
    assert int(g.node_guid[-1]) == SERVICE_GUID_BASE + (3 << 4)


def test_attach_cas_grows_a_full_switch_and_keeps_the_aggregation_node_on_top() -> None:
    t = with_aggregation_nodes(pgft(2, [2, 3], [1, 2], [1, 1]))  # spines: 3 ports + agg on 4
    sp = int(_spines(t)[0])
    assert int(t.num_ports[sp]) == 4
    f = attach_cas(t, [sp, sp], ["ufm01 HCA-1", "ufm02 HCA-1"], lmc=1)
    assert int(f.num_ports[sp]) == 6
    peers = f.port_peer[f.port_start[sp] + np.arange(1, 7)]
    desc = [f.node_desc[int(f.port_node[r])] for r in peers.tolist()]
    assert desc[3:] == ["ufm01 HCA-1", "ufm02 HCA-1", AGGREGATION_NODE_DESC]
    assert_aggregation_on_every_switch(f)
    rows = f.port_start[f.n_nodes - 2:] + 1
    assert (f.port_lmc[rows] == 1).all() and (f.port_lid[rows] % 2 == 0).all()
    assert_lids_unique(f)
    assert_same_fabric(parse_topology(format_topology(f)), f)


def test_attach_cas_errors() -> None:
    t = two_switch(2)
    with pytest.raises(FabricError, match="descriptions"):
        attach_cas(t, [int(t.switches[0])], [])
    with pytest.raises(FabricError, match="not a switch"):
        attach_cas(t, [0], ["x HCA-1"])
    # a base that is already in use continues after the GUIDs under it
    g = attach_cas(t, [int(t.switches[0])], ["x HCA-1"], guid_base=int(t.node_guid[0]))
    assert int(g.node_guid[-1]) == int(t.node_guid.max()) + 16


# --------------------------------------------------------------------------- two switches, rings
@pytest.mark.parametrize(("hosts", "parallel"), [(4, 2), ((2, 5), 3), (0, 1)])
def test_two_switch(hosts: int | tuple[int, int], parallel: int) -> None:
    f = two_switch(hosts, parallel=parallel)
    h = np.broadcast_to(np.asarray(hosts), (2,))
    assert len(f.switches) == 2
    assert len(f.cas) == int(h.sum())
    assert f.n_links == int(h.sum()) + parallel
    a, b = (int(x) for x in f.switches)
    assert f.num_ports[a] == h[0] + parallel and f.num_ports[b] == h[1] + parallel
    na, nb = f.port_node[f.link_a], f.port_node[f.link_b]
    between = ((na == a) & (nb == b)) | ((na == b) & (nb == a))
    assert int(between.sum()) == parallel
    # hosts on both switches, named by switch
    on = Counter(int(f.port_node[f.port_peer[f.port_start[c] + 1]]) for c in f.cas.tolist())
    assert on == Counter({a: int(h[0]), b: int(h[1])} if h.sum() else {})
    assert [f.node_desc[s] for s in (a, b)] == ["switch L1 0", "switch L1 1"]
    if h.sum():
        assert_lids_unique(f)


def test_ring() -> None:
    f = ring(5, [1, 2, 3, 0, 1], parallel=2)
    sw = f.switches
    assert len(sw) == 5 and len(f.cas) == 7
    assert f.n_links == 7 + 5 * 2
    deg = Counter()
    na, nb = f.port_node[f.link_a], f.port_node[f.link_b]
    is_sw = f.node_type == NodeType.SWITCH
    for x, y in zip(na[is_sw[na] & is_sw[nb]].tolist(), nb[is_sw[na] & is_sw[nb]].tolist(),
                    strict=True):
        deg[tuple(sorted((x, y)))] += 1
    assert deg == Counter({tuple(sorted((int(sw[i]), int(sw[(i + 1) % 5])))): 2 for i in range(5)})
    assert f.num_ports[sw].tolist() == [5, 6, 7, 4, 5]
    assert_lids_unique(f)
    # one switch: no ring links
    one = ring(1, 4)
    assert (len(one.switches), len(one.cas), one.n_links) == (1, 4, 4)
    with pytest.raises(FabricError):
        ring(0, 1)
    with pytest.raises(FabricError):
        ring(3, -1)
    with pytest.raises(FabricError, match="switch_ports"):
        ring(3, 4, switch_ports=3)


# --------------------------------------------------------------------------- directors
def test_director_structure() -> None:
    f = director("dir01", model="CS7500", line_cards=4, spine_cards=2, hosts_per_asic=3)
    lines = [i for i, d in enumerate(f.node_desc) if "/L" in d]
    spines = [i for i, d in enumerate(f.node_desc) if "/S" in d]
    assert [f.node_desc[i] for i in lines] == [
        f"MF0;dir01:CS7500/L{c:02d}/U1" for c in range(1, 5)]
    assert [f.node_desc[i] for i in spines] == ["MF0;dir01:CS7500/S01/U1",
                                                "MF0;dir01:CS7500/S02/U1"]
    sw = f.switches
    assert len({int(x) for x in f.sysimg_guid[sw]}) == 1, "one system image GUID per chassis"
    assert int(f.sysimg_guid[sw[0]]) not in set(f.node_guid.tolist())
    assert (f.num_ports[sw] == 36).all()
    # each line ASIC: 18 internal links, 9 to each spine ASIC, on ports 19..36
    na, nb = f.port_node[f.link_a], f.port_node[f.link_b]
    pairs = Counter(zip(na.tolist(), nb.tolist(), strict=True))
    for a in lines:
        for s in spines:
            assert pairs[(a, s)] == 9
    internal = np.isin(na, lines) & np.isin(nb, spines)
    assert sorted(set(f.port_num[f.link_a[internal]].tolist())) == list(range(19, 37))
    # hosts on external ports 1..3 of every line ASIC
    assert len(f.cas) == 12
    assert f.node_desc[int(f.cas[0])] == "node001 HCA-1"
    host_ports = f.port_num[f.port_peer[f.port_start[f.cas] + 1]]
    assert sorted(Counter(host_ports.tolist()).items()) == [(1, 4), (2, 4), (3, 4)]
    assert_lids_unique(f)


def test_director_two_asics_per_card() -> None:
    f = director("core01", line_cards=2, spine_cards=2, asics_per_card=2, radix=16)
    descs = sorted(f.node_desc[i] for i in f.switches.tolist())
    assert descs == [f"MF0;core01:CS7500/{k}{c:02d}/U{u}" for k in "LS" for c in (1, 2)
                     for u in (1, 2)]
    # 4 line ASICs x 8 internal ports over 4 spine ASICs: 2 links per pair, 8 per spine
    assert f.n_links == 4 * 8


def test_director_errors() -> None:
    with pytest.raises(FabricError, match="spread"):
        director(spine_cards=5)
    with pytest.raises(FabricError, match="ports per spine"):
        director(line_cards=6, spine_cards=1)
    with pytest.raises(FabricError, match="hosts_per_asic"):
        director(hosts_per_asic=19)
    with pytest.raises(FabricError, match="name"):
        director("a:b")


def test_chassis_ext_ports_follow_rdma_core() -> None:
    cs = director(hosts_per_asic=2)
    ext = chassis_ext_ports(cs)
    lines = [i for i, d in enumerate(cs.node_desc) if "/L" in d]
    for n in range(cs.n_nodes):
        rows = cs.port_start[n] + np.arange(int(cs.num_ports[n]) + 1)
        want = np.where((np.arange(len(rows)) >= 1) & (np.arange(len(rows)) <= 18),
                        np.arange(len(rows)), 0) if n in lines else np.zeros(len(rows))
        assert np.array_equal(ext[rows], want), cs.node_desc[n]
    # rdma-core groups only InfiniScale IV (0xbd36) chassis
    assert RDMA_CORE_CHASSIS_DEVICE_IDS == (IS4_DEVICE_ID,)
    assert not chassis_ext_ports(cs, device_ids=RDMA_CORE_CHASSIS_DEVICE_IDS).any()
    assert chassis_ext_ports(director_is4(), device_ids=RDMA_CORE_CHASSIS_DEVICE_IDS).any()
    # a board type in the description is allowed; other descriptions are not line cards
    f = two_switch(1)
    assert not chassis_ext_ports(f).any()


def test_director_text_has_ext_ports_and_parses_back() -> None:
    f = director(hosts_per_asic=2)
    text = format_topology(f, ext_ports=chassis_ext_ports(f))
    sw_lines = [ln for ln in text if re.match(r"\[\d+\]\[ext \d+\]\t", ln)]
    ca_lines = [ln for ln in text if re.match(r"\[1\]\([0-9a-f]+\) \t\"S-[0-9a-f]+\"\[\d+\]\[ext "
                                              r"\d+\]\t\t# lid", ln)]
    assert len(sw_lines) == len(ca_lines) == len(f.cas)
    assert sw_lines[0].startswith('[1][ext 1]\t"H-')
    # internal ports (19..36) have no external number
    assert not any(re.match(r"\[(19|2\d|3[0-6])\]\[ext", ln) for ln in text)
    assert_same_fabric(parse_topology(text), f)
    with pytest.raises(FabricError, match="shape"):
        format_topology(f, ext_ports=[1, 2])


# --------------------------------------------------------------------------- split ports
def test_split_ports_renumber_and_halve() -> None:
    t = attach_cas(pgft(2, [3, 4], [1, 3], [1, 1], switch_ports=64, speed="HDR"),
                   [int(_spines(pgft(2, [3, 4], [1, 3], [1, 1]))[0])], ["ufm01 HCA-1"])
    t = with_aggregation_nodes(t)
    leaf, sp = int(t.switches[0]), int(_spines(t)[0])
    f = with_split_ports(t, [leaf, sp])
    assert int(f.num_ports[leaf]) == int(f.num_ports[sp]) == 129  # 128 + aggregation node
    assert_aggregation_on_every_switch(f)
    # every old port p of the two switches is now 2p - 1, other switches unchanged
    old, new = t.link_set(), f.link_set()
    guid_leaf, guid_sp = int(t.node_guid[leaf]), int(t.node_guid[sp])

    def moved(end: tuple[int, int]) -> tuple[int, int]:
        g, p = end
        if g in (guid_leaf, guid_sp):
            return g, 129 if p == 65 else 2 * p - 1
        return end

    assert {tuple(sorted((moved(a), moved(b)))) for a, b in old} == new
    # host ports split: 2 lanes at both ends, the second half is free
    rows = f.port_start[leaf] + np.array([1, 3, 5])
    assert (f.port_width[rows] == 2).all()
    assert (f.port_width[f.port_peer[rows]] == 2).all()
    assert (f.port_peer[rows + 1] < 0).all()
    ufm = f.port_row(sp, 2 * 5 - 1)  # the spine's port 5 (after 4 leaves) held ufm01
    assert f.node_desc[int(f.port_node[f.port_peer[ufm]])] == "ufm01 HCA-1"
    assert int(f.port_width[ufm]) == 2
    up = f.port_row(leaf, 2 * 4 - 1)  # the leaf's first up-port: not split
    assert int(f.port_width[up]) == 4 and int(f.port_peer[up + 1]) < 0
    # attach_cas: the lowest free port (here a split half), or the one named
    g = attach_cas(f, [leaf, sp], ["split-host01 HCA-1", "storage-gw01 HCA-1"], ports=[0, 10])
    on = g.port_peer[g.port_start[g.n_nodes - 2:] + 1]
    assert g.port_num[on].tolist() == [2, 10] and g.port_node[on].tolist() == [leaf, sp]
    with pytest.raises(FabricError, match="in use"):
        attach_cas(f, [sp], ["x HCA-1"], ports=[9])
    with pytest.raises(FabricError, match="named twice"):
        attach_cas(f, [sp, sp], ["x HCA-1", "y HCA-1"], ports=[10, 10])
    with pytest.raises(FabricError, match="no regular port 129"):
        attach_cas(f, [sp], ["x HCA-1"], ports=[129])  # the aggregation node's
    # other modes
    assert (with_split_ports(t, [leaf], split="none").port_width[rows] == 4).all()
    al = with_split_ports(t, [leaf], split="all")
    assert (al.port_width[al.port_row(leaf, 7)] == 2).all()
    with pytest.raises(FabricError, match="split"):
        with_split_ports(t, [leaf], split="some")
    with pytest.raises(FabricError, match="ports"):
        with_split_ports(with_split_ports(t, [leaf]), [leaf])  # 258 ports


def test_port_labels() -> None:
    assert port_labels(4) == ["1/1/1", "1/1/2", "1/2/1", "1/2/2"]
    assert port_labels(4, split_ready=True) == ["1/1/1/1", "1/1/1/2", "1/1/2/1", "1/1/2/2"]
    assert port_labels(128, split_ready=True)[-1] == "1/32/2/2"
    assert port_labels(3, style="quantum") == ["1", "2", "3"]
    assert port_labels(4, split_ready=True, style="quantum") == ["1/1", "1/2", "2/1", "2/2"]
    with pytest.raises(FabricError):
        port_labels(2, style="spectrum")


# --------------------------------------------------------------------------- text round trip
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_text_round_trip(shape: str) -> None:
    f = SHAPES[shape]()
    assert_lids_unique(f)
    ext = chassis_ext_ports(f)
    for text in (format_topology(f), format_topology(f, ext_ports=ext)):
        assert_same_fabric(parse_topology(text, f"{shape}.topo"), f)
    # the ibsim net file is accepted (ibsim-specific limits and GUID rule)
    net = format_ibsim_net(f)
    assert all(len(ln) <= 255 for ln in net)


# --------------------------------------------------------------------------- real tools
def _boot(tmp_path: Path, fabric: Fabric) -> IbSim:
    tmp_path.mkdir(parents=True, exist_ok=True)
    net = tmp_path / "fabric.net"
    write_ibsim_net(strip_lids(fabric), net)
    return IbSim(net, tmp_path / "sim")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.real
@needs_ibsim
def test_real_tools_boot_route_and_discover(shape: str, tmp_path: Path) -> None:
    want = SHAPES[shape]()
    t = time.monotonic()
    with _boot(tmp_path, want) as sim:
        osm = run_opensm(sim, tmp_path / "opensm", engine="minhop")
        lines = ibnetdiscover(sim)
    got = parse_topology(lines, f"{shape}.topo")
    assert_same_nodes_and_links(got, want)
    assert_lids_unique(got)
    assert osm.engine_used == "minhop"
    assert time.monotonic() - t < 30


@pytest.mark.parametrize(("shape", "engine"), [
    ("director", "updn"),
    # every switch carries a CA (hosts, or an aggregation node): all look like
    # leaves, updn finds no root and OpenSM falls back to minhop (DESIGN.md)
    ("two-switch", "minhop"),
    ("ring-5-p2", "minhop"),
    ("quantum-agg-spine-hosts", "minhop"),
])
@pytest.mark.real
@needs_ibsim
def test_real_opensm_updn(shape: str, engine: str, tmp_path: Path) -> None:
    want = SHAPES[shape]()
    with _boot(tmp_path, want) as sim:
        osm = run_opensm(sim, tmp_path / "opensm", engine="updn")
        got = parse_topology(ibnetdiscover(sim), f"{shape}.topo")
    assert osm.engine_used == engine
    assert osm.lfts.is_file()
    assert_same_nodes_and_links(got, want)


def _ext_marks(lines: list[str]) -> set[tuple[str, str, str]]:
    """(record GUID, port line head, [ext N] mark) for every external number."""
    out: set[tuple[str, str, str]] = set()
    cur = ""
    for ln in lines:
        m = re.match(r'(?:Switch|Ca)\s+\d+\s+"[SH]-([0-9a-f]+)"', ln)
        if m:
            cur = m[1]
        for x in re.finditer(r"\[\d+\]\[ext \d+\]", ln):
            out.add((cur, ln.split("\t")[0], x[0]))
    return out


@pytest.mark.real
@needs_ibsim
def test_real_ibnetdiscover_g_prints_the_ext_ports_the_writer_writes(tmp_path: Path) -> None:
    """``ibnetdiscover -g`` on an IS4 director prints ``[ext N]`` exactly where
    our writer does with rdma-core's rule, and its grouped text parses."""
    want = director_is4()
    with _boot(tmp_path, want) as sim:
        run_opensm(sim, tmp_path / "opensm")
        real_lines = sim.run(["ibnetdiscover", "-g"]).lines()
    assert any(ln.startswith("Chassis 1 ") for ln in real_lines)
    ours = format_topology(want, ext_ports=chassis_ext_ports(
        want, device_ids=RDMA_CORE_CHASSIS_DEVICE_IDS))
    marks = _ext_marks(real_lines)
    assert len(marks) == 2 * len(want.cas)
    assert marks == _ext_marks(ours)
    assert_same_nodes_and_links(parse_topology(real_lines, "dir-g.topo"), want)


@pytest.mark.real
@needs_ibsim
def test_real_tools_on_the_split_switch_show_more_ports_and_2x(tmp_path: Path) -> None:
    want = quantum2_split()
    with _boot(tmp_path, want) as sim:
        run_opensm(sim, tmp_path / "opensm")
        lines = ibnetdiscover(sim)
    assert sum(1 for ln in lines if re.match(r"Switch\t129 ", ln)) == 2
    assert any("2xHDR" in ln for ln in lines)
    assert any(re.match(r'\[129\]\t"H-[0-9a-f]+"\[1\]\([0-9a-f]+\) \t\t# "Mellanox Technologies '
                        r'Aggregation Node"', ln) for ln in lines)


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def make_fixtures() -> ModuleType:
    return load_script("make_fixtures")


#: shape fixture -> (switches, CAs, aggregation nodes, links)
SHAPE_FIXTURES = {
    "quantum-2level-agg-spine-hosts": (10, 36, 10, 24 + 2 + 10 + 6 * 4),
    "two-switch-4-4-p2": (2, 8, 0, 8 + 2),
    "director-is5100-g": (9, 12, 0, 12 + 6 * 18),
}


def test_every_shape_fixture_is_committed(make_fixtures: ModuleType) -> None:
    assert {s.name for s in make_fixtures.SHAPE_FIXTURES} == set(SHAPE_FIXTURES)
    names = [s.name for s in make_fixtures.ALL_FIXTURES]
    assert len(names) == len(set(names))
    for n in SHAPE_FIXTURES:
        path = FIXTURES / f"{n}.topo"
        assert path.is_file(), n
        assert path.stat().st_size < 300_000


@pytest.mark.parametrize("name", sorted(SHAPE_FIXTURES))
def test_shape_fixture_is_up_to_date(name: str, make_fixtures: ModuleType) -> None:
    """The committed real ibnetdiscover output matches what the script's
    generator makes today (nodes, links, port GUIDs, widths, speeds), and
    OpenSM assigned every LID."""
    switches, cas, aggs, links = SHAPE_FIXTURES[name]
    spec = next(s for s in make_fixtures.SHAPE_FIXTURES if s.name == name)
    text = (FIXTURES / f"{name}.topo").read_text()
    assert text.startswith("#\n# Topology file: generated on ")
    got = read_topology(FIXTURES / f"{name}.topo")
    assert (len(got.switches), len(got.cas), len(aggregation_nodes(got)), got.n_links) == (
        switches, cas, aggs, links)
    assert_same_nodes_and_links(got, spec.build())
    assert_lids_unique(got)
    if aggs:
        assert_aggregation_on_every_switch(got)


def test_shape_fixture_details() -> None:
    q = read_topology(FIXTURES / "quantum-2level-agg-spine-hosts.topo")
    assert (q.num_ports[q.switches] == 41).all()
    hosts = {q.node_desc[i]: i for i in q.cas.tolist()}
    sw = {int(q.port_node[q.port_peer[q.port_start[hosts[d]] + 1]])
          for d in ("ufm01 HCA-1", "storage-gw01 HCA-1")}
    assert len(sw) == 1 and q.node_desc[sw.pop()].startswith("pgft L2 ")
    d_text = (FIXTURES / "director-is5100-g.topo").read_text()
    assert "\nChassis 1 (guid 0x" in d_text and "[1][ext 1]\t" in d_text
    d = read_topology(FIXTURES / "director-is5100-g.topo")
    assert len({int(g) for g in d.sysimg_guid[d.switches]}) == 1
    t = read_topology(FIXTURES / "two-switch-4-4-p2.topo")
    a, b = (int(x) for x in t.switches)
    na, nb = t.port_node[t.link_a], t.port_node[t.link_b]
    assert int((((na == a) & (nb == b)) | ((na == b) & (nb == a))).sum()) == 2
