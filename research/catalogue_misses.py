"""The cells of a catalogue bench run (``bench/real_fabrics.py --catalogue
--json FILE``) where smroute's default is above the best rival, by how
much, and every engine's status and routing time, as markdown.

    python research/catalogue_misses.py FILE

Comparisons (compute hosts, both host orders, the bench's own
:func:`site_compare.best_cells`): smroute on one VL against the best of
updn, dnup, ftree and nue that routed every needed pair free of credit
loops; smroute with VLs against the best OpenSM engine that routed every
needed pair.  Every cell above the best is listed (the raw misses) with its
sign test over the paired stages (RP: the same random permutations; shift
HSD: the same shifts; :mod:`site_stages`); it counts as a significant miss
by the bench's rule (:data:`site_compare.NOISE_RULE`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from site_compare import NOISE_RULE, ONE_VL_ENGINES, SITE_ENGINES, best_cells  # noqa: E402

Row = dict[str, Any]
COMPARISONS: tuple[tuple[str, tuple[str, ...] | None, bool, str], ...] = (
    ("smroute", ONE_VL_ENGINES, True, "one VL / best loop-free one-VL"),
    ("smroute-vls", None, False, "VLs / best of all"),
)


def _n(v: float) -> str:
    return str(int(v)) if v == int(v) else f"{v:.3g}"


def _share(k: int, total: int) -> str:
    return f" ({100 * k / total:.0f}%)" if total else ""


def misses(fabrics: list[Row]) -> list[str]:
    """A table of the cells above the best rival (ratio ours / best) and,
    per comparison, how many cells miss."""
    out = ["| fabric | hosts | comparison | metric | smroute | best | by | ratio | sign test "
           "| counts |", "|---|---|---|---|---|---|---|---|---|---|"]
    counts: list[str] = []
    for ours, rivals, free, title in COMPARISONS:
        miss = total = sig = 0
        for r in fabrics:
            got = best_cells(r, ours, rivals, loop_free=free)
            if isinstance(got, str):
                continue
            for c in got:
                if c is None:
                    continue
                m, o, v, best, who, verdict = c
                total += 1
                if v <= best or verdict is None:
                    continue
                miss += 1
                sig += verdict.significant
                ratio = v / best if best else math.inf
                order = "" if m == "a2a" else f" {o}"
                test = verdict.mark().strip(" ()") or "exact"
                out.append(f"| {r['fabric']} | {r.get('compute', 0)} | {title} | "
                           f"{m.upper()}{order} | {_n(v)} | {_n(best)} | {'/'.join(who[:2])} | "
                           f"{ratio:.2f} | {test} | {'yes' if verdict.significant else 'no'} |")
        counts.append(f"* {title}: {miss} of {total} cells above the best{_share(miss, total)} "
                      f"(raw); {sig} significant misses{_share(sig, total)}")
    return [*out, "", *counts, "", f"A miss counts as significant: {NOISE_RULE}."]


def _s(v: float) -> str:
    return f"{v:.0f} s" if v >= 10 else f"{v:.2g} s"


def _cell(e: Row) -> str:
    rt, wall = e.get("routing_seconds"), e.get("wall_seconds")
    t = _s(rt) if isinstance(rt, (int, float)) else "-"
    if isinstance(wall, (int, float)):
        t += f" ({_s(wall)})"
    if e["status"] == "timeout":
        return f"timeout{f' ({_s(wall)})' if isinstance(wall, (int, float)) else ''}"
    if e.get("fallback"):
        return f"fell back to {e['fallback']}"
    if e["status"] != "ok":
        return e["status"]
    m = e.get("metrics") or {}
    return t + ("" if not m or m.get("missing_needed", 0) == 0 else ", incomplete")


def routing_times(fabrics: list[Row]) -> list[str]:
    """Per fabric and engine: routing time (the whole run's wall time, for
    OpenSM the sweep under ibsim), or why there is none; ``-``: not run."""
    out = ["| fabric | CAs | " + " | ".join(SITE_ENGINES) + " |",
           "|---" * (2 + len(SITE_ENGINES)) + "|"]
    for r in fabrics:
        eng = {e["engine"]: e for e in r.get("engines", [])}
        out.append(f"| {r['fabric']} | {r.get('cas', '-')} | "
                   + " | ".join(_cell(eng[n]) if n in eng else "-" for n in SITE_ENGINES) + " |")
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1].strip())
    fabrics = json.loads(Path(sys.argv[1]).read_text())["fabrics"]
    print("\n".join(["### Cells above the best rival (compute hosts)", "", *misses(fabrics), "",
                     "### Engines: routing time (wall time of the run)", "",
                     *routing_times(fabrics)]))


if __name__ == "__main__":
    main()
