"""bench/site_compare.py, the catalogue mode of bench/real_fabrics.py: which
pairs need a route, host orders, the table against the best engine, and one
real run on the smallest catalogue shape."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from script_module import BENCH, load_script

from smroute.fabric.generate.catalogue import build_shape
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, fabric_roles

site = load_script("site_compare", BENCH)
stg = sys.modules["site_stages"]


def test_aggregation_pairs_are_needed_only_between_adjacent_switches() -> None:
    f = with_aggregation_nodes(pgft(2, [4, 4], [1, 2], [1, 1]))
    roles = fabric_roles(f)
    ep = roles.endports()
    need = site.needed_mask(f, roles, ep)
    agg = roles.endport_role[ep] == EndportRole.AGGREGATION
    hosts = ~agg
    assert need[np.ix_(hosts, hosts)].sum() == hosts.sum() * (hosts.sum() - 1)
    assert need[np.ix_(agg, hosts)].all() and need[np.ix_(hosts, agg)].all()
    # 4 leaves, 2 spines: a spine's aggregation node needs the leaves' (adjacent), not
    # the other spine's; a leaf carries hosts, so its table routes every CA and its
    # aggregation node's pairs are needed too (the roles' rule, per switch)
    sw = roles.attach[ep[agg]]
    rank = roles.rank[sw]
    sub = need[np.ix_(agg, agg)]
    leaf, spine = rank == 0, rank == 1
    assert sub[np.ix_(leaf, spine)].all() and sub[np.ix_(spine, leaf)].all()
    assert sub[np.ix_(leaf, leaf)].sum() == leaf.sum() * (leaf.sum() - 1)
    assert not sub[np.ix_(spine, spine)].any()
    assert not need.diagonal().any()


def test_host_orders_by_guid_and_by_name_differ_on_a_catalogue_shape() -> None:
    f = build_shape("edr-cs7520-200")
    roles = fabric_roles(f)
    ep = roles.endports()
    rows = np.asarray([f.port_start[n] + 1 for n in ep])
    orders = site.host_orders(f, roles, ep, f.port_guid[rows])
    comp = orders["compute"]
    assert len(comp["guid"]) == len(roles.endports(EndportRole.COMPUTE))
    assert sorted(comp["guid"].tolist()) == sorted(comp["name"].tolist())
    assert not np.array_equal(comp["guid"], comp["name"])
    names = [f.node_desc[int(ep[i])] for i in comp["name"]]
    assert names == sorted(names)
    assert len(orders["cas"]["guid"]) == len(ep)
    g = f.port_guid[rows][orders["cas"]["guid"]]
    assert (g[1:] > g[:-1]).all()


def _e(name: str, sp: float, *, missing: int = 0, loops: bool = True,
       status: str = "ok") -> dict[str, Any]:
    per = {"sp": sp, "hsd": sp, "rp": sp}
    return {"engine": name, "status": status, "metrics": {
        "missing_needed": missing, "credit_loop_free": loops,
        "sets": {"compute": {"a2a": sp, "guid": per, "name": per}}}}


def test_against_best_takes_only_eligible_rivals() -> None:
    fabrics = [{"fabric": "a", "compute": 10, "engines": [
        _e("smroute", 4), _e("smroute-vls", 3), _e("updn", 5), _e("ftree", 1, missing=3),
        _e("nue", 2, loops=False), _e("dfsssp", 3, loops=False), _e("minhop", 2,
                                                                      status="failed")]}]
    lines, ok, total, _ = site.against_best(fabrics, "smroute", site.ONE_VL_ENGINES)
    # updn only: ftree misses pairs, nue has credit loops, dfsssp and minhop use VLs
    # or are no one-VL engine
    assert (ok, total) == (7, 7) and "4 <= 5 updn" in lines[2]
    lines, ok, total, _ = site.against_best(fabrics, "smroute", site.ONE_VL_ENGINES,
                                            loop_free=False)
    assert (ok, total) == (0, 7) and "4 > 2 nue" in lines[2]
    lines, ok, total, _ = site.against_best(fabrics, "smroute-vls", None)
    # every complete OpenSM engine: updn 5, nue 2 (loops do not matter here), dfsssp 3
    assert (ok, total) == (0, 7) and "3 > 2 nue" in lines[2]


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None or shutil.which("opensm") is None,
                    reason="needs the real ibsim and OpenSM")
def test_real_run_on_the_smallest_shape(tmp_path: Path) -> None:
    f = build_shape("edr-cs7520-200")
    r = site.run_fabric("edr-cs7520-200", f, tmp_path, engines=["smroute", "smroute-vls", "updn"],
                        vls=8, budget=120, seed=1, rp_samples=20, capture=None,
                        ibdmchk_max=1000 if shutil.which("ibdmchk") else 0)
    assert r["compute"] == 201 and r["aggregation"] == len(f.switches)
    eng = {e["engine"]: e for e in r["engines"]}
    for name in ("smroute", "smroute-vls", "updn"):
        m = eng[name]["metrics"]
        assert m["needed_pairs"] > 0 and m["missing_needed"] == 0, name
        assert m["credit_loop_free"], name
        assert set(m["sets"]) == {"compute", "cas"}
        assert m["sets"]["compute"]["hosts"] == 201
        # the per-stage figures the comparison pairs: one per permutation, one per shift
        rp, shifts = (stg.stages(eng[name], "compute", "name", k) for k in ("rp", "hsd"))
        assert rp is not None and len(rp) == 20 and np.median(rp) == eng[name][
            "metrics"]["sets"]["compute"]["name"]["rp"]
        assert shifts is not None and len(shifts) == 200
    assert f.node_type[0] == NodeType.SWITCH
    if shutil.which("ibdmchk"):
        assert eng["smroute"]["ibdmchk"] == "no credit loop"
        # updn leaves aggregation-node pairs on non-adjacent switches unrouted: ibdmchk
        # counts them as missing paths and stops before its loop check
        miss = eng["updn"]["metrics"]["missing_other"]
        assert eng["updn"]["ibdmchk"] == (f"{miss} missing paths" if miss else "no credit loop")
    md = site.fabric_markdown(r)
    assert md[0] == "#### edr-cs7520-200" and any(ln.startswith("| updn | ok |") for ln in md)


def test_ca_destinations_drop_only_switch_lids() -> None:
    from smroute.routing.engine import route
    from smroute.tables.lft import NO_ROUTE

    f = build_shape("edr-cs7520-200")
    t = route(f, workers=1, labels=False).tables
    ca = site.ca_destinations(f, t)
    sw_lids = f.port_lid[f.port_start[f.switches]].astype(np.int64)
    ca_lids = np.setdiff1d(np.flatnonzero(f.lid_to_port >= 0), sw_lids)
    ca_lids = ca_lids[ca_lids > 0]
    assert (np.asarray(ca.ports)[:, sw_lids] == NO_ROUTE).all()
    assert (np.asarray(t.ports)[:, sw_lids] != NO_ROUTE).any()
    assert np.array_equal(np.asarray(ca.ports)[:, ca_lids], np.asarray(t.ports)[:, ca_lids])


def test_opensm_cache_reuses_a_row_only_for_the_same_seed_samples_and_budget(
        tmp_path: Path) -> None:
    f = build_shape("edr-cs7520-200")
    key = site.fabric_key(f)
    cache = site.OpenSMCache(tmp_path, seed=1, rp_samples=20)
    assert cache.engine(key, "updn", 900) is None and cache.discovered(key) is None
    ok = {"engine": "updn", "status": "ok", "metrics": {"missing_needed": 0}}
    late = {"engine": "lash", "status": "timeout", "error": "timed out"}
    cache.put_engine(key, "updn", 300, ok)
    cache.put_engine(key, "lash", 300, late)
    assert cache.engine(key, "updn", 900) == ok  # a routed row holds whatever the budget
    assert cache.engine(key, "lash", 300) == late
    assert cache.engine(key, "lash", 900) is None  # a larger budget runs it again
    assert site.OpenSMCache(tmp_path, seed=2, rp_samples=20).engine(key, "updn", 900) is None
    assert site.OpenSMCache(tmp_path, seed=1, rp_samples=30).engine(key, "updn", 900) is None
    (tmp_path / f"{key}-nue.json").write_text("{not json")
    assert cache.engine(key, "nue", 900) is None


def test_fabric_key_follows_the_graph_and_the_host_names() -> None:
    f = build_shape("edr-cs7520-200")
    assert site.fabric_key(f) == site.fabric_key(build_shape("edr-cs7520-200"))
    renamed = f.node_desc.copy() if hasattr(f.node_desc, "copy") else list(f.node_desc)
    renamed[int(f.cas[0])] = "another host"
    g = dataclasses.replace(f, node_desc=renamed)
    assert site.fabric_key(g) != site.fabric_key(f)
    assert site.fabric_key(build_shape("ndr-dgx-h100-1su")) != site.fabric_key(f)


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None or shutil.which("opensm") is None,
                    reason="needs the real ibsim and OpenSM")
def test_a_cached_rerun_measures_only_smroutes_engines(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    f = build_shape("edr-cs7520-200")
    cache = site.OpenSMCache(tmp_path / "cache", seed=1, rp_samples=20)
    kw: dict[str, Any] = dict(engines=["smroute", "updn", "nue"], vls=8, budget=120, seed=1,
                              rp_samples=20, capture=None, ibdmchk_max=0)
    first = site.run_fabric("edr-cs7520-200", f, tmp_path / "a", cache=cache, **kw)
    key = site.fabric_key(f)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        f"{key}-fabric.json.gz", f"{key}-nue.json", f"{key}-updn.json"]

    def no_simulation(*a: Any, **k: Any) -> None:
        raise AssertionError("simulated although every OpenSM engine is cached")

    monkeypatch.setattr(site, "simulate", no_simulation)
    again = site.run_fabric("edr-cs7520-200", f, tmp_path / "b", cache=cache,
                            **{**kw, "engines": ["smroute", "smroute-vls", "updn", "nue"]})
    assert [e["engine"] for e in again["engines"]] == ["smroute", "smroute-vls", "updn", "nue"]
    one, two = ({e["engine"]: e for e in r["engines"]} for r in (first, again))
    for name in ("updn", "nue"):
        assert two[name] == one[name]
    # smroute routed the cached discovered fabric: the same tables' metrics as on ibsim's
    assert two["smroute"]["metrics"] == one["smroute"]["metrics"]
    assert two["smroute-vls"]["metrics"]["missing_needed"] == 0
    assert again["compute"] == first["compute"] and again["net_source"] == first["net_source"]
    disc, facts = cache.discovered(key) or (None, {})
    assert disc is not None and len(disc.cas) == len(f.cas) and facts["net_source"] == "written"
    # an engine not cached yet is simulated (and refused here)
    with pytest.raises(AssertionError, match="simulated although"):
        site.run_fabric("edr-cs7520-200", f, tmp_path / "c", cache=cache,
                        **{**kw, "engines": ["smroute", "dnup"]})
