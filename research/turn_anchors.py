#!/usr/bin/env python3
"""The anchored turns of ``notes/one-vl-turn-cables.md`` measured on one VL
(:func:`smroute.routing.turn_anchors.anchor_turns`): ``smroute route``'s
mode chain (Nmodc, one VL) without them (``tree+orient`` alone), as the
product runs it (anchors only where ``tree+orient`` leaves needed pairs),
and with the anchors taken on every site (to measure their cost where
``tree+orient`` serves every needed pair).

Prints per run: the mode, the validation walk over the needed pairs and
the credit-loop check. ``--verbose`` names the first failing pairs;
``--metrics`` adds SP/A2A/RP over the compute hosts in GUID order (as
``unseen_sweep.py``).

    .venv/bin/python research/turn_anchors.py [--verbose] [--metrics] FABRIC...
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
    anchor, orient = modes.anchor_turns, modes.orient.orient_whole
    runs = (("tree+orient alone", (lambda *a: 0), orient), ("product", anchor, orient),
            ("anchors always", anchor, (lambda *a, **k: (None, "not tried", None))))
    for label, anchors, orientation in runs:
        modes.anchor_turns, modes.orient.orient_whole = anchors, orientation
        try:
            t0 = time.perf_counter()
            res = route(f, workers=1, labels=False, max_vls=1)
            took = time.perf_counter() - t0
        finally:
            modes.anchor_turns, modes.orient.orient_whole = anchor, orient
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
