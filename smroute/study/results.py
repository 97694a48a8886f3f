"""Study results: one CSV row per (fabric, mode, throw, engine).

Columns (:data:`COLUMNS`): ``fabric`` (label), ``mode`` (switch|link),
``throw`` (index), ``seed``, ``total`` (equipment M), ``removed`` (a),
``hosts`` (end-ports OpenSM discovered: hosts cut off with their leaf are
not counted), ``engine``, ``status`` (ok|failed|timeout|error), the metrics
(:data:`METRICS`: ``a2a``, ``rp``, ``sp`` congestion risk; ``hsd_topo`` /
``hsd_random`` average HSD of the CPS in topological / random orders, then
per CPS), ``unroutable_pairs`` (ordered end-port pairs with no delivered
route), ``unroutable_rp`` / ``unroutable_sp`` (undelivered flows of those
patterns), ``routing_seconds``, ``wall_seconds``, ``order`` (which node order
the patterns used), ``hot_link`` (a link at the A2A max), ``error`` and
``routing_mode`` (smroute's engines: ``tree``, ``tree+turns``,
``tree+detours`` or ``updown``), then the precision of the random-order
HSD: ``hsd_random_orders`` (the orders it averages; empty in rows of
studies that did not record it), ``hsd_random_se`` (its standard error
over the orders), ``hsd_random_paired_se`` (the standard error of this row's
value minus that of the engine ``hsd_random_paired_with`` on the same
orders, the throw's reference engine).

The CSV is rewritten atomically after each throw, so it is always complete
and a study can resume from it (:func:`done_throws`: throws with a row not
``ok`` are run again).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import numpy as np

from smroute.analysis.patterns import CPS
from smroute.errors import InputError
from smroute.fileio import atomic_write_text, read_lines
from smroute.routing import api
from smroute.text import excerpt

__all__ = [
    "COLUMNS",
    "METRICS",
    "KEY",
    "BANDS",
    "band_of",
    "complete",
    "bar_table",
    "outcome_note",
    "format_rows",
    "parse_rows",
    "read_rows",
    "write_rows",
    "done_throws",
    "RETRY_STATUSES",
    "summary_lines",
    "band_table",
    "paired_table",
    "verdict_table",
    "sign_p",
    "markdown_report",
    "compact_table",
    "csv_path",
    "as_stored",
    "reproduces",
]

METRICS = (
    "a2a", "rp", "sp", "hsd_topo", "hsd_random",
    *(f"hsd_topo_{c}" for c in CPS), *(f"hsd_random_{c}" for c in CPS),
)
COLUMNS = (
    "fabric", "mode", "throw", "seed", "total", "removed", "hosts", "engine", "status",
    *METRICS, "unroutable_pairs", "unroutable_rp", "unroutable_sp",
    "routing_seconds", "wall_seconds", "order", "hot_link", "error", "routing_mode",
    "hsd_random_orders", "hsd_random_se", "hsd_random_paired_se", "hsd_random_paired_with",
)
KEY = ("fabric", "mode", "seed", "throw")
_INT = {"throw", "seed", "total", "removed", "hosts", "unroutable_pairs", "unroutable_rp",
        "unroutable_sp", "hsd_random_orders"}
_FLOAT = set(METRICS) | {"routing_seconds", "wall_seconds", "hsd_random_se",
                         "hsd_random_paired_se"}

#: Degradation bands of the README tables: (label, lowest, highest removed).
BANDS: tuple[tuple[str, int, float], ...] = (
    ("0", 0, 0), ("1-3", 1, 3), ("4-15", 4, 15), ("16-63", 16, 63), ("64+", 64, math.inf),
)

Row = dict[str, object]


def complete(r: Row) -> bool:
    """True if the engine routed (status ok) and delivered every pair.

    Metrics of an incomplete routing leave the undelivered flows out, so they
    are not comparable with complete ones: tables and plots use complete rows
    and count the others (e.g. Dmodc leaves the leaf pairs with no up*/down*
    path unrouted, by design; OpenSM's updn sometimes drops routes)."""
    return r.get("status") == "ok" and r.get("unroutable_pairs", 0) == 0


def outcome_note(rs: Sequence[Row]) -> str:
    """``" (k failed, j incomplete)"`` for rows that are not :func:`complete`."""
    fail = sum(1 for r in rs if r.get("status") != "ok")
    inc = sum(1 for r in rs if r.get("status") == "ok" and not complete(r))
    parts = ([f"{fail} failed"] if fail else []) + ([f"{inc} incomplete"] if inc else [])
    return f" ({', '.join(parts)})" if parts else ""


def band_of(removed: int) -> str:
    """Label of the :data:`BANDS` entry holding ``removed``."""
    for label, lo, hi in BANDS:
        if lo <= removed <= hi:
            return label
    raise ValueError(f"removed must be >= 0, got {removed}")


#: Significant digits of a float in the CSV.
FLOAT_DIGITS = 6


def as_stored(v: float) -> float:
    """``v`` as the CSV stores it (:data:`FLOAT_DIGITS` significant digits)."""
    return float(f"{v:.{FLOAT_DIGITS}g}")


def reproduces(new: Row, old: Row, metrics: Sequence[str]) -> bool:
    """``new`` (a rerun of a throw and engine) gives ``old``'s ``metrics`` as
    the CSV stores them; a metric neither row has (NaN or absent) counts as
    the same."""
    for m in metrics:
        a, b = number(new.get(m)), number(old.get(m))
        if math.isnan(a) and math.isnan(b):
            continue
        if math.isnan(a) or not math.isclose(as_stored(a), b, abs_tol=1e-9):
            return False
    return True


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.{FLOAT_DIGITS}g}"
    return str(v).replace("\n", " ")


def format_rows(rows: Iterable[Row]) -> str:
    """CSV text (header + rows; missing cells empty)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in COLUMNS])
    return buf.getvalue()


def parse_rows(lines: Iterable[str], source: str = "<csv>") -> list[Row]:
    """Rows of a study CSV, typed (ints, floats with ``nan`` for empty).

    Raises :class:`~smroute.errors.InputError` (file and line) on a missing
    column or a malformed number."""
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file: expected a study CSV header", source=source) from None
    missing = [c for c in ("fabric", "mode", "throw", "seed", "removed", "engine", "status")
               if c not in header]
    if missing:
        raise InputError(f"not a study CSV: missing column(s) {', '.join(missing)}",
                         source=source, line=1)
    out: list[Row] = []
    for no, cells in enumerate(reader, 2):
        if not cells:
            continue
        if len(cells) != len(header):
            raise InputError(f"expected {len(header)} cells, found {len(cells)}",
                             source=source, line=no)
        row: Row = {}
        for k, v in zip(header, cells, strict=True):
            try:
                if k in _INT:
                    row[k] = int(v) if v != "" else 0
                elif k in _FLOAT:
                    row[k] = float(v) if v != "" else math.nan
                else:
                    row[k] = v
            except ValueError:
                raise InputError(f"column {excerpt(k)}: expected a number, found {excerpt(v)}",
                                 source=source, line=no) from None
        out.append(row)
    return out


def read_rows(path: str | os.PathLike[str]) -> list[Row]:
    """:func:`parse_rows` of a file."""
    try:
        lines = read_lines(path)
    except OSError as err:
        raise InputError(f"cannot read study CSV: {err.strerror}", source=str(path)) from None
    return parse_rows(lines, str(path))


def write_rows(path: str | os.PathLike[str], rows: Iterable[Row]) -> None:
    """Atomically (re)write the CSV at ``path``."""
    atomic_write_text(path, format_rows(rows))


#: Row statuses that make a resumed study run the throw again (every status
#: but ``ok``): ``error`` (the throw itself broke: ibsim would not start, a
#: worker died), ``timeout`` (OpenSM was too slow, e.g. on a loaded machine)
#: and ``failed`` (an engine failed; a throw depends only on its key, so a
#: deterministic failure gives the same row again).
RETRY_STATUSES = ("error", "timeout", "failed")


def done_throws(rows: Iterable[Row], engines: Sequence[str],
                retry: Collection[str] = RETRY_STATUSES) -> set[tuple[object, ...]]:
    """Keys ``(fabric, mode, seed, throw)`` that have a row for every engine
    and no row whose status is in ``retry`` (those throws are run again)."""
    have: dict[tuple[object, ...], set[str]] = {}
    again: set[tuple[object, ...]] = set()
    for r in rows:
        key = tuple(r[k] for k in KEY)
        if r.get("status") in retry:
            again.add(key)
        else:
            have.setdefault(key, set()).add(str(r["engine"]))
    need = set(engines)
    return {k for k, e in have.items() if need <= e and k not in again}


def number(v: object) -> float:
    """``v`` as a float if it is a number, else NaN (a CSV cell left empty)."""
    return float(v) if isinstance(v, (int, float)) else math.nan


def summary_lines(rows: Sequence[Row], metrics: Sequence[str] = ("a2a", "rp", "sp", "hsd_topo",
                                                                 "hsd_random")) -> list[str]:
    """Per (fabric, mode, engine): throws complete / failed / incomplete,
    median (max) of each metric over the complete throws and the median
    routing time, as aligned text lines."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((str(r["fabric"]), str(r["mode"]), str(r["engine"])), []).append(r)
    head = ["fabric", "mode", "engine", "ok", "fail", "incompl",
            *[f"{m} med(max)" for m in metrics],
            "route s med"]
    table = [head]
    for (fab, mode, eng), rs in sorted(groups.items()):
        ok = [r for r in rs if complete(r)]
        n_fail = sum(1 for r in rs if r["status"] != "ok")
        cells = [fab, mode, eng, str(len(ok)), str(n_fail), str(len(rs) - len(ok) - n_fail)]
        for m in metrics:
            v = np.array([number(r.get(m)) for r in ok])
            v = v[~np.isnan(v)]
            cells.append(f"{np.median(v):.3g} ({v.max():.3g})" if len(v) else "-")
        t = np.array([number(r.get("routing_seconds")) for r in ok])
        t = t[~np.isnan(t)]
        cells.append(f"{np.median(t):.3g}" if len(t) else "-")
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in table]


def band_table(rows: Sequence[Row], fabric: str, mode: str, metric: str,
               engines: Sequence[str]) -> list[list[str]]:
    """``median / worst`` of ``metric`` per band (rows) and engine (columns)
    over the :func:`complete` throws of (``fabric``, ``mode``); first row is
    the header, cells ``-`` where no complete throw falls in the band, with
    the count of failed / incomplete ones; the band label carries the number
    of throws."""
    sel = [r for r in rows if r["fabric"] == fabric and r["mode"] == mode]
    out = [["removed (throws)", *engines]]
    for label, lo, hi in BANDS:
        in_band = [r for r in sel if lo <= int(str(r["removed"])) <= hi]
        throws = {int(str(r["throw"])) for r in in_band}
        line = [f"{label} ({len(throws)})"]
        for e in engines:
            mine = [r for r in in_band if r["engine"] == e]
            v = np.array([number(r.get(metric)) for r in mine if complete(r)])
            v = v[~np.isnan(v)]
            cell = f"{np.median(v):.3g} / {v.max():.3g}" if len(v) else "-"
            line.append(cell + outcome_note(mine))
        out.append(line)
    return out


def csv_path(out_dir: str | os.PathLike[str]) -> Path:
    """The study CSV inside an output directory."""
    return Path(out_dir) / "study.csv"


def paired_table(rows: Sequence[Row], fabric: str, mode: str, metric: str,
                 engines: Sequence[str], ref: str = api.DEFAULT) -> list[list[str]]:
    """``ref`` against each other engine on the same throws (both
    :func:`complete`), per
    band: ``W/E/B`` = throws where ``ref`` is worse (higher), equal, better,
    and ``+x`` the largest excess of ``ref`` (``-`` if never worse)."""
    sel = [r for r in rows if r["fabric"] == fabric and r["mode"] == mode and complete(r)]
    val: dict[tuple[int, str], float] = {}
    rem: dict[int, int] = {}
    for r in sel:
        v = number(r.get(metric))
        if not math.isnan(v):
            val[(int(str(r["throw"])), str(r["engine"]))] = v
            rem[int(str(r["throw"]))] = int(str(r["removed"]))
    others = [e for e in engines if e != ref]
    out = [["removed", *[f"{ref} vs {e}" for e in others]]]
    for label, lo, hi in BANDS:
        line = [label]
        for e in others:
            d = [val[(t, ref)] - val[(t, e)] for t in rem
                 if lo <= rem[t] <= hi and (t, ref) in val and (t, e) in val]
            if not d:
                line.append("-")
                continue
            w = sum(1 for x in d if x > 1e-9)
            b = sum(1 for x in d if x < -1e-9)
            worst = max(d)
            line.append(f"{w}/{len(d) - w - b}/{b}" + (f" (+{worst:.3g})" if w else ""))
        out.append(line)
    return out


def sign_p(worse: int, better: int) -> float:
    """The one-sided sign test of paired throws (ties left out): the chance
    of ``worse`` or more of ``worse + better`` throws being worse if each
    were worse or better with even odds.  A small value: significantly
    worse; near 1: no sign of it (1.0 with no untied throw)."""
    n = worse + better
    return sum(math.comb(n, k) for k in range(worse, n + 1)) / 2 ** n


def verdict_table(rows: Sequence[Row], fabric: str, mode: str, ref: str,
                  rivals: Sequence[str], metrics: Sequence[str] = ("sp", "a2a", "rp",
                                                                   "hsd_topo", "hsd_random"),
                  tolerance: float = 0.05) -> list[list[str]]:
    """``ref`` against the best of ``rivals`` per band and metric: the rival
    with the lowest median among those complete on every throw of the band
    (``*``: none is; then the lowest median over each one's complete
    throws), ``ref``'s median over its complete throws (and how many are
    not), the paired ``W/E/B`` against that rival on the throws both
    complete, and ``ok`` when ``ref`` is complete on every throw, its median
    is at or below the rival's and it is worse on at most ``tolerance`` of
    the paired throws, else ``miss``; ``sign p``: :func:`sign_p` of the
    paired counts (how likely that many worse throws are by chance)."""
    sel = [r for r in rows if r["fabric"] == fabric and r["mode"] == mode]
    out = [["removed (throws)", "metric", "best rival", f"{ref}", "paired W/E/B", "sign p",
            "verdict"]]
    for label, lo, hi in BANDS:
        band = [r for r in sel if lo <= int(str(r["removed"])) <= hi]
        throws = sorted({int(str(r["throw"])) for r in band})
        if not throws:
            continue
        by = {(int(str(r["throw"])), str(r["engine"])): r for r in band}
        for j, m in enumerate(metrics):
            cand = [(float(np.median(list(v.values()))), len(v) == len(throws), e)
                    for e in rivals if (v := _complete_values(by, throws, e, m))]
            full = [c for c in cand if c[1]]
            mine = _complete_values(by, throws, ref, m)
            cells = [f"{label} ({len(throws)})" if j == 0 else "", m]
            if not cand or not mine:
                out.append(cells + ["-", "-", "-", "-", "miss" if not mine else "-"])
                continue
            med, _, best = min(full or cand)
            theirs = _complete_values(by, throws, best, m)
            d = [mine[t] - theirs[t] for t in mine if t in theirs]
            w, b = sum(x > 1e-9 for x in d), sum(x < -1e-9 for x in d)
            my_med = float(np.median(list(mine.values())))
            inc = len(throws) - len(mine)
            ok = inc == 0 and my_med <= med + 1e-9 and w <= tolerance * len(d)
            cells += [f"{best}{'' if full else '*'} {med:.3g}",
                      f"{my_med:.3g}" + (f" ({inc} incomplete or failed)" if inc else ""),
                      f"{w}/{len(d) - w - b}/{b}", f"{sign_p(w, b):.2g}", "ok" if ok else "miss"]
            out.append(cells)
    return out


def bar_table(rows: Sequence[Row], fabric: str, mode: str, engines: Sequence[str],
              rivals: Sequence[str], metrics: Sequence[str] = ("sp", "a2a", "rp", "hsd_topo",
                                                              "hsd_random")) -> list[list[str]]:
    """Every engine of ``engines`` by :func:`verdict_table`'s bar, each
    against the best of ``rivals`` other than itself: its ``ok`` cells of
    the (band, metric) cells that have a rival, and its misses with a sign
    test's p below 0.05 (significant losses).  How hard the bar is for any
    engine."""
    out = [["engine", "ok cells", "significant misses"]]
    for e in engines:
        others = [r for r in rivals if r != e]
        tab = [c for c in verdict_table(rows, fabric, mode, e, others, metrics)[1:]
               if c[-1] != "-"]  # (no rival)
        sig = sum(c[-1] == "miss" and _significant(c[4]) for c in tab)
        out.append([e, f"{sum(c[-1] == 'ok' for c in tab)} / {len(tab)}", str(sig)])
    return out


def _significant(paired: str) -> bool:
    """A verdict cell's paired ``W/E/B`` (``-``: no paired throw) worse with
    :func:`sign_p` below 0.05, from the counts (not the rounded ``sign p``
    column: 0.0496 prints as 0.05)."""
    if paired == "-":
        return False
    w, _, b = (int(x) for x in paired.split("/"))
    return sign_p(w, b) < 0.05


def _complete_values(by: dict[tuple[int, str], Row], throws: Sequence[int], engine: str,
                     metric: str) -> dict[int, float]:
    """``metric`` of ``engine`` per throw of ``throws`` where its row is complete."""
    return {t: number(by[(t, engine)].get(metric)) for t in throws
            if (t, engine) in by and complete(by[(t, engine)])}


def _md(table: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    out += ["| " + " | ".join(r) + " |" for r in table[1:]]
    return out


def markdown_report(rows: Sequence[Row], engines: Sequence[str] | None = None,
                    metrics: Sequence[str] = ("a2a", "rp", "sp", "hsd_topo", "hsd_random"),
                    ) -> list[str]:
    """Markdown tables: per (fabric, mode) and metric, ``median / worst`` per
    band and engine (:func:`band_table`), then median routing seconds."""
    engs = list(engines) if engines else list(dict.fromkeys(str(r["engine"]) for r in rows))
    names = {"a2a": "A2A congestion risk", "rp": "RP congestion risk (median of permutations)",
             "sp": "SP congestion risk (max over shifts)",
             "hsd_topo": "HSD, CPS in topological order (average over the 7 CPS)",
             "hsd_random": "HSD, CPS in random orders (average over the 7 CPS)",
             "routing_seconds": "routing seconds"}
    out: list[str] = []
    own = api.names()  # smroute's engines, the reference first; the others are rivals
    for fab, mode in sorted({(str(r["fabric"]), str(r["mode"])) for r in rows}):
        throws = len({r["throw"] for r in rows if r["fabric"] == fab and r["mode"] == mode})
        out += [f"#### {fab}, {mode} degradation ({throws} throws)", ""]
        for m in (*metrics, "routing_seconds"):
            out += [f"{names.get(m, m)}, median / worst:", ""]
            out += _md(band_table(rows, fab, mode, m, engs)) + [""]
            for ref in own:
                if m != "routing_seconds" and ref in engs and len(engs) > 1:
                    name = ref.capitalize()
                    out += [f"{name} against each engine on the same throws: throws where "
                            f"{name} is worse / equal / better (largest excess):", ""]
                    out += _md(paired_table(rows, fab, mode, m, engs, ref)) + [""]
        rivals = [e for e in engs if e not in own]
        cands = [e for e in own if e != api.DEFAULT and e in engs] if rivals else []
        for cand in cands:
            name = api.engine(cand).title
            out += [f"{name} against the best OpenSM engine of each band and metric (the "
                    "lowest median among the engines complete on every throw of the band; "
                    f"`*` none is), paired on the same throws; `ok`: {name} complete on every "
                    "throw, median at or below, worse in at most 5% of the paired throws; "
                    f"`sign p`: the chance of at least that many worse throws if {name} were as "
                    "likely worse as better on each untied throw (one-sided sign test):", ""]
            out += _md(verdict_table(rows, fab, mode, cand, rivals)) + [""]
        if cands:
            out += ["Every engine by the same bar, each against the best of the OpenSM "
                    "engines other than itself:", ""]
            out += _md(bar_table(rows, fab, mode, engs, rivals, metrics)) + [""]
    return out


def compact_table(rows: Sequence[Row], fabric: str, mode: str, engines: Sequence[str],
                  metrics: Sequence[str] = ("sp", "a2a", "rp", "hsd_topo")) -> list[str]:
    """One markdown table for (``fabric``, ``mode``): a row per (band, metric),
    a column per engine, cells ``median / worst`` over complete throws with
    failed / incomplete counts (:func:`band_table` rows, interleaved)."""
    short = {"a2a": "A2A", "rp": "RP", "sp": "SP", "hsd_topo": "HSD topo",
             "hsd_random": "HSD random", "routing_seconds": "route s"}
    tabs = {m: band_table(rows, fabric, mode, m, engines) for m in metrics}
    table = [["removed (throws)", "metric", *engines]]
    for i in range(1, len(BANDS) + 1):
        for j, m in enumerate(metrics):
            row = tabs[m][i]
            table.append([row[0] if j == 0 else "", short.get(m, m), *row[1:]])
    return _md(table)
