"""Pictures: ``smroute fabric draw`` (smroute/fabric/export/draw.py, smroute/cli/draw_cmd.py)
on generated shapes, degraded trees and the real captures, and ``smroute analyze
--plot`` (smroute/analysis/plot.py)."""

from __future__ import annotations

import html
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from smroute.cli.main import main
from smroute.errors import InputError
from smroute.fabric.export.draw import ANOMALY_NAMES, Drawing, draw_fabric
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate import shapes
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric, require_switches
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.model.builder import FabricBuilder
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.routing.engine import route
from smroute.tables.formats import write_tables

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's dot is not installed (Debian package graphviz; scripts/setup.sh)")


def _svg_text(path: Path) -> str:
    """The words of an SVG (text elements, entities decoded)."""
    raw = path.read_text(encoding="utf-8")
    return html.unescape(" ".join(re.findall(r"<text[^>]*>([^<]*)</text>", raw)))


def _render(d: Drawing, tmp_path: Path, name: str) -> str:
    from smroute.cli.draw_cmd import render

    out = render(d, tmp_path / f"{name}.svg")
    return _svg_text(out)


def _check_structure(f: Fabric, d: Drawing) -> None:
    """Every switch in exactly one box; every switch cable on one edge; every
    compute host counted once."""
    members = np.concatenate([b.members for b in d.switch_boxes])
    assert np.array_equal(np.sort(members), f.switches)
    assert sum(b.count for b in d.switch_boxes) == len(f.switches)
    is_sw = f.node_type == NodeType.SWITCH
    sw_links = int((is_sw[f.port_node[f.link_a]] & is_sw[f.port_node[f.link_b]]).sum())
    assert sum(e.cables for e in d.edges if e.kind != "removed") == sw_links
    roles = fabric_roles(f)
    compute = int((roles.endport_role == EndportRole.COMPUTE).sum())
    assert sum(b.count for b in d.boxes if b.kind == "hosts") == compute
    ids = {b.id for b in d.boxes}
    assert all(e.tail in ids and e.head in ids for e in d.edges)
    assert {i for _, row in d.rows for i in row} == {
        b.id for b in d.boxes if b.kind in ("switches", "removed")}


def _agg_spine_hosts() -> Fabric:
    base = pgft(2, (4, 6), (1, 4), (1, 1))
    spine = int(base.switches[-1])
    return shapes.attach_cas(shapes.with_aggregation_nodes(base), [spine, spine],
                             ["ufm01 HCA-1", "storage-gw01 HCA-1"])


def _with_self_loop(f: Fabric, node: int, pa: int, pb: int) -> Fabric:
    b = FabricBuilder()
    keep = np.arange(f.n_nodes)
    b.add_node_arrays(f, keep)
    b.set_port_arrays(f, keep)
    b.add_links_rows(f.port_node[f.link_a], f.port_num[f.link_a],
                     f.port_node[f.link_b], f.port_num[f.link_b])
    b.add_link(node, pa, node, pb)
    return b.build()


# --------------------------------------------------------------------------- generated shapes
@needs_dot
def test_aggregation_nodes_and_hosts_on_a_spine(tmp_path: Path) -> None:
    f = _agg_spine_hosts()
    d = draw_fabric(f)
    _check_structure(f, d)
    # 6 identical leaves in one box; the spine with hosts apart from the other 3
    counts = sorted((b.rank, b.count) for b in d.switch_boxes)
    assert counts == [(0, 6), (1, 1), (1, 3)]
    assert d.anomalies == {"hosts_on_non_leaf": 1}
    svc = [b for b in d.boxes if b.kind == "service"]
    assert len(svc) == 1 and svc[0].anomalies == ("hosts_on_non_leaf",)
    text = _render(d, tmp_path, "agg")
    assert "hosts on a spine" in text and "ufm01 HCA-1" in text
    assert "6 × leaf" in text and "SHARP aggregation node on each" in text
    assert "4 hosts each" in text and "24 in all" in text


@needs_dot
def test_same_level_links_self_loops_and_directors(tmp_path: Path) -> None:
    for fab in (shapes.ring(4, 2), shapes.two_switch(3, parallel=2)):
        d = draw_fabric(fab)
        _check_structure(fab, d)
        assert d.anomalies["same_rank_links"] == len(fabric_roles(fab).same_rank)
        assert any(e.kind == "same_rank" for e in d.edges)
        text = _render(d, tmp_path, "ring")
        assert "same-level" in text and "not a tree" in text
    base = pgft(2, (4, 4), (1, 2), (1, 1), switch_ports=10)
    leaf = int(base.switches[0])
    looped = _with_self_loop(base, leaf, 9, 10)
    d = draw_fabric(looped)
    _check_structure(looped, d)
    assert d.anomalies["self_loops"] == 1
    loop = [e for e in d.edges if e.kind == "self_loop"]
    assert len(loop) == 1 and loop[0].tail == loop[0].head
    text = _render(d, tmp_path, "loop")
    assert "self-looped" in text and ANOMALY_NAMES["self_loops"] in text
    di = shapes.director(line_cards=6, spine_cards=3, hosts_per_asic=4)
    d = draw_fabric(di)
    _check_structure(di, d)
    assert len(d.switch_boxes) == 2 and d.n_nodes == 3
    assert "MF0;dir01:CS7500/L01/U1" in _render(d, tmp_path, "director")


@needs_dot
def test_degraded_tree_shows_removed_equipment_and_missing_links(tmp_path: Path) -> None:
    orig = pgft(2, (18, 36), (1, 18), (1, 1))
    f, rem = degrade(orig, np.random.default_rng(7), switches=2, links=5)
    d = draw_fabric(f, original=orig)
    _check_structure(f, d)
    assert d.anomalies["removed_switches"] == 2 and d.anomalies["removed_links"] == 5
    assert d.anomalies["missing_up_links"] > 0
    removed = [b for b in d.boxes if b.kind == "removed"]
    assert sum(b.count for b in removed) == 2
    assert set(np.concatenate([b.members for b in removed]).tolist()) == set(rem.nodes.tolist())
    lost = [e for e in d.edges if e.kind == "removed" and e.anomaly == "removed_links"]
    assert sum(e.cables for e in lost) == 5
    text = _render(d, tmp_path, "degraded")
    for word in ("removed switches: 2", "removed links: 5", "missing up-links", "removed leaf",
                 "had 18 switch cables, 18 hosts", "cut off"):
        assert word in text, word
    # without the original: only what the fabric itself shows
    plain = draw_fabric(f)
    assert "removed_switches" not in plain.anomalies and plain.anomalies["missing_up_links"]


def test_three_level_degraded_and_every_grouping_bound() -> None:
    orig = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    f, _ = degrade(orig, np.random.default_rng(3), switches=3, links=12)
    for mb in (1, 2, 4, 8, 100):
        d = draw_fabric(f, original=orig, max_boxes=mb)
        _check_structure(f, d)
        widest = max(sum(1 for b in d.switch_boxes if b.rank == r) for r, _ in d.rows)
        assert widest <= mb or d.grouping == "level"
    assert draw_fabric(f, max_boxes=100).grouping == "identical"


def test_a_1620_switch_tree_collapses_to_a_few_boxes_in_seconds(tmp_path: Path) -> None:
    f = pgft(3, (18, 18, 36), (1, 18, 18), (1, 1, 1))
    t = time.perf_counter()
    d = draw_fabric(f)
    took = time.perf_counter() - t
    assert took < 5, took
    _check_structure(f, d)
    assert len(f.switches) == 1620
    # 3 switch boxes (648 leaves, 648 middle, 324 top) and one hosts box
    assert sorted(b.count for b in d.switch_boxes) == [324, 648, 648]
    assert d.n_nodes == 4 and len(d.edges) == 2
    assert all(e.cables == 11664 for e in d.edges)
    leaf = next(b for b in d.switch_boxes if b.rank == 0)
    assert "36 groups of 18 with the same uplinks" in leaf.text
    assert "18 hosts each" in d.text and "11,664 in all" in d.text
    assert d.anomalies == {}
    if shutil.which("dot"):
        from smroute.cli.draw_cmd import render

        t = time.perf_counter()
        out = render(d, tmp_path / "big.png")
        assert time.perf_counter() - t < 10
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size < 200_000


# --------------------------------------------------------------------------- the command
@needs_dot
def test_cli_draw_svg_png_dot_and_bad_input(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    orig = pgft(2, (4, 8), (1, 4), (1, 1))
    f, _ = degrade(orig, np.random.default_rng(1), switches=1, links=2)
    o_topo, f_topo = tmp_path / "orig.topo", tmp_path / "deg.topo"
    write_topology(orig, o_topo)
    write_topology(f, f_topo)
    svg, png, dot = tmp_path / "d.svg", tmp_path / "d.png", tmp_path / "d.dot"
    assert main(["fabric", "draw", str(f_topo), "--out", str(svg), "--removed", str(o_topo)]) == 0
    out = capsys.readouterr().out
    assert "removed_switches 1" in out and "removed_links 2" in out
    text = _svg_text(svg)
    assert "deg.topo" in text and "removed switches: 1" in text and "removed links: 2" in text
    assert main(["fabric", "draw", str(f_topo), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["fabric", "draw", str(f_topo), "--out", str(dot), "--title", "T1"]) == 0
    assert dot.read_text().startswith("digraph") and "T1" in dot.read_text()
    capsys.readouterr()
    assert main(["fabric", "draw", str(f_topo), "--out", str(tmp_path / "d.jpg")]) == 2
    assert "expected a name ending in" in capsys.readouterr().err
    assert main(["fabric", "draw", str(tmp_path / "none.topo"), "--out", str(svg)]) == 2
    err = capsys.readouterr().err
    assert "none.topo" in err and "Traceback" not in err


# --------------------------------------------------------------------------- real captures
def _real_files() -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(p for p in REAL.iterdir() if p.is_file() and p.name != "README.md")


@pytest.mark.skipif(not REAL.is_dir(), reason=f"no real captures at {REAL}")
@pytest.mark.parametrize("path", _real_files(), ids=lambda p: p.name)
def test_real_captures(path: Path, tmp_path: Path) -> None:
    try:
        f = read_fabric(path)
        require_switches(f, str(path))
    except InputError:
        pytest.skip(f"{path.name} is bad input by design (see its README)")
    d = draw_fabric(f)
    _check_structure(f, d)
    assert max(sum(1 for b in d.switch_boxes if b.rank == r) for r, _ in d.rows) <= 8 or (
        d.grouping == "level")
    if shutil.which("dot"):
        text = _render(d, tmp_path, "real")
        for kind, n in d.anomalies.items():
            assert ANOMALY_NAMES[kind].split(" (")[0] in text, (kind, n)
        for b in d.boxes:
            assert b.lines[0].text in text


# --------------------------------------------------------------------------- analyze --plot
@pytest.fixture(scope="module")
def degraded_tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("plot")
    orig = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    f, _ = degrade(orig, np.random.default_rng(5), links=6)
    topo, lfts = d / "f.topo", d / "t.lfts"
    write_topology(f, topo)
    write_tables(route(f, workers=1).tables, lfts, "opensm")
    return topo, lfts


@pytest.mark.parametrize("pattern,order", [("sp", "topo"), ("a2a", "topo"), ("rp", "random"),
                                           ("cps:recursive-doubling", "random")])
def test_analyze_plot_names_the_hot_spots(
        degraded_tables: tuple[Path, Path], tmp_path: Path, pattern: str, order: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    from PIL import Image

    topo, lfts = degraded_tables
    png = tmp_path / "p.png"
    rc = main(["analyze", str(lfts), "--fabric", str(topo), "--pattern", pattern, "--order",
               order, "--samples", "40", "--orders", "3", "--plot", str(png), "--json",
               "--quiet"])
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert r["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    spots = r["hot_spots"]
    assert 1 <= len(spots) <= 6
    # the hottest port carries what the analysis reports (same flows, same permutations)
    top = spots[0]["value"]
    expect = {"sp": r.get("risk_max"), "a2a": r.get("congestion_risk"),
              "rp": r.get("risk_max")}.get(pattern)
    if expect is not None:
        assert top == expect
    else:
        assert top >= 1 and top <= r["hsd_max"]
    assert [s["value"] for s in spots] == sorted((s["value"] for s in spots), reverse=True)
    meta = Image.open(png).text
    desc = meta["Description"]
    assert "hot spots" in desc
    for s in spots:
        name = s["port"].split('" (')[0].lstrip('"')  # the egress switch's description
        assert name in desc and s["levels"] in desc
    assert "→" in spots[0]["levels"]


def test_analyze_plot_svg_and_bad_name(degraded_tables: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = degraded_tables
    svg = tmp_path / "p.svg"
    assert main(["analyze", str(lfts), "--fabric", str(topo), "--pattern", "sp", "--plot",
                 str(svg), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"plot                       {svg}" in out
    text = svg.read_text()
    assert "hot spots (SP congestion risk" in text and "leaf→r1" in text and "r1→leaf" in text
    assert main(["analyze", str(lfts), "--fabric", str(topo), "--pattern", "sp", "--plot",
                 str(tmp_path / "p.pdf")]) == 2
    assert "expected a file name ending in .png or .svg" in capsys.readouterr().err


def test_link_peaks_agree_with_the_stage_metrics(degraded_tables: tuple[Path, Path]) -> None:
    from smroute.analysis import congestion as cg
    from smroute.analysis.paths import pair_paths, routing_view
    from smroute.analysis.patterns import cps, shifts
    from smroute.analysis.plot import link_categories, link_peaks
    from smroute.tables.formats import read_tables

    topo, lfts = degraded_tables
    view = routing_view(read_fabric(topo), read_tables(lfts))
    paths = pair_paths(view)
    order = np.random.default_rng(2).permutation(view.n_endports)
    for pat in (shifts(len(order)), cps("binomial", len(order))):
        peak, at, smax = link_peaks(view, paths, pat, order)
        m = cg.evaluate(view, paths, pat, order)
        assert np.array_equal(smax, m.max_flows)
        assert int(peak.max()) == m.hsd_max
        assert (at[peak > 0] >= 0).all() and (at[peak == 0] == -1).all()
    cat, names = link_categories(view)
    assert names[0] == "hosts→leaf" and names[-1] == "leaf→hosts"
    assert names.index("leaf→r1") < names.index("r1→r2") < names.index("r2→r1")
    assert (cat >= 0).sum() == view.n_links
