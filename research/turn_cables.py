#!/usr/bin/env python3
"""The design of ``notes/one-vl-turn-cables.md`` measured on one VL: every
cable from a lower switch up to a switch that carries a service host needing
a turn carries only the traffic that ends at that switch's end-ports
(:func:`smroute.routing.turn_cables.keep_turn_cables`), applied to the
tree's tables before ``smroute route``'s mode chain (Nmodc, one VL), against
the chain without it.

Prints for the tree's routes and with the cables kept: the mode, the
validation walk over the needed pairs and the credit-loop check.
``--verbose`` names the first failing pairs; ``--metrics`` adds SP/A2A/RP
over the compute hosts in GUID order (as ``unseen_sweep.py``). The product
now does this after ``tree+orient`` where that leaves needed pairs
(``smroute/routing/turn_cables.py``); this script applies it before, on
every site, to measure it.

    .venv/bin/python research/turn_cables.py [--verbose] [--metrics] FABRIC...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from site_compare import table_metrics  # noqa: E402

from smroute.fabric.ibnetdiscover.parse import read_fabric  # noqa: E402
from smroute.fabric.model.arrays import Fabric  # noqa: E402
from smroute.fabric.roles import fabric_roles  # noqa: E402
from smroute.routing import modes  # noqa: E402
from smroute.routing.deadlock import check_credit_loops  # noqa: E402
from smroute.routing.engine import route, validate_result  # noqa: E402

VERBOSE = False
#: SP/A2A/RP over the compute hosts in GUID order (as research/unseen_sweep.py)
METRICS = False


def run(path: str) -> None:
    f: Fabric = read_fabric(path)
    chain, keep = modes.chain, modes.keep_turn_cables

    def kept_first(fabric, roles, eng, prep, ports, mode, reason, max_vls, needed):  # type: ignore[no-untyped-def]
        g, c, dest = prep.graph, prep.costs, prep.dest
        n = keep(g, c, dest, ports, modes.turn_destinations(g, c, dest))
        print(f"    {n} cables kept")
        return chain(fabric, roles, eng, prep, ports, mode, reason, max_vls, needed)

    for label, patched in (("tree's routes", chain), ("turn cables kept", kept_first)):
        modes.chain, modes.keep_turn_cables = patched, (lambda *a: 0)
        try:
            t0 = time.perf_counter()
            res = route(f, workers=1, labels=False, max_vls=1)
            took = time.perf_counter() - t0
        finally:
            modes.chain, modes.keep_turn_cables = chain, keep
        v = validate_result(res)
        loops = check_credit_loops(f, res.tables)
        print(f"{Path(path).name} {label}: mode {res.mode} ({took:.1f} s)")
        print(f"    validation: {v.summary()[:160]}")
        if VERBOSE:
            for x in v.failures[:8]:
                print(f"      {x}")
        if METRICS:
            m = table_metrics(f, res.tables, fabric_roles(f), None, seed=1, rp_samples=10)
            c = m["sets"].get("compute")
            print(f"    needed pairs left {m['missing_needed']}/{m['needed_pairs']}; compute "
                  f"hosts SP/A2A/RP " + (f"{c['guid']['sp']}/{c['a2a']}/{c['guid']['rp']}"
                                         if c else "-"))
        print(f"    deadlock: {loops.summary()[:160]}")


if __name__ == "__main__":
    args = sys.argv[1:]
    while args and args[0].startswith("--"):
        VERBOSE |= args[0] == "--verbose"
        METRICS |= args[0] == "--metrics"
        args = args[1:]
    for a in args:
        run(a)
