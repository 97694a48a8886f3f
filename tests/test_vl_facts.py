"""``max_vls: auto``: the subnet manager's VL facts in ``RouteSubnet`` (proto
round trip), the daemon's choice from them (a pure function), the setting
(config, check-config, ``serve --max-vls``) and the core following the
facts: detours over VLs for the plugin's subnet when OpenSM can program
them, one VL when it cannot and for every source without facts.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smroute.fabric.faults import FaultEvent
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.engine import route
from smroute.service.config import ConfigError, check_config, default_config, load_config
from smroute.service.core import RoutingCore
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc.messages import epoch_msg
from smroute.service.rpc.subnet import route_subnet_response, subnet_request, vl_facts
from smroute.service.settings import ServiceConfig
from smroute.service.vlchoice import (
    AUTO,
    VlFacts,
    choose_vls,
    data_vls,
    parse_max_vls,
)

ROOT = Path(__file__).resolve().parents[1]


def detour_tree() -> Fabric:
    """PGFT(2;4,6;1,4;1,1) without 10 of its 24 leaf-spine cables (seed 1):
    some pairs have no up*/down* path; with 2 VLs or more the tree routes
    them with detours (tree+detours), on one VL it cannot."""
    return degrade(pgft(2, [4, 6], [1, 4], [1, 1]), np.random.default_rng(1), links=10)[0]


def facts_of(f: Fabric, **kw: object) -> VlFacts:
    """The facts an OpenSM plugin sends for ``f`` (through the proto)."""
    req = pb.RouteSubnetRequest.FromString(subnet_request(f, 0, **kw).SerializeToString())
    return vl_facts(req)


# ---------------------------------------------------------------- the wire

def test_the_facts_round_trip_through_the_proto() -> None:
    f = pgft(2, [4, 4], [1, 2], [1, 1])
    req = subnet_request(f, 0, qos=True, max_op_vls=3, vl_code=4)
    link = req.links[0]
    link.vl_cap_a, link.op_vls_a, link.vl_cap_b, link.op_vls_b = 5, 3, 2, 1
    req.nodes[0].sl2vl = not req.nodes[0].sl2vl
    back = pb.RouteSubnetRequest.FromString(req.SerializeToString())
    assert (back.programs_lanes, back.qos, back.max_op_vls) == (True, True, 3)
    got = vl_facts(back)
    assert (got.programs_lanes, got.qos, got.max_op_vls) == (True, True, 3)
    assert [got.vl_cap_a[0], got.op_vls_a[0], got.vl_cap_b[0], got.op_vls_b[0]] == [5, 3, 2, 1]
    assert (got.vl_cap_a[1:] == 4).all() and (got.op_vls_b[1:] == 4).all()
    assert got.guid_a.dtype == np.uint64 and len(got.guid_a) == f.n_links
    is_sw = got.type == int(NodeType.SWITCH)
    assert is_sw.sum() == len(f.switches)
    want = is_sw.copy()
    want[0] = not want[0]
    assert np.array_equal(got.sl2vl, want)
    # a subnet manager that sends no facts (an older plugin): it programs no lanes
    old = vl_facts(pb.RouteSubnetRequest.FromString(subnet_request(f, 0).SerializeToString()))
    assert not old.programs_lanes and not old.qos and not old.sl2vl.any()
    c = choose_vls(AUTO, old)
    assert c.vls == 1 and "programs_lanes unset" in c.reason


# ---------------------------------------------------------------- the choice

def test_vl_codes_decode_as_the_iba_says() -> None:
    assert [data_vls(c) for c in range(8)] == [1, 1, 2, 4, 8, 15, 1, 1]


def test_an_integer_setting_is_taken_as_it_is() -> None:
    f = detour_tree()
    for facts in (None, facts_of(f, qos=False), facts_of(f, qos=True, max_op_vls=1)):
        assert choose_vls(3, facts).vls == 3
        assert choose_vls(1, facts).reason == "max_vls 1"


def test_auto_without_facts_is_one_vl() -> None:
    c = choose_vls(AUTO, None)
    assert c.vls == 1 and "cannot program VLs" in c.reason


@pytest.mark.parametrize("kw, says", [
    ({"qos": False}, "qos is FALSE"),
    ({"qos": True, "max_op_vls": 1}, "max_op_vls 1 allows 1 data VL"),
    ({"qos": True, "max_op_vls": 0}, "max_op_vls 0 allows 1 data VL"),
])
def test_auto_is_one_vl_when_opensm_cannot_program_vls(kw: dict[str, object], says: str
                                                       ) -> None:
    c = choose_vls(AUTO, facts_of(detour_tree(), **kw))
    assert c.vls == 1 and says in c.reason


def test_auto_is_one_vl_when_the_sm_does_not_program_lanes() -> None:
    facts = dataclasses.replace(facts_of(detour_tree(), qos=True), programs_lanes=False)
    c = choose_vls(AUTO, facts)
    assert c.vls == 1 and "does not say it answers path SLs" in c.reason


def test_auto_is_one_vl_when_a_switch_has_no_sl_to_vl_tables() -> None:
    f = detour_tree()
    facts = facts_of(f, qos=True)
    sw = np.flatnonzero(facts.type == int(NodeType.SWITCH))
    sl2vl = facts.sl2vl.copy()
    sl2vl[sw[2]] = False
    c = choose_vls(AUTO, dataclasses.replace(facts, sl2vl=sl2vl))
    assert c.vls == 1 and f"switch {int(facts.guid[sw[2]]):#018x}" in c.reason
    assert "no SL-to-VL tables" in c.reason


@pytest.mark.parametrize("max_op_vls, code, want", [
    (5, 4, 8),   # ibsim's ports: VL0-7; max_op_vls VL0-14
    (2, 4, 2),   # max_op_vls VL0-1 caps
    (3, 4, 4),
    (4, 5, 8),
    (5, 5, 15),
    (5, 2, 2),   # the ports' VLCap limits
])
def test_auto_takes_the_least_of_the_ports_and_max_op_vls(max_op_vls: int, code: int,
                                                          want: int) -> None:
    c = choose_vls(AUTO, facts_of(detour_tree(), qos=True, max_op_vls=max_op_vls,
                                  vl_code=code))
    assert c.vls == want, c.reason


def _switch_link(facts: VlFacts) -> int:
    sw = facts.guid[facts.type == int(NodeType.SWITCH)]
    both = np.isin(facts.guid_a, sw) & np.isin(facts.guid_b, sw)
    return int(np.flatnonzero(both)[-1])


@pytest.mark.parametrize("field, code, what", [
    ("vl_cap_a", 3, "VLCap 3"), ("op_vls_b", 2, "OperationalVLs 2"),
    ("op_vls_a", 1, "OperationalVLs 1"), ("vl_cap_b", 0, "VLCap 0"),
])
def test_one_switch_port_limits_every_route(field: str, code: int, what: str) -> None:
    facts = facts_of(detour_tree(), qos=True)
    k = _switch_link(facts)
    col = getattr(facts, field).copy()
    col[k] = code
    c = choose_vls(AUTO, dataclasses.replace(facts, **{field: col}))
    assert c.vls == data_vls(code) and what in c.reason
    end = "a" if field.endswith("_a") else "b"
    guid, port = int(getattr(facts, f"guid_{end}")[k]), int(getattr(facts, f"port_{end}")[k])
    assert f"switch {guid:#018x} port {port}" in c.reason


def test_ca_ports_and_switches_without_switch_cables_do_not_count() -> None:
    f = detour_tree()
    facts = facts_of(f, qos=True)
    sw = facts.guid[facts.type == int(NodeType.SWITCH)]
    to_ca = ~(np.isin(facts.guid_a, sw) & np.isin(facts.guid_b, sw))
    assert to_ca.any()
    low = {k: np.where(to_ca, 1, getattr(facts, k))
           for k in ("vl_cap_a", "op_vls_a", "vl_cap_b", "op_vls_b")}
    cas = facts.type != int(NodeType.SWITCH)
    assert choose_vls(AUTO, dataclasses.replace(facts, **low)).vls == 8
    # a CA never has SL-to-VL tables of a switch: it does not matter
    assert not facts.sl2vl[cas].any()
    # a lone switch (no switch-to-switch cable): one VL, there is nothing to detour
    lone = pgft(1, [4], [1], [1])
    c = choose_vls(AUTO, facts_of(lone, qos=True))
    assert c.vls == 1 and "no switch-to-switch cable" in c.reason


# ---------------------------------------------------------------- the setting

@pytest.mark.parametrize("v, want", [("auto", AUTO), ("AUTO", AUTO), (" auto", AUTO), (1, 1),
                                     (15, 15), ("4", 4)])
def test_max_vls_parses(v: object, want: object) -> None:
    assert parse_max_vls(v) == want
    assert ServiceConfig(max_vls=v).max_vls == want  # type: ignore[arg-type]


@pytest.mark.parametrize("v", [0, 16, -1, True, 2.0, "lots", "", None, "0"])
def test_max_vls_refuses(v: object) -> None:
    with pytest.raises(ValueError, match=r"auto or an integer 1\.\.15"):
        parse_max_vls(v)
    with pytest.raises(ConfigError, match=r"max_vls.*expected auto or an integer 1\.\.15"):
        ServiceConfig(max_vls=v)  # type: ignore[arg-type]


def test_auto_is_the_default_and_the_config_files_say_it(tmp_path: Path) -> None:
    assert default_config().max_vls == AUTO == ServiceConfig().max_vls
    assert load_config(ROOT / "deploy" / "smroute.yaml").max_vls == AUTO
    p = tmp_path / "a.yaml"
    p.write_text("max_vls: auto\n")
    assert load_config(p).max_vls == AUTO
    p.write_text("max_vls: 4\n")
    assert load_config(p).max_vls == 4
    p.write_text("workers: 1\nmax_vls: many\n")
    cfg, errors = check_config(p)
    assert [e.key for e in errors] == ["max_vls"]
    assert str(errors[0]).endswith("a.yaml:2: max_vls: expected auto or an integer 1..15, "
                                   "got 'many'")


def test_check_config_and_serve_accept_auto(tmp_path: Path) -> None:
    p = tmp_path / "a.yaml"
    p.write_text("max_vls: auto\n")
    env = {"PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "smroute"]
    ok = subprocess.run([*run, "check-config", str(p), "--json"], capture_output=True,
                        text=True, env=env, timeout=60, check=False)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["config"]["max_vls"] == "auto"
    p.write_text("max_vls: 16\n")
    bad = subprocess.run([*run, "check-config", str(p)], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    assert bad.returncode == 2 and "max_vls" in bad.stderr + bad.stdout
    assert "auto or an integer 1..15" in bad.stderr + bad.stdout
    use = subprocess.run([*run, "serve", "--max-vls", "none"], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    assert use.returncode == 2 and "--max-vls" in use.stderr
    assert "expected auto or an integer 1..15, got" in use.stderr


# ---------------------------------------------------------------- the core follows the facts

def _answer(core: RoutingCore, req: pb.RouteSubnetRequest) -> pb.RouteSubnetResponse:
    return route_subnet_response(core, req, 60.0)


def test_the_core_routes_with_the_vls_the_facts_allow() -> None:
    f = detour_tree()
    assert route(f, workers=1, max_vls=1).mode != "tree+detours"
    core = RoutingCore(workers=1, coalesce_s=0.0)
    try:
        assert core.settings.max_vls == AUTO
        # OpenSM can program VLs (ibsim's ports: VL0-7): detours over VLs
        r1 = _answer(core, subnet_request(f, 0, qos=True))
        assert (r1.epoch.id, r1.epoch.routing_mode, r1.epoch.max_vls) == (1, "tree+detours", 8)
        assert "max_op_vls 5 allows 15" not in r1.epoch.max_vls_reason
        assert "has VLCap 4 (8 data VLs)" in r1.epoch.max_vls_reason
        assert r1.lanes.vls >= 2 and r1.epoch.vls == r1.lanes.vls
        # the same subnet with the same facts: the serving epoch
        again = _answer(core, subnet_request(f, 0, qos=True))
        assert (again.epoch.id, again.committed) == (1, False)
        # qos turned off: the same subnet is routed again, on one VL
        r2 = _answer(core, subnet_request(f, 0, qos=False))
        assert r2.committed and r2.epoch.id == 2 and r2.epoch.max_vls == 1
        assert r2.epoch.routing_mode != "tree+detours" and not r2.HasField("lanes")
        assert "qos is FALSE" in r2.epoch.max_vls_reason
        # max_op_vls 2 (VL0-1): two VLs
        r3 = _answer(core, subnet_request(f, 0, qos=True, max_op_vls=2))
        assert (r3.epoch.max_vls, r3.epoch.routing_mode, r3.lanes.vls) == (2, "tree+detours", 2)
        assert "max_op_vls 2 allows 2 data VLs" in r3.epoch.max_vls_reason
        # a fault batch on the subnet manager's fabric keeps its facts
        li = int(np.flatnonzero(f.port_node[f.link_b] != f.port_node[f.link_a])[0])
        ea = int(f.link_a[li])
        out = core.apply_faults([FaultEvent("link_down", int(f.node_guid[f.port_node[ea]]),
                                            int(f.port_num[ea]))])
        assert out.epoch.max_vls == 2
        # LoadFabric: a source that cannot program VLs; one VL on auto
        core.load_fabric(f, "test")
        ep = core.route()
        assert ep.max_vls == 1 and ep.result.lanes is None
        assert "cannot program VLs" in ep.max_vls_reason
        msg = epoch_msg(ep)
        assert (msg.max_vls, msg.max_vls_reason) == (1, ep.max_vls_reason)
    finally:
        core.close()


def test_an_integer_setting_ignores_the_facts() -> None:
    f = detour_tree()
    core = RoutingCore(workers=1, coalesce_s=0.0, max_vls=1)
    try:
        r = _answer(core, subnet_request(f, 0, qos=True))
        assert r.epoch.max_vls == 1 and r.epoch.routing_mode != "tree+detours"
        assert r.epoch.max_vls_reason == "max_vls 1"
        core.configure(max_vls=2)
        core.load_fabric(f, "file")
        ep = core.route()
        assert ep.max_vls == 2 and ep.result.mode == "tree+detours"
    finally:
        core.close()


def test_a_resumed_epoch_keeps_the_vls_auto_chose(tmp_path: Path) -> None:
    """The VLs auto chose are stored with the epoch: a restarted daemon (no
    facts yet) rebuilds the detour epoch with them, not with one VL; the
    plugin's next pass with the same facts is answered by that epoch."""
    from smroute.service.state.durable import Durable
    from smroute.service.state.store import StateStore

    f = detour_tree()
    path = tmp_path / "state.db"
    first = RoutingCore(workers=1, coalesce_s=0.0, durable=Durable(StateStore(path)))
    try:
        assert first.resume() is None
        r = _answer(first, subnet_request(f, 0, qos=True, max_op_vls=3))
        assert (r.epoch.routing_mode, r.epoch.max_vls) == ("tree+detours", 4)
        assert first.durable.flush()
    finally:
        first.close()
    again = RoutingCore(workers=1, coalesce_s=0.0, durable=Durable(StateStore(path)))
    try:
        res = again.resume()
        assert res is not None and res.epoch is not None and res.epoch.id == r.epoch.id
        assert (res.epoch.max_vls, res.epoch.result.mode) == (4, "tree+detours")
        assert res.epoch.max_vls_reason == r.epoch.max_vls_reason
        same = _answer(again, subnet_request(f, 0, qos=True, max_op_vls=3))
        assert (same.epoch.id, same.committed, same.epoch.max_vls) == (r.epoch.id, False, 4)
    finally:
        again.close()
