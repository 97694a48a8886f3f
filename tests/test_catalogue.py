"""The catalogue of named site shapes (smroute.fabric.generate.catalogue): sizes, the
parts each shape is made of, roles, host orders, both text dialects read back,
the CLI, and every shape booted in the real ibsim."""

from __future__ import annotations

import functools
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from fabric_compare import assert_same_fabric

from smroute.cli.main import main
from smroute.fabric.export.ibdiagwrite import format_ibdiagnet
from smroute.fabric.export.writers import format_topology, write_ibsim_net
from smroute.fabric.generate.catalogue import CATALOGUE, build_shape, shape_names
from smroute.fabric.ibnetdiscover.parse import parse_topology
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError, NodeType
from smroute.fabric.roles import EndportRole, fabric_roles
from smroute.lab.sidebyside import strip_lids
from smroute.lab.sim import IbSim, ibnetdiscover, run_opensm

NAMES = shape_names()
SERVICE = re.compile(r"^(ufm|stor|mgmt|head)-[0-9]{2} HCA-1$")
COMPUTE = re.compile(r"^(cn|gpu)-[a-z][0-9]{2}-c[0-9]{2} mlx5_[0-7]$")
MF0 = re.compile(r"^MF0;([^:]+):([^/]+)/([LS])([0-9]{2})/U([12])$")
#: CA count above which the real-tool test only boots ibsim (module doc of the test)
FULL_RUN_CAS = 3000


@functools.cache
def shape(name: str) -> Fabric:
    return build_shape(name)


def compute_hosts(f: Fabric) -> np.ndarray:
    return np.flatnonzero(np.fromiter((COMPUTE.match(d) is not None for d in f.node_desc),
                                      dtype=bool, count=f.n_nodes))


def test_catalogue_spans_20_sites_from_200_to_12000_hosts() -> None:
    assert len(NAMES) >= 20 and len(set(NAMES)) == len(NAMES)
    sizes = {n: len(compute_hosts(shape(n))) for n in NAMES}
    assert min(sizes.values()) >= 200 and max(sizes.values()) >= 12_000
    assert max(sizes.values()) <= 12_000
    models = {m.group(2) for n in NAMES for d in shape(n).node_desc if (m := MF0.match(d))}
    assert {"CS7500", "CS8500", "QM9790"} <= models
    assert {s.dialect for s in CATALOGUE.values()} == {"ibnetdiscover", "ibdiagnet"}


def test_unknown_name_is_refused() -> None:
    with pytest.raises(FabricError, match="no shape 'nope'"):
        build_shape("nope")


def test_the_same_name_builds_the_same_fabric() -> None:
    a, b = build_shape("edr-cs7520-200"), build_shape("edr-cs7520-200")
    assert_same_fabric(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_shape_parts_and_roles(name: str) -> None:
    f = shape(name)
    roles = fabric_roles(f)
    agg = roles.endports(EndportRole.AGGREGATION)
    # an aggregation node on every switch ASIC, directors' included
    assert len(agg) == len(f.switches)
    comp = compute_hosts(f)
    assert set(roles.endports(EndportRole.COMPUTE).tolist()) == set(comp.tolist())
    service = [i for i in f.cas.tolist() if SERVICE.match(f.node_desc[i])]
    assert service, "every site has UFM or storage hosts"
    for i in service:
        want = EndportRole.STORAGE if f.node_desc[i].startswith("stor") \
            else EndportRole.MANAGEMENT
        assert i in set(roles.endports(want).tolist()), f.node_desc[i]
    assert len(comp) + len(agg) + len(service) == len(f.cas)
    # host names sort differently from port GUIDs
    rows = f.port_start[comp] + 1
    by_guid = comp[np.argsort(f.port_guid[rows], kind="stable")]
    by_name = comp[np.argsort(np.asarray([f.node_desc[i] for i in comp.tolist()]),
                              kind="stable")]
    assert not np.array_equal(by_guid, by_name)
    # directors: every ASIC of a chassis shares its system image GUID, which is no node's
    asics = [i for i in f.switches.tolist() if MF0.match(f.node_desc[i])]
    chassis = {int(f.sysimg_guid[i]) for i in asics}
    assert not chassis & set(f.node_guid.tolist())


def test_every_kind_of_part_appears_in_the_catalogue() -> None:
    """Hosts on spines and on director line ASICs, a management island,
    parallel cables, three-level trees with directors as the core, storage
    leaves cabled to the directors' line ASICs (nearer the top than the
    compute leaves), compute leaves on the core directors beside pods behind
    spines (a site grown in phases)."""
    seen: set[str] = set()
    for n in NAMES:
        f = shape(n)
        roles = fabric_roles(f)
        ca_rows = np.flatnonzero((f.node_type[f.port_node] == NodeType.CA) & (f.port_peer >= 0))
        sw_of = f.port_node[f.port_peer[ca_rows]]
        for ca, sw in zip(f.port_node[ca_rows].tolist(), sw_of.tolist(), strict=True):
            if not SERVICE.match(f.node_desc[ca]):
                continue
            m = MF0.match(f.node_desc[sw])
            if m and m.group(3) == "L" and m.group(1).startswith("core"):
                seen.add("service on a director line ASIC")
            elif roles.rank[sw] > 0:
                seen.add("service on a spine")
            if f.node_desc[sw].startswith("MF0;mgmt-sw"):
                seen.add("management island")
            up = f.port_node[f.port_peer[(f.port_node == sw) & (f.port_peer >= 0)]]
            if roles.rank[sw] == 0 and f.node_desc[sw].startswith("MF0;stor-leaf") and all(
                    (m := MF0.match(f.node_desc[u])) and m.group(3) == "L"
                    for u in up.tolist() if f.node_type[u] == NodeType.SWITCH):
                seen.add("storage leaves on director line ASICs")
        # leaves (rank 0) cabled only to director line ASICs, and leaves cabled to none
        on_core = set()
        for s in f.switches[roles.rank[f.switches] == 0].tolist():
            if f.node_desc[s].startswith("MF0;stor-leaf"):
                continue
            up = f.port_node[f.port_peer[(f.port_node == s) & (f.port_peer >= 0)]]
            up = [u for u in up.tolist() if f.node_type[u] == NodeType.SWITCH]
            on_core.add(sum(bool(MF0.match(f.node_desc[u])) for u in up) / max(len(up), 1))
        if {0.0, 1.0} <= on_core and roles.max_rank >= 3:
            seen.add("compute leaves on the core beside pods behind spines")
        a, b = f.port_node[f.link_a], f.port_node[f.link_b]
        sw = (f.node_type[a] == NodeType.SWITCH) & (f.node_type[b] == NodeType.SWITCH)
        pairs = np.stack([np.minimum(a, b), np.maximum(a, b)])[:, sw]
        if len(np.unique(pairs, axis=1).T) < pairs.shape[1]:
            seen.add("parallel cables")
        if roles.max_rank >= 3 and any(MF0.match(d) for d in f.node_desc):
            seen.add("directors as the core of a three-level tree")
    assert seen == {"service on a director line ASIC", "service on a spine", "management island",
                    "parallel cables", "directors as the core of a three-level tree",
                    "storage leaves on director line ASICs",
                    "compute leaves on the core beside pods behind spines"}


@pytest.mark.parametrize("name", NAMES)
def test_shape_text_reads_back_in_both_dialects(name: str) -> None:
    f = shape(name)
    assert_same_fabric(parse_topology(format_topology(f), f"{name}.topo"), f)
    diag = format_ibdiagnet(f)
    assert_same_fabric(parse_topology(diag, f"{name}.ibnetdiscover"), f)
    asic = [ln for ln in diag if (m := re.match(r"switchguid=0x([0-9a-f]+)\(([0-9a-f]+)\)", ln))
            and m.group(1) != m.group(2).lstrip("0")]
    n_asics = sum(1 for d in f.node_desc if MF0.match(d) and "mgmt-sw" not in d
                  and d.split(";")[1].startswith("core"))
    assert len(asic) == n_asics  # director ASICs: system image GUID (node GUID)
    assert any(re.match(r"\[[0-9]+\]\([0-9/]+\)\t", ln) for ln in diag)  # port labels


def test_cli_list_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fabric", "generate", "catalogue", "--list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + len(NAMES)
    row = next(r for r in table if r.startswith("| hdr-cs8500-720 |"))
    assert "| 720 |" in row and "| 60 |" in row and "ibdiagnet" in row
    out = tmp_path / "s.ibnetdiscover"
    assert main(["fabric", "generate", "catalogue", "hdr-cs8500-720", "--out", str(out),
                 "-q"]) == 0
    text = out.read_text().splitlines()
    assert text[0].startswith("# This database file was automatically generated by IBDIAG")
    assert_same_fabric(parse_topology(text, str(out)), shape("hdr-cs8500-720"))
    assert main(["fabric", "generate", "catalogue", "nope"]) == 2
    assert "no shape 'nope'" in capsys.readouterr().err
    assert main(["fabric", "generate", "catalogue"]) == 2


def test_cli_writes_a_damaged_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--seed``/``--remove-links``/``--remove-switches`` damage a shape as
    they damage the other generators' trees: the same seed, the same cuts."""
    out = [tmp_path / f"{k}.topo" for k in range(3)]
    args = ["fabric", "generate", "catalogue", "ndr-dgx-h100-1su", "--remove-links", "7",
            "--remove-switches", "1"]
    assert main([*args, "--seed", "3", "--out", str(out[0])]) == 0
    assert "removed 1 switches and 7 links (seed 3)" in capsys.readouterr().err
    assert main([*args, "--seed", "3", "--out", str(out[1]), "-q"]) == 0
    assert main([*args, "--seed", "4", "--out", str(out[2]), "-q"]) == 0
    whole = shape("ndr-dgx-h100-1su")
    got = [parse_topology(p.read_text().splitlines(), str(p)) for p in out]
    assert len(got[0].switches) == len(whole.switches) - 1
    assert got[0].n_links < whole.n_links - 7  # (the switch's own links too)
    assert out[0].read_text() == out[1].read_text() != out[2].read_text()
    assert main(["fabric", "generate", "catalogue", "ndr-dgx-h100-1su", "--remove-links",
                 "-1"]) == 2


needs_ibsim = pytest.mark.skipif(
    shutil.which("ibsim") is None, reason="the ibsim binary is not installed (ibsim-utils)")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.real
@needs_ibsim
def test_real_ibsim_boots_every_shape(name: str, tmp_path: Path) -> None:
    """Every shape's net file is accepted by the real ibsim.  Up to
    FULL_RUN_CAS CAs, OpenSM sweeps it and ibnetdiscover finds the same nodes
    and links; above, ibsim only parses and serves it (OpenSM's sweep of 9k
    and 13k CAs takes minutes on the project's 2-core machines)."""
    f = shape(name)
    net = tmp_path / "f.net"
    write_ibsim_net(strip_lids(f), net)
    t = time.monotonic()
    with IbSim(net, tmp_path / "sim") as sim:
        assert sim.running
        if len(f.cas) > FULL_RUN_CAS:
            return
        run_opensm(sim, tmp_path / "opensm", engine="minhop")
        got = parse_topology(ibnetdiscover(sim), f"{name}.topo")
    assert got.link_set() == f.link_set()
    assert sorted(got.node_desc) == sorted(f.node_desc)
    assert time.monotonic() - t < 120
