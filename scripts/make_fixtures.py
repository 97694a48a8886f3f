#!/usr/bin/env python3
"""Make the committed topology fixtures with the real tools.

For each fixture: generate the fabric (:mod:`smroute.fabric.generate.trees`,
:mod:`smroute.fabric.generate.shapes`), write it as an ibsim net file without LIDs, boot
``ibsim`` on it, run the real OpenSM once (it assigns the LIDs, with the
fixture's LMC), then run the real ``ibnetdiscover`` (with the fixture's
options, e.g. ``-g``) through ``ibsim-run`` and store its output, verbatim, as
``fixtures/<name>.topo`` (atomic write).  :data:`FIXTURES` are fat-trees,
:data:`SHAPE_FIXTURES` real-world shapes (aggregation nodes, hosts on a spine,
two switches, a director).  Before writing, the output is parsed
back and checked against the generated graph (node GUIDs and types, port
counts, link set).

Usage::

    .venv/bin/python scripts/make_fixtures.py            # all fixtures
    .venv/bin/python scripts/make_fixtures.py --only pgft-2level-648
    .venv/bin/python scripts/make_fixtures.py --list

Needs the Debian packages ibsim-utils, opensm and infiniband-diags.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.errors import SmrouteError  # noqa: E402
from smroute.fabric.generate.shapes import (  # noqa: E402
    IS4_DEVICE_ID,
    attach_cas,
    director,
    two_switch,
    with_aggregation_nodes,
)
from smroute.fabric.generate.trees import degrade, fabric_tuples, parse_tuple, pgft  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fileio import atomic_write_text  # noqa: E402
from smroute.lab.sidebyside import strip_lids  # noqa: E402
from smroute.lab.sim import IbSim, ibnetdiscover, run_opensm  # noqa: E402

#: Seed of the degraded fixture (changing it changes the committed file).
DEGRADE_SEED = 20240611


@dataclass(frozen=True)
class FixtureSpec:
    """One fixture: a name, how to build its fabric, the LMC OpenSM uses, the
    routing engine and the options of ``ibnetdiscover``."""

    name: str
    description: str
    build: Callable[[], Fabric]
    lmc: int = 0
    engine: str = "minhop"
    discover_args: tuple[str, ...] = ()


def zahavi_pgft(lmc: int = 0) -> Fabric:
    """Zahavi's PGFT(3; 2,2,3; 1,2,2; 1,2,1): 12 hosts, 16 switches, parallel links."""
    return pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1], lmc=lmc)


def two_level_648() -> Fabric:
    """PGFT(2; 18,36; 1,18; 1,1): 36 leaves x 18 hosts, 18 spines, 36-port switches."""
    return pgft(2, [18, 36], [1, 18], [1, 1])


def two_level_648_degraded(seed: int = DEGRADE_SEED, spine_links: int = 4) -> Fabric:
    """:func:`two_level_648` without one spine switch and ``spine_links`` other
    leaf-spine links, all drawn with ``numpy.random.default_rng(seed)``."""
    full = two_level_648()
    rng = np.random.default_rng(seed)
    spines = np.array(
        [n for n in full.switches.tolist() if (parse_tuple(full.node_desc[n]) or (0, ()))[0] == 2],
        dtype=np.int64,
    )
    if len(spines) != 18:
        raise SystemExit(f"expected 18 spines, found {len(spines)}")
    spine = int(rng.choice(spines))
    without_spine = full.with_removed(nodes=[spine])
    degraded, _removed = degrade(without_spine, rng, links=spine_links)
    return degraded


FIXTURES: tuple[FixtureSpec, ...] = (
    FixtureSpec(
        "pgft-3-2.2.3-1.2.2-1.2.1",
        "Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1)",
        zahavi_pgft,
    ),
    FixtureSpec(
        "pgft-2level-648",
        "PGFT(2;18,36;1,18;1,1): 648 hosts, 36 leaves, 18 spines",
        two_level_648,
    ),
    FixtureSpec(
        "pgft-2level-648-degraded",
        f"pgft-2level-648 minus 1 spine and 4 spine links (seed {DEGRADE_SEED})",
        two_level_648_degraded,
    ),
    FixtureSpec(
        "pgft-3-2.2.3-lmc2",
        "Zahavi's PGFT(3;2,2,3;1,2,2;1,2,1) with LMC 2",
        lambda: zahavi_pgft(lmc=2),
        lmc=2,
    ),
)


def quantum_agg_spine_hosts() -> Fabric:
    """Quantum-style (40-port, HDR) PGFT(2; 4,6; 1,4; 1,1): 24 hosts, 6 leaves,
    4 spines; ``ufm01 HCA-1`` and ``storage-gw01 HCA-1`` on the first spine
    (its ports 7, 8), then a SHARP aggregation node on every switch (port 41)."""
    tree = pgft(2, [4, 6], [1, 4], [1, 1], switch_ports=40, speed="HDR")
    levels, _ = fabric_tuples(tree)
    spine = int(np.flatnonzero(levels == 2)[0])
    with_hosts = attach_cas(tree, [spine, spine], ["ufm01 HCA-1", "storage-gw01 HCA-1"])
    return with_aggregation_nodes(with_hosts)


def two_switch_fabric() -> Fabric:
    """Two switches, 4 hosts on each, 2 parallel links between them."""
    return two_switch(4, parallel=2)


def director_is5100() -> Fabric:
    """An IS5100-style director (InfiniScale IV, device 0xbd36): 6 line and 3
    spine ASICs, 6 links from each line to each spine ASIC, 2 hosts on every
    line ASIC.  rdma-core numbers IS4 line-card ports as external ports, so
    ``ibnetdiscover -g`` prints ``[ext N]`` and chassis groups."""
    return director(
        "dir01", model="IS5100", line_cards=6, spine_cards=3, hosts_per_asic=2,
        device_id=IS4_DEVICE_ID,
    )


SHAPE_FIXTURES: tuple[FixtureSpec, ...] = (
    FixtureSpec(
        "quantum-2level-agg-spine-hosts",
        "40-port HDR PGFT(2;4,6;1,4;1,1), 2 hosts on a spine, an aggregation node per switch",
        quantum_agg_spine_hosts,
    ),
    FixtureSpec(
        "two-switch-4-4-p2",
        "2 switches, 4 hosts on each, 2 parallel links",
        two_switch_fabric,
    ),
    FixtureSpec(
        "director-is5100-g",
        "IS5100-style director (6 line, 3 spine ASICs, 12 hosts), ibnetdiscover -g",
        director_is5100,
        discover_args=("-g",),
    ),
)

#: Every fixture the script makes.
ALL_FIXTURES: tuple[FixtureSpec, ...] = FIXTURES + SHAPE_FIXTURES


def verify(name: str, lines: list[str], expected: Fabric, lmc: int) -> None:
    """Parse ``lines`` and compare with ``expected``; ``SystemExit`` on mismatch."""
    from smroute.fabric.ibnetdiscover.parse import parse_topology

    got = parse_topology(lines, f"{name}.topo")
    problems = []
    if sorted(got.node_guid.tolist()) != sorted(expected.node_guid.tolist()):
        problems.append("node GUIDs differ")
    if got.link_set() != expected.link_set():
        problems.append(
            f"link sets differ ({len(got.link_set() - expected.link_set())} extra, "
            f"{len(expected.link_set() - got.link_set())} missing)"
        )
    ca_rows = got.port_start[got.cas] + 1
    if lmc and not (got.port_lmc[ca_rows] == lmc).all():
        problems.append(f"not every CA port has LMC {lmc}")
    if not (got.port_lid[ca_rows] != 0).all():
        problems.append("some CA port has no LID (did OpenSM run?)")
    if problems:
        raise SystemExit(f"{name}: ibnetdiscover output does not match: " + "; ".join(problems))


def make(spec: FixtureSpec, out_dir: Path, *, check: bool = True) -> dict[str, float]:
    """Build one fixture; returns the time of each step in seconds."""
    from smroute.fabric.export.writers import write_ibsim_net

    times: dict[str, float] = {}
    t0 = time.monotonic()
    fabric = spec.build()
    times["generate"] = time.monotonic() - t0
    with tempfile.TemporaryDirectory(prefix=f"smroute-fixture-{spec.name}-") as tmp:
        wd = Path(tmp)
        net = wd / f"{spec.name}.net"
        write_ibsim_net(strip_lids(fabric), net)
        t = time.monotonic()
        with IbSim(net, wd) as sim:
            times["ibsim_start"] = time.monotonic() - t
            t = time.monotonic()
            osm = run_opensm(sim, wd / "opensm", engine=spec.engine, lmc=spec.lmc)
            times["opensm"] = time.monotonic() - t
            if osm.routing_seconds is not None:
                times["opensm_routing"] = osm.routing_seconds
            t = time.monotonic()
            if spec.discover_args:
                lines = sim.run(["ibnetdiscover", *spec.discover_args], timeout=600.0).lines()
            else:
                lines = ibnetdiscover(sim)
            times["ibnetdiscover"] = time.monotonic() - t
    if check:
        verify(spec.name, lines, fabric, spec.lmc)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{spec.name}.topo"
    atomic_write_text(target, "\n".join(lines) + "\n")
    os.chmod(target, 0o644)
    times["total"] = time.monotonic() - t0
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures", help="output directory")
    ap.add_argument("--only", action="append", metavar="NAME", help="make only this fixture")
    ap.add_argument("--list", action="store_true", help="list the fixtures and exit")
    ap.add_argument("--no-check", action="store_true", help="skip the parse-back check")
    args = ap.parse_args(argv)
    if args.list:
        for spec in ALL_FIXTURES:
            print(f"{spec.name:<32} {spec.description}")
        return 0
    names = {s.name for s in ALL_FIXTURES}
    for n in args.only or []:
        if n not in names:
            ap.error(f"unknown fixture {n!r} (see --list)")
    todo = [s for s in ALL_FIXTURES if not args.only or s.name in args.only]
    try:
        for spec in todo:
            times = make(spec, args.out, check=not args.no_check)
            steps = ", ".join(f"{k} {v:.2f}s" for k, v in times.items())
            print(f"{spec.name}: {steps}")
    except SmrouteError as err:
        print(f"make_fixtures: error: {err}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
