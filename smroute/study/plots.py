"""PNG plots of a degradation study (matplotlib, Agg backend).

:func:`plot_risk` draws, per (fabric, mode), the style of the Dmodc paper's
Figure 2: maximum congestion risk (A2A, RP, SP; one panel each) against the
removed equipment, log-log (x is ``removed + 1`` so that the complete fabric
shows), one line per engine through the median of each power-of-two band of
``removed`` (Dmodc: the band's min-max shaded; others: min-max bars) and every throw
as a faint point; engines are offset slightly along x so that equal values
stay visible.
:func:`plot_times` draws the routing time of each engine the same way.
Failed and incomplete throws (some pairs not delivered,
:func:`smroute.study.results.complete`) are left out; their counts are in
the legend.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from smroute.fileio import atomic_writer
from smroute.routing import api
from smroute.study.results import Row, complete, number, outcome_note

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_risk", "plot_times", "plot_all", "ENGINE_STYLE"]

#: Colours and markers of smroute's engines other than the reference, in
#: registry order.
_OWN_STYLES = (("#e377c2", "P"), ("#17becf", "*"), ("#bcbd22", "h"))
#: Colour and marker per engine (the reference engine, Dmodc, stands out).
ENGINE_STYLE: dict[str, tuple[str, str]] = {
    api.DEFAULT: ("#d62728", "o"), "ftree": ("#1f77b4", "s"), "updn": ("#2ca02c", "^"),
    "minhop": ("#9467bd", "v"), "dfsssp": ("#8c564b", "D"), "sssp": ("#ff7f0e", "x"),
    **dict(zip([e for e in api.names() if e != api.DEFAULT], _OWN_STYLES, strict=False)),
}


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as PNG atomically (a reader never sees a half-written plot)."""
    with atomic_writer(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=90)


def _series(rows: Sequence[Row], engine: str, metric: str
            ) -> tuple[np.ndarray, np.ndarray, str]:
    mine = [r for r in rows if r["engine"] == engine]
    ok = [r for r in mine if complete(r)]
    x = np.array([float(str(r["removed"])) for r in ok])
    y = np.array([number(r.get(metric)) for r in ok])
    keep = ~np.isnan(y)
    return x[keep], y[keep], outcome_note(mine)


def _bands(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per power-of-two band of ``x + 1``: centre, median, min, max."""
    b = np.floor(np.log2(x + 1)).astype(np.int64)
    cs, med, lo, hi = [], [], [], []
    for k in np.unique(b):
        sel = b == k
        cs.append(float(np.exp(np.mean(np.log(x[sel] + 1)))))
        med.append(float(np.median(y[sel])))
        lo.append(float(y[sel].min()))
        hi.append(float(y[sel].max()))
    return tuple(np.array(a) for a in (cs, med, lo, hi))


def _engines(rows: Sequence[Row]) -> list[str]:
    seen = list(dict.fromkeys(str(r["engine"]) for r in rows))
    return [e for e in ENGINE_STYLE if e in seen] + [e for e in seen if e not in ENGINE_STYLE]


def _draw(ax: Axes, rows: Sequence[Row], metric: str, engines: Sequence[str]) -> None:
    """Engines side by side: each gets a small multiplicative x offset so that
    equal medians stay visible; Dmodc is drawn last (on top) with its band's
    min-max shaded, the others show their min-max as thin bars."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ordered = [e for e in engines if e != api.DEFAULT] + [e for e in engines if e == api.DEFAULT]
    k = len(engines)
    for e in ordered:
        color, marker = ENGINE_STYLE.get(e, ("#7f7f7f", "."))
        x, y, note = _series(rows, e, metric)
        if not len(x):
            continue
        shift = 1.035 ** (engines.index(e) - (k - 1) / 2)
        ax.scatter((x + 1) * shift, y, s=7, color=color, alpha=0.2, marker=marker,
                   linewidths=0)
        c, med, lo, hi = _bands(x, y)
        label = e + note
        dm = e == api.DEFAULT
        ax.plot(c * shift, med, color=color, marker=marker, ms=4 if dm else 3,
                lw=2.0 if dm else 1.1, label=label, zorder=3 if dm else 2)
        if dm:
            ax.fill_between(c * shift, lo, hi, color=color, alpha=0.12, zorder=1)
        else:
            ax.vlines(c * shift, lo, hi, color=color, lw=0.6, alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        fmt = ScalarFormatter()
        fmt.set_scientific(False)
        axis.set_major_formatter(fmt)
        axis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.25)


def _groups(rows: Sequence[Row]) -> dict[tuple[str, str], list[Row]]:
    g: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        g.setdefault((str(r["fabric"]), str(r["mode"])), []).append(r)
    return g


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower()


def plot_risk(rows: Sequence[Row], out_dir: str | os.PathLike[str],
              metrics: Sequence[str] = ("a2a", "rp", "sp"), *, prefix: str = "risk",
              ylabel: str = "max congestion risk") -> list[Path]:
    """One PNG per (fabric, mode): ``<prefix>-<fabric>-<mode>.png``; returns the paths."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    titles = {"a2a": "A2A", "rp": "RP (median of permutations)", "sp": "SP (max over shifts)",
              "hsd_topo": "HSD, CPS in topological order", "hsd_random": "HSD, random orders"}
    for (fab, mode), rs in sorted(_groups(rows).items()):
        engines = _engines(rs)
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6),
                                 squeeze=False)
        for ax, m in zip(axes[0], metrics, strict=True):
            _draw(ax, rs, m, engines)
            ax.set_title(titles.get(m, m), fontsize=10)
            ax.set_xlabel(f"removed {mode}{'es' if mode == 'switch' else 's'} + 1")
        axes[0][0].set_ylabel(ylabel)
        axes[0][-1].legend(fontsize=7, loc="best")
        throws = len({r["throw"] for r in rs})
        fig.suptitle(f"{fab}, {mode} degradation, {throws} throws (lower is better)",
                     fontsize=11)
        fig.tight_layout()
        p = out / f"{prefix}-{_slug(fab)}-{mode}.png"
        _save(fig, p)
        plt.close(fig)
        paths.append(p)
    return paths


def plot_times(rows: Sequence[Row], out_dir: str | os.PathLike[str]) -> list[Path]:
    """One PNG of routing seconds against removed equipment, a panel per
    (fabric, mode): ``routing-time.png``."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = sorted(_groups(rows).items())
    if not groups:
        return []
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.6), squeeze=False)
    for ax, ((fab, mode), rs) in zip(axes[0], groups, strict=True):
        _draw(ax, rs, "routing_seconds", _engines(rs))
        ax.set_title(f"{fab}, {mode}", fontsize=9)
        ax.set_xlabel("removed + 1")
    axes[0][0].set_ylabel("routing time (s)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle("Routing time (OpenSM: from its log, under ibsim; Dmodc: one process)",
                 fontsize=11)
    fig.tight_layout()
    p = out / "routing-time.png"
    _save(fig, p)
    plt.close(fig)
    return [p]


def plot_all(rows: Sequence[Row], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Risk plots, HSD plots (``hsd-*.png``) and the routing-time plot."""
    paths = plot_risk(rows, out_dir)
    paths += plot_risk(rows, out_dir, metrics=("hsd_topo", "hsd_random"), prefix="hsd",
                       ylabel="average hot-spot degree")
    return paths + plot_times(rows, out_dir)
