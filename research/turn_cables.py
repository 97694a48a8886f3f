#!/usr/bin/env python3
"""A test of the design in ``notes/one-vl-turn-cables.md``, on one VL: every
cable from a lower switch up to a switch that carries a service host needing
a turn carries only the traffic that ends at that switch's end-ports (the
lower switch's other entries on it go to its other cables that lead closer),
so every turn into that switch ends a chain of channel dependencies. Then
``smroute route``'s mode chain runs unchanged with those tables as the
tree's (Nmodc, one VL).

Prints for the tree's routes and with the cables kept: the mode, the
validation walk over the needed pairs and the credit-loop check.
``--both-ways`` keeps the cables into such a switch from above too;
``--verbose`` names the first failing pairs; ``--metrics`` adds SP/A2A/RP
over the compute hosts in GUID order (as ``unseen_sweep.py``). A research prototype: the
product does not do this.

    .venv/bin/python research/turn_cables.py [--both-ways] [--verbose] [--metrics] FABRIC...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

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
from smroute.routing.dmodc import INF  # noqa: E402
from smroute.routing.engine import route, validate_result  # noqa: E402
from smroute.routing.topology import SwitchGraph  # noqa: E402

#: keep the cables into a service host's switch from above too (no transit
#: through it either way), else only those from below
BOTH_WAYS = False
VERBOSE = False
#: SP/A2A/RP over the compute hosts in GUID order (as research/unseen_sweep.py)
METRICS = False


def keep_cables(g: SwitchGraph, c: np.ndarray, dest, ports: np.ndarray,  # type: ignore[no-untyped-def]
                turns: np.ndarray) -> int:
    """Keep every cable from a lower switch up to an upper switch that a
    turning destination other than an aggregation node sits on (a service
    host) for the traffic that ends at that switch's end-ports (in place in
    ``ports``); the number of cables kept."""
    agg = np.zeros(len(dest.lid), dtype=bool)
    ca = ~dest.is_switch
    agg[ca] = g.ep_agg[dest.owner[ca]] if len(g.ep_agg) else False
    xs = {int(t) for t in dest.target[turns & ca & ~agg].tolist() if g.rank[int(t)] > 0}
    kept: dict[int, dict[int, int]] = {}  # switch -> port -> the upper switch it is kept for
    for k in range(len(g.grp_remote)):
        x, s = int(g.grp_remote[k]), int(g.grp_switch[k])
        if x in xs and (BOTH_WAYS or g.rank[s] < g.rank[x]):
            for i in range(int(g.grp_port_count[k])):
                kept.setdefault(s, {})[int(g.grp_ports[g.grp_port_first[k] + i])] = x
    for s, mine in kept.items():
        grps = range(int(g.grp_first[s]), int(g.grp_first[s] + g.grp_count[s]))
        free = [(int(g.grp_ports[g.grp_port_first[k] + i]), int(g.grp_remote[k]))
                for k in grps for i in range(int(g.grp_port_count[k]))]
        free = [(p, r) for p, r in free if p not in mine]
        for p, x in mine.items():
            on_x = dest.target == x
            moved = np.flatnonzero((ports[s, dest.lid] == p) & ~on_x)
            for j in moved.tolist():
                t = int(dest.target[j])
                closer = [q for q, r in free if c[r, t] < INF and c[r, t] + 1 == c[s, t]]
                if closer:
                    ports[s, dest.lid[j]] = closer[int(dest.nid[j]) % len(closer)]
    return sum(len(m) for m in kept.values())


def run(path: str) -> None:
    f: Fabric = read_fabric(path)
    chain = modes.chain

    def kept_chain(fabric, roles, eng, prep, ports, mode, reason, max_vls, needed):  # type: ignore[no-untyped-def]
        g, c, dest = prep.graph, prep.costs, prep.dest
        need = modes.turn_destinations(g, c, dest)
        print(f"    {keep_cables(g, c, dest, ports, need)} cables kept")
        return chain(fabric, roles, eng, prep, ports, mode, reason, max_vls, needed)

    for label, patched in (("tree's routes", chain), ("turn cables kept", kept_chain)):
        modes.chain = patched
        try:
            t0 = time.perf_counter()
            res = route(f, workers=1, labels=False, max_vls=1)
            took = time.perf_counter() - t0
        finally:
            modes.chain = chain
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
        BOTH_WAYS |= args[0] == "--both-ways"
        VERBOSE |= args[0] == "--verbose"
        METRICS |= args[0] == "--metrics"
        args = args[1:]
    for a in args:
        run(a)
