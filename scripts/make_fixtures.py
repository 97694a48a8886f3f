#!/usr/bin/env python3
"""Make the committed topology fixtures with the real tools.

For each fixture: generate the fabric (:mod:`smroute.fabric.generate`), write
it as an ibsim net file without LIDs, boot ``ibsim`` on it, run the real OpenSM once (it
assigns the LIDs, with the fixture's LMC), then run the real ``ibnetdiscover``
through ``ibsim-run`` and store its output, verbatim, as
``fixtures/<name>.topo`` (atomic write).  Before writing, the output is parsed
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
from smroute.fabric.generate import degrade, parse_tuple, pgft  # noqa: E402
from smroute.fabric.model import Fabric  # noqa: E402
from smroute.fileio import atomic_write_text  # noqa: E402
from smroute.opensm.sidebyside import strip_lids  # noqa: E402
from smroute.opensm.sim import IbSim, ibnetdiscover, run_opensm  # noqa: E402

#: Seed of the degraded fixture (changing it changes the committed file).
DEGRADE_SEED = 20240611


@dataclass(frozen=True)
class FixtureSpec:
    """One fixture: a name, how to build its fabric, the LMC OpenSM uses."""

    name: str
    description: str
    build: Callable[[], Fabric]
    lmc: int = 0
    engine: str = "minhop"


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


def verify(name: str, lines: list[str], expected: Fabric, lmc: int) -> None:
    """Parse ``lines`` and compare with ``expected``; ``SystemExit`` on mismatch."""
    from smroute.fabric.ibnetdiscover import parse_topology

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
    from smroute.fabric.writers import write_ibsim_net

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
        for spec in FIXTURES:
            print(f"{spec.name:<28} {spec.description}")
        return 0
    names = {s.name for s in FIXTURES}
    for n in args.only or []:
        if n not in names:
            ap.error(f"unknown fixture {n!r} (see --list)")
    todo = [s for s in FIXTURES if not args.only or s.name in args.only]
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
