"""The study's bar: paired two-sided sign tests of one engine against each rival.

Per fabric, removal mode, removal band (:data:`smroute.study.results.BANDS`)
and metric, the throws both engines ran are paired: a throw is a **loss**
of the engine judged where its value is higher (every metric is lower-is-
better) or where it did not deliver every pair while the rival did; a
**win** the other way round; a **tie** where the values are equal or neither
delivered every pair.  Ties are dropped and :func:`sign_test` gives the
two-sided p of the wins against the losses; a loss (win) counts only where
the losses (wins) are more and ``p < ALPHA``.

Random-order HSD is an average over random orders of the hosts, so it has a
sampling error: :func:`hsd_precision` gives the mean paired difference of a
cell and its standard error from the orders (the rows'
``hsd_random_paired_se`` where they were measured against the engine
judged on the same orders, else the rows' ``hsd_random_se`` combined as if
independent); a cell whose error is not below its difference is
*unresolved* at the orders it has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from smroute.routing import api
from smroute.study.results import BANDS, Row, complete, number, sign_p

__all__ = [
    "ALPHA",
    "SIGN_METRICS",
    "Paired",
    "sign_test",
    "paired_counts",
    "hsd_precision",
    "resolved",
    "sign_table",
    "significant_losses",
    "loss_summary",
    "engine_totals",
    "sign_markdown",
]

#: Significance level of a loss.
ALPHA = 0.05
#: The metrics the bar judges, in the table's column order.
SIGN_METRICS = ("sp", "a2a", "rp", "hsd_topo", "hsd_random")
_SHORT = {"sp": "SP", "a2a": "A2A", "rp": "RP", "hsd_topo": "HSD topo",
          "hsd_random": "HSD random"}
_EPS = 1e-9


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test (binomial, even odds) of ``wins`` against
    ``losses`` (ties already dropped): the chance of a split at least as
    uneven as this one either way.  1.0 with no untied throw."""
    if wins < 0 or losses < 0:
        raise ValueError("wins and losses must be >= 0")
    if wins == losses:
        return 1.0
    # twice the one-sided tail of the larger side (:func:`~smroute.study.results.sign_p`)
    return min(1.0, 2 * sign_p(max(wins, losses), min(wins, losses)))


@dataclass(frozen=True)
class Paired:
    """One engine against a rival over the paired throws of a band and metric."""

    wins: int
    ties: int
    losses: int
    #: per paired throw where both delivered every pair: (throw, engine's value - rival's)
    diffs: tuple[tuple[int, float], ...] = ()

    @property
    def p(self) -> float:
        """:func:`sign_test` of the wins against the losses."""
        return sign_test(self.wins, self.losses)

    @property
    def loss(self) -> bool:
        """A significant loss: more losses than wins and ``p < ALPHA``."""
        return self.losses > self.wins and self.p < ALPHA

    @property
    def win(self) -> bool:
        """A significant win (the rival's significant loss)."""
        return self.wins > self.losses and self.p < ALPHA


def _by_throw(rows: Sequence[Row], fabric: str, mode: str, lo: int, hi: float
              ) -> dict[int, dict[str, Row]]:
    out: dict[int, dict[str, Row]] = {}
    for r in rows:
        if r["fabric"] == fabric and r["mode"] == mode and lo <= int(str(r["removed"])) <= hi:
            out.setdefault(int(str(r["throw"])), {})[str(r["engine"])] = r
    return out


def _compare(throws: dict[int, dict[str, Row]], me: str, rival: str, metric: str) -> Paired:
    w = t = lo = 0
    diffs = []
    for throw, rs in sorted(throws.items()):
        a, b = rs.get(me), rs.get(rival)
        if a is None or b is None:
            continue
        ca, cb = complete(a), complete(b)
        va, vb = number(a.get(metric)), number(b.get(metric))
        if ca and cb and not (math.isnan(va) or math.isnan(vb)):
            d = va - vb
            diffs.append((throw, d))
            w, t, lo = w + (d < -_EPS), t + (abs(d) <= _EPS), lo + (d > _EPS)
        elif ca and not cb:
            w += 1
        elif cb and not ca:
            lo += 1
        else:
            t += 1
    return Paired(w, t, lo, tuple(diffs))


def paired_counts(rows: Sequence[Row], fabric: str, mode: str, band: str, metric: str,
                  me: str, rival: str) -> Paired:
    """``me`` against ``rival`` on the throws of (``fabric``, ``mode``) in
    ``band`` (a :data:`BANDS` label) where both have a row."""
    lo, hi = next((lo, hi) for label, lo, hi in BANDS if label == band)
    return _compare(_by_throw(rows, fabric, mode, lo, hi), me, rival, metric)


def _se_of_difference(a: Row, b: Row, me: str) -> float:
    """SE of ``a``'s random-order HSD minus ``b``'s on their throw (NaN: unknown)."""
    same = a.get("hsd_random_orders") == b.get("hsd_random_orders")  # the same orders
    if same and str(b.get("hsd_random_paired_with", "")) == me:
        return number(b.get("hsd_random_paired_se"))
    if same and str(a.get("hsd_random_paired_with", "")) == str(b["engine"]):
        return number(a.get("hsd_random_paired_se"))
    return math.hypot(number(a.get("hsd_random_se")), number(b.get("hsd_random_se")))


def hsd_precision(rows: Sequence[Row], fabric: str, mode: str, band: str, me: str,
                  rival: str) -> tuple[float, float, int]:
    """``(mean difference, its standard error, fewest orders)`` of ``me``'s
    random-order HSD minus ``rival``'s over the band's throws where both
    delivered every pair; the error is NaN where a row has none, the mean
    NaN with no such throw."""
    lo, hi = next((lo, hi) for label, lo, hi in BANDS if label == band)
    throws = _by_throw(rows, fabric, mode, lo, hi)
    d, var, orders = [], 0.0, math.inf
    for rs in throws.values():
        a, b = rs.get(me), rs.get(rival)
        if a is None or b is None or not (complete(a) and complete(b)):
            continue
        va, vb = number(a.get("hsd_random")), number(b.get("hsd_random"))
        if math.isnan(va) or math.isnan(vb):
            continue
        d.append(va - vb)
        var += _se_of_difference(a, b, me) ** 2 if abs(va - vb) > _EPS else 0.0
        orders = min(orders, number(a.get("hsd_random_orders")),
                     number(b.get("hsd_random_orders")))
    if not d:
        return math.nan, math.nan, 0
    return (sum(d) / len(d), math.sqrt(var) / len(d),
            0 if math.isnan(orders) or math.isinf(orders) else int(orders))


def resolved(diff: float, se: float) -> bool:
    """The difference is measured: its error is known and below it (a
    difference of exactly zero, the same tables, is measured)."""
    if math.isnan(diff):
        return True
    if abs(diff) <= _EPS:
        return not math.isnan(se) and se <= _EPS
    return not math.isnan(se) and se < abs(diff)


def _bands(rows: Sequence[Row], fabric: str, mode: str) -> list[str]:
    have = {int(str(r["removed"])) for r in rows if r["fabric"] == fabric and r["mode"] == mode}
    return [label for label, lo, hi in BANDS if any(lo <= x <= hi for x in have)]


def _groups(rows: Sequence[Row]) -> list[tuple[str, str]]:
    return sorted({(str(r["fabric"]), str(r["mode"])) for r in rows})


def _cell(p: Paired, precision: tuple[float, float, int] | None) -> str:
    mark = " **loss**" if p.loss else " win" if p.win else ""
    text = f"{p.wins}/{p.ties}/{p.losses} p {p.p:.2g}{mark}"
    if precision is not None and precision[:2] == (0.0, 0.0):
        text += "; Δ 0 (the same values)"
    elif precision is not None and not math.isnan(precision[0]):
        diff, se, orders = precision
        err = "SE ?" if math.isnan(se) else f"SE {se:.2g}"
        flag = "" if resolved(diff, se) else " unresolved"
        text += f"; Δ {diff:+.2g} {err} ({orders or '?'} orders){flag}"
    return text


def sign_table(rows: Sequence[Row], fabric: str, mode: str, me: str, rivals: Sequence[str],
               metrics: Sequence[str] = SIGN_METRICS) -> list[list[str]]:
    """Rows (band, rival), columns metric: ``me`` against the rival as
    ``wins/ties/losses p`` (``**loss**``: significant loss, ``win``:
    significant win), random-order HSD with the mean difference and its SE."""
    out = [["removed", "rival", *(_SHORT.get(m, m) for m in metrics)]]
    for band in _bands(rows, fabric, mode):
        lo, hi = next((lo, hi) for label, lo, hi in BANDS if label == band)
        throws = _by_throw(rows, fabric, mode, lo, hi)
        for i, rival in enumerate(rivals):
            cells = [f"{band} ({len(throws)})" if i == 0 else "", rival]
            for m in metrics:
                prec = hsd_precision(rows, fabric, mode, band, me, rival) \
                    if m == "hsd_random" else None
                cells.append(_cell(_compare(throws, me, rival, m), prec))
            out.append(cells)
    return out


def significant_losses(rows: Sequence[Row], me: str, rival: str,
                       metrics: Sequence[str] = SIGN_METRICS) -> list[tuple[str, str, str, str]]:
    """``(fabric, mode, band, metric)`` where ``me`` loses to ``rival`` significantly."""
    out = []
    for fab, mode in _groups(rows):
        for band in _bands(rows, fab, mode):
            for m in metrics:
                if paired_counts(rows, fab, mode, band, m, me, rival).loss:
                    out.append((fab, mode, band, m))
    return out


def loss_summary(rows: Sequence[Row], me: str, rivals: Sequence[str],
                 metrics: Sequence[str] = SIGN_METRICS) -> list[list[str]]:
    """Per rival: ``me``'s significant losses against it and its significant
    losses against ``me`` (over every fabric, mode, band and metric), with
    the cells where ``me`` loses."""
    out = [["rival", f"{me} loses", f"rival loses to {me}", f"where {me} loses"]]
    for rival in rivals:
        mine = significant_losses(rows, me, rival, metrics)
        theirs = significant_losses(rows, rival, me, metrics)
        where = "; ".join(f"{f} {mo} {b} {_SHORT.get(m, m)}" for f, mo, b, m in mine)
        out.append([rival, str(len(mine)), str(len(theirs)), where or "-"])
    return out


def engine_totals(rows: Sequence[Row], engines: Sequence[str],
                  metrics: Sequence[str] = SIGN_METRICS) -> dict[str, int]:
    """Each engine's significant losses against every other engine of ``engines``."""
    return {e: sum(len(significant_losses(rows, e, r, metrics)) for r in engines if r != e)
            for e in engines}


def _md(table: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    return out + ["| " + " | ".join(r) + " |" for r in table[1:]]


def sign_markdown(rows: Sequence[Row], engines: Sequence[str] | None = None,
                  me: str | None = None) -> list[str]:
    """The bar's section of the report: per fabric and mode the sign-test
    table of ``me`` (default: the default engine) against every other
    engine, then the summaries and the bar's verdict."""
    me = me or api.DEFAULT
    engs = list(engines) if engines else list(dict.fromkeys(str(r["engine"]) for r in rows))
    if me not in engs or len(engs) < 2:
        return []
    own = set(api.names(lab=True))
    rivals = [e for e in engs if e != me]
    opensm = [e for e in rivals if e not in own]
    ours = [e for e in rivals if e in own]
    title = api.engine(me).title
    out = [f"## The bar: {title} against each engine, sign test per band and metric", "",
           f"Cells: throws where {title} is better / equal / worse than the rival "
           "(lower is better; a throw where only one of the two delivered every pair "
           "counts against the other; equal values and throws where neither did are ties), "
           f"and the two-sided sign test's p over the untied throws. **loss**: {title} "
           f"significantly worse (p < {ALPHA}), win: significantly better. HSD random also "
           f"gives Δ, the mean of {title} minus the rival over the throws both completed, "
           "with its standard error from the random orders and the fewest orders a throw "
           "was averaged over (`unresolved`: the error is not below the difference, "
           "`SE ?`: rows without one).", ""]
    for fab, mode in _groups(rows):
        out += [f"#### {fab}, {mode} degradation", ""]
        out += _md(sign_table(rows, fab, mode, me, rivals)) + [""]
    out += [f"Significant losses over every fabric, mode, band and metric, {title} against "
            "each rival and each rival against it:", ""]
    out += _md(loss_summary(rows, me, rivals)) + [""]
    totals = engine_totals(rows, engs)
    out += ["Every engine by the same test, against every other engine (the sum of its "
            "significant losses over the rivals):", ""]
    out += _md([["engine", "significant losses"],
                *([e, str(totals[e])] for e in sorted(engs, key=lambda e: (totals[e], e)))])
    out += [""]
    against_own = sum(len(significant_losses(rows, me, e)) for e in ours)
    head = [e for e in opensm
            if len(significant_losses(rows, me, e)) > len(significant_losses(rows, e, me))]
    fewest = min((totals[e] for e in opensm), default=0)
    out += [f"The bar: {title} has {against_own} significant losses against "
            f"{', '.join(ours) or 'no other smroute engine'} (bar: none); "
            f"head to head it loses significantly more often than the OpenSM engine in "
            f"{len(head)} of {len(opensm)} pairings"
            + (f" ({', '.join(head)})" if head else "")
            + f"; against all engines it has {totals[me]} significant losses, the OpenSM "
            f"engine with the fewest has {fewest}. Bar "
            + ("met." if against_own == 0 and not head and totals[me] <= fewest
               else "not met."), ""]
    return out
