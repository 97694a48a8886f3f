"""The daemon's pure parts: incremental reroute == from-scratch route, region
diff == diff_tables, fault events -> down set -> degraded fabric, the epoch
store, and the sequencer's coalescing (no job lost, order kept)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import fabric_roles
from smroute.routing import dmodc
from smroute.routing.engine import route
from smroute.routing.reroute import new_costs, reroute
from smroute.routing.topology import SwitchGraph, switch_graph
from smroute.service.epochs import EpochStore, table_checksum
from smroute.service.sequencer import (
    CallJob,
    DownSet,
    FaultEvent,
    FaultEventError,
    FaultJob,
    Sequencer,
    apply_events,
    degraded_fabric,
)
from smroute.tables.diff import diff_tables

DIFF_FIELDS = ("common_guid", "old_lid", "new_lid", "entry_switch", "entry_lid", "entry_old",
               "entry_new", "block_switch", "block", "only_old_guid", "only_new_guid")


def inter_links(f: Fabric) -> np.ndarray:
    sw = f.node_type == NodeType.SWITCH
    return np.flatnonzero(sw[f.port_node[f.link_a]] & sw[f.port_node[f.link_b]])


def assert_same_diff(a: object, b: object) -> None:
    for fld in DIFF_FIELDS:
        assert np.array_equal(getattr(a, fld), getattr(b, fld)), fld
    assert a.common_desc == b.common_desc  # type: ignore[attr-defined]
    assert a.width == b.width  # type: ignore[attr-defined]


FABRICS = {
    "3-level": (3, [4, 4, 8], [1, 4, 4], [1, 1, 1]),
    "3-level parallel links": (3, [4, 4, 6], [1, 4, 4], [1, 2, 2]),
    "2-level": (2, [8, 16], [1, 8], [1, 1]),
}


@pytest.mark.parametrize("name", list(FABRICS))
@pytest.mark.parametrize("lmc", [0, 2])
def test_incremental_reroute_equals_full_route(name: str, lmc: int) -> None:
    f = pgft(*FABRICS[name], lmc=lmc) if lmc else pgft(*FABRICS[name])
    base = route(f, workers=1, lmc=lmc)
    rng = np.random.default_rng(3)
    inter = inter_links(f)
    incremental = 0
    for k in (1, 1, 2, 3, 6):
        li = rng.choice(inter, size=k, replace=False)
        f2 = f.with_removed(links=li)
        full = route(f2, workers=1, lmc=lmc)
        r = reroute(base, f2, lmc=lmc)
        incremental += r.incremental
        assert np.array_equal(r.result.tables.ports, full.tables.ports), r.reason
        assert np.array_equal(r.result.costs, full.costs)
        assert_same_diff(r.diff, diff_tables(base.tables, full.tables))
        # and back up: from the degraded routing to the complete fabric
        up = reroute(r.result, f, lmc=lmc)
        assert np.array_equal(up.result.tables.ports, base.tables.ports)
        assert_same_diff(up.diff, diff_tables(full.tables, base.tables))
    assert incremental >= 3  # link-only changes take the incremental path


def test_reroute_falls_back_for_switch_removal_and_dmodk() -> None:
    f = pgft(3, [4, 4, 8], [1, 4, 4], [1, 1, 1])
    base = route(f, workers=1, lmc=0)
    f2 = f.with_removed(nodes=[int(f.switches[-1])])
    r = reroute(base, f2, lmc=0)
    assert not r.incremental and "switch set" in r.reason
    assert diff_tables(r.result.tables, route(f2, workers=1, lmc=0).tables).identical
    assert r.diff.only_old_guid.tolist() == [int(f.node_guid[f.switches[-1]])]
    li = inter_links(f)[:1]
    r2 = reroute(base, f.with_removed(links=li), lmc=0, algorithm="dmodk")
    assert not r2.incremental
    assert diff_tables(r2.result.tables, route(f.with_removed(links=li), algorithm="dmodk",
                                               workers=1, lmc=0).tables).identical
    r3 = reroute(base, f.with_removed(links=li), lmc=0, incremental=False)
    assert not r3.incremental and r3.reason == "disabled"


def test_reroute_result_tables_are_private_and_read_only() -> None:
    f = pgft(2, [4, 8], [1, 4], [1, 1])
    base = route(f, workers=1, lmc=0)
    before = base.tables.ports.copy()
    r = reroute(base, f.with_removed(links=inter_links(f)[:1]), lmc=0)
    assert np.array_equal(base.tables.ports, before)
    assert not r.result.tables.ports.flags.writeable


# ----------------------------------------------------------------- events


def test_events_to_down_set_and_degraded_fabric() -> None:
    f = pgft(2, [4, 8], [1, 4], [1, 1], switch_ports=12)
    li = int(inter_links(f)[0])
    a, b = int(f.link_a[li]), int(f.link_b[li])
    ga, pa = int(f.node_guid[f.port_node[a]]), int(f.port_num[a])
    gb, pb_ = int(f.node_guid[f.port_node[b]]), int(f.port_num[b])
    d = apply_events(f, DownSet(), [FaultEvent("link_down", gb, pb_)])
    assert d.links == {(ga, pa)}  # canonical end, whichever end was named
    f2 = degraded_fabric(f, d)
    assert f2.link_set() == f.link_set() - {tuple(sorted(((ga, pa), (gb, pb_))))}
    d = apply_events(f, d, [FaultEvent("link_up", ga, pa)])
    assert d.empty and degraded_fabric(f, d) is f
    sw = int(f.node_guid[f.switches[0]])
    ca = int(f.node_guid[f.cas[0]])
    d = apply_events(f, DownSet(), [FaultEvent("switch_down", sw), FaultEvent("ca_down", ca),
                                    FaultEvent("link_down", ga, pa)])
    f3 = degraded_fabric(f, d)
    assert len(f3.switches) == len(f.switches) - 1 and len(f3.cas) == len(f.cas) - 1
    with pytest.raises(FaultEventError, match=r"events\[0\].*not a switch"):
        apply_events(f, DownSet(), [FaultEvent("switch_down", ca)])
    free = [(int(f.node_guid[n]), p) for n in f.switches.tolist()
            for p in range(1, int(f.num_ports[n]) + 1) if f.port_peer[f.port_row(n, p)] < 0]
    with pytest.raises(FaultEventError, match="no link"):
        apply_events(f, DownSet(), [FaultEvent("link_down", *free[0])])
    with pytest.raises(FaultEventError, match="unknown kind"):
        apply_events(f, DownSet(), [FaultEvent("reboot", sw)])


# ----------------------------------------------------------------- epochs


def test_epoch_store_history_and_waiting() -> None:
    f = pgft(2, [4, 8], [1, 4], [1, 1])
    res = route(f, workers=1, lmc=0)
    store = EpochStore(history=3)
    fields = dict(cause="route", fabric=f, base_hash=f.content_hash, result=res,
                  algorithm="dmodc", lmc=0, timings={}, faults=(), down=(0, 0, 0),
                  committed_at=0.0)
    got: list[int] = []
    t = threading.Thread(target=lambda: got.extend(e.id for e in store.wait_newer(0, 10)))
    t.start()
    e1 = store.commit(**fields)
    t.join(10)
    assert got == [1]
    for _ in range(4):
        store.commit(**fields)
    assert store.ids() == [3, 4, 5] and store.current is not None and store.current.id == 5
    assert store.current.parent_id == 4
    with pytest.raises(KeyError, match="not in the history"):
        store.get(1)
    assert e1.tables_sha256 == table_checksum(res.tables)
    assert store.validation(5) == "pending"
    store.set_validation(5, "skipped: test")
    assert store.wait_validation(5, 1) == "skipped: test"
    assert store.wait_newer(5, 0.01) == []


# ----------------------------------------------------------------- sequencer


def test_sequencer_coalesces_bursts_and_keeps_order() -> None:
    batches: list[list[int]] = []
    order: list[str] = []

    def on_batch(jobs: list[FaultJob]) -> None:
        batches.append([j.events[0].guid for j in jobs])
        order.append(f"batch{len(jobs)}")
        time.sleep(0.05)  # a reroute: events arriving now wait for the next batch
        for j in jobs:
            j.future.set_result(len(jobs))

    def on_dry(job: FaultJob) -> None:
        order.append("dry")
        job.future.set_result(0)

    seq = Sequencer(on_batch, on_dry, coalesce_s=0.05)
    try:
        futs = [seq.submit(FaultJob((FaultEvent("switch_down", i),))) for i in range(10)]
        time.sleep(0.02)  # still inside the window of the first batch
        futs += [seq.submit(FaultJob((FaultEvent("switch_down", 10 + i),))) for i in range(5)]
        for f in futs:
            f.result(10)
        assert len(batches[0]) >= 10  # the burst shared one reroute
        assert futs[0].result() == len(batches[0])
        more = [seq.submit(FaultJob((FaultEvent("switch_down", 100 + i),))) for i in range(3)]
        call = seq.submit(CallJob(lambda: order.append("call") or 7))
        dry = seq.submit(FaultJob((FaultEvent("switch_down", 200),), dry_run=True))
        late = seq.submit(FaultJob((FaultEvent("switch_down", 300),)))
        assert call.result(10) == 7 and dry.result(10) == 0 and late.result(10) == 1
        for f in more:
            f.result(10)
    finally:
        seq.close()
    flat = [g for b in batches for g in b]
    assert flat == list(range(15)) + [100, 101, 102, 300]  # none lost, in order
    assert len(batches) <= 4
    assert order[-3:] == ["call", "dry", "batch1"]
    # after close, submissions fail instead of hanging
    with pytest.raises(RuntimeError):
        seq.submit(CallJob(lambda: None)).result(1)


def test_wire_encoded_blocks_equal_message_objects() -> None:
    """GetTables encodes blocks in protobuf wire form with numpy; it must parse
    to exactly the LftBlock messages (block indices >= 128 take 2-byte varints)."""
    from smroute.service.epochs import padded_blocks
    from smroute.service.rpc._gen import smroute_pb2 as pb
    from smroute.service.rpc.messages import _encode_blocks, _encode_full

    rng = np.random.default_rng(0)
    ports = rng.integers(0, 256, size=(3, 20_000), dtype=np.uint8)  # 313 blocks
    enc = _encode_full(ports)
    for r in range(3):
        row = padded_blocks(ports[r:r + 1]).tobytes()
        ref = pb.SwitchTable(blocks=[pb.LftBlock(index=i, ports=row[i * 64:(i + 1) * 64])
                                     for i in range(len(row) // 64)])
        got = pb.SwitchTable.FromString(enc[r].tobytes())
        assert got == ref and len(got.blocks) == 313
        part = pb.SwitchTable.FromString(_encode_blocks(row, [0, 127, 128, 312]))
        assert [b.index for b in part.blocks] == [0, 127, 128, 312]
        assert part.blocks[2].ports == row[128 * 64:129 * 64]


def test_incremental_reroute_random_link_sets_and_chains() -> None:
    """30 random sets of 1-6 failed links (some isolating switches, changing
    ranks or dividers: then the full path), each rerouted from the previous
    degraded state, always equal to a from-scratch route."""
    f = pgft(3, [2, 2, 4], [1, 2, 2], [1, 1, 1])
    inter = inter_links(f)
    rng = np.random.default_rng(11)
    prev = route(f, workers=1, lmc=0)
    paths = set()
    for _ in range(30):
        li = rng.choice(inter, size=int(rng.integers(1, 7)), replace=False)
        f2 = f.with_removed(links=li)
        r = reroute(prev, f2, lmc=0)
        full = route(f2, workers=1, lmc=0)
        assert np.array_equal(r.result.tables.ports, full.tables.ports), r.reason
        assert_same_diff(r.diff, diff_tables(prev.tables, full.tables))
        paths.add(r.incremental)
        prev = r.result
    assert paths == {True, False}


def test_core_validation_in_helper_process_after_quiet_period() -> None:
    """Large validation walks (here: every walk) wait for a quiet period, skip
    superseded epochs, and run in the helper process with the same result."""
    from smroute.routing.validate import Validation
    from smroute.service.core import RoutingCore

    f = pgft(2, [4, 8], [1, 4], [1, 1])
    core = RoutingCore(workers=1, coalesce_s=0.0)
    core.validator.big_pairs, core.validator.quiet_s = 0, 0.5
    try:
        core.load_fabric(f, "test")
        e1 = core.route()
        e2 = core.route()  # within the quiet period: e1 is superseded
        v2 = core.store.wait_validation(e2.id, 120)
        assert isinstance(v2, Validation) and v2.ok and v2.pairs > 0
        assert str(core.store.validation(e1.id)).startswith("skipped: superseded")
        r = e2.result
        from smroute.routing.validate import validate

        local = validate(r.walk_graph, r.tables.ports, r.dest, r.costs)
        assert (v2.pairs, v2.delivered, v2.non_minimal) == (
            local.pairs, local.delivered, local.non_minimal)
        assert core.helper.started  # the helper process did it
    finally:
        core.close()


def test_route_subnet_answer_does_not_wait_for_the_quiet_period() -> None:
    """A ``RouteSubnet`` answer waits for its epoch's validation: a large one
    is walked at once (in the helper process), not after the quiet period
    (here 60 s, longer than the call's 30 s deadline)."""
    import time

    from smroute.service.core import RoutingCore
    from smroute.service.rpc.subnet import route_subnet_response, subnet_request

    core = RoutingCore(workers=1, coalesce_s=0.0)
    core.validator.big_pairs, core.validator.quiet_s = 0, 60.0
    try:
        t0 = time.monotonic()
        resp = route_subnet_response(core, subnet_request(pgft(2, [4, 8], [1, 4], [1, 1]), 0),
                                     30.0)
        assert time.monotonic() - t0 < 20
        assert resp.committed and len(resp.switches) == 12
        assert core.helper.started  # walked in the helper process
    finally:
        core.close()


@pytest.mark.parametrize("name", ["3-level", "3-level parallel links", "2-level", "degraded"])
def test_costs_after_one_link_equal_a_full_computation(name: str) -> None:
    """The reroute's costs (``new_costs``: unchanged, one link's columns
    relaxed again, or in full) equal a full computation, for every
    switch-to-switch cable taken out of a tree and put back, alone and with
    its parallel twins; the cases where only one link's columns were relaxed
    are counted (the test would pass vacuously without them)."""
    if name == "degraded":
        f = degrade(pgft(3, [4, 4, 6], [1, 4, 4], [1, 1, 2]), np.random.default_rng(4),
                    links=12)[0]
    else:
        f = pgft(*FABRICS[name])

    def graph(fab: Fabric) -> SwitchGraph:
        return switch_graph(fab, fabric_roles(fab))

    g0 = graph(f)
    c0, _ = dmodc.costs_and_dividers(g0)
    inter = inter_links(f)
    a, b = f.port_node[f.link_a[inter]], f.port_node[f.link_b[inter]]
    pair = np.minimum(a, b) * f.n_nodes + np.maximum(a, b)
    one = 0
    for k, li in enumerate(inter):
        for gone in ([li], inter[pair == pair[k]]):
            g1 = graph(f.with_removed(links=gone))
            if not np.array_equal(g1.rank, g0.rank):
                continue  # the reroute falls back to a full route
            c1, _ = dmodc.costs_and_dividers(g1)
            assert np.array_equal(new_costs(g0, c0, g1), c1)  # taken out
            assert np.array_equal(new_costs(g1, c1, g0), c0)  # put back
            one += not np.array_equal(c0, c1)
    assert one > 10
