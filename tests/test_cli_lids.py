"""``smroute lids``: the DLID table loads, its DLIDs avoid hot spots when the
tables are walked, and bad input gives file:line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from lids_trace import recount

from smroute.analysis.paths import routing_view
from smroute.analysis.patterns import shifts
from smroute.cli.main import main
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import kary_ntree
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.routing.engine import route

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def naruse_topo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("lids") / "naruse.topo"
    write_topology(kary_ntree(6, 2, lmc=3, hosts_per_leaf=5), p)
    return p


def job_file(tmp_path: Path, hosts: list[str], name: str = "job.txt") -> Path:
    p = tmp_path / name
    p.write_text("# job allocation\n\n" + "\n".join(hosts) + "\n")
    return p


def hosts_of(topo: Path, n: int, seed: int) -> list[str]:
    f = read_topology(topo)
    descs = [f.node_desc[c] for c in f.cas.tolist()]
    rng = np.random.default_rng(seed)
    return [descs[i] for i in rng.choice(len(descs), n, replace=False)]


def walk_hsd(topo: Path, hosts: list[str], dl: np.ndarray) -> np.ndarray:
    """Per shift stage, the max flows on a link with these DLIDs, by tracing
    the Dmodc tables of the same topology."""
    f = read_topology(topo)
    v = routing_view(f, route(f, workers=1).tables)
    by_desc = {f.node_desc[int(v.ep_node[e])]: e for e in range(v.n_endports)}
    ranks = np.array([by_desc[h] for h in hosts])
    hsd, bad = recount(v, ranks, shifts(len(hosts)), dl)
    assert not bad.any()
    return hsd


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table_loads_and_walks_hot_spot_free(naruse_topo: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             seed: int) -> None:
    hosts = hosts_of(naruse_topo, 16, seed)
    job = job_file(tmp_path, hosts)
    out = tmp_path / "dlids.txt"
    rc = main(["lids", "--fabric", str(naruse_topo), "--job", str(job), "--out", str(out),
               "--workers", "1"])
    assert rc == 0
    assert "selected LIDs avg 1.000 max 1" in capsys.readouterr().out
    tab = np.loadtxt(out, dtype=np.int64)
    assert tab.shape == (16, 17)
    assert (tab[:, 0] == np.arange(16)).all()
    dl = tab[:, 1:]
    assert (np.diag(dl) == 0).all()
    assert (walk_hsd(naruse_topo, hosts, dl) == 1).all()
    # the base LIDs would not have been hot-spot free for every allocation tested
    text = out.read_text()
    assert "# rank 0: " + hosts[0] in text


def test_json_csv_and_per_stage(naruse_topo: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    hosts = hosts_of(naruse_topo, 10, 5)
    job = job_file(tmp_path, hosts)
    rc = main(["lids", "--fabric", str(naruse_topo), "--job", str(job), "--format", "json",
               "--per-stage", "--workers", "1"])
    assert rc == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["n_ranks"] == 10 and doc["lmc"] == 3 and doc["hosts"] == hosts
    dl = np.array(doc["dlids"])
    assert len(doc["stages"]) == 9
    assert [s["hsd"] for s in doc["stages"]] == walk_hsd(naruse_topo, hosts, dl).tolist()
    assert doc["hsd"]["max"] == 1 and doc["hsd"]["base_max"] >= 1
    assert "HSD over 9 stages" in cap.err
    rc = main(["lids", "--fabric", str(naruse_topo), "--job", str(job), "--format", "csv",
               "--workers", "1", "--lmc", "1"])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "src_rank," + ",".join(f"dlid_{d}" for d in range(10))
    rows = np.array([[int(x) for x in ln.split(",")] for ln in lines[1:]])
    assert rows.shape == (10, 11)
    f = read_topology(naruse_topo)
    lid_of = {f.node_desc[int(f.port_node[r])]: int(f.port_lid[r])
              for r in range(len(f.port_node)) if f.port_lid[r]}
    base = np.array([lid_of[h] for h in hosts])
    off = rows[:, 1:] - base[None, :]
    np.fill_diagonal(off, 0)
    assert set(np.unique(off).tolist()) <= {0, 1}  # --lmc 1: two LIDs per port


def test_real_opensm_fixture_by_guid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The committed fixture is real ibnetdiscover output of ibsim after OpenSM
    assigned LIDs with LMC 2; hosts given by port GUID."""
    topo = FIXTURES / "pgft-3-2.2.3-lmc2.topo"
    f = read_topology(topo)
    v = routing_view(f, route(f, workers=1).tables)
    guids = [f"{int(g):#018x}" for g in v.ep_guid.tolist()][::-1]
    job = job_file(tmp_path, guids)
    rc = main(["lids", "--fabric", str(topo), "--job", str(job), "--format", "json",
               "--workers", "1"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lmc"] == 2 and doc["n_ranks"] == len(guids)
    assert doc["hsd"]["avg"] <= doc["hsd"]["base_avg"]


@pytest.mark.parametrize("case,extra,pattern", [
    ("unknown", ["no such host"], r"job\.txt:4: .*no CA with node description 'no such host'"),
    ("dup", ["DUP"], r"job\.txt:4: host .* listed twice \(first on line 3\)"),
    ("lmc", ["--lmc", "4"], r"LMC mismatch: --lmc 4 but the job's ports have LMC 3"),
    ("pattern", ["--pattern", "bogus"], r"unknown CPS 'bogus'"),
    ("empty", [], r"no host listed"),
])
def test_errors(naruse_topo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                case: str, extra: list[str], pattern: str) -> None:
    first = hosts_of(naruse_topo, 1, 0)[0]
    hosts = [first]
    args = []
    if case in ("unknown",):
        hosts += extra
    elif case == "dup":
        hosts += [first]
    elif case == "empty":
        hosts = []
    else:
        args = extra
    job = job_file(tmp_path, hosts)
    rc = main(["lids", "--fabric", str(naruse_topo), "--job", str(job), "--workers", "1",
               *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    import re
    assert re.search(pattern, err), err
    assert "Traceback" not in err


def test_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       naruse_topo: Path) -> None:
    assert main(["lids", "--fabric", str(naruse_topo), "--job", str(tmp_path / "nope")]) == 2
    assert "nope: cannot read" in capsys.readouterr().err
    job = job_file(tmp_path, ["host 0.0"])
    assert main(["lids", "--fabric", str(tmp_path / "none.topo"), "--job", str(job)]) == 2
