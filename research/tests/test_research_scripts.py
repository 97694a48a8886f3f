"""The investigation scripts of research/: each does what its report relies on."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from smroute.analysis.paths import OK, pair_paths, routing_view
from smroute.cli.main import main
from smroute.fabric.generate.trees import degrade
from smroute.routing.deadlock import check_credit_loops
from smroute.routing.engine import route, validate_result
from smroute.study.degrade import parse_pgft
from smroute.study.results import band_of, read_rows, write_rows

RESEARCH = Path(__file__).resolve().parent.parent
SMALL = "2;4,8;1,4;1,1"  # 32 hosts, 8 leaves, 4 spines, 32 leaf-spine links

needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="the ibsim binary is not installed (Debian package ibsim-utils): "
    "the small study drives the real simulator and OpenSM",
)


def load_script(name: str) -> ModuleType:
    """``research/<name>.py`` executed as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, RESEARCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


def test_uplink_floor_splits_evenly_and_counts_every_off_leaf_flow():
    """The floor's even split gives each leaf's cables its other end-ports in
    equal shares (±1), never its own; the loads are the flows leaving each
    leaf, counted per cable, as a direct count finds them."""
    floor = load_script("study_uplink_floor")
    rng = np.random.default_rng(5)
    ep_leaf = rng.integers(0, 4, size=23)
    cables = np.array([3, 0, 5, 2])
    split = floor.even_split(ep_leaf, cables, np.random.default_rng(1))
    first = np.cumsum(cables) - cables
    for leaf in range(4):
        row = split[leaf]
        assert (row[ep_leaf == leaf] == -1).all()
        if cables[leaf] == 0:
            assert (row == -1).all()
            continue
        off = row[ep_leaf != leaf]
        assert ((off >= first[leaf]) & (off < first[leaf] + cables[leaf])).all()
        n = np.bincount(off - first[leaf], minlength=cables[leaf])
        assert n.max() - n.min() <= 1
    got = floor.floor_loads(split, ep_leaf, int(cables.sum()), 4, np.random.default_rng(2))
    again = np.random.default_rng(2)
    for k in range(4):
        perm = again.permutation(len(ep_leaf))
        load = np.zeros(int(cables.sum()), dtype=np.int64)
        for i in range(len(ep_leaf)):
            if split[ep_leaf[i], perm[i]] >= 0:
                load[split[ep_leaf[i], perm[i]]] += 1
        assert got[k] == load.max()
    # a complete 2-level tree: 630 destinations per leaf over 18 cables, 35 each
    full = parse_pgft("2;18,36;1,18;1,1").build()
    g = route(full, workers=1, labels=False).graph
    sw = np.full(g.n_switches, -1)
    sw[g.leaves] = np.arange(len(g.leaves))
    even = floor.even_split(sw[g.ep_switch], np.full(len(g.leaves), 18), rng)
    assert (np.bincount(even[even >= 0]) == 35).all()


def test_nmodc_dev_reproduces_the_study_and_keeps_the_cached_rows(tmp_path: Path) -> None:
    """The development comparison reruns smroute's engines as the study does:
    Dmodc reproduces its cached rows (exit 0), the CSV's Nmodc rows stay
    beside the new ones as ``nmodc-csv`` with the same values; a changed
    cached Dmodc row is reported (exit 1)."""
    dev = load_script("study_nmodc_dev")
    study = ["study", "degrade", "--pgft", SMALL, "--mode", "link", "--throws", "3",
             "--seed", "5", "--engines", "dmodc,nmodc", "--rp-samples", "20",
             "--random-orders", "1", "--vls", "2", "--no-plots", "-q", "--out", str(tmp_path)]
    assert main(study) == 0
    csv_file = tmp_path / "study.csv"
    cached = read_rows(csv_file)
    out = tmp_path / "merged.csv"
    argv = ["study_nmodc_dev.py", "--csv", str(csv_file), "--seed", "5", "--rp-samples", "20",
            "--random-orders", "1", "--vls", "2", "--throws", "0-2", "--out", str(out)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.argv", argv)
        assert dev.main() == 0
    rows = read_rows(out)
    assert sorted(r["engine"] for r in rows) == sorted(["dmodc", "nmodc", "nmodc-csv"] * 3)
    for r in rows:
        want = next(c for c in cached if c["throw"] == r["throw"]
                    and c["engine"] == r["engine"].replace("-csv", ""))
        assert all(r[m] == want[m] for m in ("a2a", "rp", "sp", "hsd_topo", "hsd_random"))
    # a cached Dmodc row the rerun does not reproduce
    rows_off = [dict(r, a2a=float(r["a2a"]) + 1) if r["engine"] == "dmodc" and r["throw"] == 1
                else r for r in cached]
    new = [dict(r) for r in cached if r["throw"] == 1]
    merged, differ = dev.merged(rows_off, new)
    assert differ == [1]
    assert sorted(r["engine"] for r in merged if r["throw"] == 1) == ["dmodc", "nmodc",
                                                                       "nmodc-csv"]


@needs_ibsim
def test_hsd_precision_reruns_the_study_over_more_orders(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The precision check reruns a band's throws as the study does, OpenSM's
    engines included: over the study's own random orders it gives the CSV's
    rows exactly (exit 0); over more, the metrics that do not depend on the
    orders stay the CSV's and both verdicts are printed; a cached row it
    does not reproduce is reported (exit 1)."""
    prec = load_script("study_hsd_precision")
    study = ["study", "degrade", "--pgft", SMALL, "--mode", "link", "--throws", "2",
             "--seed", "5", "--engines", "dmodc,nmodc,updn", "--rp-samples", "20",
             "--random-orders", "2", "--vls", "2", "--no-plots", "-q",
             "--workdir", str(tmp_path / "work"), "--out", str(tmp_path)]
    assert main(study) == 0
    cached = read_rows(tmp_path / "study.csv")
    bands = ",".join(sorted({band_of(int(str(r["removed"]))) for r in cached}))

    def run(orders: int, csv_file: Path) -> tuple[int, list[dict[str, object]]]:
        out = tmp_path / f"orders{orders}.csv"
        argv = ["study_hsd_precision.py", "--csv", str(csv_file), "--mode", "link",
                "--seed", "5", "--bands", bands, "--engines", "nmodc,updn", "--vls", "2",
                "--rp-samples", "20", "--random-orders", str(orders), "--out", str(out)]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("sys.argv", argv)
            code = prec.main()
        return code, read_rows(out)

    def same(rows: list[dict[str, object]], metrics: tuple[str, ...]) -> bool:
        by = {(r["throw"], r["engine"]): r for r in cached}
        return all(str(r.get(m)) == str(by[(r["throw"], r["engine"])].get(m))
                   for r in rows for m in metrics)

    code, rows = run(2, tmp_path / "study.csv")
    assert code == 0
    assert sorted(str(r["engine"]) for r in rows) == sorted(["dmodc", "nmodc", "updn"] * 2)
    assert same(rows, ("a2a", "rp", "sp", "hsd_topo", "hsd_random"))
    code, rows = run(5, tmp_path / "study.csv")
    assert code == 0 and same(rows, ("a2a", "rp", "sp", "hsd_topo"))
    printed = capsys.readouterr().out
    assert "over the CSV's orders" in printed and "over 5 orders" in printed
    off = tmp_path / "off.csv"
    write_rows(off, [dict(r, a2a=float(str(r["a2a"])) + 1) if r["engine"] == "updn" else r
                     for r in cached])
    assert run(2, off)[0] == 1


def test_link_classes_count_entry_links_and_loads() -> None:
    """On a complete 2-level tree Dmodc's sources reach every destination
    through one spine (``entries`` 1); with a leaf-spine link removed the
    leaves' moduli differ and some destinations enter through several.  The
    classes are a leaf's up-links and a spine's down-links, each with the
    mean over the permutations of its largest direct count."""
    lc = load_script("study_link_classes")
    full = parse_pgft(SMALL).build()
    cut, _ = degrade(full, np.random.default_rng(1), links=1)
    for fab, one in ((full, True), (cut, False)):
        res = route(fab, workers=1, labels=False)
        view = routing_view(fab, res.tables)
        hosts = np.arange(view.n_endports, dtype=np.int64)
        loads, entries = lc.link_classes(fab, res.tables, hosts, np.random.default_rng(3), 4)
        assert (entries == 1.0) is one and entries >= 1.0
        # the same permutations counted directly, per class of link
        paths = pair_paths(view)
        lvl, nxt = view.sw_level, view.next_sw.reshape(-1, 256)
        rng, top = np.random.default_rng(3), {"0>1": 0.0, "1>0": 0.0}
        for _ in range(4):
            dst = hosts[rng.permutation(len(hosts))]
            count = np.zeros(paths.n_links, dtype=np.int64)
            for s, d in zip(hosts.tolist(), dst.tolist(), strict=True):
                row = view.ep_leaf_row[s] * paths.n_endports + d
                if s != d:
                    count[paths.links[row][paths.links[row] >= 0]] += 1
            best = {"0>1": 0, "1>0": 0}
            for sw, p in zip(*np.nonzero(view.link_of.reshape(-1, 256) >= 0), strict=True):
                if nxt[sw, p] >= 0:
                    c = f"{lvl[sw]}>{lvl[nxt[sw, p]]}"
                    best[c] = max(best[c], int(count[view.link_of.reshape(-1, 256)[sw, p]]))
            for c in top:
                top[c] += best[c] / 4
        assert loads == pytest.approx(top)


def test_catalogue_misses_lists_the_cells_above_the_best_and_the_timeouts() -> None:
    cm = load_script("catalogue_misses")

    def eng(name: str, sp: float, *, loops: bool = True, status: str = "ok") -> dict[str, Any]:
        per = {"sp": sp, "hsd": sp, "rp": sp}
        return {"engine": name, "status": status, "routing_seconds": 0.5, "wall_seconds": 3.0,
                "metrics": {"missing_needed": 0, "credit_loop_free": loops,
                            "sets": {"compute": {"a2a": sp, "guid": per, "name": per}}}}

    fabrics = [{"fabric": "f", "compute": 8, "cas": 10, "engines": [
        eng("smroute", 6), eng("smroute-vls", 3), eng("nue", 4), eng("dfsssp", 2, loops=False),
        {"engine": "lash", "status": "timeout", "wall_seconds": 900.0}]}]
    lines = cm.misses(fabrics)
    # one VL: 6 against nue's 4 in all 7 cells; VLs: 3 against dfsssp's 2
    assert sum("| one VL / best loop-free one-VL |" in ln for ln in lines) == 7
    assert ("| f | 8 | one VL / best loop-free one-VL | SP guid | 6 | 4 | nue | 1.50 | exact "
            "| yes |") in lines
    assert "| f | 8 | VLs / best of all | A2A | 3 | 2 | dfsssp | 1.50 | exact | yes |" in lines
    # rows without per-stage figures: RP and HSD cannot be tested and count
    assert ("| f | 8 | one VL / best loop-free one-VL | RP guid | 6 | 4 | nue | 1.50 | "
            "no stages: counted | yes |") in lines
    assert ("* one VL / best loop-free one-VL: 7 of 7 cells above the best (100%) (raw); "
            "7 significant misses (100%)") in lines
    row = cm.routing_times(fabrics)[2]
    assert "| 0.5 s (3 s) |" in row and "| timeout (900 s) |" in row and "| - |" in row


def test_merge_catalogue_keeps_the_header_and_the_last_row_of_a_fabric() -> None:
    mc = load_script("merge_catalogue")
    a = {"machine": "m", "mode": "catalogue", "engines": ["smroute", "nue"], "seed": 1,
         "fabrics": [{"fabric": "x", "v": 1}, {"fabric": "y", "v": 1}]}
    b = {"machine": "other", "mode": "catalogue", "engines": ["smroute", "lash"], "seed": 1,
         "fabrics": [{"fabric": "x", "v": 2}]}
    got = mc.merge([a, b])
    assert got["machine"] == "m" and got["engines"] == ["smroute", "nue", "lash"]
    assert got["fabrics"] == [{"fabric": "y", "v": 1}, {"fabric": "x", "v": 2}]
    with pytest.raises(ValueError):
        mc.merge([])


def test_unseen_sweep_builds_variants_and_reports_each_run(tmp_path: Path, capsys: Any,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The sweep's variants build as captures are written (the ibdiagnet
    dialect included, the file parses back to the same switches and CAs),
    and a run prints one line per variant: modes, exit codes, figures."""
    sw = load_script("unseen_sweep")
    from smroute.fabric.ibnetdiscover.parse import read_fabric

    names = {f"{v.family} {v.params}": v for v in sw.variants()}
    assert len(names) > 250
    v = names["dirs L16 h20 cs7500+cs8500 c4 line_svc2/1dir ibdiagnet"]
    assert v.dialect == "ibdiagnet"
    f = v.make()
    (tmp_path / "d.topo").write_text("\n".join(sw.format_ibdiagnet(f)) + "\n")
    back = read_fabric(tmp_path / "d.topo")
    assert (len(back.switches), len(back.cas)) == (len(f.switches), len(f.cas)) == (130, 452)
    lmc = names["lmc L10 h18 S6 c2 LMC 1"].make()
    ca_ports = lmc.port_lid[lmc.node_type[lmc.port_node] != 2]
    assert (ca_ports[ca_ports > 0] % 2 == 0).all()  # LMC 1: aligned base LIDs
    monkeypatch.setattr(sys, "argv", ["unseen_sweep", "--only", "single switch, 1 host"])
    assert sw.main() == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if "single switch" in ln]
    assert len(rows) == 1 and "| 1/1 | tree | 0 |" in rows[0] and "miss 0/0" in rows[0]


def test_hsd_topo_trade_hybrids_take_dmodc_entries_where_they_say() -> None:
    """On a 3-level tree that lost one L2 switch, ``intra`` is Nmodc's
    tables but for the damaged pod's leaves towards their own pod, and
    ``target`` but for every leaf towards the damaged pod's hosts: there
    Dmodc's entries, elsewhere Nmodc's; both deliver every pair (the
    metrics count no undelivered flow); ``intra`` is what Nmodc now routes
    itself.  The sign test is two-sided."""
    tr = load_script("study_hsd_topo_trade")
    assert tr.sign_p(0, 0) == 1.0 and tr.sign_p(3, 3) == 1.0
    assert tr.sign_p(10, 0) == pytest.approx(2 / 1024) and tr.sign_p(0, 10) == tr.sign_p(10, 0)
    full = parse_pgft("3;4,4,4;1,4,4;1,1,1").build()
    l2 = next(i for i, d in enumerate(full.node_desc) if d.startswith("pgft L2 1.2"))
    fab = full.with_removed(nodes=[l2])
    res = {a: route(fab, algorithm=a, workers=1, labels=False) for a in ("dmodc", "nmodc")}
    d, n = res["dmodc"].tables, res["nmodc"].tables
    hyb = tr.hybrids(fab, d, n)
    view = routing_view(fab, d)
    pod, damaged, _ = tr.leaf_facts(view)
    assert damaged.sum() == 4 and len(set(pod[damaged].tolist())) == 1
    leaf_row = np.searchsorted(view.leaves, view.ep_leaf)
    for name, src_ok, dst_ok in (
            ("intra", damaged, lambda i: (pod[leaf_row] == pod[i]) & (leaf_row != i)),
            ("target", np.ones(len(damaged), bool), lambda i: damaged[leaf_row] & (leaf_row != i))):
        for i, leaf in enumerate(view.leaves.tolist()):
            row = view.table_row[leaf]
            sel = dst_ok(i) if src_ok[i] else np.zeros(len(leaf_row), bool)
            lids = view.ep_lid
            assert (hyb[name].ports[row, lids[sel]] == d.ports[row, lids[sel]]).all()
            assert (hyb[name].ports[row, lids[~sel]] == n.ports[row, lids[~sel]]).all()
        upper = np.setdiff1d(np.arange(view.n_switches), view.leaves)
        rows = view.table_row[upper]
        assert (hyb[name].ports[rows] == n.ports[rows]).all()
        hv = routing_view(fab, hyb[name])
        assert (pair_paths(hv).status == OK).all()
    # Nmodc's own pod routes (routing/nmodc/pod_routes.py) are the intra hybrid
    assert np.array_equal(hyb["intra"].ports, n.ports)
    assert not np.array_equal(hyb["target"].ports, n.ports)


def test_turn_anchors_deliver_a_two_director_site_on_one_vl(tmp_path: Path, capsys: Any) -> None:
    """Storage on one CS7510's line ASICs beside another CS7510, 2 cables
    cut (the sweep's v178): tree+orient alone leaves needed pairs on one
    VL; with the anchored turns every needed pair is delivered and no
    credit loop is found."""
    sw, tc = load_script("unseen_sweep"), load_script("turn_anchors")
    v = {f"{v.family} {v.params}": v for v in sw.variants()}[
        "dirs-links L20 h[16, 14] cs7510+cs7510 c3 line_svc2/1dir -2 links seed1"]
    path = tmp_path / "v.topo"
    path.write_text("\n".join(sw.format_topology(v.make())) + "\n")
    tc.run(str(path))
    out = capsys.readouterr().out.split("v.topo ")[1:]
    assert len(out) == 3 and "INVALID" in out[0] and "no credit loop" in out[0]
    for run in out[1:]:
        assert "validation: valid" in run and "deadlock: no credit loop" in run, run


def test_what_the_orientation_leaves_is_searched_on_its_tables(monkeypatch: Any) -> None:
    """Three pods, storage on the two cores of one spine index, 15 cables
    cut (the sweep's v152): the turn switch most destinations share serves
    182 of them and the others are oriented one at a time on top; without
    that step the orientation serves most destinations, the ones it leaves
    are oriented again on top of its tables (backwards where no turn switch
    serves), and every needed pair is delivered on one VL, free of credit
    loops, either way."""
    from smroute.routing import orient

    sw = load_script("unseen_sweep")
    v = {f"{v.family} {v.params}": v for v in sw.variants()}[
        "3lvl-links pods[6, 5, 3] h18 S6 C2 cc1 core_svc2 -15 links seed1"]
    f = v.make()
    r = route(f, workers=1, labels=False)
    assert "through the one switch most of them may turn at" in r.mode_reason, r.mode_reason
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok
    monkeypatch.setattr(orient, "orient_shared", lambda *a, **k: None)
    r = route(f, workers=1, labels=False)
    assert "as the orientation left them" in r.mode_reason, r.mode_reason
    assert validate_result(r).ok and check_credit_loops(f, r.tables).ok


def test_the_guard_tries_each_table_set_once(monkeypatch: Any) -> None:
    """A director site one VL cannot serve (one cable from each leaf to
    each director, UFM on line ASICs: ``one_vl_stress.py 5 30``, variant
    5): the guard routes it again without the optional passes, last first.
    Without the last one the tables are those with every pass (it changed
    nothing), and the chain is not run on them again: two chains, each on
    other tables (three, the first twice, when the guard compared only with
    the tables it tried itself)."""
    import hashlib

    from smroute.routing import modes

    st = load_script("one_vl_stress")
    rng = np.random.default_rng(5)
    for _ in range(6):
        plan, _desc, links = st.variant(rng, "")
        seed = int(rng.integers(1, 100))
    f = st.build(plan, seed=seed, links=links)
    seen: list[str] = []
    real = modes.chain

    def spy(fabric: Any, roles: Any, engine: Any, prep: Any, ports: np.ndarray,
            *a: Any, **k: Any) -> Any:
        seen.append(hashlib.sha256(ports.tobytes()).hexdigest())
        return real(fabric, roles, engine, prep, ports, *a, **k)

    monkeypatch.setattr(modes, "chain", spy)
    r = route(f, workers=1, labels=False)
    assert not validate_result(r).ok
    assert len(seen) == 2 and len(set(seen)) == 2, seen


def test_one_vl_stress_reports_each_variant(capsys: Any) -> None:
    """Each drawn variant gets one line, ok or BAD with the validation's
    reason, and the count of BAD ones is what the run returns."""
    st = load_script("one_vl_stress")
    bad = st.run(7, 2)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[-1] == f"BAD: {bad} of 2"
    assert sum(" BAD " in line for line in lines[:2]) == bad
    assert all(("INVALID" in line) == (" BAD " in line) for line in lines[:2])
    for family in ("3lvl", "2lvl"):  # one family only
        bad = st.run(5, 2, family)
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[-1] == f"BAD: {bad} of 2"
        assert all(f" {family} " in line for line in lines[:2]), lines


def test_node_order_audit_reverses_the_nodes_and_compares_tables() -> None:
    """The audit's fabric lists the same nodes the other way round, and a
    site routes to the same tables in both orders."""
    audit = load_script("node_order_audit")
    from smroute.fabric.generate.catalogue import build_shape

    f = build_shape("edr-cs7520-200")
    g = audit.reversed_nodes(f)
    assert sorted(f.node_guid.tolist()) == sorted(g.node_guid.tolist())
    assert not np.array_equal(f.node_guid[f.switches], g.node_guid[g.switches])
    assert audit.verdict(f, 1) == "tree+turns: same"


def test_ab_metrics_compares_a_checkout_with_the_code_now(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: Any) -> None:
    """The same code on both sides: no fabric changes tables; a cell of
    paired samples carries its sign test."""
    ab = load_script("ab_metrics")
    topo = Path(__file__).resolve().parents[2] / "fixtures" / "director-is5100-g.topo"
    monkeypatch.setattr(sys, "argv", ["ab_metrics.py", "--before", str(ab.ROOT), "--perms", "20",
                                      "--orders", "2", str(topo)])
    ab.main()
    assert capsys.readouterr().out.strip() == "0 of 1 fabrics change tables"
    want = "HSD guid 1.667 -> 2.333 (p 0.5)"
    assert ab.cell("HSD guid", [1.0, 2.0, 2.0], [2.0, 2.0, 3.0]) == want
    assert ab.cell("A2A", [5], [6]) == "A2A 5 -> 6"


def test_dragonfly_plus_writes_each_variant_and_they_route(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variant is written as a capture that reads back; the one
    without aggregation nodes routes across on one VL."""
    dfp = load_script("dragonfly_plus")
    monkeypatch.setattr(sys, "argv", ["dragonfly_plus.py", str(tmp_path)])
    dfp.main()
    names = {p.stem for p in tmp_path.glob("*.topo")}
    assert names == set(dfp.VARIANTS)
    from smroute.fabric.ibnetdiscover.parse import read_fabric

    f = read_fabric(tmp_path / "dfp-spread-9g.topo")
    r = route(f, workers=1)
    assert r.mode == "tree+cross" and validate_result(r).ok
    assert check_credit_loops(f, r.tables).ok


def test_non_tree_writes_each_variant_and_the_direct_ones_route_shortest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variant is written as a capture that reads back; a torus
    routes over shortest paths, a tree with hosts on its tops up*/down*."""
    nt = load_script("non_tree")
    monkeypatch.setattr(sys, "argv", ["non_tree.py", str(tmp_path)])
    nt.main()
    assert {p.stem for p in tmp_path.glob("*.topo")} == set(nt.VARIANTS)
    from smroute.fabric.ibnetdiscover.parse import read_fabric

    for name, modes in (("torus-4x4", ("shortest",)),
                        ("pgft-tops", ("updown", "updown+orient"))):
        f = read_fabric(tmp_path / f"{name}.topo")
        r = route(f, workers=1)
        assert r.mode in modes and validate_result(r).ok, r.mode_reason
        assert check_credit_loops(f, r.tables).ok


def test_leaf_shortcuts_routes_the_two_ways(capsys: pytest.CaptureFixture[str]) -> None:
    ls = load_script("leaf_shortcuts")
    import smroute.routing.nmodc.shortcuts as product

    sys.argv = ["leaf_shortcuts.py", "--sweep", "1", "--seed", "1", "--summary"]
    ls.main()
    assert product.shortcut_leaves is ls._LEAVES
    out = capsys.readouterr().out
    changed = {w: int(out.split(f" {w}: ")[1].split("'changed': ")[1].split("}")[0])
               for w in ("off", "on")}
    assert changed["off"] == 0 and changed["on"] > 0
    assert "'left': 0, 'loop_free': True" in out and "hsd_name: on below off" in out


def test_merged_clusters_writes_each_site_and_the_first_ranks_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """30 sites written as captures that read back; on the first, cluster
    B's leaves rank apart below the tops (B's spines) and the default
    routes it whole on one VL (the aggregation nodes' turns oriented), free
    of credit loops."""
    mc = load_script("merged_clusters")
    monkeypatch.setattr(sys, "argv", ["merged_clusters.py", str(tmp_path)])
    assert mc.main() == 0
    files = sorted(tmp_path.glob("*.topo"))
    assert len(files) == len(mc.SIZES) * len(mc.CUTS) + len(mc.THREE_LEVEL) * 2 == 30
    from smroute.fabric.ibnetdiscover.parse import read_fabric
    from smroute.routing.nmodc.entries import apart_leaves

    f = read_fabric(tmp_path / "merged-8x4-6x3-j1-c1-cut0.topo")
    r = route(f, workers=1)
    names = {f.node_desc[int(r.graph.sw_node[s])] for s in apart_leaves(r.graph).tolist()}
    assert len(names) == 6 and all(";b-leaf" in n for n in names)
    assert r.mode.startswith("tree") and validate_result(r).ok
    assert check_credit_loops(f, r.tables).ok


def test_mixed_sites_writes_each_site_and_the_grown_spines_share_by_cables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """74 sites written as captures that read back; on the complete leaf/spine
    grown with twice-cabled spines every leaf shares by its cables, and
    the default routes it whole on one VL, free of credit loops."""
    ms = load_script("mixed_sites")
    monkeypatch.setattr(sys, "argv", ["mixed_sites.py", str(tmp_path)])
    assert ms.main() == 0
    files = sorted(tmp_path.glob("*.topo"))
    assert len(files) == 2 * len(ms.plans()) + (len(ms.MIXSPINE) + len(ms.MIXCORE)) * len(
        ms.MIXSPINE_CUTS) == 74
    from smroute.fabric.ibnetdiscover.parse import read_fabric
    from smroute.routing.nmodc.cables import structural_shares

    f = read_fabric(tmp_path / "mixspine-12l-16h-4o-2n2-cut0.topo")
    r = route(f, workers=1)
    assert structural_shares(r.graph)[r.graph.leaves].all()
    assert r.mode.startswith("tree") and validate_result(r).ok
    assert check_credit_loops(f, r.tables).ok
