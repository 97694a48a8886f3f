"""OpenSM's engines and Dmodc side by side on the real ibsim (no mocks).

One ibsim per fabric, the real OpenSM once per engine, the real
ibnetdiscover for Dmodc's view; the tables read back from every
``opensm-lfts.dump`` are analysed with the same flows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis.compare import CompareConfig
from smroute.analysis.paths import routing_view, trace
from smroute.errors import SmrouteError
from smroute.fabric.generate.trees import degrade, parse_tuple, pgft
from smroute.lab.sidebyside import ENGINES, _check_lids, run_side_by_side, sm_node
from smroute.routing import api
from smroute.routing.engine import route
from smroute.tables.lft import ForwardingTables

needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="the ibsim binary is not installed (Debian package ibsim-utils): "
    "these tests drive the real simulator and OpenSM",
)
CFG = CompareConfig(rp_samples=100, random_orders=1)
TREE3 = (3, (4, 4, 4), (1, 4, 4), (1, 1, 1))  # 64 hosts, 48 switches, non-blocking


@pytest.mark.real
@needs_ibsim
def test_all_engines_on_a_complete_three_level_tree(tmp_path: Path) -> None:
    f = pgft(*TREE3)
    r = run_side_by_side(f, tmp_path, np.random.default_rng(1), config=CFG)
    assert list(r.runs) == list(ENGINES)
    assert r.fabric is not None and len(r.fabric.cas) == 64
    assert r.order_kind == api.DEFAULT and len(r.order) == 64
    for e, run in r.runs.items():
        assert run.status == "ok", (e, run.error)
        assert run.routing_seconds is not None and run.routing_seconds >= 0
        assert run.tables is not None and run.tables.n_switches == 48
        m = r.metrics[e]
        assert m.hosts == 64
        assert m.unroutable == {"pairs": 0, "rp": 0, "sp": 0}
    v = {e: m.values for e, m in r.metrics.items()}
    # Dmodc and ftree (D-mod-K on a complete PGFT) are shift-optimal ...
    for e in ("dmodc", "ftree"):
        assert v[e]["sp"] == 1.0 and v[e]["hsd_topo_shift"] == 1.0 and v[e]["a2a"] == 4.0
    # ... min-hop style engines are not (their tables really are different)
    for e in ("updn", "minhop", "dfsssp", "sssp"):
        assert v[e]["sp"] > 1.0
    assert v["minhop"]["a2a"] > v["dmodc"]["a2a"]
    # OpenSM's files stay in the work directory, one directory per engine
    for e in ("ftree", "minhop"):
        assert (tmp_path / e / "dump" / "opensm-lfts.dump").is_file()
        assert "building routing with" in (tmp_path / e / "opensm.log").read_text()


@pytest.mark.real
@needs_ibsim
def test_failures_are_recorded_not_raised(tmp_path: Path) -> None:
    f = pgft(*TREE3)
    # remove the first CA's leaf: the SM must attach elsewhere, 4 hosts vanish
    first_ca = int(f.cas[0])
    leaf = int(f.port_node[f.port_peer[f.port_start[first_ca] + 1]])
    assert parse_tuple(f.node_desc[leaf])[0] == 1  # type: ignore[index]
    deg = f.with_removed(nodes=[leaf])
    assert sm_node(deg) != int(deg.cas[0])
    r = run_side_by_side(deg, tmp_path, np.random.default_rng(2), config=CFG,
                         engines=("dmodc", "ftree", "minhop"), opensm_timeout=120)
    assert r.fabric is not None and len(r.order) == 60
    assert r.runs["dmodc"].status == "ok" and r.runs["minhop"].status == "ok"
    # OpenSM's ftree gives up on this degraded tree and falls back to minhop:
    # that is a failure of ftree, not ftree's tables
    ft = r.runs["ftree"]
    assert ft.status == "failed" and "fell back" in ft.error and ft.tables is None
    assert "ftree" not in r.metrics and r.metrics["dmodc"].unroutable["pairs"] == 0

    # a timed-out OpenSM is a recorded timeout; as no SM assigned LIDs,
    # Dmodc (which routes the LIDs OpenSM assigned) fails too -- recorded
    r2 = run_side_by_side(pgft(2, (4, 8), (1, 4), (1, 1)), tmp_path / "t",
                          np.random.default_rng(3), config=CFG,
                          engines=("dmodc", "minhop"), opensm_timeout=0.001)
    assert r2.runs["minhop"].status == "timeout" and "timed out" in r2.runs["minhop"].error
    assert r2.runs["dmodc"].status == "failed" and "no LID" in r2.runs["dmodc"].error
    assert r2.metrics == {} and r2.error == "no engine produced tables"


@pytest.mark.real
@needs_ibsim
def test_heavily_degraded_fabric(tmp_path: Path) -> None:
    f = pgft(*TREE3)
    deg, _ = degrade(f, np.random.default_rng(5), links=60)
    r = run_side_by_side(deg, tmp_path, np.random.default_rng(4), config=CFG,
                         engines=("dmodc", "minhop", "sssp"))
    assert r.runs["minhop"].status == "ok"
    # whatever each engine does, the analysis counts what it could not deliver:
    # the ordered pairs a flow-by-flow trace through its tables does not deliver
    assert r.fabric is not None and set(r.metrics) == {"dmodc", "minhop", "sssp"}
    src, dst = (a.ravel() for a in np.meshgrid(r.order, r.order, indexing="ij"))
    pair = src != dst
    for e, m in r.metrics.items():
        t = r.runs[e].tables
        assert t is not None
        lost = int((~trace(routing_view(r.fabric, t), src[pair], dst[pair]).ok).sum())
        assert m.unroutable["pairs"] == lost, e
        assert m.values["a2a"] >= 1
    assert r.metrics["minhop"].unroutable["pairs"] == 0  # minhop routes any connected fabric


def test_unknown_engine(tmp_path: Path) -> None:
    with pytest.raises(SmrouteError, match="unknown engine"):
        run_side_by_side(pgft(*TREE3), tmp_path, np.random.default_rng(0), engines=("dor",))


def test_lid_check_names_the_switch() -> None:
    f = pgft(2, (4, 8), (1, 4), (1, 1))
    t = route(f, workers=1).tables
    assert _check_lids(t, f) == ""
    lids = t.switch_lid.copy()
    lids[2] += 1000
    bad = ForwardingTables(t.switch_guid, lids, t.switch_desc, t.ports)
    msg = _check_lids(bad, f)
    assert f"{int(t.switch_guid[2]):#018x}" in msg and "LIDs changed" in msg


def test_the_default_engine_gets_the_vls_the_others_one(tmp_path: Path) -> None:
    """The study's protocol: ``max_vls`` is the default engine's (Nmodc,
    detours over VLs where the tree has no path); Dmodc stays the paper's, on
    one VL. A damaged PGFT whose tree needs detours: Nmodc routes it over
    VLs, Dmodc orients it on one."""
    from smroute.study.degrade import parse_pgft, plan_throw

    th = plan_throw(parse_pgft("3;4,4,4;1,4,4;1,1,1").build(), "switch", 2026, 44)
    r = run_side_by_side(th.fabric, tmp_path, np.random.default_rng(1), config=CFG,
                         engines=("nmodc", "dmodc"), max_vls=4)
    assert api.DEFAULT == "nmodc"
    assert r.runs["nmodc"].note.startswith("tree+detours"), r.runs["nmodc"].note
    assert r.runs["dmodc"].note.startswith("tree+orient"), r.runs["dmodc"].note
