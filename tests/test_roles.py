"""The roles model (smroute.fabric.roles) and routing over it, on the
real-world shapes of the generators (no external file needed): aggregation
nodes on every switch, hosts on spines, two-switch and ring fabrics,
directors, split ports; OpenSM guid-file overrides; the routing modes; and
the daemon refusing tables that leave connected pairs unrouted."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest

from smroute.analysis.paths import pair_paths, routing_view
from smroute.cli.main import main
from smroute.errors import InputError
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate import shapes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import (
    REASONS,
    EndportRole,
    GuidOverrides,
    SwitchRole,
    fabric_roles,
    parse_guid_file,
)
from smroute.fabric.summary import format_summary, summarize
from smroute.routing.engine import route, unrouted_connected, validate_result
from smroute.routing.validate import DEAD_END

SMALL = (2, (4, 6), (1, 4), (1, 1))


def _agg_spine_hosts() -> Fabric:
    f = shapes.with_aggregation_nodes(pgft(*SMALL))
    spine = int(f.switches[-1])
    return shapes.attach_cas(f, [spine, spine], ["ufm01 HCA-1", "storage-gw01 HCA-1"])


SHAPES: dict[str, tuple[Callable[[], Fabric], str]] = {
    "pgft": (lambda: pgft(*SMALL), "tree"),
    "agg-2-level": (lambda: shapes.with_aggregation_nodes(pgft(*SMALL)), "tree+turns"),
    "agg-3-level": (lambda: shapes.with_aggregation_nodes(
        pgft(3, (2, 2, 4), (1, 2, 2), (1, 1, 1))), "tree+turns"),
    "agg-spine-hosts": (_agg_spine_hosts, "tree+turns"),
    "two-switch": (lambda: shapes.two_switch(4), "shortest"),
    "ring": (lambda: shapes.ring(5, 2), "shortest"),
    "director": (lambda: shapes.director(hosts_per_asic=2), "tree"),
    "split-ports": (lambda: shapes.with_split_ports(pgft(*SMALL), pgft(*SMALL).switches[:2]),
                    "tree"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_routes_every_pair(name: str) -> None:
    make, mode = SHAPES[name]
    f = make()
    r = route(f, workers=1)
    assert r.mode == mode, r.mode_reason
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    # an independent flow-by-flow trace: every end-port reaches every end-port
    assert pair_paths(routing_view(f, r.tables)).unroutable_pairs == 0
    assert unrouted_connected(r) == 0


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_summary_routing_and_analysis_agree(name: str) -> None:
    f = SHAPES[name][0]()
    roles = fabric_roles(f)
    s = summarize(f)
    sw = f.switches
    counts = np.bincount(roles.rank[sw][roles.rank[sw] >= 0])
    assert {lv.rank: lv.switches for lv in s.levels} == {
        i: int(c) for i, c in enumerate(counts) if c}
    r = route(f, workers=1)
    assert np.array_equal(routing_view(f, r.tables).sw_level, roles.rank[sw])
    if roles.tree:
        assert np.array_equal(r.graph.rank, roles.rank[sw])
    assert s.routing_mode == roles.mode


def test_aggregation_nodes_are_not_hosts_and_do_not_make_leaves() -> None:
    f = shapes.with_aggregation_nodes(pgft(*SMALL))
    roles = fabric_roles(f)
    agg = roles.endports(EndportRole.AGGREGATION)
    assert len(agg) == len(f.switches)  # one per switch, spines included
    assert (roles.reason[agg] > 0).all()
    assert not roles.hosts_mask[agg].any()
    sw = f.switches
    assert (roles.switch_role[sw] == SwitchRole.LEAF).sum() == 6  # not all 10 switches
    assert (roles.switch_role[sw] == SwitchRole.ROOT).sum() == 4
    assert len(roles.endports(EndportRole.COMPUTE)) == 24
    # the same without the description hint: recognised from the structure
    # (the switch's GUID but for the low byte, on the switch's last port)
    plain = dataclasses.replace(f, node_desc=tuple("CA" for _ in f.node_desc), _cache={})
    assert set(fabric_roles(plain).endports(EndportRole.AGGREGATION).tolist()) == set(
        agg.tolist())


def test_hosts_on_a_spine_are_service_hosts_reported_as_anomaly() -> None:
    f = _agg_spine_hosts()
    roles = fabric_roles(f)
    assert roles.tree
    svc = roles.endports(EndportRole.SERVICE, EndportRole.MANAGEMENT, EndportRole.STORAGE)
    assert len(svc) == 2 and (roles.rank[roles.attach[svc]] == 1).all()
    s = summarize(f)
    assert s.anomaly_count("hosts_on_non_leaf") == 1
    text = "\n".join(format_summary(s))
    assert "host on an upper switch" in text or "description names" in text
    assert "aggregation" in text


def test_self_loops_and_same_rank_links_are_reported_and_never_used() -> None:
    f = shapes.two_switch(3, parallel=1)
    ring = shapes.ring(4, 2)
    for fab in (f, ring):
        roles = fabric_roles(fab)
        assert not roles.tree and roles.why_not_tree
        assert len(roles.same_rank) > 0
        assert summarize(fab).anomaly_count("same_rank_links") == len(roles.same_rank)


def test_guid_file_format_and_errors() -> None:
    assert parse_guid_file("# roots\n0x0002c90300001234\n\n0x10  # trailing\n") == frozenset(
        {0x2C90300001234, 0x10})
    with pytest.raises(InputError, match=r"f:2: not a GUID"):
        parse_guid_file("0x1\nzzz\n", "f")


def test_cn_guid_file_makes_leaves_and_root_guid_file_sets_ranks(tmp_path: Path) -> None:
    f = _agg_spine_hosts()
    roles = fabric_roles(f)
    compute = roles.endports(EndportRole.COMPUTE)
    # compute nodes only on the first 3 leaves: the other leaves' hosts become service hosts
    leaf3 = roles.leaves[:3]
    cn = compute[np.isin(roles.attach[compute], leaf3)]
    ov = GuidOverrides(compute=frozenset(int(g) for g in f.node_guid[cn]))
    r2 = fabric_roles(f, ov)
    assert set(r2.endports(EndportRole.COMPUTE).tolist()) == set(cn.tolist())
    assert set(r2.leaves.tolist()) == set(leaf3.tolist())
    # roots: the spines; ranks count down from them
    spines = f.switches[roles.rank[f.switches] == 1]
    ro = fabric_roles(f, GuidOverrides(roots=frozenset(int(g) for g in f.node_guid[spines])))
    assert np.array_equal(ro.rank[f.switches], roles.rank[f.switches])
    assert (ro.switch_role[spines] == SwitchRole.ROOT).all()
    # through the CLI
    topo = tmp_path / "f.topo"
    write_topology(f, topo)
    gf = tmp_path / "cn.guids"
    gf.write_text("".join(f"{int(g):#018x}\n" for g in f.node_guid[cn]))
    out = tmp_path / "t.lfts"
    assert main(["route", str(topo), "-q", "--workers", "1", "--cn-guids", str(gf),
                 "--out", str(out)]) == 0
    assert main(["fabric", "summary", str(topo), "--cn-guids", str(gf)]) == 0
    bad = tmp_path / "bad.guids"
    bad.write_text("nope\n")
    assert main(["route", str(topo), "--root-guids", str(bad), "--out", str(out)]) == 2


def test_turn_routes_are_updown_in_one_orientation() -> None:
    """With aggregation nodes on the spines, the spine-to-spine pairs go
    through the turn root; every route is up*/down* in its orientation (the
    validation walk checks that orientation)."""
    f = shapes.with_aggregation_nodes(pgft(*SMALL))
    r = route(f, workers=1)
    assert r.mode == "tree+turns" and r.check_graph is not None and r.turn_lids == 4
    v = validate_result(r)
    assert v.ok and v.updown_violations == 0
    # the tree's own graph would see the turns as violations: the check is real
    from smroute.routing.validate import validate
    tree_view = validate(r.graph, r.tables.ports, r.dest, r.costs)
    assert tree_view.updown_violations > 0


def test_disconnected_pairs_are_not_routing_failures(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a = shapes.two_switch(2, parallel=1)
    sw = a.switches
    inter = np.flatnonzero(np.isin(a.port_node[a.link_a], sw) & np.isin(a.port_node[a.link_b], sw))
    cut = a.with_removed(links=inter)  # two islands
    r = route(cut, workers=1)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_disconnected == 2 * 2 * 2 and v.ca_pairs_unroutable == 0
    topo = tmp_path / "cut.topo"
    write_topology(cut, topo)
    assert main(["route", str(topo), "-q", "--workers", "1", "--out",
                 str(tmp_path / "t.lfts")]) == 0
    assert "physically disconnected" in capsys.readouterr().out
    # a dead end inside a component is a failure
    ports = r.tables.ports.copy()
    lid = int(r.graph.ep_lid[-1])
    ports[r.graph.ep_switch[-1], lid] = 0xFF
    from smroute.routing.validate import validate
    bad = validate(r.walk_graph, ports, r.dest, r.costs)
    assert not bad.ok and bad.dead_ends >= 1
    assert DEAD_END == 1


def test_daemon_refuses_tables_that_leave_connected_pairs_unrouted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from smroute.routing import api
    from smroute.routing.builtin import Dmodk
    from smroute.service.core import RoutingCore
    from smroute.service.errors import ServiceError
    from smroute.service.rpc.servicer import status_code

    class Offered(Dmodk):  # D-mod-K as if the daemon offered it
        name = "offered-dmodk"
        guarantees = dataclasses.replace(Dmodk.guarantees, lab_only=False)

    monkeypatch.setitem(api.REGISTRY, Offered.name, Offered())
    f, _ = degrade(pgft(3, [2, 2, 2], [1, 2, 2], [1, 1, 1]), np.random.default_rng(0), links=6)
    # precondition: D-mod-K (complete trees only) leaves pairs of this one unrouted
    assert validate_result(route(f, workers=1, algorithm="dmodk")).ca_pairs_unroutable > 0
    core = RoutingCore(workers=1, coalesce_s=0.0)
    try:
        core.load_fabric(f, "degraded")
        good = core.route("dmodc")
        with pytest.raises(ServiceError) as ei:
            core.route(Offered.name)
        assert status_code(ei.value)[0] == grpc.StatusCode.FAILED_PRECONDITION
        assert "refused to commit" in str(ei.value) and f"epoch {good.id} keeps serving" in str(
            ei.value)
        assert core.store.current is not None and core.store.current.id == good.id
        assert core.settings.algorithm == "dmodc"
    finally:
        core.close()


def _pods_with_cores(leaves_per_pod: list[int], svc_on_core: bool,
                     shared_storage: bool = False, on_cores: int = 0) -> Fabric:
    """Pods of leaves (8 hosts each) under 4 spines a pod, spine j of every
    pod cabled to core j; ``svc_on_core``: a storage switch with 4 hosts
    cabled to core 0 alone (2 cables); ``shared_storage``: two, each cabled
    to cores 0 and 1; ``on_cores``: that many more leaves of 8 hosts cabled
    to every core."""
    from smroute.fabric.generate.catalogue import core_tier
    from smroute.fabric.generate.sitegen import QUANTUM, Site

    site = Site()
    groups, n = [], 0
    for p, k in enumerate(leaves_per_pod):
        lv = site.switches([f"p{p}-leaf{i}" for i in range(k)], 40, QUANTUM)
        for x in lv:
            for _ in range(8):
                site.host(x, f"cn{n:03d} mlx5_0")
                n += 1
        groups.append(lv)
    spines = []
    for p, lv in enumerate(groups):
        sp = site.switches([f"p{p}-spine{j}" for j in range(4)], 40, QUANTUM)
        for x in lv:
            for s in sp:
                site.cable(x, s)
        spines.append(sp)
    cores = core_tier(site, spines, 1, 1, 40, QUANTUM, "MQM8790")
    if svc_on_core:
        svc = site.switch("stor-sw", 40, QUANTUM)
        for h in range(4):
            site.host(svc, f"stor-{h:02d} HCA-1")
        site.cable(svc, cores[0], 2)
    for k in range(on_cores):
        leaf = site.switch(f"core-leaf{k}", 40, QUANTUM)
        for _ in range(8):
            site.host(leaf, f"cn{n:03d} mlx5_0")
            n += 1
        for c in cores:
            site.cable(leaf, c)
    for k in range(2 if shared_storage else 0):
        svc = site.switch(f"stor-sw{k}", 40, QUANTUM)
        for h in range(4):
            site.host(svc, f"stor-{k}-{h:02d} HCA-1")
        site.cable(svc, cores[0])
        site.cable(svc, cores[1])
    return site.build(np.random.default_rng(3))


def test_a_leaf_cabled_to_a_core_alone_leaves_the_core_a_core() -> None:
    """A storage switch cabled to one core alone: the core stays at the
    cores' rank (not a spine's, one hop above the storage switch, which
    left it no up link from the spines), the storage switch is a leaf whose
    cables skip a rank, and the tree routes every pair up*/down*."""
    f = _pods_with_cores([4, 4, 4], svc_on_core=True)
    roles = fabric_roles(f)
    by_desc = {d: i for i, d in enumerate(f.node_desc)}
    cores = [by_desc[d] for d in f.node_desc if d.startswith("MF0;core-")]
    assert {int(roles.rank[c]) for c in cores} == {2}
    assert roles.rank[by_desc["stor-sw"]] == 0 and roles.tree
    r = route(f, workers=1)
    assert r.mode == "tree", r.mode_reason
    v = validate_result(r)
    assert v.ok and v.updown_violations == 0 and v.ca_pairs_unroutable == 0


@pytest.mark.parametrize("damaged", [False, True])
def test_leaves_cabled_to_shared_cores_rank_from_the_other_side(damaged: bool) -> None:
    """Two storage switches each cabled to the same two cores: no leaf
    hanging off upper switches alone (each core has two), and ranked from
    every leaf those cores share rank 1 with the spines (cables within a
    rank; the tree falls back).  The switches have two sides, the storage
    leaves on one, and ranked from the compute leaves every core reaches
    every host down, so the ranks come from those: every
    core stays at rank 2, the storage cables skip a rank, no cable joins
    two switches of one rank, and the tree routes every pair up*/down*,
    also with cables cut."""
    f = _pods_with_cores([4, 4, 4], svc_on_core=False, shared_storage=True)
    if damaged:
        f = degrade(f, np.random.default_rng(5), links=3)[0]
    roles = fabric_roles(f)
    cores = [i for i, d in enumerate(f.node_desc) if d.startswith("MF0;core-")]
    stor = [i for i, d in enumerate(f.node_desc) if d.startswith("stor-sw")]
    assert {int(roles.rank[c]) for c in cores} == {2} and {int(roles.rank[s]) for s in stor} == {0}
    assert len(roles.same_rank) == 0 and roles.tree
    assert {REASONS[roles.reason[s]].split(":")[0] for s in stor} == {
        "carries hosts, ranked apart from the other leaves"}
    r = route(f, workers=1)
    assert r.mode == "tree", r.mode_reason
    v = validate_result(r)
    assert v.ok and v.updown_violations == 0 and v.ca_pairs_unroutable == 0


def test_leaves_on_the_cores_rank_from_the_pods_whose_tops_reach_every_host() -> None:
    """Eight leaves cabled to every core beside two pods of three leaves
    (more hosts on the cores' leaves): ranked from those leaves the pods'
    spines would stand beside the cores, tops that reach their own pod
    only, and the pods no path up*/down* to each other; ranked from the
    pods' leaves every core reaches every host down.  The side whose tops
    reach the larger share of the hosts wins, not the one with more."""
    f = _pods_with_cores([3, 3], svc_on_core=False, on_cores=8)
    roles = fabric_roles(f)
    by_desc = {d: i for i, d in enumerate(f.node_desc)}
    spines = [i for d, i in by_desc.items() if "spine" in d]
    assert {int(roles.rank[s]) for s in spines} == {1} and roles.max_rank == 2
    assert {int(roles.rank[by_desc[f"core-leaf{k}"]]) for k in range(8)} == {0}
    r = route(f, workers=1)
    assert r.mode == "tree", r.mode_reason
    v = validate_result(r)
    assert v.ok and v.updown_violations == 0 and v.ca_pairs_unroutable == 0


def test_a_pod_of_one_leaf_keeps_its_spines_below_the_cores() -> None:
    """A leaf alone under its pod's spines is no leaf hanging off upper
    switches: ranked from the other leaves its spines would sit above the
    cores."""
    f = _pods_with_cores([4, 4, 1], svc_on_core=False)
    roles = fabric_roles(f)
    spines = [i for i, d in enumerate(f.node_desc) if d.startswith("p2-spine")]
    assert {int(roles.rank[s]) for s in spines} == {1}
    assert roles.max_rank == 2


def test_leaves_alone_on_their_directors_line_asics_all_rank_0() -> None:
    """Two directors of 36 line ASICs, 16 leaves cabled twice to each and 4
    to the first alone: round-robin, each of the 16 is the only leaf of its
    line ASICs, as if hanging off upper switches (a storage switch on a
    core).  Most hosts are on them, so no leaf is ranked apart: every leaf
    at rank 0, the line ASICs with leaves at 1, the spines at 2 (ranked from
    the 4 leaves, the 16 would sit below line ASICs two ranks up and the
    directors' other line ASICs above the spines)."""
    from smroute.fabric.generate.sitegen import CONNECTX6, QUANTUM, Site

    site = Site(speed="HDR", host_device=CONNECTX6)
    dirs = [site.director(f"core{k + 1}", "CS8500", line_asics=36, spine_asics=18, radix=36,
                          device=QUANTUM) for k in range(2)]
    leaves = site.switches([f"MF0;leaf{i:02d}:MQM/U1" for i in range(20)], 40, QUANTUM)
    for i, x in enumerate(leaves):
        for k in range(18):
            site.host(x, f"cn{i:02d}-{k:02d} mlx5_0")
        for d in dirs[:1] if i >= 16 else dirs:
            site.cable_director(x, d, 2)
    f = site.build(np.random.default_rng(2))
    roles = fabric_roles(f)
    sw = np.flatnonzero(f.node_type == NodeType.SWITCH)
    desc = np.asarray(f.node_desc, dtype=object)[sw]
    ranks = roles.rank[sw]
    leaf = np.char.startswith(desc.astype(str), "MF0;leaf")
    assert set(ranks[leaf].tolist()) == {0}
    assert not (roles.reason[sw[leaf]] == REASONS.index(
        "carries hosts, ranked apart from the other leaves: its cables skip ranks")).any()
    spine = np.char.find(desc.astype(str), "/S") >= 0
    assert set(ranks[spine].tolist()) == {2}
