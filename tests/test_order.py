"""``smroute order`` / :mod:`smroute.analysis.order`: on whole generated trees
any input order of the hosts becomes one whose shift permutations load every
link with at most one flow -- checked by tracing every flow through the
tables -- the order is never worse than the input, host names resolve to a
host's first HCA, and bad job files exit 2 naming the line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from lids_trace import recount

from smroute.analysis import order as O
from smroute.analysis.congestion import evaluate
from smroute.analysis.paths import RoutingView, pair_paths, routing_view
from smroute.analysis.patterns import CPS, cps, shifts
from smroute.cli.main import main
from smroute.errors import InputError
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.routing.engine import RoutingResult, route

TWO = (2, (4, 8), (1, 4), (1, 1))  # 32 hosts
TWO_PAR = (2, (12, 12), (1, 6), (1, 2))  # 144 hosts, parallel links (Zahavi Table 3)
THREE = (3, (4, 4, 8), (1, 4, 4), (1, 1, 1))  # 128 hosts
THREE_PAR = (3, (2, 2, 3), (1, 2, 2), (1, 2, 1))  # 12 hosts, parallel links (Gliksberg Fig. 1)

_CACHE: dict[tuple, tuple[Fabric, RoutingResult, RoutingView, np.ndarray]] = {}


def routed(spec: tuple) -> tuple[Fabric, RoutingResult, RoutingView, np.ndarray]:
    """Fabric, its routing (the default engine), view and each end-port's NID."""
    if spec not in _CACHE:
        f = pgft(*spec)
        r = route(f, workers=1)
        v = routing_view(f, r.tables)
        _CACHE[spec] = (f, r, v, O.endport_nids(v, r.graph.ep_row, r.nids))
    return _CACHE[spec]


def walked_shift_hsd(v: RoutingView, ranks: np.ndarray) -> np.ndarray:
    """Per shift stage, the most flows on one link, every flow traced hop by
    hop through the tables (base LIDs); asserts every flow is delivered."""
    dl = np.broadcast_to(v.ep_lid[ranks][None, :], (len(ranks), len(ranks)))
    hsd, bad = recount(v, ranks, shifts(len(ranks)), dl)
    assert not bad.any()
    return hsd


# =========================================================================== whole trees
@pytest.mark.parametrize("spec", [TWO, TWO_PAR, THREE, THREE_PAR],
                         ids=["2-level", "2-level-parallel", "3-level", "3-level-parallel"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_order_of_a_whole_tree_becomes_contention_free(spec: tuple, seed: int) -> None:
    f, r, v, nid = routed(spec)
    rng = np.random.default_rng(seed)
    ports = rng.permutation(v.n_endports).astype(np.int64)
    choice = O.rank_order(v, ports, nid, report=seed == 0)
    ranks = ports[choice.order]
    assert sorted(choice.order.tolist()) == list(range(len(ports)))
    assert not choice.kept_input and choice.missing_nids == 0
    # independent of the analysis code: walk every flow of every shift stage
    hsd = walked_shift_hsd(v, ranks)
    assert len(hsd) == len(ranks) - 1 and (hsd == 1).all()
    # the random input order was congested, by the same walk
    assert walked_shift_hsd(v, ports).max() > 1
    # the analysis agrees with the walk, and the order is not worse
    after, before = choice.after[O.MAIN_CPS], choice.before[O.MAIN_CPS]
    assert np.array_equal(after.max_flows, hsd)
    assert after.hsd_avg == 1.0 and after.hsd_avg < before.hsd_avg
    assert np.array_equal(before.max_flows, walked_shift_hsd(v, ports))
    if seed == 0:  # every unidirectional CPS follows (Zahavi section III)
        assert set(choice.after) == set(CPS)
        for name in ("ring", "binomial", "dissemination", "tournament"):
            assert choice.after[name].hsd_max == 1, name
    # the routing's order is reached from any input: same ranks whatever the seed
    assert np.array_equal(ranks, np.argsort(nid, kind="stable"))


def test_input_already_topological() -> None:
    f, r, v, nid = routed(THREE)
    ports = np.argsort(nid, kind="stable").astype(np.int64)
    choice = O.rank_order(v, ports, nid)
    assert np.array_equal(choice.order, np.arange(len(ports)))
    assert not choice.kept_input and "already in topological order" in choice.reason


# =========================================================================== never worse
def test_never_worse_keeps_the_input_when_the_nids_do_not_match() -> None:
    """The safeguard: NIDs that do not match the routes (scrambled) give a
    worse order, so the input (here the routing's own order) is kept."""
    f, r, v, nid = routed(TWO_PAR)
    ports = np.argsort(nid, kind="stable").astype(np.int64)
    scrambled = np.random.default_rng(7).permutation(nid)
    choice = O.rank_order(v, ports, scrambled, report=True)
    assert choice.kept_input and "kept the input order" in choice.reason
    assert np.array_equal(choice.order, np.arange(len(ports)))
    assert choice.after is choice.before
    assert choice.topo[O.MAIN_CPS].hsd_avg > choice.before[O.MAIN_CPS].hsd_avg == 1.0
    assert (walked_shift_hsd(v, ports[choice.order]) == 1).all()


@pytest.mark.parametrize("spec", [TWO_PAR, THREE])
def test_never_worse_on_partial_jobs(spec: tuple) -> None:
    """Random partial jobs: the chosen order's shift HSD (walked) never
    exceeds the input's; some small jobs keep their input order."""
    f, r, v, nid = routed(spec)
    rng = np.random.default_rng(11)
    kept = 0
    for _ in range(40):
        n = int(rng.integers(3, 40))
        ports = rng.choice(v.n_endports, n, replace=False).astype(np.int64)
        choice = O.rank_order(v, ports, nid)
        before = walked_shift_hsd(v, ports)
        after = walked_shift_hsd(v, ports[choice.order])
        assert after.mean() <= before.mean() + 1e-12
        assert np.array_equal(after, choice.after[O.MAIN_CPS].max_flows)
        kept += choice.kept_input
    assert kept >= 1


def test_degraded_tree_never_worse() -> None:
    f0 = pgft(*THREE)
    for seed in range(3):
        f, _ = degrade(f0, np.random.default_rng(seed), switches=2, links=6)
        r = route(f, workers=1)
        v = routing_view(f, r.tables)
        nid = O.endport_nids(v, r.graph.ep_row, r.nids)
        ports = np.random.default_rng(seed).permutation(v.n_endports).astype(np.int64)
        choice = O.rank_order(v, ports, nid)
        b, a = choice.before[O.MAIN_CPS], choice.after[O.MAIN_CPS]
        assert a.hsd_avg <= b.hsd_avg
        assert b.total_unroutable == 0
        assert np.array_equal(a.max_flows, walked_shift_hsd(v, ports[choice.order]))


def test_job_paths_match_the_full_view() -> None:
    """The restricted view (job leaves x job end-ports) gives the same HSD
    per stage as the whole fabric's paths, for every CPS."""
    f, r, v, nid = routed(THREE_PAR)
    pp = pair_paths(v)
    ports = np.random.default_rng(3).choice(v.n_endports, 9, replace=False).astype(np.int64)
    sub, sp, local = O.job_paths(v, ports)
    assert sub.n_endports == 9 and sp.n_endports == 9
    assert np.array_equal(sub.ep_row[local], v.ep_row[ports])
    for name in CPS:
        full = evaluate(v, pp, cps(name, 9), ports)
        part = evaluate(sub, sp, cps(name, 9), local)
        assert np.array_equal(full.max_flows, part.max_flows), name
        assert np.array_equal(full.unroutable, part.unroutable), name


# =========================================================================== hosts
def multi_hca(spec: tuple = TWO) -> Fabric:
    """``spec`` with CAs described ``node<j> mlx5_<d>``: two HCAs per host,
    devices ``mlx5_10`` (listed first) and ``mlx5_2`` (the first in natural order)."""
    f = pgft(*spec)
    descs = list(f.node_desc)
    for k, c in enumerate(f.cas.tolist()):
        descs[c] = f"node{k // 2} mlx5_{(10, 2)[k % 2]}"
    return dataclasses.replace(f, node_desc=tuple(descs), _cache={})


def test_host_names_resolve_to_the_first_hca() -> None:
    f = multi_hca()
    v = routing_view(f, route(f, workers=1).tables)
    by_desc = {f.node_desc[int(v.ep_node[e])]: e for e in range(v.n_endports)}
    guid5 = hex(int(v.ep_guid[by_desc["node5 mlx5_2"]]))
    entries = [(1, "node3"), (2, "node0 mlx5_10"), (4, guid5)]
    ports = O.resolve_hosts(v, entries, "job")
    assert ports.tolist() == [by_desc["node3 mlx5_2"], by_desc["node0 mlx5_10"],
                              by_desc["node5 mlx5_2"]]
    assert [O.host_label(v, int(e), h) for e, (_, h) in zip(ports, entries, strict=True)] == [
        "node3", "node0", "node5"]
    with pytest.raises(InputError, match="job:6: host 'node3 mlx5_2' listed twice "
                       r"\(first on line 1\)"):
        O.resolve_hosts(v, [*entries, (6, "node3 mlx5_2")], "job")
    with pytest.raises(InputError, match="job:2: no CA with node description or host name"):
        O.resolve_hosts(v, [(1, "node1"), (2, "node99")], "job")
    with pytest.raises(InputError, match="job:1: no end-port or CA with GUID"):
        O.resolve_hosts(v, [(1, "0x1234")], "job")
    # generated descriptions ("host 0.1") are no HOST DEVICE form: written as given
    g, _, gv, _ = routed(TWO)
    assert O.host_label(gv, 0, "as written") == "as written"


def test_nid_order_puts_ports_without_nid_last() -> None:
    nid = np.array([5, -1, 3, 9, -1])
    assert O.nid_order([0, 1, 2, 3, 4], nid).tolist() == [2, 0, 3, 1, 4]
    assert O.nid_order([4, 3, 1, 0], nid).tolist() == [3, 1, 0, 2]


# =========================================================================== CLI
@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("order") / "two-par.topo"
    write_topology(pgft(*TWO_PAR), p)
    return p


def _job(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "job.txt"
    p.write_text("# my job\n" + "\n".join(lines) + "\n")
    return p


def test_cli_hostfile_is_contention_free(topo: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    f, r, v, nid = routed(TWO_PAR)
    names = [f.node_desc[int(n)] for n in v.ep_node.tolist()]
    perm = np.random.default_rng(5).permutation(len(names))
    job = _job(tmp_path, [names[i] for i in perm])
    assert main(["order", "--fabric", str(topo), "--job", str(job), "--report"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert sorted(lines) == sorted(names) and lines != [names[i] for i in perm]
    by_name = {n: e for e, n in enumerate(names)}
    ranks = np.array([by_name[h] for h in lines])
    assert (walked_shift_hsd(v, ranks) == 1).all()
    assert "order (nmodc): topological order: shift HSD avg 1.000 max 1" in cap.err
    assert "recursive-halving" in cap.err and "<- main metric" in cap.err


def test_cli_slurm_out_file_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = multi_hca(THREE)
    fab = tmp_path / "multi.topo"
    write_topology(f, fab)
    job = _job(tmp_path, ["node9", "node1", "node40", "node2 mlx5_10"])
    out = tmp_path / "hosts.slurm"
    rc = main(["order", "--fabric", str(fab), "--job", str(job), "--format", "slurm",
               "--tasks-per-host", "2", "--out", str(out), "--report"])
    assert rc == 0
    text = out.read_text().splitlines()
    assert len(text) == 8 and text[0::2] == text[1::2]
    assert sorted(text[0::2]) == ["node1", "node2", "node40", "node9"]
    cap = capsys.readouterr()
    assert cap.out.startswith("order (nmodc): ") and "input avg" in cap.out
    assert cap.err == ""
    assert main(["order", "--fabric", str(fab), "--job", str(job), "--out", str(out)]) == 0
    assert out.read_text().splitlines() == text[0::2]


def test_cli_bad_job_file_exits_2_naming_the_line(topo: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    f, r, v, nid = routed(TWO_PAR)
    good = f.node_desc[int(v.ep_node[0])]
    job = _job(tmp_path, [good, "", "no-such-host"])
    assert main(["order", "--fabric", str(topo), "--job", str(job)]) == 2
    err = capsys.readouterr().err
    assert f"{job}:4: no CA with node description or host name 'no-such-host'" in err
    assert "Traceback" not in err
    job = _job(tmp_path, [good, good])
    assert main(["order", "--fabric", str(topo), "--job", str(job)]) == 2
    assert f"{job}:3: host {good!r} listed twice (first on line 2)" in capsys.readouterr().err
    job = _job(tmp_path, ["# nobody"])
    assert main(["order", "--fabric", str(topo), "--job", str(job)]) == 2
    assert "no host listed" in capsys.readouterr().err
    assert main(["order", "--fabric", str(topo), "--job", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err
    job = _job(tmp_path, [good])
    assert main(["order", "--fabric", str(topo), "--job", str(job),
                 "--tasks-per-host", "0"]) == 2
    assert main(["order", "--fabric", str(topo), "--job", str(job)]) == 0
    cap = capsys.readouterr()
    assert cap.out == good + "\n" and "a single host" in cap.err
