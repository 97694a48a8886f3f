"""``smroute trace``: one path through a table file, on real captures routed by
smroute, on tables made wrong on purpose, and on OpenSM's own dump of a real
capture compared with ``ibtracert`` on the same simulated fabric."""

from __future__ import annotations

import json
import lzma
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis.hoptrace import find_endpoint, trace_route
from smroute.cli.main import main
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.tables.formats import read_tables, write_tables

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
if not REAL.is_dir():
    REAL = Path("/work/shared/fabrics/real")
LOGINOFF = REAL / "loginoff-infiniband_topology-topo"
pytestmark = pytest.mark.skipif(not LOGINOFF.exists(),
                                reason="the real captures (shared/fabrics/real) are absent")


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("trace")
    out = d / "lo.lfts"
    assert main(["route", str(LOGINOFF), "--out", str(out), "-q"]) == 0
    return LOGINOFF, out


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["trace", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_ca_pair_sample_is_delivered_by_name_guid_and_lid(
        routed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = routed
    rc, out, _ = _run(capsys, topo, lfts, "stage97", "stage1")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith('From "stage97 mlx4_0" (0x24be05ffff985d90)[1]')
    assert lines[-1].startswith('To "stage1 mlx4_0" (0x24be05ffff98aba0)[1]: delivered after')
    rc, js, _ = _run(capsys, topo, lfts, "0x24be05ffff985d90", "stage1 mlx4_0", "--json")
    doc = json.loads(js)
    assert rc == 0 and doc["status"] == "delivered"
    rc, by_lid, _ = _run(capsys, topo, lfts, "stage97", f"lid:{doc['dst']['lid']}", "--json")
    assert json.loads(by_lid)["hops"] == doc["hops"]
    # the hops are the cables of the fabric: each output port leads to the next input port
    f = read_fabric(topo)
    for a, b in zip(doc["hops"], doc["hops"][1:], strict=False):
        row = f.port_row(f.node_by_guid(int(a["guid"], 16)), a["out_port"])
        peer = int(f.port_peer[row])
        assert f"{int(f.node_guid[f.port_node[peer]]):#018x}" == b["guid"]
        assert int(f.port_num[peer]) == b["in_port"]


def test_library_walk_agrees_with_the_tables_for_many_pairs(routed: tuple[Path, Path]) -> None:
    f = read_fabric(routed[0])
    t = read_tables(routed[1])
    cas = f.cas[:40]
    for s in cas[::7].tolist():
        for d in cas.tolist():
            src = find_endpoint(f, f"{int(f.node_guid[s]):#018x}")
            dst = find_endpoint(f, f"{int(f.node_guid[d]):#018x}")
            tr = trace_route(f, t, src, dst)
            assert tr.delivered, tr.reason
            for h in tr.hops:
                assert t.ports[t.row_of(int(f.node_guid[h.node])), tr.dlid] == h.out_port


def test_missing_route_loop_unknown_endpoint_and_compressed_tables(
        routed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = routed
    f = read_fabric(topo)
    t = read_tables(lfts)
    dst = find_endpoint(f, "stage1")
    first = trace_route(f, t, find_endpoint(f, "stage97"), dst)
    assert len(first.hops) >= 2
    # no route at the second switch
    ports = t.ports.copy()
    second = t.row_of(int(f.node_guid[first.hops[1].node]))
    ports[second, first.dlid] = 255
    broken = tmp_path / "noroute.lfts"
    write_tables(type(t)(t.switch_guid, t.switch_lid, t.switch_desc, ports), broken)
    rc, out, err = _run(capsys, topo, broken, "stage97", "stage1")
    assert rc == 1 and "NOT DELIVERED (no route)" in out and "Traceback" not in err
    # a loop: the second switch sends the LID back where it came from
    ports[second, first.dlid] = first.hops[1].in_port
    looped = tmp_path / "loop.lfts.xz"
    plain = tmp_path / "loop.lfts"
    write_tables(type(t)(t.switch_guid, t.switch_lid, t.switch_desc, ports), plain)
    looped.write_bytes(lzma.compress(plain.read_bytes()))
    rc, out, _ = _run(capsys, topo, looped, "stage97", "stage1", "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["status"] == "loop" and "met a second time" in doc["reason"]
    rc, _, err = _run(capsys, topo, lfts, "stage97", "nosuchhost")
    assert rc == 2 and "'nosuchhost': no node description or host name matches" in err
    rc, _, err = _run(capsys, topo, lfts, "stage97", "lid:9999")
    assert rc == 2 and "no port has LID 9999" in err
    rc, _, err = _run(capsys, topo, lfts, "stage97", "MF0;ib5:SX6036/U1")
    assert rc == 0  # a switch by its description: delivered at its port 0


def test_vl_of_each_hop_from_a_lanes_file(routed: tuple[Path, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    topo, lfts = routed
    f = read_fabric(topo)
    tr = trace_route(f, read_tables(lfts), find_endpoint(f, "stage97"),
                     find_endpoint(f, "stage1"))
    leaf = int(f.node_guid[tr.hops[0].node])
    mid = tr.hops[1]
    lanes = tmp_path / "x.lanes"
    lanes.write_text(
        "smroute-lanes 1\nvls 2\nsls 2\nescape_sl 0\n"
        f"sl 1 {int(f.node_guid[tr.hops[-1].node]):#018x} {tr.dlid:#06x} from {leaf:#018x}\n"
        f"vl {int(f.node_guid[mid.node]):#018x} {mid.out_port} 0100000000000000\n"
        "end 1 1\n")
    rc, out, _ = _run(capsys, topo, lfts, "stage97", "stage1", "--lanes", lanes, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["sl"] == 1
    assert [h["vl"] for h in doc["hops"]] == [0, 1] + [0] * (len(doc["hops"]) - 2)
    rc, text, _ = _run(capsys, topo, lfts, "stage97", "stage1", "--lanes", lanes)
    assert ", SL 1" in text.splitlines()[0] and " VL 1" in text.splitlines()[2]


_IBTRACERT_HOP = re.compile(r"^\[(\d+)\] -> (\w+) port \{0x([0-9a-f]+)\}\[(\d+)\]")


def ibtracert_switch_hops(lines: list[str]) -> list[tuple[int, int, int]]:
    """(switch GUID, input port, output port) of each switch ibtracert lists:
    a line ``[OUT] -> KIND port {GUID}[IN]`` gives the previous node's output port."""
    seen = [m.groups() for m in map(_IBTRACERT_HOP.match, lines) if m]
    return [(int(g, 16), int(inp), int(seen[k + 1][0]))
            for k, (_, kind, g, inp) in enumerate(seen) if kind == "switch"]


@pytest.mark.real
@pytest.mark.skipif(shutil.which("ibsim") is None or shutil.which("opensm") is None
                    or shutil.which("ibtracert") is None,
                    reason="ibsim, OpenSM or ibtracert (infiniband-diags) not installed")
def test_opensm_dump_traced_as_ibtracert_walks_the_simulated_fabric(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from smroute.lab.sim import IbSim, dump_switch_routes, ibnetdiscover, run_opensm

    with IbSim(LOGINOFF, tmp_path / "sim") as sim:
        osm = run_opensm(sim, tmp_path / "opensm", engine="minhop")
        topo = tmp_path / "osm.topo"
        topo.write_text("\n".join(ibnetdiscover(sim)) + "\n")
        held = tmp_path / "dump_fts.txt"  # what the switches hold, read back live
        held.write_text(dump_switch_routes(sim))
        f = read_fabric(topo)
        rng = np.random.default_rng(5)
        pairs = [tuple(int(x) for x in rng.choice(f.cas, 2, replace=False)) for _ in range(4)]
        for s, d in pairs:
            slid, dlid = int(f.node_lid[s]), int(f.node_lid[d])
            live = sim.run(["ibtracert", str(slid), str(dlid)]).stdout.splitlines()
            want = ibtracert_switch_hops(live)
            assert want, live
            for tables in (osm.lfts, osm.fdbs, held):  # opensm-lfts.dump, .fdbs, dump_fts
                rc, out, _ = _run(capsys, topo, tables, f"lid:{slid}", f"lid:{dlid}", "--json")
                doc = json.loads(out)
                assert rc == 0, out
                got = [(int(h["guid"], 16), h["in_port"], h["out_port"]) for h in doc["hops"]]
                assert got == want, (tables, live, got)


@pytest.mark.slow
def test_vls_from_the_lanes_file_route_writes(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A tree too degraded for up*/down* routes alone, routed with detours over
    VLs: the VL trace prints for each hop is the routing's own."""
    from smroute.fabric.export.writers import write_topology
    from smroute.fabric.generate.trees import degrade, pgft
    from smroute.routing.engine import route
    from smroute.routing.lanesfile import parse_lanes

    fabric, _ = degrade(pgft(2, (18, 36), (1, 18), (1, 1)), np.random.default_rng(0), links=400)
    topo, out, lanes = tmp_path / "f.topo", tmp_path / "t.lft", tmp_path / "t.lanes"
    write_topology(fabric, topo)
    assert main(["route", str(topo), "-q", "--workers", "1", "--vls", "4", "--lanes-out",
                 str(lanes), "--out", str(out)]) == 0
    capsys.readouterr()
    r = route(fabric, workers=1, max_vls=4)
    assert r.lanes is not None
    lf = parse_lanes(lanes.read_text().splitlines())
    f = read_fabric(topo)
    g = r.graph
    rng = np.random.default_rng(3)
    turned = 0
    for lid in rng.choice(r.lanes.detour_lids, 6, replace=False).tolist():
        for s in rng.choice(f.cas, 6, replace=False).tolist():
            rc, js, _ = _run(capsys, topo, out, f"{int(f.node_guid[s]):#x}", f"lid:{lid}",
                             "--lanes", lanes, "--json")
            doc = json.loads(js)
            if rc != 0:  # a pair the degraded tree leaves unconnected
                assert doc["status"] != "delivered"
                continue
            sw = {int(x): i for i, x in enumerate(g.sw_guid.tolist())}
            first = sw[int(doc["hops"][0]["guid"], 16)]
            sl = int(r.lanes.sl_of(first, lid))
            assert doc["sl"] == sl == lf.sl_of(int(g.sw_guid[first]), lid)
            for h in doc["hops"]:
                want = int(r.lanes.vl_of(sw[int(h["guid"], 16)], h["in_port"], h["out_port"], sl))
                assert h["vl"] == want
                turned += want > 0
    assert turned > 0  # some hop left on a VL above 0


def test_a_host_with_two_hcas_is_ambiguous_by_name_not_by_description() -> None:
    from smroute.errors import InputError

    selene = REAL / "Mellanox-ufm_sdk_3.0-selene.storage.txt"
    f = read_fabric(selene)
    with pytest.raises(InputError, match=r"'ai400x-064': 2 nodes match .*name one by GUID"):
        find_endpoint(f, "ai400x-064")
    ep = find_endpoint(f, "ai400x-064 HCA-2")
    assert f.node_desc[f.port_node[ep.row]] == "ai400x-064 HCA-2" and ep.lid is None
    assert find_endpoint(f, "0x0c42a10300021909").row == ep.row  # its node GUID
    assert find_endpoint(f, f"lid:{int(f.port_lid[ep.row])}").row == ep.row
