#!/usr/bin/env python3
"""Check every throw of a study CSV that Nmodc routed with detours.

For each ``nmodc`` row whose ``routing_mode`` is ``tree+detours``: plan the
throw again (same seed and protocol), route the part of the fabric a subnet
manager reaches with Nmodc and ``--vls`` VLs, and run the validation walk
(every switch to every LID) and the channel-dependency check per VL
(:func:`smroute.routing.deadlock.check_credit_loops`).  Prints one line per
throw and exits 1 if any throw is not valid or has a credit loop.

    .venv/bin/python research/check_study_detours.py docs/study/pgft1728/study.csv --vls 4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smroute.lab.simnet import sm_part  # noqa: E402
from smroute.routing.deadlock import check_credit_loops  # noqa: E402
from smroute.routing.engine import route, validate_result  # noqa: E402
from smroute.study.degrade import parse_pgft, plan_throw  # noqa: E402
from smroute.study.results import read_rows  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--vls", type=int, default=4)
    args = ap.parse_args()
    rows = [r for r in read_rows(args.csv)
            if r["engine"] == "nmodc" and r.get("routing_mode") == "tree+detours"]
    bad = 0
    complete = {label: parse_pgft(label).build() for label in {str(r["fabric"]) for r in rows}}
    for r in rows:
        th = plan_throw(complete[str(r["fabric"])], str(r["mode"]), int(str(r["seed"])),
                        int(str(r["throw"])))
        fabric = sm_part(th.fabric)
        res = route(fabric, algorithm="nmodc", workers=1, labels=False, max_vls=args.vls)
        v = validate_result(res)
        dl = check_credit_loops(fabric, res.tables, res.lanes)
        ok = v.ok and dl.ok and res.mode == "tree+detours"
        bad += not ok
        lanes = res.lanes
        print(f"{r['mode']} throw {r['throw']} removed {r['removed']}: {res.mode}, "
              f"{lanes.n_vls if lanes else 1} VLs, {lanes.n_sls if lanes else 1} SLs; "
              f"valid {v.ok}; channel cycles {dl.cyclic} ({dl.vls} VLs)", flush=True)
    print(f"{len(rows)} throws with detours, {bad} not valid or with a credit loop")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
