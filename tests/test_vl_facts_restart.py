"""``max_vls: auto`` across a restart: the subnet manager's VL facts are
kept in the state database, so a restarted daemon reroutes link and switch
events with the VLs it was allowed before the subnet manager speaks again;
a database without them (an older smroute's, a damaged row) opens and
routes on one VL until the next ``RouteSubnet``, said in the log.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smroute.cli.ctl_render import epoch_lines
from smroute.fabric.faults import FaultEvent
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.service.core import RoutingCore
from smroute.service.epochs import Epoch
from smroute.service.rpc.messages import epoch_msg
from smroute.service.rpc.subnet import route_subnet_response, subnet_request, vl_facts
from smroute.service.state import salvage as sv
from smroute.service.state.codec import CodecError
from smroute.service.state.durable import Durable
from smroute.service.state.store import StateStore
from smroute.service.state.vlfacts import KEY, decode_facts, encode_facts
from smroute.service.vlchoice import AUTO, choose_vls


def _tree() -> Fabric:
    """Some pairs have no up*/down* path: detours over 2 VLs or more
    (``tree+detours``), never on one VL."""
    return degrade(pgft(2, [4, 6], [1, 4], [1, 1]), np.random.default_rng(1), links=10)[0]


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        self.events.append((level, event, fields))

    def named(self, event: str) -> list[tuple[str, str, dict[str, Any]]]:
        return [e for e in self.events if e[1] == event]


def _core(path: Path, log: _Log | None = None) -> RoutingCore:
    return RoutingCore(workers=1, coalesce_s=0.0, log=log or _Log(),
                       durable=Durable(StateStore(path, log=log or _Log())))


def _first_run(path: Path, f: Fabric) -> Epoch:
    """A daemon that routed the plugin's subnet with 4 VLs (max_op_vls 3),
    stopped."""
    core = _core(path)
    try:
        assert core.resume() is None
        r = route_subnet_response(core, subnet_request(f, 0, qos=True, max_op_vls=3), 60.0)
        assert (r.epoch.routing_mode, r.epoch.max_vls) == ("tree+detours", 4)
        assert core.durable.flush()
        return core.store.current  # type: ignore[return-value]
    finally:
        core.close()


def _link_down(f: Fabric) -> FaultEvent:
    li = int(np.flatnonzero(f.port_node[f.link_b] != f.port_node[f.link_a])[0])
    ea = int(f.link_a[li])
    return FaultEvent("link_down", int(f.node_guid[f.port_node[ea]]), int(f.port_num[ea]))


def test_a_reroute_after_a_restart_uses_the_stored_vls(tmp_path: Path) -> None:
    f = _tree()
    path = tmp_path / "state.db"
    first = _first_run(path, f)
    log = _Log()
    again = _core(path, log)
    try:
        res = again.resume()
        assert res is not None and res.epoch is not None and res.epoch.id == first.id
        assert again.vl_facts is not None and again.vl_facts.max_op_vls == 3
        restored = log.named("state_vl_facts_restored")
        assert restored and restored[0][2]["auto_vls"] == 4
        assert not log.named("state_vl_facts_missing")
        # a link goes down before the subnet manager speaks again
        out = again.apply_faults([_link_down(f)])
        ep = out.epoch
        assert ep.id > first.id and ep.max_vls == 4
        assert ep.max_vls_reason == first.max_vls_reason
        assert "max_op_vls 3 allows 4 data VLs" in ep.max_vls_reason
        assert ep.result.lanes is not None and ep.result.mode == "tree+detours"
        # shown by ctl epoch as for any epoch
        assert f"  VLs allowed: 4 ({first.max_vls_reason})" in list(epoch_lines(epoch_msg(ep)))
    finally:
        again.close()


def test_an_older_database_without_facts_routes_on_one_vl_until_route_subnet(
        tmp_path: Path) -> None:
    f = _tree()
    path = tmp_path / "state.db"
    _first_run(path, f)
    with sqlite3.connect(path) as db:  # as an older smroute left it: no facts row
        db.execute("DELETE FROM meta WHERE key = ?", (KEY,))
    log = _Log()
    again = _core(path, log)
    try:
        res = again.resume()
        assert res is not None and res.epoch is not None and res.epoch.max_vls == 4
        assert again.vl_facts is None
        (level, _, fields), = log.named("state_vl_facts_missing")
        assert level == "warning" and "one VL until the subnet manager's next RouteSubnet" \
            in fields["message"]
        ep = again.apply_faults([_link_down(f)]).epoch
        assert ep.max_vls == 1 and ep.result.lanes is None
        assert "cannot program VLs" in ep.max_vls_reason
        # the plugin speaks again: its facts, kept from now on
        r = route_subnet_response(again, subnet_request(f, 0, qos=True, max_op_vls=3), 60.0)
        assert r.epoch.max_vls == 4
        assert again.durable.store is not None
        assert decode_facts(again.durable.store.meta()[KEY]) is not None
    finally:
        again.close()


def test_load_fabric_clears_the_stored_facts(tmp_path: Path) -> None:
    f = _tree()
    path = tmp_path / "state.db"
    _first_run(path, f)
    core = _core(path)
    try:
        core.resume()
        core.load_fabric(f, "test")
        assert core.durable.store is not None and core.durable.store.meta()[KEY] == ""
        core.route()
        assert core.durable.flush()
    finally:
        core.close()
    log = _Log()
    again = _core(path, log)
    try:
        again.resume()
        assert again.vl_facts is None and not log.named("state_vl_facts_missing")
        assert again.apply_faults([_link_down(f)]).epoch.max_vls == 1
    finally:
        again.close()


def test_a_damaged_facts_row_is_salvaged_around_and_said(tmp_path: Path) -> None:
    """A facts row that fails its checksum: the database is moved aside and
    its other rows salvaged (the epoch resumes), the facts are none (one
    VL, said); one whose checksum holds but that does not decode: said too."""
    f = _tree()
    path = tmp_path / "state.db"
    first = _first_run(path, f)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 'garbled' WHERE key = ?", (KEY,))
    log = _Log()
    again = _core(path, log)
    try:
        res = again.resume()
        assert again.durable.store is not None and again.durable.store.moved_aside is not None
        assert res is not None and res.epoch is not None and res.epoch.id == first.id
        assert again.vl_facts is None and log.named("state_vl_facts_missing")
    finally:
        again.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO meta(key, value, crc) VALUES (?, ?, ?)",
                   (KEY, "bm90IGZhY3Rz", sv.row_check("meta", (KEY, "bm90IGZhY3Rz"))))
    log = _Log()
    again = _core(path, log)
    try:
        again.resume()
        assert again.vl_facts is None
        (level, _, fields), = log.named("state_vl_facts_unreadable")
        assert level == "error" and "do not decode" in fields["error"]
    finally:
        again.close()


def test_the_facts_round_trip_and_refuse_what_is_not_them() -> None:
    f = _tree()
    facts = vl_facts(subnet_request(f, 0, qos=True, max_op_vls=3))
    back = decode_facts(encode_facts(facts))
    assert back is not None
    assert (back.programs_lanes, back.qos, back.max_op_vls) == (True, True, 3)
    for k in ("guid", "type", "sl2vl", "guid_a", "port_a", "guid_b", "port_b", "vl_cap_a",
              "op_vls_a", "vl_cap_b", "op_vls_b"):
        assert np.array_equal(getattr(back, k), getattr(facts, k)), k
    assert choose_vls(AUTO, back) == choose_vls(AUTO, facts)
    assert encode_facts(None) == "" and decode_facts("") is None
    for bad in ("not base64!", "bm90IGZhY3Rz", encode_facts(facts)[:-40]):
        with pytest.raises(CodecError):
            decode_facts(bad)
