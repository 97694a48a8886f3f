"""ibutils' real ``ibdmchk`` checks our ``opensm.fdbs`` + ``opensm-subnet.lst``.

``ibdmchk -s opensm-subnet.lst -f opensm.fdbs -m opensm.mcfdbs`` walks every
CA-to-CA path through the tables and looks for credit loops.  Our routed
tables must pass on complete and degraded fat-trees; tables we break on
purpose (a wrong port, a missing entry, a credit loop) must be reported.  The
reference is what OpenSM itself dumps for the same fabric under ibsim.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from credit_loop import credit_loop_tables, loop_fabric

from smroute.cli.route_cmd import hop_table
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.lab.ibdmchk import IbdmchkReport, parse_ibdmchk, run_ibdmchk
from smroute.routing.engine import RoutingResult, route
from smroute.routing.validate import validate
from smroute.tables.formats import write_tables
from smroute.tables.lft import NO_ROUTE, ForwardingTables

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("ibdmchk") is None,
                       reason="ibdmchk (Debian package ibutils) is not installed"),
]


def _degraded() -> Fabric:
    full = pgft(3, [4, 4, 4], [1, 4, 2], [1, 1, 1])
    deg, removed = degrade(full, np.random.default_rng(20240607), switches=2, links=10)
    assert len(removed.nodes) == 2 and len(removed.links) == 10
    return deg


SHAPES: dict[str, Callable[[], Fabric]] = {
    # Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1): parallel links between levels 1 and 2
    "zahavi-pgft": lambda: pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]),
    # the bundled default: PGFT(2;18,36;1,18;1,1), 648 hosts, 54 switches
    "two-level-648": lambda: pgft(2, [18, 36], [1, 18], [1, 1]),
    "degraded-3-level": _degraded,
    # LMC 1: ibdmchk checks the base LIDs (its -l 1 mode fails on OpenSM's own dumps)
    "lmc1": lambda: pgft(2, [4, 3], [1, 2], [1, 2], lmc=1),
}


def _route(fabric: Fabric) -> RoutingResult:
    r = route(fabric, workers=1)
    v = validate(r.walk_graph, r.tables.ports, r.dest, r.costs)
    assert v.ok, v.summary()  # precondition: our own walk accepts them
    return r


def _write(fabric: Fabric, r: RoutingResult, d: Path, t: ForwardingTables | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    fdbs = d / "opensm.fdbs"
    written = write_tables(t if t is not None else r.tables, fdbs, "fdbs",
                           fabric=fabric, hops=hop_table(r))
    assert written == [fdbs, d / "opensm-subnet.lst"]
    return fdbs


def _check(fdbs: Path) -> IbdmchkReport:
    return run_ibdmchk(fdbs, fdbs.with_name("opensm-subnet.lst"), timeout=600)


def _ca_ports(f: Fabric) -> int:
    return int(((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0)).sum())


def _routed_entries(t: ForwardingTables) -> int:
    return int((t.ports[:, 1:] != NO_ROUTE).sum())


def _guid_name(guid: int) -> str:
    """How ibdm names a node from opensm-subnet.lst."""
    return f"S{guid:016x}/U1"


# --------------------------------------------------------------------------- accepted
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_ibdmchk_accepts_our_tables(shape: str, tmp_path: Path) -> None:
    fabric = SHAPES[shape]()
    r = _route(fabric)
    rep = _check(_write(fabric, r, tmp_path))
    assert rep.errors == [], rep.stdout[-3000:]
    linked = np.unique(fabric.port_node[fabric.link_a.tolist() + fabric.link_b.tolist()])
    assert rep.nodes == rep.systems == len(linked)  # subnet.lst lists links
    assert rep.fdb_switches == len(fabric.switches)
    assert rep.fdb_entries == _routed_entries(r.tables)
    n = _ca_ports(fabric)
    assert rep.ca_paths == n * (n - 1)  # every ordered CA pair was walked ...
    assert rep.missing_paths == 0 and rep.dead_ends == [] and rep.unreachable == []
    assert rep.credit_loops is False  # ... and no credit loop
    assert rep.ok


def test_ibdmchk_report_of_openSM_matches_ours_and_hops_agree(tmp_path: Path) -> None:
    """OpenSM's own dumps of the same fabric (ibsim, minhop): ibdmchk sees the
    same nodes and switches in both; our subnet.lst lists the same links; our
    hop counts to CAs equal OpenSM's minimal ones."""
    from smroute.fabric.export.writers import write_ibsim_net
    from smroute.lab.sim import IbSim, run_opensm

    fabric = SHAPES["zahavi-pgft"]()
    r = _route(fabric)
    ours = _write(fabric, r, tmp_path / "ours")
    net = tmp_path / "fabric.net"
    write_ibsim_net(fabric, net)
    with IbSim(net, tmp_path / "sim") as sim:
        osm = run_opensm(sim, tmp_path / "opensm", engine="minhop", log_flags=0x43)
    theirs = run_ibdmchk(osm.fdbs, osm.subnet_lst)
    mine = _check(ours)
    assert theirs.ok and mine.ok, theirs.stdout[-2000:]
    assert (mine.nodes, mine.fdb_switches, mine.ca_paths) == (
        theirs.nodes, theirs.fdb_switches, theirs.ca_paths)

    def links(path: Path) -> set[tuple[str, str, str, str]]:
        pat = re.compile(r"NodeGUID:([0-9a-f]{16}) .*? PN:([0-9A-F]{2}) \} \{ .*?"
                         r"NodeGUID:([0-9a-f]{16}) .*? PN:([0-9A-F]{2}) \}")
        found = {m.groups() for m in map(pat.search, path.read_text().splitlines()) if m}
        assert found
        return found  # type: ignore[return-value]

    assert links(ours.with_name("opensm-subnet.lst")) == links(osm.subnet_lst)

    def hops(path: Path) -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        sw = 0
        for line in path.read_text().splitlines():
            m = re.match(r"dump_ucast_routes: Switch (0x[0-9a-f]+)", line)
            if m:
                sw = int(m.group(1), 16)
                continue
            m = re.match(r"0x([0-9A-Fa-f]+) : (\d+)\s+: (\d+)", line)
            if m:
                out[(sw, int(m.group(1), 16))] = int(m.group(3))
        return out

    ca_lids = set(fabric.port_lid[(fabric.node_type[fabric.port_node] == NodeType.CA)
                                  & (fabric.port_peer >= 0)].tolist())
    h_ours, h_osm = hops(ours), hops(osm.fdbs)
    ca_ours = {k: v for k, v in h_ours.items() if k[1] in ca_lids}
    ca_osm = {k: v for k, v in h_osm.items() if k[1] in ca_lids}
    assert ca_ours == ca_osm and len(ca_ours) == len(fabric.switches) * len(ca_lids)
    # own LID: 0 hops on both
    for sw, lid in zip(r.tables.switch_guid.tolist(), r.tables.switch_lid.tolist(), strict=True):
        assert h_ours[(sw, lid)] == h_osm[(sw, lid)] == 0


# --------------------------------------------------------------------------- broken tables
def _leaf_and_remote_lid(fabric: Fabric, r: RoutingResult) -> tuple[int, int, int, int]:
    """A leaf switch (table row), a LID of a CA on another leaf, a port of the
    leaf leading to one of its own CAs, and the number of CAs on the leaf."""
    t = r.tables
    leaf_sw = int(r.graph.leaves[0])
    row = t.row_of(int(r.graph.sw_guid[leaf_sw]))
    node = int(r.graph.sw_node[leaf_sw])
    own = r.graph.ep_switch == leaf_sw
    other = np.flatnonzero(~own)
    lid = int(r.graph.ep_lid[other[0]])
    port = int(r.graph.ep_switch_port[np.flatnonzero(own)[0]])
    assert fabric.node_type[node] == NodeType.SWITCH and t.ports[row, lid] != port
    return row, lid, port, int(own.sum())


def _with(t: ForwardingTables, changes: list[tuple[int, int, int]]) -> ForwardingTables:
    ports = t.ports.copy()
    for row, lid, port in changes:
        ports[row, lid] = port
    return ForwardingTables(t.switch_guid, t.switch_lid, t.switch_desc, ports)


def test_ibdmchk_reports_a_wrong_port(tmp_path: Path) -> None:
    fabric = SHAPES["two-level-648"]()
    r = _route(fabric)
    row, lid, port, n_local = _leaf_and_remote_lid(fabric, r)
    # the leaf sends LID to one of its own hosts instead of up: every host of
    # that leaf loses its path to LID, nobody else does
    rep = _check(_write(fabric, r, tmp_path, _with(r.tables, [(row, lid, port)])))
    assert not rep.ok
    assert rep.missing_paths == n_local == 18
    assert {d[0] for d in rep.dead_ends} == {lid}
    assert len(rep.unreachable) == n_local
    assert rep.returncode == 1 and rep.credit_loops is None


def test_ibdmchk_reports_a_missing_entry(tmp_path: Path) -> None:
    fabric = SHAPES["zahavi-pgft"]()
    r = _route(fabric)
    row, lid, _, n_local = _leaf_and_remote_lid(fabric, r)
    rep = _check(_write(fabric, r, tmp_path, _with(r.tables, [(row, lid, NO_ROUTE)])))
    assert not rep.ok
    guid = int(r.tables.switch_guid[row])
    assert set(rep.dead_ends) == {(lid, _guid_name(guid))}
    assert rep.missing_paths == n_local


def test_ibdmchk_reports_a_credit_loop(tmp_path: Path) -> None:
    """Three destinations routed over down-up turns whose channel dependencies
    close a cycle: spine A -> leaf 2 -> spine B -> leaf 1 -> spine A."""
    fabric = loop_fabric()
    r = _route(fabric)
    bad = credit_loop_tables(fabric, r)
    rep = _check(_write(fabric, r, tmp_path, bad))
    # every path is still delivered, but the dependencies loop
    assert rep.missing_paths == 0 and rep.ca_paths == 30
    assert rep.credit_loops is True and not rep.ok
    assert "-E- credit loops in routing" in rep.errors
    assert rep.loop_ports


def test_parse_ibdmchk_reads_a_failure_report() -> None:
    text = (
        "-I- Defined 11/11 systems/nodes \n"
        "-I- Defined 53 fdb entries for:5 switches\n"
        "-E- Unassigned LFT for lid:3 Dead end at:S0002c90310000000/U1\n"
        "-E- Fail to find a path from:S0002c90300000000/U1/1 to:S0002c90300000020/U1/1\n"
        "-E- Found 1 missing paths out of:30 paths\n"
    )
    rep = parse_ibdmchk(text, returncode=1)
    assert (rep.systems, rep.nodes, rep.fdb_entries, rep.fdb_switches) == (11, 11, 53, 5)
    assert rep.dead_ends == [(3, "S0002c90310000000/U1")]
    assert rep.unreachable == [("S0002c90300000000/U1/1", "S0002c90300000020/U1/1")]
    assert rep.missing_paths == 1 and rep.credit_loops is None and not rep.ok
    assert len(rep.errors) == 3
