"""Nmodc's redirect digit where the end-ports do not fill the tree
(smroute/routing/nmodc/nominal.redirect_dividers): a few leaves under a
large director, one leaf cable lost; the lost slot's destinations spread
over the leaf's other cables instead of piling onto one or two."""

from __future__ import annotations

import numpy as np

from smroute.analysis.congestion import a2a_risk
from smroute.analysis.paths import pair_paths, routing_view
from smroute.fabric.generate.sitegen import QUANTUM2, Site
from smroute.fabric.generate.trees import pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing import dmodc
from smroute.routing.engine import route, validate_result
from smroute.routing.nmodc import nominal
from smroute.routing.topology import switch_graph


def _director_site() -> tuple[Fabric, int]:
    """10 leaves of 32 hosts, 16 cables each to the 32 line ASICs of a
    64-port director (16 spine ASICs); the fabric and the link between the
    third leaf and its seventh line ASIC."""
    site = Site(speed="NDR")
    leaves = site.switches([f"leaf{i + 1:02d}" for i in range(10)], 64, QUANTUM2)
    for i, leaf in enumerate(leaves):
        for c in range(32):
            site.host(leaf, f"cn{i:02d}-{c:02d} mlx5_0")
    d = site.director("core1", "QM9790", line_asics=32, spine_asics=16, radix=64,
                      device=QUANTUM2)
    for leaf in leaves:
        site.cable_director(leaf, d, 16)
    f = site.build(np.random.default_rng(3))
    a, b = f.port_node[f.link_a], f.port_node[f.link_b]
    leaf3, line7 = leaves[2], d.line[(2 * 16 + 6) % 32]
    cut = np.flatnonzero(((a == leaf3) & (b == line7)) | ((a == line7) & (b == leaf3)))
    return f, int(cut[0])


def test_a_lost_slot_spreads_over_the_other_cables() -> None:
    f, cut = _director_site()
    full = route(f, algorithm="nmodc", workers=1, labels=False)
    lost = f.with_removed(links=[cut])
    r = route(lost, algorithm="nmodc", workers=1, labels=False)
    assert validate_result(r).ok
    g = r.graph
    leaf = int(np.flatnonzero(np.bincount(g.grp_switch[g.rank[g.grp_remote] > 0])
                              == 15)[0])  # the leaf that lost a cable
    remote = g.ep_lid[g.ep_switch != leaf]
    per = np.bincount(r.tables.ports[leaf, remote])
    per = per[per > 0]
    # 288 destinations on 15 cables: 19-20 each, and the lost slot's 18 one
    # or two more (by the tops' divider 256 alone 13 of them went one way)
    assert len(per) == 15 and per.max() <= 22, per.tolist()

    def a2a(fab: Fabric, tables: object) -> int:
        view = routing_view(fab, tables)  # type: ignore[arg-type]
        return a2a_risk(view, pair_paths(view)).value

    assert a2a(lost, r.tables) <= a2a(f, full.tables) + 2 <= 22


def test_a_full_tree_keeps_the_tops_divider() -> None:
    """Where the NIDs fill the tree, the redirect digit is the one above
    the tops (what the degradation study's trees route with)."""
    for f in (pgft(2, (18, 36), (1, 18), (1, 1)), pgft(3, (4, 4, 8), (1, 4, 4), (1, 1, 1))):
        g = switch_graph(f)
        slots = nominal.nominal_slots(g)
        pi = nominal.nominal_dividers(g, slots.arity)
        rd = nominal.redirect_dividers(g, pi, len(g.ep_switch))
        top = pi[g.rank == g.max_rank].max()
        assert (rd[g.rank == 0] == top).all()
        assert np.array_equal(pi, dmodc.dividers(g))
