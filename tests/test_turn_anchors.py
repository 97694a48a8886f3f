"""One VL on a site with UFM and storage on a director's line ASICs beside
another director (:mod:`smroute.routing.turn_anchors`): where
``tree+orient`` leaves needed pairs, the service hosts' switches turn at
their anchors, whose cables carry no transit, and every needed pair is
delivered free of credit loops (the channel-dependency check; ``ibdmchk``
finds the paths)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.fabric.export.writers import format_topology
from smroute.fabric.generate.catalogue import build_shape, core_tier, director_site
from smroute.fabric.generate.shapes import attach_cas, with_aggregation_nodes
from smroute.fabric.generate.sitegen import CONNECTX6, QUANTUM, SWITCHIB, Site
from smroute.fabric.generate.trees import degrade
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.routing import modes, orient, turn_anchors
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import route, validate_result
from smroute.routing.reroute import reroute


def two_directors(cut: int = 2, seed: int = 1, both: bool = False,
                  island: bool = False) -> Fabric:
    """20 leaves of 16 or 14 hosts, each cabled 3 times to each of two
    CS7510-like directors (18 line and 9 spine ASICs of 36 ports), UFM and
    storage on two line ASICs of the first (``both``: and storage on one of
    the second), an aggregation node on every switch, ``cut`` random switch
    links removed; ``island``: a management switch with two hosts hangs
    above the first leaf (two cables, nothing above it)."""
    site = Site(speed="EDR", host_device=CONNECTX6)
    leaves = site.switches([f"MF0;leaf{i + 1:03d}:MQM/U1" for i in range(20)], 36, SWITCHIB)
    for i, leaf in enumerate(leaves):
        for k in range(16 if i % 2 == 0 else 14):
            site.host(leaf, f"cn{i:02d}{k:02d} mlx5_0")
    dirs = [site.director(f"core{k + 1}", "CS7510", line_asics=18, spine_asics=9, radix=36,
                          device=SWITCHIB) for k in range(2)]
    for leaf in leaves:
        for d in dirs:
            site.cable_director(leaf, d, 3)
    if island:
        mgmt = site.switch("MF0;mgmt-sw01:MQM/U1", 36, SWITCHIB)
        site.cable(leaves[0], mgmt, 2)
        for k in range(2):
            site.host(mgmt, f"mgmt-{k + 1:02d} HCA-1")
    f = site.build(np.random.default_rng(seed))
    lines = dirs[0].line
    f = attach_cas(f, [lines[1], lines[6]], ["ufm-01 HCA-1", "stor-02 HCA-1"])
    if both:
        f = attach_cas(f, [dirs[1].line[3]], ["stor-03 HCA-1"])
    f = with_aggregation_nodes(f)
    return degrade(f, np.random.default_rng(1000 + seed), links=cut)[0] if cut else f


ANCHORED = "turns at one lower neighbour each"


def delivered_on_one_vl(f: Fabric, mode: str, phrase: str = "") -> None:
    """``f`` routed on one VL in ``mode`` (its reason naming ``phrase``):
    every needed pair delivered, no credit loop."""
    r = route(f, workers=1, labels=False)
    assert r.mode == mode, r.mode_reason
    assert phrase in r.mode_reason
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    assert check_credit_loops(f, r.tables).ok


def test_anchors_deliver_what_tree_orient_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    f = two_directors()
    delivered_on_one_vl(f, "tree+orient", ANCHORED)
    # without them, the same chain leaves needed pairs
    monkeypatch.setattr(modes, "anchor_turns", lambda *a: 0)
    before = route(f, workers=1, labels=False)
    assert "no orientation serves" in before.mode_reason
    assert not validate_result(before).ok


def anchor_cables(r: object) -> list[tuple[int, int]]:
    """The (anchored switch, anchor) pairs of a routing ``r``."""
    g, dest = r.graph, r.dest  # type: ignore[attr-defined]
    xs = turn_anchors.service_switches(g, dest, modes.turn_destinations(g, r.costs, dest))  # type: ignore[attr-defined]
    _, a = turn_anchors.anchors(g, xs)
    return [(int(x), int(y)) for x, y in zip(xs, a, strict=True) if y >= 0]


@pytest.mark.parametrize("site", ["one", "both", "island"])
def test_the_anchor_cables_carry_no_transit(site: str) -> None:
    """Up the cables from an anchor to its switch go only the entries that
    end at that switch's end-ports; no other switch routes through it on to
    the anchor (so no chain of dependencies passes either cable); the
    other routes stay minimal."""
    f = two_directors(both=site == "both", island=site == "island")
    r = route(f, workers=1, labels=False)
    assert ANCHORED in r.mode_reason
    g, dest, p = r.graph, r.dest, r.tables.ports
    port_sw, port_to, _ = g.cables()
    pairs = anchor_cables(r)
    assert len(pairs) == {"one": 2, "both": 3, "island": 3}[site]
    for x, a in pairs:
        up = g.grp_ports[(port_sw == a) & (port_to == x)]
        down = g.grp_ports[(port_sw == x) & (port_to == a)]
        assert (dest.target[np.isin(p[a, dest.lid], up)] == x).all()
        leave = np.isin(p[x, dest.lid], down)
        for w in np.unique(port_to[port_sw == x]).tolist():
            into = g.grp_ports[(port_sw == w) & (port_to == x)]
            assert not np.isin(p[w, dest.lid[leave]], into).any(), (x, a, w)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    assert v.non_minimal == 0
    assert check_credit_loops(f, r.tables).ok


def test_a_site_tree_orient_serves_keeps_its_tables() -> None:
    """Where ``tree+orient`` serves every needed pair (storage on the line
    ASICs of a degraded director site), no switch is anchored: it would only
    cost the compute hosts."""
    f = director_site(spine_hosts=0, line_hosts=4, remove_links=20, seed=0)
    r = route(f, workers=1, labels=False)
    assert r.mode == "tree+orient", r.mode_reason
    assert ANCHORED not in r.mode_reason
    assert validate_result(r).ok


def test_the_one_at_a_time_orientation_runs_only_where_the_anchors_fail(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain's order: the destinations through their turn switches all
    at once, then the anchors on the tree's tables, then those of the most
    shared turn switch at once with the others one at a time on top, then
    one destination at a time.  Where the anchors serve, the one-at-a-time search (seconds on a
    large site, its result dropped for the anchors' anyway) is not run; the
    tables are those the search-first order gave; where the all-at-once
    orientation serves, no anchor is tried (it routes the compute hosts
    better)."""
    f = two_directors()
    first = route(f, workers=1, labels=False).tables.ports
    calls: list[str] = []
    one_by_one, anchor = orient.orient_one_by_one, modes.anchor_turns

    def spy_one(*a: object, **k: object) -> object:
        calls.append("one by one")
        return one_by_one(*a, **k)  # type: ignore[arg-type]

    def spy_anchor(*a: object) -> int:
        calls.append("anchors")
        return anchor(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(orient, "orient_one_by_one", spy_one)
    monkeypatch.setattr(modes, "anchor_turns", spy_anchor)
    r = route(f, workers=1, labels=False)
    assert calls == ["anchors"] and ANCHORED in r.mode_reason
    assert np.array_equal(r.tables.ports, first)
    calls.clear()  # where the anchors fail, one at a time
    each = route(director_site(spine_hosts=0, line_hosts=4, remove_links=20, seed=1),
                 workers=1, labels=False)
    assert calls[:2] == ["anchors", "one by one"] and "each destination's" in each.mode_reason
    calls.clear()
    whole = route(build_shape("hdr-cs8500-core-island-900"), workers=1, labels=False)
    assert whole.mode == "tree+orient" and not calls, (calls, whole.mode_reason)


def test_the_undamaged_site_needs_them_too() -> None:
    """The same two directors with no cable cut need the anchors too."""
    r = route(two_directors(cut=0), workers=1, labels=False)
    assert ANCHORED in r.mode_reason
    assert validate_result(r).ok


def test_a_cable_cut_is_rerouted_through_the_anchors() -> None:
    """The daemon's reroute after a cable cut on such a site routes it in
    full again (mode ``tree+orient``), through the anchors of the changed
    tree, every needed pair delivered free of credit loops."""
    f = two_directors(cut=0, both=True)
    prev = route(f, workers=1, labels=False)
    assert ANCHORED in prev.mode_reason
    cut, _ = degrade(f, np.random.default_rng(7), links=1)
    out = reroute(prev, cut, lmc=None)
    assert not out.incremental and ANCHORED in out.result.mode_reason
    v = validate_result(out.result)
    assert v.ok and v.ca_pairs_unroutable == 0, v.summary()
    assert check_credit_loops(cut, out.result.tables).ok


def storage_on_cores(cut: int = 0, seed: int = 0, one_pod: bool = False) -> Fabric:
    """Two pods of 8 leaves (20 or 18 hosts) under 8 pod spines, spine
    ``j`` of each pod cabled to core ``j``; storage on the first four cores
    (``one_pod``: those cabled to pod 1's spines only, so they rank as
    leaves and the pod-1 spines under them have nothing above), an
    aggregation node on every switch; ``cut`` random switch links removed
    (``seed``)."""
    site = Site(speed="HDR", host_device=CONNECTX6)
    spines = []
    for p, hosts in ((1, 20), (2, 18)):
        leaves = site.switches([f"MF0;p{p}-leaf{i + 1:02d}:MQM/U1" for i in range(8)], 40,
                               QUANTUM)
        for i, leaf in enumerate(leaves):
            for k in range(hosts):
                site.host(leaf, f"p{p}n{i:02d}{k:02d} mlx5_0")
        pod = site.switches([f"MF0;p{p}-spine{j + 1:02d}:MQM/U1" for j in range(8)], 40, QUANTUM)
        for leaf in leaves:
            for sp in pod:
                site.cable(leaf, sp)
        spines.append(pod)
    if one_pod:
        spines[1] = spines[1][4:]
        cores = core_tier(site, [spines[0][:4]], 1, 1, 40, QUANTUM, "MQM")
        core_tier(site, [spines[0][4:], spines[1]], 1, 1, 40, QUANTUM, "MQX")
    else:
        cores = core_tier(site, spines, 1, 1, 40, QUANTUM, "MQM")
    f = site.build(np.random.default_rng(1))
    f = attach_cas(f, cores[:4], [f"stor-{k + 1:02d} HCA-1" for k in range(4)])
    f = with_aggregation_nodes(f)
    return degrade(f, np.random.default_rng(seed), links=cut)[0] if cut else f


def test_storage_on_cores_of_two_pods_ranks_them_as_cores() -> None:
    """A core with storage shares one spine with each leaf (half of its
    switch neighbours): an upper switch, not a leaf. The tree then routes
    through one turn root, every needed pair delivered, free of credit
    loops, on one VL."""
    f = storage_on_cores()
    roles = fabric_roles(f)
    cores = [i for i, d in enumerate(f.node_desc) if d.startswith("MF0;core-")]
    assert (roles.rank[cores] == roles.max_rank).all()
    stor = roles.endport_role[[i for i, d in enumerate(f.node_desc) if d.startswith("stor-")]]
    assert (stor == EndportRole.STORAGE).all()
    delivered_on_one_vl(f, "tree+turns")


def test_what_the_anchors_leave_is_searched_on_their_tables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Storage switches under pod 1's spines only (they rank as leaves; the
    spines under them have nothing above): the orientation leaves the
    aggregation nodes of the pod-2 spines with no core, the anchors on its
    tables leave a few pairs (two turns: a storage switch down to a leaf and
    up, across, down to a leaf and up); only those destinations are then
    oriented again on top of the anchors' tables, backwards where no turn
    switch serves, and every needed pair is delivered, free of credit loops.
    Without the anchors' tables as the base it is not."""
    f = storage_on_cores(one_pod=True)
    delivered_on_one_vl(f, "tree+orient", "as the anchors left them")
    real = modes.anchor_turns
    monkeypatch.setattr(modes, "anchor_turns", lambda *a: real(*a) if not a[-1] else 0)
    assert not validate_result(route(f, workers=1, labels=False)).ok


def test_damaged_storage_on_cores_is_delivered_backwards(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With two cables cut, neither the orientation nor the anchors serve
    every needed pair (some sources need two turns: a storage core down to
    a leaf and up again, then down to another leaf and up to a pod spine
    with nothing above); the last resort routes the destinations no turn
    switch serves backwards from the switches with a path, cable by cable,
    and every needed pair is delivered, free of credit loops. Without that
    search it is not."""
    f = storage_on_cores(cut=2, seed=4)
    delivered_on_one_vl(f, "tree+orient", "backwards from the switches with a path")
    monkeypatch.setattr(orient, "search_turns", lambda *a: False)
    before = route(f, workers=1, labels=False)
    assert not validate_result(before).ok


def test_route_command_route_all_ca_pairs(tmp_path: Path) -> None:
    """``smroute route``: the default reports the aggregation-node pairs no
    traffic needs; ``--route-all-ca-pairs`` needs them too (then routed)."""
    import subprocess
    import sys

    from smroute.fabric.export.writers import write_topology

    topo = tmp_path / "dir.topo"
    write_topology(two_directors(), topo)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "smroute", "route", str(topo), "-q",
                               "--workers", "1", "--out", str(tmp_path / "t.lft"), *args],
                              capture_output=True, text=True, timeout=300)

    p = run()
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mode:       tree+orient" in p.stdout
    assert "no traffic needs them" in p.stdout
    assert "deadlock:   no credit loop" in p.stdout and "on 1 VLs" in p.stdout
    p = run("--route-all-ca-pairs")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no traffic needs them" not in p.stdout and "valid:" in p.stdout


def test_route_names_the_vls_where_one_vl_leaves_pairs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Where one VL leaves needed pairs (the damaged site without the
    backwards search), ``smroute route`` exits 1, writes nothing and says
    that detours over VLs may deliver them; with ``--vls 2`` they do."""
    from smroute.cli.main import main
    from smroute.fabric.export.writers import write_topology

    topo = tmp_path / "site.topo"
    write_topology(storage_on_cores(cut=2, seed=4), topo)
    out = tmp_path / "site.lft"
    monkeypatch.setattr(orient, "search_turns", lambda *a: False)
    assert main(["route", str(topo), "--out", str(out), "--workers", "1"]) == 1
    text = capsys.readouterr().out
    assert "hint:       on one VL no orientation serves" in text and "--vls 2" in text
    assert not out.exists()
    assert main(["route", str(topo), "--out", str(out), "--workers", "1", "--vls", "2",
                 "--lanes-out", str(tmp_path / "site.lanes")]) == 0
    assert out.exists() and "hint:" not in capsys.readouterr().out


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="ibdmchk (Debian package ibutils) is not installed")
def test_ibdmchk_finds_the_needed_paths(tmp_path: Path) -> None:
    """ibutils' ibdmchk on those tables (one VL) finds every path but those
    between aggregation nodes on switches not adjacent (no traffic needs
    them; one VL cannot carry them). ibdmchk looks for credit loops only
    where every CA pair has a path: the loop check here is smroute's, which
    agrees with ibdmchk on one VL (test_detours)."""
    from smroute.cli.route_cmd import hop_table
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import write_tables

    f = two_directors()
    r = route(f, workers=1)
    v = validate_result(r)
    assert v.ok and v.ca_pairs_unneeded > 0
    fdbs = tmp_path / "opensm.fdbs"
    write_tables(r.tables, fdbs, "fdbs", fabric=f, hops=hop_table(r))
    rep = run_ibdmchk(fdbs, fdbs.with_name("opensm-subnet.lst"), timeout=600)
    assert rep.missing_paths == v.ca_pairs_unneeded, rep.stdout[-2000:]
    assert check_credit_loops(f, r.tables).ok


def in_reverse_node_order(f: Fabric) -> Fabric:
    """``f`` as a capture listing its nodes the other way round (as
    ibnetdiscover lists what it found: breadth first from the SM)."""
    head, *blocks = "\n".join(format_topology(f)).split("\n\n")
    g = parse_topology("\n\n".join([head, *reversed(blocks)]))
    assert not np.array_equal(f.node_guid[f.switches], g.node_guid[g.switches])
    return g


def test_the_anchors_do_not_follow_the_node_order() -> None:
    """The same cabling in another node order: the same anchors, the same
    tables.  The management switch above the first leaf has no choice of
    anchor and chooses first; in the order of switch ids a line ASIC could
    take that leaf before it, leaving it two anchors."""
    f = two_directors(cut=0, island=True)
    got = []
    for fab in (f, in_reverse_node_order(f)):
        r = route(fab, workers=1, labels=False)
        assert ANCHORED in r.mode_reason
        assert validate_result(r).ok
        got.append(r.tables.ports[np.argsort(r.tables.switch_guid)])
    assert np.array_equal(got[0], got[1])


def test_the_one_at_a_time_orientation_reports_its_progress(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Orienting destinations one at a time can take minutes on a large
    site: ``route``'s ``progress`` hears each destination tried, and
    ``smroute route`` shows it on stderr (one line per update at most every
    10 s in a log, and the last); here it leaves needed pairs, which exits 1
    (no table written) after the same progress."""
    f = director_site(spine_hosts=0, line_hosts=4, remove_links=20, seed=1)
    heard: list[tuple[str, int, int]] = []
    r = route(f, workers=1, labels=False,
              progress=lambda label, done, total: heard.append((label, done, total)))
    assert "each destination's" in r.mode_reason
    one = [(d, t) for label, d, t in heard if label == "orienting destination LIDs one at a time"]
    assert one and one[0][0] == 0 and one[-1][0] == one[-1][1] > 0
    assert all(b[0] >= a[0] or b[0] == 0 for a, b in zip(one, one[1:], strict=False))
    topo = tmp_path / "site.topo"
    topo.write_text("\n".join(format_topology(f)) + "\n")
    from smroute.cli.main import main

    assert main(["route", str(topo), "--out", str(tmp_path / "t.lfts")]) == 1
    assert not (tmp_path / "t.lfts").exists()
    err = capsys.readouterr().err
    total = one[-1][1]
    assert f"orienting destination LIDs one at a time: {total}/{total} (100%)" in err, err
