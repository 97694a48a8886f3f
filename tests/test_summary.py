"""Fabric summary: levels, counts, link types, parallel links, anomalies; and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType, speed_code
from smroute.fabric.model.builder import FabricBuilder
from smroute.fabric.summary import ANOMALY_KINDS, components, format_summary, summarize

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
EDR = speed_code("EDR")


def two_level(
    leaves: int = 4,
    hosts: int = 3,
    spines: int = 2,
    *,
    parallel: int = 1,
    stray_host_on_spine: bool = False,
    leaf_leaf_link: bool = False,
    island: bool = False,
    narrow_link: bool = False,
) -> Fabric:
    """A hand-wired 2-level tree (GUIDs: hosts 0x1000+, leaves 0x2000+,
    spines 0x3000+) with optional defects."""
    b = FabricBuilder()
    spare = 2
    leaf_ports = hosts + spines * parallel + spare
    spine_ports = leaves * parallel + spare
    lv = [b.add_node(NodeType.SWITCH, 0x2000 + i, leaf_ports, f"leaf {i}") for i in range(leaves)]
    sp = [b.add_node(NodeType.SWITCH, 0x3000 + i, spine_ports, f"spine {i}")
          for i in range(spines)]
    h = 0
    for i, leaf in enumerate(lv):
        for j in range(hosts):
            ca = b.add_node(NodeType.CA, 0x1000 + 16 * h, 1, f"host {i}.{j}")
            h += 1
            b.add_link(leaf, j + 1, ca, 1)
        for s, spine in enumerate(sp):
            for k in range(parallel):
                b.add_link(leaf, hosts + s * parallel + k + 1, spine, i * parallel + k + 1)
    if stray_host_on_spine:
        ca = b.add_node(NodeType.CA, 0x1000 + 16 * h, 1, "stray host")
        b.add_link(sp[0], spine_ports, ca, 1)
    if leaf_leaf_link:
        b.add_link(lv[0], leaf_ports, lv[1], leaf_ports)
    if island:
        x = b.add_node(NodeType.SWITCH, 0x4000, 4, "island a")
        y = b.add_node(NodeType.SWITCH, 0x4001, 4, "island b")
        b.add_link(x, 1, y, 1)
    fab = b.build()
    # every linked port runs 4xEDR, except one end of one link if asked
    b2 = FabricBuilder()
    for n in range(fab.n_nodes):
        b2.add_node(NodeType(int(fab.node_type[n])), int(fab.node_guid[n]),
                    int(fab.num_ports[n]), fab.node_desc[n])
    for li in range(fab.n_links):
        ra, rb = int(fab.link_a[li]), int(fab.link_b[li])
        na, nb = int(fab.port_node[ra]), int(fab.port_node[rb])
        pa, pb = int(fab.port_num[ra]), int(fab.port_num[rb])
        b2.add_link(na, pa, nb, pb)
        b2.set_port(na, pa, width=4, speed=EDR)
        b2.set_port(nb, pb, width=1 if (narrow_link and li == 0) else 4, speed=EDR)
    return b2.build()


def guids(items: tuple[dict, ...] | list[dict]) -> set[int]:
    return {int(it["guid"], 16) for it in items}


# --------------------------------------------------------------------------- healthy trees
def test_648_two_level_tree_counts_and_levels() -> None:
    s = summarize(pgft(2, [18, 36], [1, 18], [1, 1]), source="x.topo")
    assert (s.nodes, s.switches, s.hosts, s.routers) == (702, 54, 648, 0)
    assert (s.links, s.switch_links, s.host_links) == (1296, 648, 648)
    assert [(lv.rank, lv.switches, lv.hosts) for lv in s.levels] == [(0, 36, 648), (1, 18, 0)]
    leaf, spine = s.levels
    assert (leaf.up_min, leaf.up_max, leaf.down_min, leaf.down_max) == (18, 18, 18, 18)
    assert (spine.up_max, spine.down_min, spine.down_max) == (0, 36, 36)
    assert s.link_types == {"4xEDR": 1296}
    assert s.parallel_pairs == 0
    assert s.component_sizes == (702,)
    assert s.ok
    assert set(s.anomalies) == set(ANOMALY_KINDS)


def test_zahavi_pgft_three_levels_and_parallel_links() -> None:
    s = summarize(pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]))
    assert [(lv.switches, lv.hosts) for lv in s.levels] == [(6, 12), (6, 0), (4, 0)]
    # level 1 -> 2 has p_2 = 2: each of the 6 leaves has 2 links to each of 2 parents
    assert s.parallel_pairs == 12
    assert s.parallel_multiplicity == {2: 12}
    assert all(item["links"] == 2 for item in s.parallel_items)
    assert s.ok


def test_three_level_big_tree_is_fast_and_regular() -> None:
    import time

    f = pgft(3, [18, 18, 36], [1, 18, 18], [1, 1, 1])
    t = time.perf_counter()
    s = summarize(f)
    assert time.perf_counter() - t < 5.0
    assert [lv.switches for lv in s.levels] == [648, 648, 324]
    assert s.hosts == 11664 and s.ok


# --------------------------------------------------------------------------- anomalies
def test_degraded_tree_reports_exactly_the_switches_that_lost_links() -> None:
    full = pgft(2, [18, 36], [1, 18], [1, 1])
    deg, removed = degrade(full, np.random.default_rng(3), links=5)
    s = summarize(deg)
    ends = removed.link_ends
    # column 0/2 are GUIDs of the two ends; leaves are level-1 GUIDs
    touched = {int(g) for g in ends[:, 0]} | {int(g) for g in ends[:, 2]}
    leaves = {g for g in touched if deg.node_desc[deg.node_by_guid(g)].startswith("pgft L1 ")}
    spines = touched - leaves
    total_up, up_items = s.anomalies["missing_up_links"]
    total_dn, dn_items = s.anomalies["missing_down_links"]
    assert guids(up_items) == leaves and total_up == len(leaves)
    assert guids(dn_items) == spines and total_dn == len(spines)
    assert s.anomaly_count("hosts_on_non_leaf") == 0
    assert s.anomaly_count("disconnected") == 0
    assert not s.ok


def test_removed_spine_shows_in_levels_not_as_missing_links() -> None:
    full = pgft(2, [18, 36], [1, 18], [1, 1])
    spine = int(full.switches[-1])
    s = summarize(full.with_removed(nodes=[spine]))
    assert [lv.switches for lv in s.levels] == [36, 17]
    assert s.levels[0].up_max == 17 and s.levels[0].free_ports == 36
    assert s.ok


def test_stray_host_on_spine_is_a_host_on_non_leaf() -> None:
    s = summarize(two_level(stray_host_on_spine=True))
    total, items = s.anomalies["hosts_on_non_leaf"]
    assert total == 1
    assert guids(items) == {0x3000}
    assert items[0]["rank"] == 1 and items[0]["hosts"] == 1
    # the spine still ranks as level 1, the leaves as 0
    assert [lv.switches for lv in s.levels] == [4, 2]
    assert s.anomaly_count("same_rank_links") == 0


def test_linked_leaves_are_same_rank_links() -> None:
    s = summarize(two_level(leaf_leaf_link=True))
    total, items = s.anomalies["same_rank_links"]
    assert total == 1
    assert {int(items[0]["a"]["guid"], 16), int(items[0]["b"]["guid"], 16)} == {0x2000, 0x2001}
    assert items[0]["rank"] == 0


def test_island_is_unranked_and_disconnected() -> None:
    s = summarize(two_level(island=True))
    total, items = s.anomalies["unranked_switches"]
    assert total == 2 and guids(items) == {0x4000, 0x4001}
    assert s.unranked == 2
    dtotal, ditems = s.anomalies["disconnected"]
    assert dtotal == 1 and ditems[0]["size"] == 2 and ditems[0]["switches"] == 2
    assert s.component_sizes[1:] == (2,)


def test_width_mismatch_is_reported_with_both_ends() -> None:
    s = summarize(two_level(narrow_link=True))
    total, items = s.anomalies["link_mismatch"]
    assert total == 1
    assert {items[0]["a"]["width"], items[0]["b"]["width"]} == {1, 4}
    # histogram uses the first end's width when both are known
    assert sum(s.link_types.values()) == s.links


def test_parallel_two_level_counts_pairs() -> None:
    s = summarize(two_level(leaves=3, spines=2, parallel=3))
    assert s.parallel_pairs == 6 and s.parallel_multiplicity == {3: 6}
    assert s.levels[0].up_max == 6 and s.ok


def test_max_items_caps_lists_but_not_totals() -> None:
    full = pgft(2, [18, 36], [1, 18], [1, 1])
    deg, _ = degrade(full, np.random.default_rng(1), links=30)
    s = summarize(deg, max_items=2)
    total, items = s.anomalies["missing_up_links"]
    assert total > 2 and len(items) == 2


def test_to_dict_is_json_and_text_mentions_anomalies() -> None:
    s = summarize(two_level(stray_host_on_spine=True, island=True), source="f.topo")
    d = json.loads(json.dumps(s.to_dict()))
    assert d["ok"] is False
    assert d["anomalies"]["hosts_on_non_leaf"]["total"] == 1
    assert d["components"]["count"] == 2
    text = "\n".join(format_summary(s))
    assert "hosts on non-leaf switches: 1" in text
    assert '"spine 0" (0x0000000000003000)' in text
    assert "Fabric: f.topo" in text


def test_empty_fabric() -> None:
    s = summarize(FabricBuilder().build())
    assert s.nodes == 0 and s.levels == () and s.ok


# --------------------------------------------------------------------------- components
def _union_find(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    return np.array([find(i) for i in range(n)])


@pytest.mark.parametrize("seed", range(20))
def test_components_match_union_find(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    m = int(rng.integers(0, 2 * n))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    got = components(n, a, b)
    want = _union_find(n, a, b)
    assert np.array_equal(got, want)  # both label with the smallest member index


def test_components_long_chain() -> None:
    n = 5000
    perm = np.random.default_rng(0).permutation(n)
    got = components(n, perm[:-1], perm[1:])
    assert (got == 0).all()


# --------------------------------------------------------------------------- CLI
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "smroute", "fabric", "summary", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )


needs_fixture = pytest.mark.skipif(
    not (FIXTURES / "pgft-2level-648.topo").exists(), reason="fixtures not generated"
)


@needs_fixture
def test_cli_text_summary_of_default_fixture() -> None:
    r = _cli("fixtures/pgft-2level-648.topo")
    assert r.returncode == 0, r.stderr
    assert "54 switches, 648 hosts" in r.stdout
    assert "Anomalies: none" in r.stdout


@needs_fixture
def test_cli_json_summary_of_degraded_fixture() -> None:
    r = _cli("fixtures/pgft-2level-648-degraded.topo", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["switches"] == 53 and d["hosts"] == 648
    assert [lv["switches"] for lv in d["levels"]] == [36, 17]
    assert d["anomalies"]["missing_up_links"]["total"] >= 1
    assert d["ok"] is False


def test_cli_bad_file_exits_2_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.topo"
    bad.write_text(
        "#\n# Topology file\n#\n\nSwitch\t36 \"S-0000000000000001\"\n[x]\tgarbage here\n"
    )
    r = _cli(str(bad))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"{bad}:" in r.stderr
    assert any(ch.isdigit() for ch in r.stderr.split(f"{bad}:", 1)[1][:8])
    assert r.stdout == ""


def test_cli_missing_file_exits_2(tmp_path: Path) -> None:
    r = _cli(str(tmp_path / "nope.topo"))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "nope.topo" in r.stderr


def test_cli_usage_error_exits_2() -> None:
    r = _cli()
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_a_leaf_whose_cables_skip_a_rank_counts_them_as_up_links() -> None:
    """Two leaf/spine clusters joined at their spines: B's leaves are
    ranked apart below B's spines (rank 2), their 3 cables skip rank 1;
    they count as up-links (3, not 0: only B's leaves, with 3 against A's
    4, have fewer than their level's most), and the tops' cables down to
    them as down-links."""
    from smroute.fabric.generate.sitegen import CONNECTX5, SWITCHIB, Site

    site = Site(speed="EDR", host_device=CONNECTX5)
    spines = []
    for c, (n_leaves, n_spines) in {"a": (8, 4), "b": (6, 3)}.items():
        leaves = site.switches([f"{c}-leaf{i}" for i in range(n_leaves)], 36, SWITCHIB)
        spines.append(site.switches([f"{c}-spine{j}" for j in range(n_spines)], 36, SWITCHIB))
        for i, x in enumerate(leaves):
            for k in range(16):
                site.host(x, f"cn-{c}{i:02d}-{k:02d} mlx5_0")
            for s in spines[-1]:
                site.cable(x, s)
    for a in spines[0]:
        for b in spines[1]:
            site.cable(a, b)
    s = summarize(site.build(np.random.default_rng(3)))
    leaves = s.levels[0]
    assert (leaves.up_min, leaves.up_max) == (3, 4)
    assert s.levels[2].down_max == 4 + 6  # (a top: A's 4 spines and B's 6 leaves)
    missing = s.anomalies["missing_up_links"]
    assert missing[0] == 6 and all(item["up_links"] == 3 for item in missing[1])
