"""Every real fabric capture routes correctly, checked against the real tools.

The captures are public ``ibnetdiscover`` output kept in
``../shared/fabrics/real`` (beside the checkout; its README says what each one
exercises).  They are read there, never copied into the project; the tests
skip, saying why, when the folder is absent.

Per capture: ``smroute fabric summary`` and ``smroute route`` exit as the
README expects (0, or 2/3 with a message for the files that are no routable
topology) and never print a traceback; the tables deliver every CA-to-CA pair
that cables join (our validation walk *and* an independent flow-by-flow trace
of the analysis module agree), switch LIDs stay up*/down*; summary, routing
and analysis agree on the roles; ``ibdmchk`` finds no credit loop; and the
real OpenSM's ``file`` engine loads the tables under ibsim, ``dump_fts``
reading back exactly them.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis.paths import pair_paths, routing_view
from smroute.cli.inputs import load_fabric
from smroute.cli.main import main
from smroute.cli.route_cmd import hop_table
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.fabric.summary import summarize
from smroute.routing.engine import RoutingResult, route, validate_result

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
REAL_FILES = sorted(p.name for p in REAL.glob("*") if p.is_file() and p.name != "README.md")
#: The captures that are no routable topology, and the exit codes allowed.
NOT_ROUTABLE = {
    "NVIDIA-topograph-example-bad.out": (2, 3),  # one CA, no switch
    "HyungKwang-My-Programing-Topo.8_-invalid_lid_Null.txt": (2,),  # a blanked LID
}
ROUTABLE = [n for n in REAL_FILES if n not in NOT_ROUTABLE]
#: Captures that are no tree: routed by the general up*/down* fallback, said so.
NO_TREE = {"jabl-ibtopotool-1.topo", "jabl-ibtopotool-3.topo",
           "Mellanox-ufm_sdk_3.0-small_topo_file"}

pytestmark = pytest.mark.skipif(
    not REAL_FILES, reason=f"real captures not found at {REAL} (../shared beside the checkout)")

_routed: dict[str, tuple[Fabric, RoutingResult]] = {}


def routed(name: str) -> tuple[Fabric, RoutingResult]:
    """The fabric of capture ``name`` and its routing (computed once per session)."""
    if name not in _routed:
        f = load_fabric(str(REAL / name))
        _routed[name] = (f, route(f, workers=1))
    return _routed[name]


@pytest.mark.parametrize("name", REAL_FILES)
def test_cli_exit_codes_and_no_traceback(name: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = str(REAL / name)
    allowed = NOT_ROUTABLE.get(name, (0,))
    rc_sum = main(["fabric", "summary", path])
    rc_route = main(["route", path, "-q", "--workers", "1", "--out", str(tmp_path / "t.lfts")])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    assert rc_sum in allowed and rc_route in allowed, text[-2000:]
    if name in NOT_ROUTABLE:
        assert name in out.err  # the message names the file
        assert not (tmp_path / "t.lfts").exists()
    else:
        assert (tmp_path / "t.lfts").is_file()
        assert "validation: valid" in out.out
        mode = next(ln for ln in out.out.splitlines() if ln.startswith("mode:"))
        if name in NO_TREE:  # the mode of a fabric that is no tree, with the reason
            assert mode.split()[1] in ("updown", "shortest") and "(no tree: " in mode, mode
        else:
            assert mode.split()[1] in ("tree", "tree+turns"), mode


@pytest.mark.parametrize("name", ROUTABLE)
def test_every_connected_ca_pair_is_delivered(name: str) -> None:
    f, r = routed(name)
    v = validate_result(r)
    assert v.ok, v.summary()
    assert v.ca_pairs_unroutable == 0 and v.updown_violations == 0
    # independent: trace every end-port to every end-port, flow by flow
    view = routing_view(f, r.tables)
    paths = pair_paths(view)
    comp = r.graph.component  # both index switches in fabric order
    # (entry switch, end-port) pairs in different physical components
    apart = int((comp[view.leaves][:, None] != comp[view.ep_leaf][None, :]).sum())
    assert paths.unroutable_pairs == apart
    if name.startswith("treydock"):  # a fragment with no switch-to-switch link
        assert apart > 0 and v.ca_pairs_disconnected > 0
    # aggregation nodes and hosts on upper switches are delivered like any host
    roles = fabric_roles(f)
    special = roles.endports(EndportRole.AGGREGATION, EndportRole.SERVICE,
                             EndportRole.MANAGEMENT, EndportRole.STORAGE)
    on_upper = special[roles.rank[roles.attach[special]] > 0]
    if name.startswith("NVIDIA-topograph-example.out"):
        assert len(on_upper) >= 9  # one aggregation node on each spine
    if name.startswith("loginoff"):
        assert len(on_upper) >= 2  # hosts on a spine


@pytest.mark.parametrize("name", ROUTABLE)
def test_summary_routing_and_analysis_agree_on_roles(name: str) -> None:
    f, r = routed(name)
    roles = fabric_roles(f)
    s = summarize(f, roles=None)
    levels = {lv.rank: lv.switches for lv in s.levels}
    sw = f.switches
    counts = np.bincount(roles.rank[sw][roles.rank[sw] >= 0])
    assert levels == {i: int(c) for i, c in enumerate(counts) if c}
    view = routing_view(f, r.tables)
    assert np.array_equal(view.sw_level, roles.rank[sw])
    if roles.tree:
        assert np.array_equal(r.graph.rank, roles.rank[sw])
        assert np.array_equal(np.flatnonzero(r.graph.is_leaf), np.flatnonzero(roles.rank[sw] == 0))
    assert s.routing_mode == roles.mode and (r.mode in ("updown", "shortest")) >= (not roles.tree)


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibdmchk") is None,
                    reason="ibdmchk (Debian package ibutils) is not installed")
@pytest.mark.parametrize("name", ROUTABLE)
def test_ibdmchk_finds_no_credit_loop(name: str, tmp_path: Path) -> None:
    from smroute.lab.ibdmchk import run_ibdmchk
    from smroute.tables.formats import write_tables

    f, r = routed(name)
    fdbs = tmp_path / "opensm.fdbs"
    write_tables(r.tables, fdbs, "fdbs", fabric=f, hops=hop_table(r))
    rep = run_ibdmchk(fdbs, tmp_path / "opensm-subnet.lst", timeout=600)
    if len(summarize(f).component_sizes) > 1:
        pytest.skip("a partitioned fabric: ibdmchk needs every switch of opensm.fdbs linked "
                    "into one subnet (our own walk and trace check it above)")
    assert rep.credit_loops is False, rep.stdout[-3000:]
    assert rep.missing_paths == 0 and rep.dead_ends == [] and rep.unreachable == []
    # ibdmchk's own min-hop trace (from the topology, before any table) loops
    # on a switch without a LID; nothing else may be reported
    other = [e for e in rep.errors if "Run into loop in min hop path" not in e]
    assert other == [], rep.stdout[-3000:]
    n_ca = int(((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0)).sum())
    assert rep.ca_paths == n_ca * (n_ca - 1)  # every ordered CA pair was walked


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None,
                    reason="the ibsim binary is not installed (Debian package ibsim-utils)")
@pytest.mark.parametrize("name", ROUTABLE)
def test_opensm_file_engine_loads_and_switches_hold_our_tables(name: str, tmp_path: Path) -> None:
    from test_opensm_file_engine import _load_into_opensm, assert_switches_hold

    from smroute.lab.simnet import simulable, sm_node

    f0, _ = routed(name)
    if len(summarize(f0).component_sizes) > 1:
        pytest.skip("a partitioned fabric: OpenSM on one side sees only its own part")
    # the capture as ibsim can hold it (port GUIDs node GUID + port), its LIDs kept
    f = dataclasses.replace(simulable(f0), port_lid=f0.port_lid, port_lmc=f0.port_lmc,
                            _cache={})
    r = route(f, workers=1)
    assert validate_result(r).ok
    lmc = int(f.port_lmc[(f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0)].max())
    osm, held = _load_into_opensm(f, r.tables, tmp_path, lmc, sm_node=sm_node(f))
    assert osm.engine_used == "file"
    log = osm.log.read_text()
    assert "file tables configured on all switches" in log
    assert "PARSE ERROR" not in log
    assert_switches_hold(held, r.tables)
