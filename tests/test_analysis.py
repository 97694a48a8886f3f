"""Static analysis of forwarding tables: path tracing, patterns, congestion risk
(Gliksberg's A2A / RP / SP) and hot-spot degree (Zahavi's HSD).

Checked against a plain-Python table walker and brute-force per-link sets,
a hand-computed tiny fabric, analytic A2A values of complete trees, Zahavi's
Theorems 1-3 (congestion-free CPS with topological order) and his Table 3
(random-order HSD)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from smroute.analysis import patterns as P
from smroute.analysis.congestion import (
    a2a_risk,
    congestion_risk,
    evaluate,
    hsd_random_orders,
    link_loads,
    rp_risk,
    sp_risk,
)
from smroute.analysis.paths import (
    DEAD_END,
    LOOP,
    OK,
    PairPaths,
    RoutingView,
    pair_paths,
    routing_view,
    trace,
)
from smroute.errors import InputError
from smroute.fabric.generate.trees import degrade, pgft, topological_host_order
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.model.builder import FabricBuilder
from smroute.routing.engine import RoutingResult, route
from smroute.tables.lft import NO_ROUTE, ForwardingTables

FIG = (3, (2, 2, 3), (1, 2, 2), (1, 2, 1))  # Gliksberg Fig. 1 / Zahavi, parallel links
RLFT2 = (2, (12, 12), (1, 6), (1, 2))  # Zahavi Table 3, 144 end-ports, K = 12
RLFT2_SMALL = (2, (4, 8), (1, 4), (1, 1))
RLFT3 = (3, (4, 4, 8), (1, 4, 4), (1, 1, 1))  # 128 end-ports, K = 4
RLFT3_B = (3, (6, 6, 12), (1, 6, 6), (1, 1, 1))  # 432 end-ports, K = 6


def _ids(spec: tuple) -> str:
    return "PGFT({};{};{};{})".format(
        spec[0], *(",".join(map(str, x)) for x in spec[1:]))


_CACHE: dict[tuple, tuple[Fabric, RoutingResult, RoutingView, PairPaths]] = {}


def routed(spec: tuple) -> tuple[Fabric, RoutingResult, RoutingView, PairPaths]:
    if spec not in _CACHE:
        f = pgft(*spec)
        r = route(f, workers=1)
        v = routing_view(f, r.tables)
        _CACHE[spec] = (f, r, v, pair_paths(v))
    return _CACHE[spec]


# =========================================================================== reference
def _ref_walk(f: Fabric, t: ForwardingTables, src_row: int, dst_row: int,
              max_hops: int = 64) -> tuple[int, list[tuple]]:
    """Plain-Python walk: (status, [link keys]) with link keys ("inj", row) or
    (switch guid, port)."""
    lid = int(f.port_lid[dst_row])
    rows = {int(g): i for i, g in enumerate(t.switch_guid.tolist())}
    links: list[tuple] = [("inj", src_row)]
    node = int(f.port_node[f.port_peer[src_row]])
    for _ in range(max_hops + 1):
        g = int(f.node_guid[node])
        if g not in rows or lid >= t.ports.shape[1]:
            return DEAD_END, links
        p = int(t.ports[rows[g], lid])
        if p == NO_ROUTE or p == 0 or p > int(f.num_ports[node]):
            return DEAD_END, links
        peer = int(f.port_peer[int(f.port_start[node]) + p])
        if peer < 0:
            return DEAD_END, links
        links.append((g, p))
        pn = int(f.port_node[peer])
        if f.node_type[pn] == NodeType.SWITCH:
            node = pn
            continue
        return (OK if peer == dst_row else DEAD_END), links
    return LOOP, links


def _key_of(v: RoutingView, link: int) -> tuple:
    if v.link_switch[link] >= 0:
        return (int(v.sw_guid[v.link_switch[link]]), int(v.link_port[link]))
    return ("inj", int(v.ep_row[v.link_ep[link]]))


def _ref_stage(f: Fabric, t: ForwardingTables, v: RoutingView, src_ep, dst_ep):
    """Brute force for one stage: (max flows, max risk, unroutable, flows per key)."""
    n_flows: dict[tuple, int] = defaultdict(int)
    srcs: dict[tuple, set] = defaultdict(set)
    dsts: dict[tuple, set] = defaultdict(set)
    bad = 0
    for s, d in zip(np.asarray(src_ep).tolist(), np.asarray(dst_ep).tolist(), strict=True):
        if s == d:
            continue
        st, links = _ref_walk(f, t, int(v.ep_row[s]), int(v.ep_row[d]), v.max_hops)
        if st != OK:
            bad += 1
            continue
        for k in links:
            n_flows[k] += 1
            srcs[k].add(s)
            dsts[k].add(d)
    mf = max(n_flows.values(), default=0)
    risk = max((min(len(srcs[k]), len(dsts[k])) for k in n_flows), default=0)
    return mf, risk, bad, n_flows


def _degraded(seed: int = 1, switches: int = 4, links: int = 20):
    f, _ = degrade(pgft(*RLFT3), np.random.default_rng(seed), switches=switches, links=links)
    r = route(f, workers=1)
    v = routing_view(f, r.tables)
    return f, r, v, pair_paths(v)


# =========================================================================== tiny fabric
def tiny(tables: dict[str, dict[int, int]] | None = None) -> tuple[Fabric, ForwardingTables]:
    """Hosts h0,h1 on leaf A (ports 1,2), h2,h3 on leaf B; spines S0 (A:3,
    B:3) and S1 (A:4, B:4).  Host LIDs 1..4.  Default tables: A sends h2 AND
    h3 via S0; B sends h0 via S0 and h1 via S1; spines go straight down."""
    b = FabricBuilder()
    hosts = [b.add_node(NodeType.CA, 0x100 + i, 1, f"h{i}") for i in range(4)]
    la = b.add_node(NodeType.SWITCH, 0x200, 4, "A")
    lb = b.add_node(NodeType.SWITCH, 0x201, 4, "B")
    s0 = b.add_node(NodeType.SWITCH, 0x300, 2, "S0")
    s1 = b.add_node(NodeType.SWITCH, 0x301, 2, "S1")
    for i, h in enumerate(hosts):
        b.set_port(h, 1, guid=0x1000 + i, lid=i + 1)
        b.add_link(h, 1, la if i < 2 else lb, 1 + i % 2)
    for k, sw in enumerate((la, lb, s0, s1)):
        b.set_port(sw, 0, guid=0x200 + k, lid=5 + k)
    for leaf, down in ((la, 1), (lb, 2)):
        b.add_link(leaf, 3, s0, down)
        b.add_link(leaf, 4, s1, down)
    f = b.build()
    t = {
        "A": {1: 1, 2: 2, 3: 3, 4: 3},
        "B": {1: 3, 2: 4, 3: 1, 4: 2},
        "S0": {1: 1, 2: 1, 3: 2, 4: 2},
        "S1": {1: 1, 2: 1, 3: 2, 4: 2},
    }
    for name, entries in (tables or {}).items():
        t[name].update(entries)
    names = ["A", "B", "S0", "S1"]
    ports = np.full((4, 9), NO_ROUTE, dtype=np.uint8)
    for i, name in enumerate(names):
        for lid, p in t[name].items():
            ports[i, lid] = p
    guids = np.array([0x200, 0x201, 0x300, 0x301], dtype=np.uint64)
    return f, ForwardingTables(guids, np.arange(5, 9), tuple(names), ports)


def _tiny_view(tables=None):
    f, t = tiny(tables)
    v = routing_view(f, t)
    pp = pair_paths(v)
    order = P.host_order(v, ["h0", "h1", "h2", "h3"])
    return f, t, v, pp, order


def _link(v: RoutingView, switch: str, port: int) -> int:
    s = v.fabric.node_desc.index(switch)
    sid = int(np.flatnonzero(v.sw_node == s)[0])
    return int(v.link_of[sid * 256 + port])


def test_tiny_hand_computed() -> None:
    f, t, v, pp, order = _tiny_view()
    assert v.n_endports == 4 and v.n_leaves == 2
    assert v.n_links == 8 + 4 + 4  # 4 cables leaf-spine x 2 directions, delivery, injection
    # A2A: A->S0 and S0->B carry {h0,h1} -> {h2,h3}: risk 2; the rest 1
    a = a2a_risk(v, pp)
    assert a.value == 2 and a.unroutable == 0 and a.flows == 12
    for sw, port in (("A", 3), ("S0", 2)):
        k = _link(v, sw, port)
        assert (a.n_src[k], a.n_dst[k], a.risk[k]) == (2, 2, 2)
    k = _link(v, "B", 3)  # h2,h3 -> h0 only
    assert (a.n_src[k], a.n_dst[k]) == (2, 1)
    k = _link(v, "A", 1)  # delivers to h0: from h1, h2, h3
    assert (a.n_src[k], a.n_dst[k]) == (3, 1)
    assert (a.n_src[v.inj_link[0]], a.n_dst[v.inj_link[0]]) == (1, 3)
    assert a.risk[_link(v, "A", 4)] == 0  # A never uses S1
    # SP over h0..h3: s=1 -> 1, s=2 -> h0->h2 and h1->h3 share A->S0: 2, s=3 -> 1
    sp = sp_risk(v, pp, order)
    assert sp.risk.tolist() == [1, 2, 1] and sp.max_flows.tolist() == [1, 2, 1]
    assert sp.risk_max == 2 and sp.labels == ("s=1", "s=2", "s=3")
    assert sp.flows.tolist() == [4, 4, 4]
    loads, bad = link_loads(v, pp, order, np.roll(order, -2))
    assert bad == 0
    assert loads[_link(v, "A", 3)] == 2 and loads[_link(v, "S0", 2)] == 2
    assert loads[_link(v, "B", 3)] == 1 and loads[_link(v, "B", 4)] == 1
    assert loads[v.inj_link].tolist() == [1, 1, 1, 1]
    assert loads[v.deliver_link].tolist() == [1, 1, 1, 1]
    assert loads.sum() == 4 * 4  # each flow: injection, up, down, delivery
    # a non-permutation stage: h0->h2, h0->h3, h1->h2 all cross A->S0:
    # 3 flows (HSD 3) but 2 sources and 2 destinations (risk 2)
    pat = P.explicit("fan", 4, [([0, 0, 1], [2, 3, 2])])
    assert not pat.permutation
    m = evaluate(v, pp, pat, order)
    assert (m.max_flows[0], m.risk[0], m.flows[0]) == (3, 2, 3)
    # the same stage written as A2A gives the A2A value
    m = evaluate(v, pp, P.all_to_all(4), order)
    assert m.risk_max == a.value == 2 and m.max_flows[0] == 4  # A->S0: 4 flows


def test_tiny_unroutable_and_loop() -> None:
    # B has no route to h1: h2->h1 and h3->h1 are dead ends
    f, t, v, pp, order = _tiny_view({"B": {2: NO_ROUTE}})
    a = a2a_risk(v, pp)
    assert a.unroutable == 2
    sp = sp_risk(v, pp, order)
    assert sp.unroutable.tolist() == [0, 1, 1] and sp.total_unroutable == 2
    tr = trace(v, [2, 3, 0], [1, 1, 1])
    assert tr.status.tolist() == [DEAD_END, DEAD_END, OK]
    assert (tr.links[:2, 1:] == -1).all()
    assert tr.hops.tolist() == [1, 1, 2]  # h0 -> h1 stays on leaf A
    # B sends h1 to S1, S1 sends it back to B: a loop
    f, t, v, pp, order = _tiny_view({"S1": {2: 2}})
    tr = trace(v, [2], [1])
    assert tr.status[0] == LOOP
    assert tr.hops[0] == v.max_hops + 2  # injection + max_hops + 1 switch hops
    assert pp.unroutable_pairs == 1  # (leaf B, h1)
    assert sp_risk(v, pp, order).total_unroutable == 2
    # a port leading to the wrong host, a port to nowhere, the management port
    for bad in ({"A": {3: 1}}, {"A": {3: 0}}, {"S0": {3: 2, 4: 2}, "A": {3: 3}}):
        f, t, v, pp, order = _tiny_view(bad)
        st, _ = _ref_walk(f, t, int(v.ep_row[0]), int(v.ep_row[2]))
        assert trace(v, [0], [2]).status[0] == st


def test_tables_matched_by_guid() -> None:
    f, t = tiny()
    v = routing_view(f, t)
    base = evaluate(v, pair_paths(v), P.shifts(4), P.host_order(v, ["h0", "h1", "h2", "h3"]))
    # rows in another order (as read back from another subnet manager), wider
    perm = np.array([3, 1, 0, 2])
    wide = np.full((4, 40), NO_ROUTE, dtype=np.uint8)
    wide[:, :9] = t.ports[perm]
    t2 = ForwardingTables(t.switch_guid[perm], t.switch_lid[perm],
                          tuple(t.switch_desc[i] for i in perm), wide)
    v2 = routing_view(f, t2)
    m = evaluate(v2, pair_paths(v2), P.shifts(4), P.host_order(v2, ["h0", "h1", "h2", "h3"]))
    assert m.risk.tolist() == base.risk.tolist()
    # a switch missing from the tables routes nothing
    keep = np.array([0, 1, 2])  # no S1
    t3 = ForwardingTables(t.switch_guid[keep], t.switch_lid[keep], ("A", "B", "S0"),
                          t.ports[keep])
    v3 = routing_view(f, t3)
    assert v3.missing_switches.tolist() == [int(np.flatnonzero(v3.sw_guid == 0x301)[0])]
    assert a2a_risk(v3, pair_paths(v3)).unroutable == 2  # h2, h3 -> h1 via S1


def test_tables_read_back_from_opensm_dump() -> None:
    """Tables written as ``opensm-lfts.dump`` and parsed back (as OpenSM's are)
    give the same paths and metrics."""
    from smroute.tables.formats import format_opensm, parse_lft_dump

    f, r, v, pp = routed(FIG)
    back = parse_lft_dump(format_opensm(r.tables).splitlines(), "dump")
    v2 = routing_view(f, back)
    pp2 = pair_paths(v2)
    assert np.array_equal(pp2.links, pp.links) and np.array_equal(pp2.status, pp.status)
    order = P.topological_order(v2, r)
    c1 = congestion_risk(v, pp, order, np.random.default_rng(4), samples=30)
    c2 = congestion_risk(v2, pp2, order, np.random.default_rng(4), samples=30)
    assert c1.values == c2.values == {"A2A": 2.0, "RP": c1.rp.risk_median, "SP": 1.0}


# =========================================================================== tracing
@pytest.mark.parametrize("case", ["fig", "degraded"])
def test_trace_matches_reference_walker(case: str) -> None:
    # degraded: heavy enough to cut some hosts off (undeliverable flows)
    f, r, v, pp = routed(FIG) if case == "fig" else _degraded(seed=5, links=80)
    t = r.tables
    e = v.n_endports
    s, d = np.repeat(np.arange(e), e), np.tile(np.arange(e), e)
    keep = s != d
    s, d = s[keep], d[keep]
    tr = trace(v, s, d)
    gathered = pp.flow_links(v, s, d)
    assert np.array_equal(gathered.status, tr.status)
    n_bad = 0
    for i in range(len(s)):
        st, links = _ref_walk(f, t, int(v.ep_row[s[i]]), int(v.ep_row[d[i]]), v.max_hops)
        assert tr.status[i] == st
        got = [_key_of(v, int(x)) for x in tr.links[i] if x >= 0]
        if st == OK:
            assert got == links and tr.hops[i] == len(links)
            gl = [_key_of(v, int(x)) for x in gathered.links[i] if x >= 0]
            assert gl == links and gathered.hops[i] == len(links)
        else:
            n_bad += 1
            assert got == links[: len(got)]
    if case == "degraded":
        assert n_bad > 0


def test_view_layout() -> None:
    f, r, v, pp = routed(FIG)
    n_ss = int(((f.node_type[f.port_node[f.link_a]] == NodeType.SWITCH)
                & (f.node_type[f.port_node[f.link_b]] == NodeType.SWITCH)).sum())
    assert v.n_endports == len(f.cas) == 12
    assert v.n_core == 2 * n_ss
    assert v.n_links == v.n_core + 2 * v.n_endports
    assert (v.link_switch[: v.n_core] >= 0).all()
    assert (v.link_ep[v.deliver_link] == np.arange(12)).all()
    assert (v.link_ep[v.inj_link] == np.arange(12)).all()
    assert "->" in v.describe_link(int(v.inj_link[0]))
    g, port = v.link_guid_port([0, int(v.inj_link[3]), int(v.deliver_link[3])])
    assert g[0] == v.sw_guid[v.link_switch[0]] and port[0] == v.link_port[0]
    assert g[1] == f.node_guid[v.ep_node[3]] and port[1] == f.port_num[v.ep_row[3]]
    assert g[2] == v.sw_guid[v.ep_leaf[3]] and port[2] == v.ep_leaf_port[3]
    assert pp.links.shape == (v.n_leaves * 12, 4)  # leaf -> L2 -> L3 -> L2 -> leaf
    assert pp.all_ok
    # every end-port's row maps back
    assert (v.endports_of_rows(v.ep_row) == np.arange(12)).all()
    assert v.endports_of_rows([0])[0] == -1  # port 0 of the first CA does not exist


# =========================================================================== patterns
def test_pattern_definitions() -> None:
    def stages(p: P.Pattern) -> list[list[tuple[int, int]]]:
        return [sorted(zip(s.tolist(), d.tolist(), strict=True)) for s, d in p]

    assert stages(P.ring(4)) == [[(0, 1), (1, 2), (2, 3), (3, 0)]]
    assert stages(P.shift(5, 2)) == [[(0, 2), (1, 3), (2, 4), (3, 0), (4, 1)]]
    assert len(P.shifts(7)) == 6 and P.shifts(7)[-1][1].tolist() == [6, 0, 1, 2, 3, 4, 5]
    assert [d[0] for _, d in P.dissemination(6)] == [1, 2, 4]  # s = 0, 1, 2
    assert stages(P.binomial(6)) == [[(0, 1)], [(0, 2), (1, 3)], [(0, 4), (1, 5)]]
    assert stages(P.binomial(6, reverse=True)) == [[(4, 0), (5, 1)], [(2, 0), (3, 1)],
                                                   [(1, 0)]]
    assert stages(P.tournament(6)) == [[(1, 0), (3, 2), (5, 4)], [(2, 0)], [(4, 0)]]
    rd = P.recursive_doubling(6)  # P = 4: pre, s=0, s=1, post
    assert rd.labels == ("pre", "s=0", "s=1", "post")
    assert stages(rd) == [
        [(4, 0), (5, 1)],
        [(0, 1), (1, 0), (2, 3), (3, 2)],
        [(0, 2), (1, 3), (2, 0), (3, 1)],
        [(0, 4), (1, 5)],
    ]
    rh = P.recursive_halving(6)
    assert rh.labels == ("pre", "s=1", "s=0", "post") and stages(rh)[1] == stages(rd)[2]
    assert P.recursive_doubling(8).labels == ("s=0", "s=1", "s=2")  # no pre/post
    # tree-aware: 2 leaves of 3 hosts: level 1 (m=3, L=1, E=2): pre 2->0, 5->3;
    # 0<->1, 3<->4; post; level 2 (m=2): i <-> i + 3 for all i
    tree = P.recursive_doubling_tree(6, (3, 2))
    assert tree.labels == ("1.pre", "1.0", "1.post", "2.0")
    assert stages(tree) == [
        [(2, 0), (5, 3)], [(0, 1), (1, 0), (3, 4), (4, 3)], [(0, 2), (3, 5)],
        [(0, 3), (1, 4), (2, 5), (3, 0), (4, 1), (5, 2)],
    ]
    a2a = P.all_to_all(4)
    assert len(a2a) == 1 and len(a2a[0][0]) == 12 and not a2a.permutation
    for name in P.CPS:
        p = P.cps(name, 12)
        assert p.permutation and len(p) > 0
        for s, d in p:
            assert len(np.unique(s)) == len(s) and len(np.unique(d)) == len(d)
            assert ((s >= 0) & (s < 12) & (d >= 0) & (d < 12) & (s != d)).all()
    with pytest.raises(InputError):
        P.cps("butterfly", 4)
    with pytest.raises(InputError):
        P.explicit("bad", 3, [([0], [3])])


def test_pattern_batch_equals_stages() -> None:
    rng = np.random.default_rng(7)
    for p in (P.shifts(9), P.dissemination(9), P.random_permutations(9, rng, 5),
              P.tournament(9), P.recursive_doubling(9)):
        src, dst, stg = p.batch(1, len(p))
        for k in range(1, len(p)):
            s, d = p[k]
            sel = stg == k - 1
            assert np.array_equal(src[sel], s) and np.array_equal(dst[sel], d)
    r1 = P.random_permutations(10, np.random.default_rng(3), 4)
    r2 = P.random_permutations(10, np.random.default_rng(3), 4)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(r1, r2, strict=True))
    assert all(sorted(d.tolist()) == list(range(10)) for _, d in r1)


def test_orders() -> None:
    f, r, v, pp = routed(FIG)
    topo = P.topological_order(v, r)
    # Dmodc's NIDs on a complete PGFT are Zahavi's end-port index order
    assert np.array_equal(v.ep_node[topo], topological_host_order(f))
    names = [f.node_desc[n] for n in v.ep_node[topo][::-1].tolist()]
    assert np.array_equal(P.host_order(v, names), topo[::-1])
    guids = [int(f.node_guid[v.ep_node[e]]) for e in topo[:3]]
    assert np.array_equal(P.host_order(v, guids), topo[:3])
    pg = [hex(int(v.ep_guid[e])) for e in topo[:3]]
    assert np.array_equal(P.host_order(v, pg), topo[:3])
    with pytest.raises(InputError):
        P.host_order(v, ["no such host"])
    with pytest.raises(InputError):
        P.host_order(v, [names[0], names[0]])
    a = P.random_order(v, np.random.default_rng(1))
    assert np.array_equal(a, P.random_order(v, np.random.default_rng(1)))
    assert sorted(a.tolist()) == list(range(v.n_endports))
    with pytest.raises(ValueError):
        evaluate(v, pp, P.ring(3), np.array([0, 0, 1]))


def test_job_files() -> None:
    """One parser for job host lists (analyze --order FILE, lids --job,
    SelectLids): ``#`` comments anywhere, errors name the line."""
    f, r, v, pp = routed(FIG)
    topo = P.topological_order(v, r)
    names = [f.node_desc[n] for n in v.ep_node[topo].tolist()]
    lines = ["# job 7", "", f"{names[2]}  # first rank", hex(int(v.ep_guid[topo[0]])), names[1]]
    entries = P.parse_job(lines, "job")
    assert entries == [(3, names[2]), (4, hex(int(v.ep_guid[topo[0]]))), (5, names[1])]
    assert np.array_equal(P.resolve_job(v, entries, "job"), topo[[2, 0, 1]])
    with pytest.raises(InputError, match="job:5: host .* listed twice \\(first on line 3\\)"):
        P.resolve_job(v, [*entries[:2], (5, names[2])], "job")
    with pytest.raises(InputError, match="job:4: no CA with node description 'nope'"):
        P.resolve_job(v, [entries[0], (4, "nope")], "job")
    with pytest.raises(InputError, match="job: no host listed"):
        P.parse_job(["# nothing", "  "], "job")


# =========================================================================== theorems
@pytest.mark.parametrize("spec", [FIG, RLFT2, RLFT2_SMALL, RLFT3, RLFT3_B], ids=_ids)
def test_unidirectional_cps_congestion_free(spec: tuple) -> None:
    """Zahavi Theorems 1-2 / Table 3: with Dmodc tables and topological order
    every unidirectional CPS has HSD 1 on every stage, and SP risk is 1;
    Theorem 3: so has the tree-aware recursive doubling."""
    f, r, v, pp = routed(spec)
    order = P.topological_order(v, r)
    n = len(order)
    sp = sp_risk(v, pp, order)
    assert sp.n_stages == n - 1 and sp.risk_max == 1 and sp.total_unroutable == 0
    for name in P.UNIDIRECTIONAL:
        m = evaluate(v, pp, P.cps(name, n), order)
        assert m.hsd_max == 1 and m.hsd_avg == 1.0 and m.risk_max == 1, name
    m = evaluate(v, pp, P.binomial(n, reverse=True), order)
    assert m.hsd_max == 1
    m = evaluate(v, pp, P.recursive_doubling_tree(n, spec[1]), order)
    assert m.hsd_max == 1


def test_partial_job_congestion_free() -> None:
    """Zahavi V.B: a contiguous allocation of ``i * prod(w)`` end-ports keeps
    every shift congestion-free."""
    f, r, v, pp = routed(RLFT3)
    order = P.topological_order(v, r)
    for n in (16, 48, 96):  # prod(w) = 16
        assert sp_risk(v, pp, order[:n]).risk_max == 1
        assert sp_risk(v, pp, order[n:2 * n]).risk_max == 1


def test_flat_recursive_doubling_blocks_when_leaves_are_not_powers_of_two() -> None:
    """The MPI-style recursive doubling is not congestion-free with 12 hosts
    per leaf; the tree-aware one (section VI) is."""
    f, r, v, pp = routed(RLFT2)
    order = P.topological_order(v, r)
    assert evaluate(v, pp, P.recursive_doubling(144), order).hsd_max == 2
    assert evaluate(v, pp, P.recursive_doubling_tree(144, (12, 12)), order).hsd_max == 1


def test_random_order_hsd_vs_zahavi_table3() -> None:
    """Random node orders congest: Zahavi Table 3 (K=12, 144 end-ports, Shift)
    reports an average HSD of 3.75 and 2.9 for recursive doubling.  The row's
    printed tuple (2;12,12;1,12;1,2) is not an RLFT (leaves would have 36 ports);
    the K=12 RLFT with 144 end-ports is PGFT(2;12,12;1,6;1,2)."""
    rng = np.random.default_rng(2010)
    f, r, v, pp = routed(RLFT2)
    sh = hsd_random_orders(v, pp, P.shifts(144), rng, orders=25)
    assert 3.5 < sh.mean < 4.0  # Zahavi: 3.75
    assert sh.min > 3.0 and sh.max_flows.shape == (25, 143)
    rd = hsd_random_orders(v, pp, P.recursive_doubling(144), rng, orders=25)
    assert 2.4 < rd.mean < 3.6  # Zahavi: 2.9
    # the tuple as printed: still clearly congested
    f, r, v, pp = routed((2, (12, 12), (1, 12), (1, 2)))
    assert hsd_random_orders(v, pp, P.shifts(144), rng, orders=5).mean > 2.5
    # 3 levels, K=4: the topological order's 1 becomes several
    f, r, v, pp = routed(RLFT3)
    assert hsd_random_orders(v, pp, P.shifts(128), rng, orders=5).mean > 3.0
    assert sp_risk(v, pp, P.random_order(v, rng)).risk_max > 3


# =========================================================================== A2A
@pytest.mark.parametrize("spec", [
    (2, (4, 8), (1, 4), (1, 1)),
    (2, (12, 12), (1, 6), (1, 2)),
    (2, (6, 4), (1, 6), (1, 1)),
    (2, (8, 4), (1, 2), (1, 2)),  # 2 hosts per up-port
    (2, (6, 5), (1, 3), (1, 1)),
    (2, (3, 6), (1, 1), (1, 1)),  # a single spine
], ids=_ids)
def test_a2a_two_level_analytic(spec: tuple) -> None:
    """Complete PGFT(2; m1, m2; 1, w2; 1, p2) with ``u = w2 p2`` up-ports per
    leaf and ``m1 = c u``.  Dmodc sends destination NID ``t`` up through the
    leaf port of residue ``t mod u`` (group ``t mod w2``, link ``floor(t/w2)
    mod p2``) and down the same-numbered parallel link, and NIDs are
    contiguous per leaf, so:

    * leaf up-link: sources = the ``m1`` hosts of the leaf; destinations =
      the ``c`` hosts of each of the ``m2 - 1`` other leaves with that residue;
    * spine down-link to a leaf: destinations = its ``c`` hosts of that
      residue; sources = the ``N - m1`` hosts elsewhere;
    * host links have one source or one destination.

    A2A risk = ``max(min(m1, c (m2 - 1)), min(c, N - m1))``."""
    _, (m1, m2), (_, w2), (_, p2) = spec
    u = w2 * p2
    c = m1 // u
    assert c * u == m1
    f, r, v, pp = routed(spec)
    a = a2a_risk(v, pp)
    want = max(min(m1, c * (m2 - 1)), min(c, m1 * m2 - m1))
    assert a.value == want
    assert a.unroutable == 0 and a.flows == m1 * m2 * (m1 * m2 - 1)
    # every leaf up-link has exactly those counts
    up = [k for k in range(v.n_core)
          if v.sw_level[v.link_switch[k]] == 0]
    assert set(a.n_src[up].tolist()) == {m1}
    assert set(a.n_dst[up].tolist()) == {c * (m2 - 1)}


@pytest.mark.parametrize("spec", [RLFT3, (3, (2, 2, 4), (1, 2, 2), (1, 1, 1)),
                                  (3, (4, 4, 4), (1, 4, 2), (1, 1, 2))], ids=_ids)
def test_a2a_three_level_rlft_analytic(spec: tuple) -> None:
    """Complete 3-level RLFT with ``p2 = 1``: ``m1`` up-ports per leaf and
    ``m1 m2`` residues above L2, so a leaf up-link carries ``m1`` sources and
    ``(N - m1) / m1`` destinations, an L2 up-link the ``m1 m2`` hosts of its
    subtree as sources and ``(N - m1 m2) / (m1 m2)`` destinations; down-links
    carry one destination."""
    _, (m1, m2, m3), _, _ = spec
    n = m1 * m2 * m3
    f, r, v, pp = routed(spec)
    want = max(min(m1, (n - m1) // m1), min(m1 * m2, (n - m1 * m2) // (m1 * m2)))
    assert a2a_risk(v, pp).value == want


# =========================================================================== brute force
@pytest.mark.parametrize("case", ["fig", "degraded"])
def test_metrics_match_brute_force(case: str) -> None:
    # degraded: heavy enough to cut some hosts off (undeliverable flows)
    f, r, v, pp = routed(FIG) if case == "fig" else _degraded(seed=5, links=80)
    t = r.tables
    rng = np.random.default_rng(11)
    e = v.n_endports
    order = P.random_order(v, rng)
    # permutation stages (fast path) and general stages with repeated endpoints
    stages = [(np.arange(e), rng.permutation(e)) for _ in range(3)]
    stages += [(rng.integers(0, e, 3 * e), rng.integers(0, e, 3 * e)) for _ in range(3)]
    for pat in (P.explicit("perm", e, stages[:3]), P.explicit("mixed", e, stages),
                P.shifts(e), P.tournament(e), P.recursive_doubling(e)):
        m = evaluate(v, pp, pat, order)
        for k, (s, d) in enumerate(pat):
            mf, risk, bad, _ = _ref_stage(f, t, v, order[s], order[d])
            assert (m.max_flows[k], m.risk[k], m.unroutable[k]) == (mf, risk, bad), (
                pat.name, k)
    # A2A against brute force over all pairs, and the generic evaluation of it
    a = a2a_risk(v, pp)
    src, dst = P.all_to_all(e)[0]
    mf, risk, bad, flows = _ref_stage(f, t, v, src, dst)
    assert (a.value, a.unroutable) == (risk, bad)
    m = evaluate(v, pp, P.all_to_all(e), np.arange(e))
    assert (m.max_flows[0], m.risk[0], m.unroutable[0]) == (mf, risk, bad)
    loads, nbad = link_loads(v, pp, src, dst)
    assert nbad == bad
    assert {_key_of(v, k): int(x) for k, x in enumerate(loads) if x} == dict(flows)
    # A2A over a subset of participants (a job)
    part = rng.choice(e, size=e // 2, replace=False)
    s2 = np.repeat(part, len(part))
    d2 = np.tile(part, len(part))
    _, risk2, bad2, _ = _ref_stage(f, t, v, s2, d2)
    a2 = a2a_risk(v, pp, part)
    assert (a2.value, a2.unroutable) == (risk2, bad2)


def test_degraded_tree_metrics() -> None:
    f, r, v, pp = _degraded(seed=0, switches=10, links=60)
    assert not pp.all_ok
    order = P.topological_order(v, r)
    cr = congestion_risk(v, pp, order, np.random.default_rng(0), samples=50)
    vals = cr.values
    assert vals["A2A"] >= vals["SP"] >= 1 and vals["RP"] >= 1
    # every ordered pair is in exactly one shift: SP and A2A miss the same flows
    bad = cr.unroutable
    assert bad["SP"] == bad["A2A"] > 0 and bad["RP"] > 0
    n = len(order)
    e_bad = 0
    for i in range(n):  # count undelivered pairs from the pair table
        lr = v.ep_leaf_row[order[i]]
        st = pp.status.reshape(v.n_leaves, v.n_endports)[lr, order]
        e_bad += int((st != OK).sum()) - int(st[i] != OK)
    assert e_bad == bad["A2A"]
    assert cr.rp.n_stages == 50 and cr.sp.n_stages == n - 1
    # the complete tree is better on every metric
    f0, r0, v0, pp0 = routed(RLFT3)
    c0 = congestion_risk(v0, pp0, P.topological_order(v0, r0), np.random.default_rng(0),
                         samples=50)
    assert c0.values["SP"] == 1 and c0.values["A2A"] == 7
    assert vals["SP"] > 1 and vals["A2A"] >= 7
    assert all(x == 0 for x in c0.unroutable.values())


def test_rp_seeded() -> None:
    f, r, v, pp = routed(RLFT3)
    order = P.topological_order(v, r)
    a = rp_risk(v, pp, order, np.random.default_rng(5), samples=200)
    b = rp_risk(v, pp, order, np.random.default_rng(5), samples=200)
    assert np.array_equal(a.risk, b.risk) and a.n_stages == 200
    assert a.risk_median == float(np.median(a.risk)) and a.risk_median > 1
    s = a.summary()
    assert s["pattern"] == "random permutation" and s["stages"] == 200
