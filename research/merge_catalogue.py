"""Merge catalogue bench results (``bench/real_fabrics.py --catalogue --json
FILE``, one run per shape) into one file for ``--from-json`` and
``catalogue_misses.py``: the first file's header (machine, VLs, RP samples,
seed, budget), the union of the engines, the fabrics in the order given; a
fabric in several files is taken from the last.

    python research/merge_catalogue.py OUT IN [IN ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One results document of ``runs`` (module doc)."""
    if not runs:
        raise ValueError("nothing to merge")
    out = {k: v for k, v in runs[0].items() if k != "fabrics"}
    out["engines"] = list(dict.fromkeys(e for r in runs for e in r.get("engines", [])))
    fabrics: dict[str, Any] = {}
    for r in runs:
        for f in r["fabrics"]:
            fabrics.pop(f["fabric"], None)
            fabrics[f["fabric"]] = f
    out["fabrics"] = list(fabrics.values())
    return out


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1].strip())
    runs = [json.loads(Path(p).read_text()) for p in sys.argv[2:]]
    text = json.dumps(merge(runs), indent=1) + "\n"
    tmp = Path(sys.argv[1] + ".tmp")
    tmp.write_text(text)
    tmp.replace(sys.argv[1])


if __name__ == "__main__":
    main()
