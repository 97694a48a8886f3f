"""OpenSM's engines and Dmodc side by side on real fabric captures (no mocks).

The captures live outside the project, in ``../shared/fabrics/real`` (see its
README); every test here is skipped, with the reason, when that folder is
absent.  The side-by-side runs boot the real ibsim on the capture, run the
real OpenSM per engine and route the real ibnetdiscover view with Dmodc; the
metrics are recounted here flow by flow with :func:`trace`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from smroute.analysis.compare import CompareConfig
from smroute.analysis.paths import RoutingView, routing_view, trace
from smroute.fabric.export.writers import format_ibsim_net
from smroute.fabric.generate.trees import pgft
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.lab.sidebyside import SideBySide, run_side_by_side
from smroute.lab.simnet import discovery_gap, opensm_error, simulable, sm_node
from smroute.routing import api
from smroute.tables.lft import ForwardingTables

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
needs_real = pytest.mark.skipif(
    not REAL.is_dir(),
    reason=f"the real fabric captures are not there ({REAL}): they live outside the "
    "project, beside the checkout in ../shared/fabrics/real",
)
needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="the ibsim binary is not installed (Debian package ibsim-utils): "
    "these tests drive the real simulator and OpenSM",
)
CFG = CompareConfig(rp_samples=50, random_orders=0, cps=("shift",))
ENGINES = ("dmodc", "updn", "minhop")
#: What OpenSM 3.3.23 and Dmodc really do on the captures (measured):
#: file -> (Dmodc's mode, updn's status, host ports, net file used).
#: updn finds no root where every switch carries hosts ("disabling UPDN
#: algorithm, no root nodes were found") and falls back to minhop.
EXPECTED = {
    "jabl-ibtopotool-1.topo": ("shortest", "fell back", 5, "capture"),
    "Mellanox-ufm_sdk_3.0-small_topo_file": ("updown", "fell back", 12, "capture"),
    "loginoff-infiniband_topology-topo": ("tree", "ok", 145, "capture"),
}


def _recount(view: RoutingView, order: np.ndarray) -> dict[str, float]:
    """SP, HSD of the shift CPS, A2A and undelivered pairs, flow by flow."""
    n = len(order)
    src, dst = (a.ravel() for a in np.meshgrid(order, order, indexing="ij"))
    pair = src != dst
    t = trace(view, src[pair], dst[pair])
    n_links = view.n_links
    srcs = np.zeros((n_links, n), dtype=bool)
    dsts = np.zeros((n_links, n), dtype=bool)
    pos = {int(e): i for i, e in enumerate(order.tolist())}
    for k in np.flatnonzero(t.ok):
        links = t.links[k][t.links[k] >= 0]
        srcs[links, pos[int(src[pair][k])]] = True
        dsts[links, pos[int(dst[pair][k])]] = True
    a2a = int(np.minimum(srcs.sum(1), dsts.sum(1)).max())
    per_shift = []
    for s in range(1, n):
        tr = trace(view, order, np.roll(order, -s))
        load = np.zeros(n_links, dtype=np.int64)
        for k in np.flatnonzero(tr.ok):
            np.add.at(load, tr.links[k][tr.links[k] >= 0], 1)
        per_shift.append(int(load.max()))
    return {"lost": int((~t.ok).sum()), "a2a": a2a, "sp": max(per_shift),
            "hsd_topo_shift": float(np.mean(per_shift))}


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Fabric, SideBySide]]:
    out = {}
    for i, name in enumerate(EXPECTED):
        f = read_fabric(REAL / name)
        wd = tmp_path_factory.mktemp(f"real{i}")
        out[name] = (f, run_side_by_side(f, wd, np.random.default_rng(i), engines=ENGINES,
                                         config=CFG, capture=REAL / name, opensm_timeout=120))
    return out


@pytest.mark.real
@needs_real
@needs_ibsim
@pytest.mark.parametrize("name", list(EXPECTED))
def test_real_capture_side_by_side(name: str,
                                   side_by_side: dict[str, tuple[Fabric, SideBySide]]) -> None:
    f, r = side_by_side[name]
    mode, updn, hosts, net = EXPECTED[name]
    assert r.error == "" and r.net_source == net and r.notes == [] and r.partition == ""
    assert r.fabric is not None and sorted(r.fabric.node_guid.tolist()) == sorted(
        f.node_guid.tolist())
    assert r.runs["dmodc"].status == "ok" and r.runs["dmodc"].note.split(":")[0] == mode
    assert r.runs["minhop"].status == "ok"
    if updn == "ok":
        assert r.runs["updn"].status == "ok"
    else:
        u = r.runs["updn"]
        assert u.status == "failed" and u.fallback == "minhop" and u.tables is None
        assert "no root nodes were found" in u.error and "updn" not in r.metrics
    # the hosts: every linked end-port but the aggregation nodes, each once
    assert r.order_kind == api.DEFAULT and len(r.order) == hosts == len(set(r.order.tolist()))
    tables: ForwardingTables | None = r.runs["dmodc"].tables
    assert tables is not None
    view = routing_view(r.fabric, tables)
    roles = fabric_roles(r.fabric)
    agg = set(roles.endports(EndportRole.AGGREGATION).tolist())
    assert not agg & set(view.ep_node[r.order].tolist())
    assert len(agg) == (1 if "small_topo" in name else 0)
    assert hosts + len(agg) == view.n_endports
    # Dmodc delivers every host pair; every metric is what a trace counts
    assert r.metrics["dmodc"].unroutable == {"pairs": 0, "rp": 0, "sp": 0}
    for e, m in r.metrics.items():
        t = r.runs[e].tables
        assert t is not None
        got = _recount(routing_view(r.fabric, t), r.order)
        assert m.unroutable["pairs"] == got["lost"], e
        for k in ("a2a", "sp", "hsd_topo_shift"):
            assert m.values[k] == pytest.approx(got[k]), (e, k)
        assert r.runs[e].routing_seconds is not None


@needs_real
def test_every_routable_capture_can_be_written_for_ibsim() -> None:
    """Whatever the parser read, :func:`simulable` turns it into a net file
    ibsim can load (real HCAs have port GUID = node GUID, which ibsim cannot
    represent), with the SM on a CA whose port 1 is linked (ibsim attaches a
    client there), else on a switch."""
    done = 0
    for p in sorted(REAL.iterdir()):
        try:
            f = read_fabric(p)
        except ValueError:
            continue  # the bad inputs (README: "exit 2")
        if not len(f.switches):
            continue
        sm = sm_node(f)
        lines = format_ibsim_net(simulable(f), sm_node=sm)
        assert max(len(ln) for ln in lines) <= 255
        if p.name == "jabl-ibtopotool-4.topo":  # its one CA is cabled on port 2 only
            assert f.node_type[sm] == NodeType.SWITCH
        else:
            assert f.node_type[sm] == NodeType.CA, p.name
            assert f.port_peer[f.port_start[sm] + 1] >= 0, p.name
        done += 1
    assert done >= 10


@needs_real
def test_partition_and_mismatch_are_reported() -> None:
    f = read_fabric(REAL / "treydock-infiniband_exporter-ports-test.out")
    sm = sm_node(f)
    comp = f.with_removed(nodes=[n for n in range(f.n_nodes)
                                 if f.node_desc[n] in ("ib-i4l1s01", "p0001 HCA-1",
                                                        "ib-i7l2s01")])
    mismatch, partition = discovery_gap(f, sm, comp)
    assert mismatch == ""
    assert partition.startswith("1 switches and 1 CAs in 1 other physically disconnected")
    mismatch, _ = discovery_gap(f, sm, f)
    assert "switches more" in mismatch and "CAs instead of" in mismatch


def test_opensm_error_says_why_an_engine_was_given_up(tmp_path: Path) -> None:
    log = tmp_path / "opensm.log"
    log.write_text(
        "Nov 24 01:14:11 614400 [4D] 0x04 -> ucast_mgr_route: building routing with "
        "'ftree' routing algorithm...\n"
        "Nov 24 01:14:11 614917 [4D] 0x01 -> construct_fabric: ERR AB2B: Found more than "
        "one root on fabric with maximum rank 0\n"
        "Nov 24 01:14:11 614985 [4D] 0x04 -> ucast_mgr_route: building routing with "
        "'updn' routing algorithm...\n"
        "Nov 24 01:26:27 758838 [E1] 0x02 -> updn_lid_matrices: disabling UPDN algorithm, "
        "no root nodes were found\n"
        "Nov 24 01:26:27 758892 [E1] 0x01 -> ucast_mgr_route: updn: cannot build lid "
        "matrices\n"
        "Nov 24 01:28:15 456304 [41] 0x04 -> ucast_mgr_route: building routing with "
        "'ftree' routing algorithm...\n"
        "Nov 24 01:28:15 456306 [41] 0x02 -> Fabric has 1 switches - topology is not "
        "fat-tree.\nFalling back to default routing\n"
        "Nov 24 01:28:15 456309 [41] 0x01 -> ucast_mgr_route: ftree: cannot build lid "
        "matrices\n"
        "Nov 24 01:28:02 083137 [25] 0x01 -> fabric_validate_topology: ERR AB0A: Different "
        "number of downward port groups on switches:\n"
        "       GUID 0x1c34da0300728a06, LID 3, Index 1.0.12 - 15 port groups\n"
        "       GUID 0xb8599f0300fcc20c, LID 4, Index 1.0.11 - 16 port groups\n")
    assert opensm_error(log, "ftree") == ("ERR AB2B: Found more than one root on fabric "
                                          "with maximum rank 0")
    assert opensm_error(log, "updn") == "disabling UPDN algorithm, no root nodes were found"
    assert opensm_error(log, "minhop") == ""
    log.write_text("".join(log.read_text().splitlines(keepends=True)[4:]))
    assert opensm_error(log, "ftree") == ("ERR AB0A: Different number of downward port groups "
                                          "on switches: GUID 0x1c34da0300728a06, LID 3, Index "
                                          "1.0.12 - 15 port groups ...")
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:5]))
    assert opensm_error(log, "ftree") == "Fabric has 1 switches - topology is not fat-tree."
    assert opensm_error(tmp_path / "absent.log", "ftree") == ""


@pytest.mark.real
@needs_real
@needs_ibsim
def test_a_capture_ibsim_cannot_read_is_written_and_its_partition_reported(
        tmp_path: Path) -> None:
    path = REAL / "treydock-infiniband_exporter-ports-test.out"  # a ports report
    f = read_fabric(path)
    r = run_side_by_side(f, tmp_path, np.random.default_rng(0), engines=("dmodc", "minhop"),
                         config=CFG, capture=path, opensm_timeout=120)
    assert r.net_source == "written" and len(r.notes) == 1
    assert r.notes[0].startswith("ibsim could not run the capture as a net file")
    assert "1 switches and 1 CAs in 1 other physically disconnected part" in r.partition
    assert r.runs["dmodc"].status == r.runs["minhop"].status == "ok"
    assert len(r.order) == 2 and r.order_kind == api.DEFAULT
    assert r.metrics["dmodc"].unroutable["pairs"] == r.metrics["minhop"].unroutable["pairs"] == 0


def test_a_fabric_that_cannot_be_simulated_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    r = run_side_by_side(pgft(2, (4, 8), (1, 4), (1, 1)), tmp_path / "file" / "work",
                         np.random.default_rng(0), engines=("dmodc", "minhop"))
    assert r.fabric is None and r.metrics == {} and len(r.order) == 0
    assert r.error.startswith("cannot simulate the fabric: ") and "file" in r.error
    assert {e: run.status for e, run in r.runs.items()} == {"dmodc": "error", "minhop": "error"}
    assert all(run.error == r.error for run in r.runs.values())
