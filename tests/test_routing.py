"""Dmodc / Dmodk routing: equality on complete PGFTs, the shift-permutation
theorems (walking the tables and counting flows per port), validation on
degraded trees, worker-count invariance, and refusals."""

from __future__ import annotations

import platform
import subprocess
import sys

import numpy as np
import pytest

from smroute.errors import LmcMismatchError, RoutingError
from smroute.fabric.generate.trees import degrade, pgft
from smroute.routing import dmodc, kernel
from smroute.routing.engine import route
from smroute.routing.pool import RoutePool
from smroute.routing.topology import TO_END_PORT, next_switch, switch_graph
from smroute.routing.validate import validate
from smroute.tables.lft import NO_ROUTE

#: Complete PGFTs, with and without parallel links (Zahavi's figure first).
COMPLETE = [
    (3, (2, 2, 3), (1, 2, 2), (1, 2, 1)),
    (2, (4, 8), (1, 4), (1, 2)),
    (2, (6, 12), (1, 6), (1, 1)),
    (3, (4, 4, 4), (1, 4, 4), (1, 1, 1)),
    (3, (3, 3, 4), (1, 3, 3), (1, 1, 1)),
    (3, (2, 2, 2), (1, 2, 2), (1, 2, 2)),
]


def _ids(spec: tuple) -> str:
    return f"PGFT({spec[0]};{spec[1]};{spec[2]};{spec[3]})"


@pytest.mark.parametrize("spec", COMPLETE, ids=_ids)
def test_dmodc_equals_dmodk_on_complete_pgft(spec: tuple) -> None:
    f = pgft(*spec)
    a = route(f, algorithm="dmodc", workers=1)
    b = route(f, algorithm="dmodk", workers=1)
    assert a.tables.ports.shape == b.tables.ports.shape
    assert np.array_equal(a.tables.ports, b.tables.ports)


def _flows_per_port(result, src_ep: np.ndarray, dst_ep: np.ndarray) -> np.ndarray:
    """Walk the tables for flows (end-port index -> end-port index, base LIDs),
    return flow counts per directed switch port, shape (S, 256)."""
    g = result.graph
    ports = result.tables.ports
    nxt = next_switch(g)
    lid = g.ep_lid[dst_ep]
    cur = g.ep_switch[src_ep].copy()
    counts = np.zeros((g.n_switches, 256), dtype=np.int64)
    active = np.ones(len(src_ep), dtype=bool)
    for _ in range(2 * g.max_rank + 2):
        if not active.any():
            break
        c = cur[active]
        p = ports[c, lid[active]].astype(np.int64)
        assert (p != NO_ROUTE).all(), "a flow hit a missing route"
        np.add.at(counts, (c, p), 1)
        nx = nxt[c, p]
        done = nx == TO_END_PORT
        # delivered to the right end-port
        assert (p[done] == g.ep_switch_port[dst_ep[active][done]]).all()
        assert (c[done] == g.ep_switch[dst_ep[active][done]]).all()
        assert (nx[~done] >= 0).all(), "a flow fell off the fabric"
        idx = np.flatnonzero(active)
        cur[idx[~done]] = nx[~done]
        active[idx[done]] = False
    assert not active.any(), "a flow did not arrive (loop)"
    return counts


@pytest.mark.parametrize("spec", COMPLETE, ids=_ids)
def test_shift_permutations_put_at_most_one_flow_per_port(spec: tuple) -> None:
    """Zahavi's Theorems 1-2: in topological-NID order, every stage of the Shift
    CPS loads every (up and down) port with at most one flow."""
    f = pgft(*spec)
    r = route(f, workers=1)
    order = np.argsort(r.nids)  # end-port indices in NID order
    n = len(order)
    worst = 0
    for s in range(1, n):
        counts = _flows_per_port(r, order, np.roll(order, -s))
        worst = max(worst, int(counts.max()))
    assert worst == 1


def test_random_order_shift_is_congested() -> None:
    """The same tables with a random node order do congest: the test above can fail."""
    f = pgft(2, (6, 12), (1, 6), (1, 1))
    r = route(f, workers=1)
    order = np.random.default_rng(7).permutation(len(r.nids))
    worst = max(int(_flows_per_port(r, order, np.roll(order, -s)).max()) for s in range(1, 20))
    assert worst > 1


def test_nids_are_topological_on_generated_tree() -> None:
    """Algorithm 2 numbers hosts leaf by leaf, pods together: equal to the
    generator's D-mod-K host order on a complete PGFT."""
    f = pgft(3, (3, 3, 4), (1, 3, 3), (1, 1, 1))
    r = route(f, workers=1)
    host_of_ep = f.port_node[r.graph.ep_row]
    by_nid = host_of_ep[np.argsort(r.nids)]
    assert [f.node_desc[n] for n in by_nid[:4]] == [
        "host 0.0.0", "host 0.0.1", "host 0.0.2", "host 0.1.0"]
    assert np.array_equal(np.sort(r.nids), np.arange(len(r.nids)))


def test_dividers_and_costs_of_complete_tree() -> None:
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    g = switch_graph(f)
    c, pi = dmodc.costs_and_dividers(g)
    # Pi = product of up-arities of lower levels: 1, w2, w2*w3
    assert set(pi[g.rank == 0].tolist()) == {1}
    assert set(pi[g.rank == 1].tolist()) == {4}
    assert set(pi[g.rank == 2].tolist()) == {16}
    leaves = g.leaves
    cl = dmodc.hop_counts(c[np.ix_(leaves, leaves)])
    assert set(np.unique(cl).tolist()) == {0, 2, 4}
    assert (np.diag(cl) == 0).all()
    # leaf to another leaf must go up first: encoded as an up-phase cost
    off = ~np.eye(len(leaves), dtype=bool)
    assert (c[np.ix_(leaves, leaves)][off] >= dmodc.UP_PHASE).all()
    # a top switch reaches every leaf down only
    tops = np.flatnonzero(g.rank == 2)
    assert (c[np.ix_(tops, leaves)] == 2).all()


@pytest.mark.parametrize("seed", range(6))
def test_degraded_tree_routes_every_pair_updown(seed: int) -> None:
    f = pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1))
    d, _ = degrade(f, np.random.default_rng(seed), switches=2, links=6)
    r = route(d, workers=1)
    v = validate(r.walk_graph, r.tables.ports, r.dest, r.costs)
    assert v.ok, v.summary()
    assert v.updown_violations == 0 and v.loops == 0
    assert v.ca_pairs_unroutable == 0


def test_disconnected_leaf_is_reported_apart_not_as_failure() -> None:
    f = pgft(2, (2, 4), (1, 2), (1, 1))
    g = switch_graph(f)
    leaf = int(g.leaves[0])
    # remove every up-link of the first leaf: its hosts are cut off physically
    la, lb = f.port_node[f.link_a], f.port_node[f.link_b]
    node = int(g.sw_node[leaf])
    up_links = np.flatnonzero(((la == node) | (lb == node))
                              & (f.node_type[la] == 2) & (f.node_type[lb] == 2))
    d = f.with_removed(links=up_links)
    r = route(d, workers=1)
    v = validate(r.walk_graph, r.tables.ports, r.dest, r.costs,
                 switch_desc=r.tables.switch_desc, lid_desc=r.tables.lid_desc)
    assert v.ok, v.summary()
    # 2 hosts on the cut leaf x 6 elsewhere, both directions
    assert v.ca_pairs_disconnected == 2 * 2 * 6
    assert v.ca_pairs_unroutable == 0
    assert "physically disconnected" in v.summary()


def test_routing_failure_is_reported_by_name() -> None:
    f = pgft(2, (2, 4), (1, 2), (1, 1))
    r = route(f, workers=1)
    g = r.graph
    ports = r.tables.ports.copy()
    far = int(g.ep_lid[-1])
    ports[g.leaves[0], far] = NO_ROUTE  # a leaf loses its route to a far host
    v = validate(r.walk_graph, ports, r.dest, r.costs,
                 switch_desc=r.tables.switch_desc, lid_desc=r.tables.lid_desc)
    assert not v.ok
    assert v.ca_pairs_unroutable == 2  # the leaf's two hosts
    assert any("host" in str(x) and "no route" in str(x) for x in v.failures)


def test_same_tables_for_any_worker_count() -> None:
    f = pgft(3, (4, 4, 6), (1, 4, 4), (1, 1, 1))
    base = route(f, workers=1).tables.ports
    with RoutePool(2) as pool:
        for _ in range(2):  # the pool is reused across jobs
            assert np.array_equal(route(f, pool=pool).tables.ports, base)


_FREE_16_MIB = """
import sys
import numpy as np
from smroute.routing.pool import _keep_heap
def rss():
    return int(next(x for x in open("/proc/self/status") if x.startswith("VmRSS")).split()[1])
if sys.argv[1] == "keep":
    _keep_heap()
a = np.ones(16 << 20, dtype=np.uint8)
before = rss()
del a
print(before - rss())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_pool_workers_keep_freed_memory() -> None:
    """A worker keeps a job's freed arrays for the next job
    (``pool._keep_heap``): a freed 16 MiB array stays resident, where glibc's
    defaults hand it back to the system (and the next job page-faults)."""
    freed = {how: int(subprocess.run([sys.executable, "-c", _FREE_16_MIB, how], check=True,
                                     capture_output=True, text=True).stdout)
             for how in ("default", "keep")}
    assert freed["default"] > 12 * 1024  # KiB handed back
    assert freed["keep"] < 4 * 1024


def test_lmc_routes_every_lid_and_keeps_base_tables() -> None:
    f = pgft(2, (4, 8), (1, 4), (1, 1), lmc=2)
    r = route(f, workers=1)
    base = route(f, workers=1, lmc=0)
    g = r.graph
    for k in range(4):
        lids = g.ep_lid + k
        assert (r.tables.ports[np.ix_(g.leaves, lids)] != NO_ROUTE).all()
    # base LIDs route exactly as without LMC
    assert np.array_equal(r.tables.ports[:, g.ep_lid], base.tables.ports[:, g.ep_lid])
    # the 4 LIDs of one remote destination leave a leaf through different up ports
    leaf = int(g.leaves[0])
    far = int(np.flatnonzero(g.ep_switch != leaf)[0])
    ups = {int(r.tables.ports[leaf, g.ep_lid[far] + k]) for k in range(4)}
    assert len(ups) == 4


def test_lids_beyond_unicast_range_are_refused() -> None:
    from smroute.fabric.model.base import NodeType
    from smroute.fabric.model.builder import FabricBuilder

    b = FabricBuilder()
    sw = b.add_node(NodeType.SWITCH, 0x100, 4, "sw")
    b.set_port(sw, 0, guid=0x100, lid=1)
    for i, lid in enumerate((0xBF00, 0xBFC0)):
        ca = b.add_node(NodeType.CA, 0x200 + 16 * i, 1, f"ca{i}")
        b.set_port(ca, 1, guid=0x201 + 16 * i, lid=lid, lmc=7)
        b.add_link(sw, i + 1, ca, 1)
    with pytest.raises(RoutingError, match="unicast range"):
        route(b.build(), workers=1)


def test_overlapping_lmc_ranges_are_refused() -> None:
    f = pgft(2, (4, 8), (1, 4), (1, 1))  # LIDs assigned with LMC 0
    with pytest.raises(LmcMismatchError, match="belongs to two ports") as ei:
        route(f, workers=1, lmc=2)
    assert ei.value.exit_code == 2  # bad input, as in every command


def test_unknown_algorithm_and_bad_lmc() -> None:
    f = pgft(2, (2, 2), (1, 2), (1, 1))
    with pytest.raises(RoutingError, match="unknown algorithm"):
        route(f, algorithm="ftree")
    with pytest.raises(RoutingError, match="LMC"):
        route(f, lmc=8)


def test_float_division_equals_integer_division() -> None:
    """The kernels' float32 ``divmod`` (``kernel._mod``, ``kernel.slot_offsets``)
    equals integer division for every digit below 2**16 and divisors up to
    640 (lost-slot tables of 18 slots have 306 entries), and the integer
    path beyond 2**24 gives the same."""
    q = np.arange(1 << 16, dtype=np.int32)[None, :]
    n = np.arange(1, 641, dtype=np.int32)[:, None]
    assert np.array_equal(kernel._mod(q, n), q % n)
    quot, rem = kernel._divmod(q, n)
    assert np.array_equal(quot, q // n) and np.array_equal(rem, q % n)
    rng = np.random.default_rng(7)
    tgt = rng.integers(0, 5, q.shape[1])
    div = rng.integers(1, 400, (3, 5))
    start = rng.integers(0, 1000, (3, 5))
    for digits in (q, q + np.int32(1 << 24)):  # float32 path, integer path
        quot, entry = kernel.slot_offsets(digits, div, tgt, start, quotient=True)
        assert np.array_equal(entry, start[:, tgt] + digits % div[:, tgt])
        assert np.array_equal(quot, digits // div[:, tgt])


def _walk_one(nxt: np.ndarray, rank: np.ndarray, ports: np.ndarray, dest, s: int, d: int,
              max_hops: int, free: bool) -> tuple[int, int]:
    """One (switch, destination) walk followed hop by hop: ``(status, hops)``."""
    from smroute.routing.validate import DEAD_END, LOOP, OK, UPDOWN
    moves: list[int] = []
    cur = s
    while len(moves) <= max_hops + 1:
        p = int(ports[cur, dest.lid[d]])
        if cur == dest.target[d] and p == dest.local_port[d]:
            went_down = False
            for m in moves:  # down, then up later: not up*/down*
                if m > 0 and went_down and not free:
                    return UPDOWN, len(moves)
                went_down |= m < 0
            return OK, len(moves)
        nx = int(nxt[cur, p])
        if nx < 0:
            return DEAD_END, len(moves)
        if rank[nx] == rank[cur] and not free:
            return UPDOWN, len(moves)
        moves.append(int(np.sign(rank[nx] - rank[cur])))
        cur = nx
    return LOOP, -1


@pytest.mark.parametrize(("seed", "bound"), [(1, None), (2, None), (3, 1)])
def test_validation_walk_equals_hop_by_hop_walks_on_broken_tables(
        seed: int, bound: int | None) -> None:
    """The vectorized walk (``validate.walk``) gives every pair of a tree's
    tables with random ports (loops, dead ends, down-then-up moves) the status
    and hop count of a walk followed hop by hop; with ``max_hops`` 1 the
    tree's own 3- and 4-hop walks count as loops."""
    from smroute.routing.validate import LOOP, walk
    r = route(pgft(3, (4, 4, 4), (1, 4, 4), (1, 1, 1)), workers=1)
    g, dest = r.graph, r.dest
    rng = np.random.default_rng(seed)
    ports = r.tables.ports.copy()
    hit = rng.random(ports.shape) < 0.2
    ports[hit] = rng.integers(0, 10, int(hit.sum()))
    free = rng.random(len(dest.lid)) < 0.2
    max_hops = 2 * g.max_rank + 2 if bound is None else bound
    status, hops = walk(g, ports, dest, turns=free, max_hops=bound)
    nxt = next_switch(g)
    want = np.array([[_walk_one(nxt, g.rank, ports, dest, s, d, max_hops, bool(free[d]))
                      for d in range(len(dest.lid))] for s in range(g.n_switches)])
    assert np.array_equal(status, want[:, :, 0])
    resolved = status != LOOP
    assert np.array_equal(hops[resolved], want[:, :, 1][resolved])
    assert set(np.unique(status).tolist()) == {0, 1, 2, 3}  # every outcome occurs
