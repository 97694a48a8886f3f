"""The committed fixtures (real ibnetdiscover output, see scripts/make_fixtures.py)
parse and have the expected shape."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from script_module import load_script

from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.summary import summarize

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

#: name -> (switches, hosts, links, switches per rank, parallel switch pairs, LMC)
EXPECTED: dict[str, tuple[int, int, int, list[int], int, int]] = {
    "pgft-3-2.2.3-1.2.2-1.2.1": (16, 12, 48, [6, 6, 4], 12, 0),
    "pgft-2level-648": (54, 648, 1296, [36, 18], 0, 0),
    "pgft-2level-648-degraded": (53, 648, 1296 - 36 - 4, [36, 17], 0, 0),
    "pgft-3-2.2.3-lmc2": (16, 12, 48, [6, 6, 4], 12, 2),
}


@pytest.fixture(scope="module")
def make_fixtures() -> ModuleType:
    return load_script("make_fixtures")


def _load(name: str) -> Fabric:
    return read_topology(FIXTURES / f"{name}.topo")


def test_every_fixture_of_the_script_is_committed(make_fixtures: ModuleType) -> None:
    names = {spec.name for spec in make_fixtures.FIXTURES}
    assert names == set(EXPECTED)
    for n in names:
        assert (FIXTURES / f"{n}.topo").is_file(), n


def test_default_fabric_of_run_default_exists() -> None:
    script = (ROOT / "scripts" / "run-default.sh").read_text()
    assert "fixtures/pgft-2level-648.topo" in script
    assert (FIXTURES / "pgft-2level-648.topo").is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_counts(name: str) -> None:
    switches, hosts, links, per_rank, parallel, lmc = EXPECTED[name]
    f = _load(name)
    s = summarize(f)
    assert (s.switches, s.hosts, s.links) == (switches, hosts, links)
    assert [lv.switches for lv in s.levels] == per_rank
    assert s.parallel_pairs == parallel
    assert s.component_sizes == (switches + hosts,)
    assert s.link_types == {"4xEDR": links}
    ca_rows = f.port_start[f.cas] + 1
    assert (f.port_lid[ca_rows] > 0).all()
    assert (f.port_lmc[ca_rows] == lmc).all()
    assert (f.port_lid[f.port_start[f.switches]] > 0).all()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_is_real_ibnetdiscover_output(name: str) -> None:
    text = (FIXTURES / f"{name}.topo").read_text()
    assert text.startswith("#\n# Topology file: generated on ")
    assert "\n# Initiated from node " in text
    # OpenSM assigned the LIDs (not the generator's LID plan: CA ports 1..N first)
    f = _load(name)
    ca_lids = np.sort(f.port_lid[f.port_start[f.cas] + 1].astype(np.int64))
    step = 1 << EXPECTED[name][5]
    assert not np.array_equal(ca_lids, step * np.arange(1, len(ca_lids) + 1))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_matches_the_generator(name: str, make_fixtures: ModuleType) -> None:
    spec = next(s for s in make_fixtures.FIXTURES if s.name == name)
    want = spec.build()
    got = _load(name)
    assert got.link_set() == want.link_set()
    assert sorted(got.node_guid.tolist()) == sorted(want.node_guid.tolist())
    order = np.argsort(got.node_guid)
    worder = np.argsort(want.node_guid)
    assert np.array_equal(got.node_type[order], want.node_type[worder])
    assert np.array_equal(got.num_ports[order], want.num_ports[worder])


def test_degraded_fixture_anomalies() -> None:
    s = summarize(_load("pgft-2level-648-degraded"))
    # one spine gone: every leaf has 17 up-links at most; 4 more links gone
    assert s.levels[0].up_max == 17
    assert 1 <= s.anomaly_count("missing_up_links") <= 4
    assert 1 <= s.anomaly_count("missing_down_links") <= 4
    assert s.anomaly_count("hosts_on_non_leaf") == 0
    assert s.anomaly_count("disconnected") == 0


def test_lmc2_fixture_lids_are_aligned() -> None:
    f = _load("pgft-3-2.2.3-lmc2")
    rows = f.port_start[f.cas] + 1
    assert (f.port_lid[rows] % 4 == 0).all()
    assert all(int(f.port_lmc[r]) == 2 for r in rows.tolist())
    assert (f.node_type[f.port_node[rows]] == NodeType.CA).all()
