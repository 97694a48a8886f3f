"""Run a degradation study: throws -> side-by-side runs -> CSV rows.

:func:`run_throw` (one task, run in a worker) degrades the complete fabric
(:func:`smroute.study.degrade.plan_throw`), runs every engine on it
(:func:`smroute.lab.sidebyside.run_side_by_side`) and returns one CSV row
per engine.  :func:`run_study` plans the throws, skips those already in the
CSV (and runs again those with a row that is not ``ok``), runs the rest
through :func:`smroute.study.executors.run_unordered` and rewrites the CSV
after each finished throw.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import shutil
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from smroute.analysis.compare import CompareConfig, TableMetrics
from smroute.errors import SmrouteError
from smroute.fabric.ibnetdiscover.parse import read_topology
from smroute.fabric.model.arrays import Fabric
from smroute.lab.sidebyside import SMROUTE_ENGINES, run_side_by_side
from smroute.routing import api
from smroute.study.degrade import parse_pgft, plan_throw
from smroute.study.executors import run_unordered
from smroute.study.results import (
    KEY,
    METRICS,
    RETRY_STATUSES,
    Row,
    as_stored,
    done_throws,
    read_rows,
    write_rows,
)

__all__ = ["ThrowTask", "load_fabric", "run_throw", "plan_tasks", "run_study"]


@dataclass(frozen=True)
class ThrowTask:
    """Everything a worker needs for one throw (picklable).

    source: ``"pgft:<tuple>"`` or ``"file:<ibnetdiscover path>"``; label: the
    fabric's name in the CSV; workroot: where the throw's scratch directory
    goes (removed afterwards unless ``keep_work``); vls: the data VLs
    ``nmodc`` may use (2+: detours); check: ``(metric, value)`` of the cached
    row of smroute's engine ``checked`` that this run's row of it must
    reproduce (a resumed throw that only adds engines beside its cached
    rows); reference: the engine the
    other rows' random-order HSD is paired with for its standard error
    (default: the default engine).
    """

    source: str
    label: str
    mode: str
    seed: int
    index: int
    engines: tuple[str, ...]
    workroot: str
    rp_samples: int = 1000
    random_orders: int = 3
    opensm_timeout: float = 600.0
    keep_work: bool = False
    vls: int = 1
    check: tuple[tuple[str, float], ...] = ()
    checked: str = ""
    reference: str = ""

    @property
    def key(self) -> tuple[object, ...]:
        """The throw's CSV key ``(fabric, mode, seed, throw)`` (results.KEY order)."""
        return (self.label, self.mode, self.seed, self.index)


@functools.lru_cache(maxsize=4)
def load_fabric(source: str) -> Fabric:
    """The complete fabric of a task source (cached per process)."""
    kind, _, arg = source.partition(":")
    if kind == "pgft":
        return parse_pgft(arg).build()
    if kind == "file":
        return read_topology(arg)
    raise SmrouteError(f"bad fabric source {source!r}: expected pgft:TUPLE or file:PATH")


def _base(task: ThrowTask, total: int, removed: int) -> Row:
    return {"fabric": task.label, "mode": task.mode, "throw": task.index, "seed": task.seed,
            "total": total, "removed": removed}


def error_rows(task: ThrowTask, error: str, total: int = 0, removed: int = 0) -> list[Row]:
    """One ``status=error`` row per engine (the throw itself failed)."""
    return [{**_base(task, total, removed), "engine": e, "status": "error", "error": error}
            for e in task.engines]


def run_throw(task: ThrowTask) -> list[Row]:
    """Degrade, route with every engine, analyse; one row per engine."""
    full = load_fabric(task.source)
    throw = plan_throw(full, task.mode, task.seed, task.index)
    work = Path(task.workroot) / f"{task.label}-{task.mode}-s{task.seed}-t{task.index}"
    if work.exists():
        shutil.rmtree(work, ignore_errors=True)
    cfg = CompareConfig(rp_samples=task.rp_samples, random_orders=task.random_orders)
    try:
        sbs = run_side_by_side(throw.fabric, work, throw.metrics_rng, engines=task.engines,
                               config=cfg, opensm_timeout=task.opensm_timeout,
                               max_vls=task.vls)
    except SmrouteError as err:
        return error_rows(task, str(err).splitlines()[0], throw.total, throw.removed)
    finally:
        if not task.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    rows = []
    ref = task.reference or api.DEFAULT
    for e in task.engines:
        run = sbs.runs[e]
        row: Row = {**_base(task, throw.total, throw.removed), "engine": e,
                    "hosts": len(sbs.order), "status": run.status, "error": run.error,
                    "routing_seconds": run.routing_seconds, "wall_seconds": run.wall_seconds,
                    "order": sbs.order_kind,
                    "routing_mode": run.note.split(":")[0] if e in SMROUTE_ENGINES else ""}
        m = sbs.metrics.get(e)
        if m is not None:
            row.update(m.values)
            row.update(hsd_precision_cells(m.random_order_hsd,
                                           None if e == ref else sbs.metrics.get(ref)))
            row.update({"unroutable_pairs": m.unroutable["pairs"],
                        "unroutable_rp": m.unroutable["rp"],
                        "unroutable_sp": m.unroutable["sp"], "hot_link": m.hot_link})
        elif run.status == "ok":
            row["status"], row["error"] = "failed", sbs.error or "no metrics"
        rows.append(row)
    return _checked(task, rows)


def hsd_precision_cells(per_order: Sequence[float], ref: TableMetrics | None) -> Row:
    """The precision columns of a row whose random-order HSD is the mean of
    ``per_order`` (one value per random order): the orders, the standard
    error, and that of the difference to ``ref`` (the reference engine's
    metrics on the same orders; ``None`` for the reference's own row)."""
    x = np.asarray(per_order, dtype=np.float64)
    out: Row = {"hsd_random_orders": len(x)}
    if len(x) < 2:
        return out
    out["hsd_random_se"] = float(x.std(ddof=1) / math.sqrt(len(x)))
    if ref is not None and len(ref.random_order_hsd) == len(x):
        d = x - np.asarray(ref.random_order_hsd, dtype=np.float64)
        out["hsd_random_paired_se"] = float(d.std(ddof=1) / math.sqrt(len(x)))
        out["hsd_random_paired_with"] = ref.name
    return out


def _checked(task: ThrowTask, rows: list[Row]) -> list[Row]:
    """``rows``, or ``status=error`` rows if the row of ``task.checked`` does
    not reproduce ``task.check`` (the cached rows of the throw came from
    other permutations, order or fabric: the next resume runs it in full)."""
    if not task.check:
        return rows
    dm = next((r for r in rows if r["engine"] == task.checked), {})
    diff = [f"{k} {dm.get(k, 'none')} != {v:g}" for k, v in task.check
            if not isinstance(got := dm.get(k), (int, float)) or as_stored(got) != v]
    if not diff:
        return rows
    why = (f"the cached rows of this throw do not reproduce ({task.checked}'s "
           f"{', '.join(diff[:3])}): it runs again in full on the next resume")
    return [{**r, "status": "error", "error": why} for r in rows]


def _resumed(task: ThrowTask, old: list[Row], retry: Collection[str]) -> ThrowTask | None:
    """``task`` reduced to the engines missing from its cached rows ``old``
    (plus one of smroute's engines with a cached ``ok`` row, the default
    first, checked against that row: the others when the default's rows
    are being computed again), else ``None`` (run in full).  A missing
    OpenSM engine runs under ibsim alone; the check shows the fabric, its
    LIDs, the host order and the permutations are the cached rows' own."""
    have = {str(r["engine"]): r for r in old if r.get("status") not in retry}
    checked = next((e for e in SMROUTE_ENGINES if e in task.engines and e in have
                    and have[e].get("status") == "ok"), None)
    if checked is None:
        return None
    dm = have[checked]
    missing = [e for e in task.engines if e not in have]
    orders = dm.get("hsd_random_orders") or task.random_orders  # refined rows: not checked
    check = tuple((k, float(v)) for k in METRICS
                  if isinstance(v := dm.get(k), (int, float)) and not math.isnan(v)
                  and (orders == task.random_orders or not k.startswith("hsd_random")))
    if not check:  # nothing to check the cached rows by
        return None
    engines = tuple(e for e in task.engines if e in missing or e == checked)
    return dataclasses.replace(task, engines=engines, check=check, checked=checked)


def plan_tasks(source: str, label: str, modes: Sequence[str], throws: int, seed: int,
               engines: Sequence[str], workroot: str, **kwargs: Any) -> list[ThrowTask]:
    """Throws ``0 .. throws - 1`` of every mode."""
    return [ThrowTask(source, label, mode, seed, i, tuple(engines), workroot, **kwargs)
            for mode in modes for i in range(throws)]


@dataclass(frozen=True)
class Progress:
    """One finished throw, for progress reporting."""

    done: int
    todo: int
    task: ThrowTask
    rows: list[Row]
    seconds: float


def run_study(
    tasks: Sequence[ThrowTask],
    csv_file: str | Path,
    *,
    workers: int = 2,
    scheduler: Any = None,
    on_throw: Callable[[Progress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    retry: Collection[str] = RETRY_STATUSES,
) -> list[Row]:
    """Run ``tasks`` not yet complete in ``csv_file`` (resuming: a throw with a
    row whose status is in ``retry`` runs again), rewriting the CSV atomically
    after each throw; return all rows (old and new), sorted."""
    path = Path(csv_file)
    rows: list[Row] = read_rows(path) if path.exists() else []
    engines = tasks[0].engines if tasks else ()
    done = done_throws(rows, engines, retry)
    by_key: dict[tuple[object, ...], list[Row]] = {}
    for r in rows:
        by_key.setdefault(tuple(r[k] for k in KEY), []).append(r)
    todo: list[ThrowTask] = []
    for t in tasks:
        if t.key not in done:
            part = _resumed(t, by_key.get(t.key, []), retry)
            todo.append(part or t)
    # drop the rows each throw about to run will write again (all, if run in full)
    again = {(t.key, e) for t in todo for e in t.engines}
    full = {t.key for t in todo if not t.check}
    rows = [r for r in rows if (k := tuple(r[c] for c in KEY)) not in full
            and (k, r["engine"]) not in again]
    t0 = clock()
    it: Iterator[tuple[ThrowTask, list[Row] | None, str | None]] = run_unordered(
        run_throw, todo, workers=workers, scheduler=scheduler)
    for n, (task, res, err) in enumerate(it, 1):
        new = res if res is not None else error_rows(task, err or "unknown error")
        rows.extend(new)
        rows.sort(key=_sort_key)
        write_rows(path, rows)
        if on_throw is not None:
            on_throw(Progress(n, len(todo), task, new, clock() - t0))
    return rows


def _sort_key(r: Row) -> tuple[str, str, int, int, str]:
    return (str(r["fabric"]), str(r["mode"]), int(str(r["seed"])), int(str(r["throw"])),
            str(r["engine"]))
