"""More random orders for the random-order HSD comparisons the study leaves unresolved.

A study averages each throw's random-order HSD over a few random orders
(``--random-orders``).  Where a band's comparison of the reference engine
(the default) with a rival is unresolved -- the standard error from the
orders is unknown or not below the mean difference
(:func:`smroute.study.signtest.resolved`) -- :func:`precision_tasks` plans
those throws again with more orders, for the reference and the rivals in
question only, and :func:`run_precision` runs them
(:func:`smroute.study.runner.run_throw`: the same degraded fabric, LIDs,
host order and metrics generator, so the study's orders are the first of
the new ones) and updates the cached rows in place: the random-order HSD,
per CPS too, and its precision columns.  A rerun row whose order-free
metrics (:data:`FIXED`) do not reproduce the cached row's leaves it as it
was and is counted.  Throws whose rows already have the orders are
skipped, so the pass resumes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from smroute.study.executors import run_unordered
from smroute.study.results import (
    BANDS,
    KEY,
    METRICS,
    Row,
    complete,
    read_rows,
    reproduces,
    write_rows,
)
from smroute.study.runner import ThrowTask, run_throw
from smroute.study.signtest import hsd_precision, resolved

__all__ = ["FIXED", "PRECISION_COLUMNS", "precision_tasks", "PrecisionResult", "run_precision"]

#: The metrics that do not depend on the random orders: a rerun must give the cached ones.
FIXED = ("a2a", "rp", "sp", "hsd_topo")
#: The columns a precision rerun replaces in a cached row.
PRECISION_COLUMNS = (
    *(m for m in METRICS if m.startswith("hsd_random")),
    "hsd_random_orders", "hsd_random_se", "hsd_random_paired_se", "hsd_random_paired_with",
)


def _orders(r: Row) -> int:
    v = r.get("hsd_random_orders")
    return v if isinstance(v, int) else 0


def precision_tasks(rows: Sequence[Row], template: ThrowTask, orders: int, reference: str,
                    bands: Collection[str] | None = None) -> list[ThrowTask]:
    """Throws of ``template``'s fabric, mode and seed to rerun with ``orders``
    random orders: in each band (of ``bands``, default all) whose random-order
    HSD comparison of ``reference`` with a rival of ``template.engines`` is
    not :func:`resolved`, the throws where both delivered every pair and
    one has fewer orders; each task runs ``reference`` and every rival that
    delivered every pair on that throw (a throw's rows average the same
    orders, so every comparison on it stays paired)."""
    sel = [r for r in rows if r["fabric"] == template.label and r["mode"] == template.mode
           and r["seed"] == template.seed]
    rivals = [e for e in template.engines if e != reference]
    need: set[int] = set()
    for band, lo, hi in BANDS:
        if bands is not None and band not in bands:
            continue
        in_band = [r for r in sel if lo <= int(str(r["removed"])) <= hi]
        by: dict[tuple[int, str], Row] = {(int(str(r["throw"])), str(r["engine"])): r
                                          for r in in_band}
        for rival in rivals:
            diff, se, _ = hsd_precision(in_band, template.label, template.mode, band,
                                        reference, rival)
            if resolved(diff, se):
                continue
            for t in sorted({t for t, _ in by}):
                a, b = by.get((t, reference)), by.get((t, rival))
                if a is None or b is None or not (complete(a) and complete(b)):
                    continue
                if min(_orders(a), _orders(b)) < orders or (
                        b.get("hsd_random_paired_with") != reference
                        and abs(float(str(a["hsd_random"])) - float(str(b["hsd_random"]))) > 0):
                    need.add(t)
    # every engine complete on a rerun throw gets the new orders, so that
    # the rows of a throw always average the same orders
    done = {(int(str(r["throw"])), str(r["engine"])) for r in sel if complete(r)}
    return [dataclasses.replace(template, index=t, random_orders=orders, reference=reference,
                                engines=(reference, *(e for e in rivals if (t, e) in done)),
                                check=())
            for t in sorted(need)]


@dataclass(frozen=True)
class PrecisionResult:
    """What a precision pass did: throws rerun, rows updated, rows that did
    not reproduce (left as they were), throws that broke."""

    throws: int
    updated: int
    differ: int
    broke: int


def run_precision(tasks: Sequence[ThrowTask], csv_file: str | Path, *, workers: int = 2,
                  scheduler: object = None,
                  on_throw: Callable[[int, int, ThrowTask, str], None] | None = None,
                  ) -> PrecisionResult:
    """Run ``tasks`` and update the CSV's rows in place, rewriting it after
    each throw; ``on_throw(done, todo, task, note)`` reports progress."""
    path = Path(csv_file)
    rows = read_rows(path)
    index = {(*(r[k] for k in KEY), str(r["engine"])): r for r in rows}
    updated = differ = broke = 0
    it = run_unordered(run_throw, list(tasks), workers=workers, scheduler=scheduler)
    for n, (task, res, err) in enumerate(it, 1):
        notes = []
        if res is None or any(r.get("status") == "error" for r in res):
            broke += 1
            notes.append(f"broke: {err or next(str(r['error']) for r in res or [])}")
        else:
            for new in res:
                old = index.get((*task.key, str(new["engine"])))
                if old is None or new.get("status") != "ok":
                    continue
                if not reproduces(new, old, FIXED):
                    differ += 1
                    notes.append(f"{new['engine']} does not reproduce its cached row")
                    continue
                for c in PRECISION_COLUMNS:
                    if c in new:
                        old[c] = new[c]
                    else:
                        old.pop(c, None)
                updated += 1
                notes.append(f"{new['engine']} {float(str(new['hsd_random'])):.4f}")
            write_rows(path, rows)
        if on_throw is not None:
            on_throw(n, len(tasks), task, "; ".join(notes))
    return PrecisionResult(len(tasks), updated, differ, broke)
