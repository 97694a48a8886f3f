"""``max_vls: auto`` end to end with real components: ibsim, OpenSM 3.3.23
with the smroute plugin, and ``smroute serve`` at its defaults.

ibsim's ports report VLCap VL0-7 and OperationalVLs VL0-7 (``smpquery
portinfo``).  The plugin sends those facts with OpenSM's ``qos`` and
``max_op_vls`` in every ``RouteSubnet``, and the daemon's choice follows
them on a degraded tree that needs detours over VLs: with ``qos TRUE`` and
``max_op_vls 5`` it routes detours within 8 VLs and OpenSM programs them;
a restarted daemon reroutes a link event before OpenSM's next pass within
the same 8 (the facts kept in its state database); with ``max_op_vls 2``,
within 2; with ``qos FALSE``, on one VL, and the pass
is still smroute's (an explicit ``max_vls 2`` makes OpenSM fall back to
updn there instead: tests/test_opensm_plugin.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import numpy as np
import pytest
from test_opensm_plugin import (  # noqa: F401 - the fixtures, used by name
    TOOLS,
    Rig,
    detour_tree,
    dr_paths,
    lanes_of,
    lanes_vl,
    plugin_dir,
    read_sl2vl,
    rig_factory,
    wait_for,
)

from smroute.lab.processes import DaemonProcess
from smroute.lab.simnet import sim_name
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.rpc.client import SmrouteClient

pytestmark = [
    pytest.mark.real,
    pytest.mark.integration,
    pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS),
                       reason="needs ibsim-utils, opensm and infiniband-diags "
                              "(scripts/setup.sh installs them)"),
]


def committed(rig: Rig) -> dict[int, dict[str, object]]:
    """The daemon's epoch_committed log records by epoch."""
    assert rig.daemon is not None
    return {int(str(r["epoch"])): r for r in rig.daemon.log_events()
            if r.get("event") == "epoch_committed"}


def test_auto_follows_opensms_vl_facts(
        rig_factory: Callable[..., Rig]) -> None:  # noqa: F811 - the imported fixture
    fabric = detour_tree()
    rig = rig_factory(fabric)  # deploy/opensm-plugin.conf: qos TRUE, max_op_vls 5
    assert rig.sim is not None and rig.osm is not None and rig.daemon is not None
    assert rig.client is not None

    # 1. qos TRUE, max_op_vls 5 (VL0-14), ports VL0-7: detours within 8 VLs,
    #    programmed by OpenSM (no fallback)
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's first sweep")
    log = rig.log_since(0)
    assert "ERR SMR" not in log and "updn tables configured" not in log
    ep, want = rig.epoch_tables()
    assert (ep.routing_mode, ep.max_vls, ep.validation.ok) == ("tree+detours", 8, True)
    assert "VLCap 4 (8 data VLs)" in ep.max_vls_reason, ep.max_vls_reason
    assert f"smroute: epoch {ep.id} routes detours over {ep.vls} VLs" in log
    rig.settle(want)
    lanes = lanes_of(rig.daemon.address, ep.id)
    assert lanes.vls == ep.vls >= 2
    # OpenSM programmed the epoch's SL-to-VL tables: every table of the lanes
    # read back from its switch (smpquery sl2vl by directed route)
    host = sim_name(fabric, int(fabric.cas[0]))
    dr = dr_paths(fabric, int(fabric.cas[0]))
    row_of = {int(fabric.node_guid[s]): s for s in fabric.switches.tolist()}
    tables = [t for t in lanes.tables if any(t.vl)]
    assert tables
    for t in tables[:8]:
        got = read_sl2vl(rig.sim, host, dr[row_of[t.guid]], t.out_port)
        inp = next(iter(got)) if t.any_in_port else t.in_port
        assert got[inp] == lanes_vl(lanes, t.guid, inp, t.out_port), (hex(t.guid), t.out_port)
    first = ep.id
    before = committed(rig)

    # 1b. the daemon restarts on its state while OpenSM is down: a link event
    #     rerouted before OpenSM's next pass keeps the 8 VLs (the stored facts)
    rig.osm.stop()
    assert rig.client is not None
    rig.client.close()
    rig.daemon.stop()
    rig.daemon = DaemonProcess(None, rig.wd / "daemon-again", listen=rig.address,
                               log_format="json", state=rig.daemon.state)
    rig.daemon.start()
    rig.client = SmrouteClient(rig.daemon.address)
    assert any(r.get("event") == "state_vl_facts_restored" for r in rig.daemon.log_events())
    sw = fabric.port_node[fabric.link_a] != fabric.port_node[fabric.link_b]
    sw &= np.isin(fabric.port_node[fabric.link_b], fabric.switches)
    sw &= np.isin(fabric.port_node[fabric.link_a], fabric.switches)
    end = int(fabric.link_a[int(np.flatnonzero(sw)[0])])
    out = rig.client.apply_faults([pb.FaultEvent(
        kind=pb.FaultEvent.LINK_DOWN, node_guid=int(fabric.node_guid[fabric.port_node[end]]),
        port=int(fabric.port_num[end]))])
    assert out.committed and out.epoch.id > first
    assert (out.epoch.max_vls, out.epoch.max_vls_reason) == (8, ep.max_vls_reason)

    # 2. max_op_vls 2 (VL0-1): the same subnet is routed again within 2 VLs
    rig.start_opensm(name="twovls", conf={"qos": True, "max_op_vls": 2})
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "twovls: smroute's sweep")
    text = rig.log_since(0)
    assert "ERR SMR" not in text
    ep2, want2 = rig.epoch_tables()
    assert ep2.id > first and (ep2.routing_mode, ep2.max_vls) == ("tree+detours", 2)
    assert "OpenSM's max_op_vls 2 allows 2 data VLs" in ep2.max_vls_reason
    assert f"routes detours over {ep2.vls} VLs" in text and ep2.vls == 2
    rig.settle(want2)

    # 3. qos FALSE: OpenSM programs no SL-to-VL tables, so one VL; smroute
    #    still routes the pass (no ERR SMR06, no fallback)
    rig.osm.stop()
    rig.start_opensm(name="noqos", conf={"qos": False, "max_op_vls": 5})
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "noqos: smroute's sweep")
    text = rig.log_since(0)
    assert "ERR SMR" not in text and "routes detours over" not in text
    ep3, want3 = rig.epoch_tables()
    assert ep3.id > ep2.id and ep3.max_vls == 1 and ep3.vls == 1
    assert ep3.routing_mode != "tree+detours" and ep3.validation.ok
    assert "qos is FALSE" in ep3.max_vls_reason
    rig.settle(want3)

    # the daemon's log says which VL count each epoch used and why
    recs = committed(rig)
    assert before[first]["max_vls"] == 8 and recs[ep2.id]["max_vls"] == 2
    assert recs[ep3.id]["max_vls"] == 1 and "qos is FALSE" in str(
        recs[ep3.id]["max_vls_reason"])


def test_a_dragonfly_plus_crosses_and_detours_where_spines_reach_few_groups(
        rig_factory: Callable[..., Rig]) -> None:  # noqa: F811 - the imported fixture
    """A canonical Dragonfly+ (a spine reaches only some groups across)
    with an aggregation node on every switch: OpenSM's pass is smroute's,
    routes between groups cross once, the aggregation nodes on spines
    without a cable across take detours over VLs, and OpenSM installs the
    epoch's tables."""
    from smroute.fabric.generate.shapes import dragonfly_plus, with_aggregation_nodes

    fabric = with_aggregation_nodes(dragonfly_plus(5, 2, 2, 2, spread=True, seed=3))
    rig = rig_factory(fabric)
    assert rig.osm is not None and rig.daemon is not None
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's first sweep")
    log = rig.log_since(0)
    assert "ERR SMR" not in log and "updn tables configured" not in log
    ep, want = rig.epoch_tables()
    assert (ep.routing_mode, ep.validation.ok) == ("tree+detours", True), ep.routing_mode_reason
    assert "across one cable" in ep.routing_mode_reason and ep.vls >= 2
    rig.settle(want)


def test_a_ring_routes_over_shortest_paths_with_vls(
        rig_factory: Callable[..., Rig]) -> None:  # noqa: F811 - the imported fixture
    """A ring of six switches carrying hosts (no tree): at the daemon's
    defaults every destination takes shortest routes, those that turn up
    after coming down on a higher VL; OpenSM installs the epoch's tables
    and every switch's SL-to-VL tables read back equal the daemon's."""
    from smroute.fabric.generate.shapegen import ring

    fabric = ring(6, 2)
    rig = rig_factory(fabric)
    assert rig.sim is not None and rig.daemon is not None
    wait_for(lambda: rig.sweep_done(0, "smroute"), 60, "smroute's first sweep")
    assert "ERR SMR" not in rig.log_since(0)
    ep, want = rig.epoch_tables()
    assert (ep.routing_mode, ep.validation.ok) == ("shortest", True), ep.routing_mode_reason
    assert ep.vls >= 2
    rig.settle(want)
    lanes = lanes_of(rig.daemon.address, ep.id)
    host = int(fabric.cas[0])
    host_name, dr = sim_name(fabric, host), dr_paths(fabric, host)
    compared = 0
    for sw in fabric.switches.tolist():
        guid = int(fabric.node_guid[sw])
        for out in range(1, int(fabric.num_ports[sw]) + 1):
            if fabric.port_peer[fabric.port_start[sw] + out] < 0:
                continue
            for inp, vls in read_sl2vl(rig.sim, host_name, dr[sw], out).items():
                assert vls == lanes_vl(lanes, guid, inp, out), (hex(guid), inp, out)
                compared += 1
    assert compared > 50 and any(any(t.vl) for t in lanes.tables)
