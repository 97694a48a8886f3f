"""Generators (PGFT/XGFT/k-ary-n-tree/thin/slender), degradation and writers."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from smroute.fabric.export.writers import (
    format_ibsim_net,
    format_topology,
    ibsim_limits,
    write_ibsim_net,
    write_topology,
)
from smroute.fabric.generate.trees import (
    DEFAULT_GUID_BASE,
    degrade,
    fabric_tuples,
    is_rlft,
    kary_ntree,
    level_sizes,
    navaridas_tree,
    parse_tuple,
    pgft,
    rlft_check,
    slender_tree,
    thin_tree,
    topological_host_order,
    xgft,
)
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType

FIG = (3, [2, 2, 3], [1, 2, 2], [1, 2, 1])  # Zahavi / Gliksberg Fig. 1


# --------------------------------------------------------------------------- helpers
def _by_desc(f: Fabric) -> dict[str, int]:
    return {d: i for i, d in enumerate(f.node_desc)}


def _desc_links(f: Fabric) -> Counter[tuple[tuple[str, int], tuple[str, int]]]:
    """Links as a multiset of unordered ((desc, port), (desc, port))."""
    out: Counter[tuple[tuple[str, int], tuple[str, int]]] = Counter()
    for a, b in zip(f.link_a.tolist(), f.link_b.tolist(), strict=True):
        ea = (f.node_desc[int(f.port_node[a])], int(f.port_num[a]))
        eb = (f.node_desc[int(f.port_node[b])], int(f.port_num[b]))
        out[(min(ea, eb), max(ea, eb))] += 1
    return out


def _reference_links(h, m, w, p, hosts_per_leaf=None):
    """Zahavi's rule by brute force over all port pairs (slow, small trees only)."""
    def tuples(level):
        ranges = [range(w[t] if t < level else m[t]) for t in range(h)]  # a_1..a_h
        yield from itertools.product(*reversed(ranges))  # a_h..a_1

    def name(level, digs):
        s = ".".join(map(str, digs))
        return f"host {s}" if level == 0 else f"pgft L{level} {s}"

    out: Counter = Counter()
    for lv in range(h):
        t = lv + 1  # digit index that may differ (1-based)
        col = h - t  # its column in (a_h..a_1)
        down_lower = 0 if lv == 0 else m[lv - 1] * p[lv - 1]
        for a in tuples(lv):
            if lv == 0 and hosts_per_leaf is not None and a[-1] >= hosts_per_leaf:
                continue
            for bdig in tuples(lv + 1):
                if any(bdig[c] != a[c] for c in range(h) if c != col):
                    continue
                for q in range(w[t - 1] * p[t - 1]):
                    for r in range(m[t - 1] * p[t - 1]):
                        ok = any(
                            q == bdig[col] + k * w[t - 1] and r == a[col] + k * m[t - 1]
                            for k in range(p[t - 1])
                        )
                        if ok:
                            ea = (name(lv, a), down_lower + q + 1)
                            eb = (name(lv + 1, bdig), r + 1)
                            out[(min(ea, eb), max(ea, eb))] += 1
    return out


# --------------------------------------------------------------------------- PGFT
def test_zahavi_figure_counts():
    f = pgft(*FIG)
    assert len(f.cas) == 12
    assert len(f.switches) == 16  # 6 leaves + 6 + 4
    assert level_sizes(*FIG[:3]) == [12, 6, 6, 4]
    levels, _ = fabric_tuples(f)
    assert Counter(levels.tolist()) == {0: 12, 1: 6, 2: 6, 3: 4}
    # host links 12 + leaf up links 6*w2*p2=24 + 6*w3*p3=12
    assert f.n_links == 48


@pytest.mark.parametrize(
    "params",
    [
        FIG,
        (2, [4, 3], [1, 2], [1, 2]),
        (2, [2, 2], [2, 2], [1, 1]),  # dual-homed hosts (w1 = 2)
        (3, [2, 3, 2], [1, 2, 3], [1, 1, 2]),
        (1, [5], [1], [1]),
        (2, [3, 2], [1, 1], [1, 3]),
    ],
)
def test_wiring_matches_rule_exactly(params):
    f = pgft(*params)
    assert _desc_links(f) == _reference_links(*params)


def test_wiring_partial_population():
    params = (2, [4, 3], [1, 2], [1, 2])
    f = pgft(*params, hosts_per_leaf=3)
    assert len(f.cas) == 9
    assert _desc_links(f) == _reference_links(*params, hosts_per_leaf=3)
    leaf = _by_desc(f)["pgft L1 0.0"]
    # down-port 4 (host a_1 = 3) stays unconnected
    assert f.port_peer[f.port_row(leaf, 4)] == -1
    assert topological_host_order(f).tolist() == list(range(9))


def test_specific_links_figure():
    f = pgft(*FIG)
    links = _desc_links(f)
    # Zahavi Fig. 5(b) pattern: (2, 1.1.0) up-port q = b_3 = 0 -> IB 4 + 0 + 1,
    # (3, 0.1.0) down-port r = a_3 = 1 -> IB 2
    assert links[(("pgft L2 1.1.0", 5), ("pgft L3 0.1.0", 2))] == 1
    # k = 1 parallel link of leaf (1, 2.1.0) to (2, 2.1.0): q = 1 + 1*2 = 3 -> IB 2+3+1,
    # r = a_2 + 1*m_2 = 1 + 2 = 3 -> IB 4
    assert links[(("pgft L1 2.1.0", 6), ("pgft L2 2.1.0", 4))] == 1
    # host (0, 2.1.1) on its leaf's down-port a_1 + 1 = 2
    assert links[(("host 2.1.1", 1), ("pgft L1 2.1.0", 2))] == 1


def test_parallel_links():
    f = pgft(*FIG)
    pairs = Counter()
    for a, b in zip(f.link_a.tolist(), f.link_b.tolist(), strict=True):
        pairs[tuple(sorted((int(f.port_node[a]), int(f.port_node[b]))))] += 1
    levels, _ = fabric_tuples(f)
    by_level = Counter()
    for (x, y), c in pairs.items():
        by_level[(int(min(levels[x], levels[y])), c)] += 1
    # level 1-2 pairs: 6 leaves x w2 = 2 parents, each with p2 = 2 links
    assert by_level == {(0, 1): 12, (1, 2): 12, (2, 1): 12}


def test_port_counts_and_numbering():
    f = pgft(*FIG)
    levels, _ = fabric_tuples(f)
    want = {0: 1, 1: 2 + 4, 2: 4 + 2, 3: 3}
    assert all(int(f.num_ports[i]) == want[int(levels[i])] for i in range(f.n_nodes))
    # every port of every node is linked in a full PGFT
    assert (f.port_peer[f.port_num > 0] >= 0).all()
    # switch down-ports lead to lower levels, up-ports to higher ones
    for row in np.flatnonzero(f.port_peer >= 0).tolist():
        n, peer = int(f.port_node[row]), int(f.port_node[f.port_peer[row]])
        lv = int(levels[n])
        down = {0: 0, 1: 2, 2: 4, 3: 3}[lv]
        if int(f.port_num[row]) <= down:
            assert levels[peer] == lv - 1
        else:
            assert levels[peer] == lv + 1
    g = pgft(*FIG, switch_ports=36)
    assert (g.num_ports[g.switches] == 36).all()
    assert g.link_set() == f.link_set()
    with pytest.raises(FabricError):
        pgft(*FIG, switch_ports=5)


def test_guids_lids_descriptions():
    f = pgft(*FIG, lmc=2)
    assert len(np.unique(f.node_guid)) == f.n_nodes
    pg = f.port_guid[f.port_exists & (f.port_guid != 0)]
    assert len(np.unique(pg)) == len(pg)
    for n in f.cas.tolist():
        assert int(f.port_guid[f.port_row(n, 1)]) == int(f.node_guid[n]) + 1
        lid = int(f.port_lid[f.port_row(n, 1)])
        assert lid % 4 == 0 and int(f.port_lmc[f.port_row(n, 1)]) == 2
    for n in f.switches.tolist():
        assert int(f.port_guid[f.port_row(n, 0)]) == int(f.node_guid[n])
        assert int(f.port_lmc[f.port_row(n, 0)]) == 0
    assert (f.node_lid > 0).all()
    # every LID (incl. the LMC range) maps back to exactly one port
    lids = f.node_lid[f.cas].astype(np.int64)
    assert (f.lid_to_port[lids + 3] == f.lid_to_port[lids]).all()
    assert len(np.unique(f.node_lid)) == f.n_nodes
    # GUID layout: base + level << 28 + index << 4
    levels, digits = fabric_tuples(f)
    assert int(f.node_guid[0]) == DEFAULT_GUID_BASE
    leaf = _by_desc(f)["pgft L1 2.1.0"]
    assert int(f.node_guid[leaf]) == DEFAULT_GUID_BASE + (1 << 28) + (5 << 4)
    assert f.node_desc[leaf] == "pgft L1 2.1.0"
    assert parse_tuple("pgft L1 2.1.0") == (1, (2, 1, 0))
    assert parse_tuple("host 0.1.2") == (0, (0, 1, 2))
    assert parse_tuple("MF0;switch-1") is None
    assert (levels >= 0).all() and digits.shape == (f.n_nodes, 3)


def test_topological_host_order_index():
    h, m, w, p = FIG
    f = pgft(*FIG)
    order = topological_host_order(f)
    js = []
    for n in order.tolist():
        lv, digs = parse_tuple(f.node_desc[n])
        a = digs[::-1]  # a_1..a_h
        js.append(sum(a[t] * int(np.prod(m[:t])) for t in range(h)))
    assert js == list(range(12))
    # hosts of one leaf are contiguous
    leaf_of = [int(f.port_node[f.port_peer[f.port_row(n, 1)]]) for n in order.tolist()]
    assert leaf_of == sorted(leaf_of)


def test_big_rlft_fast():
    t0 = time.perf_counter()
    f = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    assert time.perf_counter() - t0 < 3.0
    assert len(f.cas) == 11664
    assert len(f.switches) == 1620
    assert f.n_links == 11664 * 3
    assert (f.num_ports[f.switches] == 36).all()
    assert is_rlft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])


def test_40k_hosts_fast():
    t0 = time.perf_counter()
    f = pgft(3, [32, 32, 40], [1, 32, 32], [1, 1, 1])
    assert time.perf_counter() - t0 < 5.0
    assert len(f.cas) == 40960
    assert len(f.switches) == 32 * 40 + 40 * 32 + 32 * 32
    assert int(f.node_lid.max()) <= 0xBFFF


def test_rlft_check():
    assert rlft_check(3, [18, 18, 36], [1, 18, 18], [1, 1, 1]) == []
    assert rlft_check(2, [4, 4], [1, 2], [1, 2]) == []  # Zahavi Fig. 4(b)
    v = rlft_check(*FIG)
    assert any("CBB" in s for s in v) and not is_rlft(*FIG)
    assert any("w_1" in s for s in rlft_check(2, [2, 2], [2, 2], [1, 1]))
    assert any("port counts" in s for s in rlft_check(3, [32, 32, 40], [1, 32, 32], [1, 1, 1]))
    assert rlft_check(2, [2], [1], [1])  # wrong length


def test_bad_parameters():
    with pytest.raises(FabricError):
        pgft(2, [2], [1, 1], [1, 1])
    with pytest.raises(FabricError):
        pgft(2, [2, 0], [1, 1], [1, 1])
    with pytest.raises(FabricError):
        pgft(*FIG, hosts_per_leaf=3)
    with pytest.raises(FabricError):
        pgft(*FIG, speed="FAST")
    with pytest.raises(FabricError):
        pgft(3, [200, 2, 2], [1, 200, 1], [1, 1, 1])  # 400 ports


# --------------------------------------------------------------------------- Navaridas
# Table 2: "links" counts host links plus switch-to-switch links (the top level's
# upward ports are unplugged): e.g. 8,4-fat-tree 4096 + 3 * 4096 = 16384.
TABLE2 = [
    ("8,4-fat-tree", 2048, 16384, 4096, 16),
    ("8:4,4-thin-tree", 960, 7680, 4096, 12),
    ("8:2,4-thin-tree", 680, 5440, 4096, 10),
    ("8:4,8-slender-tree", 1020, 8160, 4096, 12),
    ("8:2,5-slender-tree", 682, 5456, 4096, 10),
    ("6,5-fat-tree", 6480, 38880, 7776, 12),
    ("9:3,4-thin-tree", 1080, 9720, 6561, 12),
    ("9:3,6-slender-tree", 1092, 9828, 6561, 12),
]


@pytest.mark.parametrize(("spec", "switches", "links", "nodes", "radix"), TABLE2)
def test_navaridas_table2(spec, switches, links, nodes, radix):
    f = navaridas_tree(spec)
    assert len(f.switches) == switches
    assert f.n_links == links
    assert len(f.cas) == nodes
    assert int(f.num_ports[f.switches].max()) == radix
    assert (f.num_ports[f.cas] == 1).all()


def test_navaridas_generators():
    a = kary_ntree(8, 4)
    assert a.link_set() == xgft(4, [8] * 4, [1, 8, 8, 8], name="kary").link_set()
    assert len(thin_tree(8, 4, 4).switches) == 960
    assert len(slender_tree(8, 4, 8).switches) == 1020
    # k:k, n thin-tree is the k,n-fat-tree
    assert thin_tree(4, 4, 3).link_set() == kary_ntree(4, 3).link_set()
    # 4:2,2-slender-tree is identical (as a graph) to the 4:2,2-thin-tree
    s, t = slender_tree(4, 2, 2), thin_tree(4, 2, 2)
    assert len(s.switches) == len(t.switches) == 6 and s.n_links == t.n_links == 24
    with pytest.raises(FabricError):
        slender_tree(6, 4, 3)
    with pytest.raises(FabricError):
        navaridas_tree("8-ary-tree")


def test_slender_wiring_rule():
    k, kp, n = 4, 2, 4
    f = slender_tree(k, kp, n)
    d = _by_desc(f)
    counts = [kp * (k // kp) ** (n - 1 - i) for i in range(n)]
    links = _desc_links(f)
    want: Counter = Counter()
    for i in range(n - 1):
        for s in range(counts[i]):
            for port in range(kp):
                ea = (f"slender L{i + 1} {s}", k + port + 1)
                eb = (f"slender L{i + 2} {kp * (s // k) + port}", s % k + 1)
                want[(min(ea, eb), max(ea, eb))] += 1
    for j in range(counts[0] * k):
        ea, eb = (f"host {j}", 1), (f"slender L1 {j // k}", j % k + 1)
        want[(min(ea, eb), max(ea, eb))] += 1
    assert links == want
    assert parse_tuple("slender L3 5") == (3, (5,))
    assert topological_host_order(f).tolist() == [d[f"host {j}"] for j in range(counts[0] * k)]


# --------------------------------------------------------------------------- degrade
def test_degrade_deterministic():
    f = pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1])
    g1, r1 = degrade(f, np.random.default_rng(7), switches=3, links=10)
    g2, r2 = degrade(f, np.random.default_rng(7), switches=3, links=10)
    assert g1.content_hash == g2.content_hash
    assert r1.nodes.tolist() == r2.nodes.tolist() and r1.links.tolist() == r2.links.tolist()
    g3, r3 = degrade(f, np.random.default_rng(8), switches=3, links=10)
    assert g3.content_hash != g1.content_hash
    assert len(g1.switches) == len(f.switches) - 3
    assert len(g1.cas) == len(f.cas)
    assert (f.node_type[r1.nodes] == NodeType.SWITCH).all()
    # removed links are switch-to-switch and gone from the result
    ls = g1.link_set()
    for ga, pa, gb, pb in r1.link_ends.tolist():
        assert f.node_type[f.node_by_guid(ga)] == NodeType.SWITCH
        assert f.node_type[f.node_by_guid(gb)] == NodeType.SWITCH
        assert (min((ga, pa), (gb, pb)), max((ga, pa), (gb, pb))) not in ls
    lost_with_switches = sum(
        int((f.port_peer[f.port_start[n] + 1: f.port_start[n] + f.num_ports[n] + 1] >= 0).sum())
        for n in r1.nodes.tolist()
    )
    assert g1.n_links <= f.n_links - 10 - lost_with_switches + 3  # shared links counted once
    assert g1.n_links >= f.n_links - 10 - lost_with_switches
    # only-link degradation keeps every node
    g4, r4 = degrade(f, np.random.default_rng(1), links=5)
    assert g4.n_nodes == f.n_nodes and g4.n_links == f.n_links - 5 and len(r4.nodes) == 0
    assert topological_host_order(g1).tolist() == list(range(len(f.cas)))
    with pytest.raises(FabricError):
        degrade(f, np.random.default_rng(1), switches=10_000)
    with pytest.raises(FabricError):
        degrade(f, np.random.default_rng(1), links=10_000)


def test_with_removed_big_is_fast():
    f = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    t0 = time.perf_counter()
    g, _ = degrade(f, np.random.default_rng(3), switches=50, links=500)
    assert time.perf_counter() - t0 < 2.0
    assert len(g.switches) == 1570


# --------------------------------------------------------------------------- writers
_SW_HDR = re.compile(
    r'^Switch\t(\d+) "S-([0-9a-f]{16})"\t\t# "([^"]*)" base port 0 lid (\d+) lmc (\d+)$'
)
_CA_HDR = re.compile(r'^(Ca|Rt)\t(\d+) "([HR])-([0-9a-f]{16})"\t\t# "([^"]*)"$')
_SW_PORT = re.compile(
    r'^\[(\d+)\]\t"([SH])-([0-9a-f]{16})"\[(\d+)\](?:\(([0-9a-f]+)\) )?'
    r'\t\t# "([^"]*)" lid (\d+) (\d+x)(\w+|\?\?\?)$'
)
_CA_PORT = re.compile(
    r'^\[(\d+)\]\(([0-9a-f]+)\) \t"([SH])-([0-9a-f]{16})"\[(\d+)\](?: \([0-9a-f]+\) )?'
    r'\t\t# lid (\d+) lmc (\d+) "([^"]*)" lid (\d+) (\d+x)(\w+)$'
)


def _parse_text(lines: list[str]) -> tuple[set, dict[int, str]]:
    """Tiny ibnetdiscover reader: links as {((guid, port), (guid, port))}, descs."""
    links: set = set()
    descs: dict[int, str] = {}
    cur = None
    for ln in lines:
        if mo := _SW_HDR.match(ln):
            cur = int(mo[2], 16)
            descs[cur] = mo[3]
        elif mo := _CA_HDR.match(ln):
            cur = int(mo[4], 16)
            descs[cur] = mo[5]
        elif mo := _SW_PORT.match(ln):
            e = ((cur, int(mo[1])), (int(mo[3], 16), int(mo[4])))
            links.add((min(e), max(e)))
        elif mo := _CA_PORT.match(ln):
            e = ((cur, int(mo[1])), (int(mo[4], 16), int(mo[5])))
            links.add((min(e), max(e)))
        else:
            assert ln == "" or ln.startswith("#") or re.match(
                r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=0x[0-9a-f]+(\([0-9a-f]+\))?$",
                ln,
            ), ln
    return links, descs


def test_format_topology_shape():
    f = pgft(*FIG, lmc=1)
    lines = format_topology(f)
    assert lines[:3] == ["#", "# Topology file: generated on Thu Jan  1 00:00:00 1970", "#"]
    assert lines[3] == "# Initiated from node 0002c90300000000 port 0002c90300000001"
    port_lines = [ln for ln in lines if ln.startswith("[")]
    assert len(port_lines) == 2 * f.n_links
    links, descs = _parse_text(lines)
    assert links == f.link_set()
    assert descs == {int(f.node_guid[i]): f.node_desc[i] for i in range(f.n_nodes)}
    # records: blank line, vendid, devid, sysimgguid, <type>guid, header
    i = lines.index("switchguid=0x2c90310000000(2c90310000000)")
    assert lines[i - 4: i] == ["", "vendid=0x2c9", "devid=0xcb20", "sysimgguid=0x2c90310000000"]
    assert lines[i + 1] == (
        'Switch\t6 "S-0002c90310000000"\t\t# "pgft L1 0.0.0" base port 0 lid 26 lmc 0'
    )
    assert lines[i + 2] == (
        '[1]\t"H-0002c90300000000"[1](2c90300000001) \t\t# "host 0.0.0" lid 2 4xEDR'
    )
    j = lines.index('Ca\t1 "H-0002c90300000000"\t\t# "host 0.0.0"')
    assert lines[j - 1] == "caguid=0x2c90300000000"
    assert lines[j + 1] == (
        '[1](2c90300000001) \t"S-0002c90310000000"[1]\t\t# lid 2 lmc 1 "pgft L1 0.0.0" lid 26 4xEDR'
    )
    # switches before CAs
    assert max(k for k, ln in enumerate(lines) if ln.startswith("Switch")) < j


def test_format_parallel_links_and_degraded():
    f = pgft(*FIG)
    g, _ = degrade(f, np.random.default_rng(0), switches=2, links=3)
    for fab in (f, g):
        lines = format_topology(fab)
        links, _ = _parse_text(lines)
        assert links == fab.link_set()
        assert sum(ln.startswith("[") for ln in lines) == 2 * fab.n_links


def test_format_topology_ext_ports():
    """``[p][ext N]`` after the local and the remote port number, where given;
    all zeros is the plain text; write_topology passes the option through."""
    f = pgft(*FIG)
    assert format_topology(f, ext_ports=np.zeros(f.n_ports, dtype=np.int64)) == format_topology(f)
    ext = np.zeros(f.n_ports, dtype=np.int64)
    leaf = int(f.switches[0])
    ext[f.port_row(leaf, 1)] = 7  # to host 0.0.0
    ext[f.port_row(leaf, 3)] = 9  # first up-link
    lines = format_topology(f, ext_ports=ext)
    assert '[1][ext 7]\t"H-0002c90300000000"[1](2c90300000001) \t\t# "host 0.0.0"' in "\n".join(
        lines)
    assert any(ln.startswith('[1](2c90300000001) \t"S-0002c90310000000"[1][ext 7]\t\t# lid ')
               for ln in lines)
    up = int(f.port_peer[f.port_row(leaf, 3)])
    assert any(ln.startswith(f'[{int(f.port_num[up])}]\t"S-0002c90310000000"[3][ext 9]\t\t#')
               for ln in lines)
    assert sum("[ext " in ln for ln in lines) == 4
    links, _ = _parse_text([re.sub(r"\[ext \d+\]", "", ln) for ln in lines])
    assert links == f.link_set()
    with pytest.raises(FabricError, match=">= 0"):
        format_topology(f, ext_ports=-ext)


def test_ibsim_net_and_files(tmp_path: Path):
    f = pgft(*FIG, lmc=1)
    net = format_ibsim_net(f)
    assert all(len(ln) <= 255 for ln in net)
    links, _ = _parse_text(net)
    assert links == f.link_set()
    first = next(ln for ln in net if ln.startswith(("Ca", "Switch")))
    assert first.startswith("Ca\t1 ")  # a CA is ibsim's attach point
    write_topology(f, tmp_path / "t.topo")
    write_ibsim_net(f, tmp_path / "t.net")
    assert (tmp_path / "t.topo").read_text().splitlines() == format_topology(f)
    assert (tmp_path / "t.net").read_text().splitlines() == net
    assert ibsim_limits(f)[:2] == ["-N", "2048"]
    big = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    lim = dict(zip(ibsim_limits(big)[::2], ibsim_limits(big)[1::2], strict=True))
    assert int(lim["-N"]) >= big.n_nodes and int(lim["-S"]) >= 1620


def _records(text: str) -> list[str]:
    return sorted(r.strip() for r in text.split("\n\n")[1:] if r.strip())


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None or shutil.which("ibsim-run") is None
                    or shutil.which("ibnetdiscover") is None, reason="ibsim tools not installed")
@pytest.mark.parametrize("with_opensm", [False, True])
def test_ibsim_reproduces_generated_fabric(tmp_path: Path, with_opensm: bool):
    """ibsim fed our net file + (OpenSM +) ibnetdiscover give back exactly our
    records: GUIDs, descriptions, links, LIDs/LMC, widths and speeds."""
    if with_opensm and shutil.which("opensm") is None:
        pytest.skip("opensm not installed")
    f = pgft(2, [4, 3], [1, 2], [1, 2], lmc=2 if with_opensm else 0, hosts_per_leaf=3,
             speed="HDR")
    write_ibsim_net(f, tmp_path / "net")
    env = dict(os.environ, IBSIM_SOCKNAME=f"smr{uuid.uuid4().hex[:12]}",
               OSM_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    sim = subprocess.Popen(
        ["ibsim", "-s", "-n", *ibsim_limits(f), "net"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert sim.stdout is not None
        for line in sim.stdout:  # wait until the simulator listens
            if "simulator ready" in line:
                break
        else:
            pytest.fail("ibsim did not start")
        if with_opensm:
            (tmp_path / "osm.conf").write_text("lmc 2\n")
            subprocess.run(
                ["ibsim-run", "opensm", "-o", "-F", "osm.conf", "-f", "./osm.log", "-R", "minhop"],
                cwd=tmp_path, env=env, check=True, timeout=120, capture_output=True,
            )
        out = subprocess.run(["ibsim-run", "ibnetdiscover"], cwd=tmp_path, env=env, check=True,
                             timeout=120, capture_output=True, text=True).stdout
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert _records(out) == _records("\n".join(format_topology(f)))
