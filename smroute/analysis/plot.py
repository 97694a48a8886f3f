"""A picture of an analysis: flows per port by level, up and down, hot spots named.

:func:`link_values` computes one number per directed link (port) of a
:class:`~smroute.analysis.paths.RoutingView` for a pattern of
``smroute analyze``:

* ``a2a``: the link's all-to-all congestion risk, ``min(#sources,
  #destinations)`` (:func:`~smroute.analysis.congestion.a2a_risk`); its
  maximum is the A2A value;
* ``sp``, ``rp``, ``cps:NAME``: the most flows the link carries in any one
  stage (its **peak**) and that stage; in a permutation stage a link's flows
  are its congestion risk, so the maximum over links is the SP risk (max over
  shifts), the largest RP stage risk, or the CPS's maximum hot-spot degree.

:func:`plot_link_values` draws them (matplotlib, Agg): links are grouped by
the levels they join (rank 0 = leaves, from the fabric's roles), in the order
a flow meets them -- up from the hosts to the top, then down to the hosts --
each group a column of dots whose area is the number of ports with that
value; the hottest ports are numbered on the plot and named below it
(``"desc"[port] -> "desc"[port]``), and for stage patterns a side panel shows
the hottest port of every stage.  The names are also written into the file's
metadata (PNG text chunk / SVG description).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from smroute.analysis.paths import OK, PORTS, PairPaths, RoutingView

if TYPE_CHECKING:
    from smroute.analysis.patterns import Pattern

__all__ = [
    "HotSpot",
    "LinkValues",
    "link_categories",
    "link_peaks",
    "link_values",
    "plot_analysis",
    "plot_link_values",
    "plot_path",
]

IntArray = npt.NDArray[np.int64]
_BATCH_ELEMS = 1 << 22  # link entries per bincount batch
_BATCH_BINS = 1 << 23  # (stage, link) bins per batch
#: Suffixes ``--plot`` accepts.
PLOT_FORMATS = {".png": "png", ".svg": "svg"}
_HOT = 6  # hot spots named


def plot_path(text: str) -> str:
    """argparse type of ``--plot``: a ``.png`` or ``.svg`` file name."""
    if Path(text).suffix.lower() not in PLOT_FORMATS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a file name ending in .png or .svg")
    return text


@dataclass(frozen=True, eq=False)
class LinkValues:
    """One value per link id (``(n_links,)`` int64 ``value``) and what it means.

    stage: ``(n_links,)`` int64 stage where a link's peak was first reached
    (-1 where not per stage); stage_max: ``(K,)`` int64 the hottest link of
    each stage (empty for a2a); stage_labels: their labels; quantity: what
    ``value`` is; summary: its maximum as the analysis names it; axis: a
    short axis label; unit: a value in a sentence (a format string).
    """

    pattern: str
    value: IntArray
    stage: IntArray
    stage_max: IntArray
    stage_labels: tuple[str, ...]
    quantity: str
    summary: str
    axis: str = "flows"
    unit: str = "{} flows"


@dataclass(frozen=True)
class HotSpot:
    """A hot port: its link id, value, names and (stage patterns) stage."""

    link: int
    value: int
    name: str
    full_name: str
    category: str
    stage: str

    def to_dict(self) -> dict[str, Any]:
        return {"link": self.link, "value": self.value, "port": self.full_name,
                "levels": self.category, "stage": self.stage or None}


def link_peaks(view: RoutingView, paths: PairPaths, pattern: Pattern, order: npt.ArrayLike,
               *, progress: Callable[[int, int], None] | None = None,
               ) -> tuple[IntArray, IntArray, IntArray]:
    """Per link, the most flows in one stage of ``pattern`` (participant ``i``
    on end-port ``order[i]``) and the first stage reaching it; per stage, the
    most flows on one link.  Returns ``(peak (n_links,), stage (n_links,),
    stage_max (K,))``, int64; undelivered flows load no link."""
    o = np.asarray(order, dtype=np.int64)
    nl, k = paths.n_links, pattern.n_stages
    peak = np.zeros(nl, dtype=np.int64)
    at = np.full(nl, -1, dtype=np.int64)
    stage_max = np.zeros(k, dtype=np.int64)
    h = paths.links.shape[1]
    step = max(1, min(_BATCH_ELEMS // (max(pattern.n, 1) * (h + 2)), _BATCH_BINS // (nl + 1)))
    for a in range(0, k, step):
        b = min(a + step, k)
        src, dst, stg = pattern.batch(a, b)
        se, de = o[src], o[dst]
        pair = view.ep_leaf_row[se] * paths.n_endports + de
        ok = (se != de) & (paths.status[pair] == OK)
        se, de, stg, pair = se[ok], de[ok], stg[ok], pair[ok]
        base = stg * (nl + 1) + 1
        keys = np.concatenate([
            (paths.gather(pair).astype(np.int64) + base[:, None]).ravel(),
            base + view.inj_link[se], base + view.deliver_link[de],
        ])
        cnt = np.bincount(keys, minlength=(b - a) * (nl + 1)).reshape(b - a, nl + 1)[:, 1:]
        if nl:
            bm, bs = cnt.max(axis=0), cnt.argmax(axis=0)
            better = bm > peak
            peak[better] = bm[better]
            at[better] = a + bs[better]
            stage_max[a:b] = cnt.max(axis=1)
        if progress is not None:
            progress(b, k)
    at[peak == 0] = -1
    return peak, at, stage_max


def link_values(view: RoutingView, paths: PairPaths, pattern: str, order: npt.ArrayLike,
                rng: np.random.Generator, *, samples: int = 1000, random_order: bool = False,
                progress: Callable[[int, int], None] | None = None) -> LinkValues:
    """The per-link values of an ``smroute analyze`` pattern (``a2a``, ``rp``,
    ``sp``, ``cps:NAME``) over the participants ``order`` (module doc).

    ``rng`` must be in the state the analysis used, so that ``rp`` draws the
    same permutations and ``cps`` with ``random_order`` takes the first of the
    analysis' random orders."""
    from smroute.analysis import patterns as pt
    from smroute.analysis.congestion import a2a_risk

    o = np.asarray(order, dtype=np.int64)
    n = len(o)
    if pattern == "a2a":
        r = a2a_risk(view, paths, o)
        return LinkValues(pattern, r.risk.astype(np.int64), np.full(len(r.risk), -1, np.int64),
                          np.zeros(0, np.int64), (),
                          "A2A congestion risk of each port: min(#sources, #destinations) of "
                          "the flows crossing it", f"A2A congestion risk {r.value}",
                          "A2A congestion risk", "risk {}")
    if pattern == "rp":
        pat = pt.random_permutations(n, rng, samples)
        what = f"{samples:,} random permutations"
    elif pattern == "sp":
        pat = pt.shifts(n)
        what = f"{pat.n_stages:,} shift permutations"
    else:
        pat = pt.cps(pattern[4:], n)
        if random_order:
            o = rng.permutation(o)
        what = f"{pat.n_stages:,} stages of {pattern[4:]}" + (
            " (the first random order)" if random_order else "")
    peak, at, smax = link_peaks(view, paths, pat, o, progress=progress)
    labels = tuple(pat.label(i) for i in range(pat.n_stages))
    top = int(peak.max()) if len(peak) else 0
    name = {"rp": "largest RP stage risk", "sp": "SP congestion risk"}.get(
        pattern, "maximum hot-spot degree")
    return LinkValues(pattern, peak, at, smax, labels,
                      f"peak flows of each port in one stage, over {what}",
                      f"{name} {top}", "peak flows in one stage", "{} flows")


# --------------------------------------------------------------------------- levels
def _short_level(r: int, max_rank: int) -> str:
    if r < 0:
        return "?"
    if r == 0:
        return "leaf"
    if max_rank == 1:
        return "spine"
    return f"r{r}"


def link_categories(view: RoutingView) -> tuple[IntArray, list[str]]:
    """Per link id, the index of its group of levels (``(n_links,)`` int64,
    -1 for router ports), and the groups' names in the order a flow meets
    them: ``hosts→leaf``, ``leaf→r1``, ..., same-level groups, ..., ``r1→leaf``,
    ``leaf→hosts`` (``spine`` for rank 1 of a 2-level fabric, ``?`` an
    unranked switch)."""
    nl = view.n_links
    lvl = view.sw_level.astype(np.int64)
    max_rank = int(lvl.max()) if len(lvl) else 0
    frm = np.full(nl, -9, dtype=np.int64)
    to = np.full(nl, -9, dtype=np.int64)
    host = -2
    core = np.arange(view.n_core)
    s = view.link_switch[core].astype(np.int64)
    peer = view.next_sw[s * PORTS + view.link_port[core].astype(np.int64)].astype(np.int64)
    frm[core], to[core] = lvl[s], np.where(peer >= 0, lvl[np.maximum(peer, 0)], -1)
    dl = view.n_core + np.arange(view.n_endports)
    frm[dl], to[dl] = lvl[view.link_switch[dl]], host
    inj = np.arange(view.n_switch_links, nl)
    frm[inj], to[inj] = host, lvl[view.ep_leaf[view.link_ep[inj]]]
    valid = frm > -9

    def name(r: int) -> str:
        return "hosts" if r == host else _short_level(r, max_rank)

    def sort_key(pair: tuple[int, int]) -> tuple[int, int, int]:
        a, b = pair
        known = a >= 0 or a == host
        if not known or (b < 0 and b != host):
            return (3, a, b)
        ua = -1 if a == host else a
        ub = -1 if b == host else b
        if ub > ua:
            return (0, ua, ub)
        if ub == ua:
            return (1, ua, ub)
        return (2, -ua, -ub)

    pairs = sorted({(int(a), int(b)) for a, b in zip(frm[valid].tolist(), to[valid].tolist(),
                                                      strict=True)}, key=sort_key)
    index = {p: i for i, p in enumerate(pairs)}
    cat = np.full(nl, -1, dtype=np.int64)
    for p, i in index.items():
        cat[valid & (frm == p[0]) & (to == p[1])] = i
    names = [f"{name(a)}→{name(b)}" for a, b in pairs]
    return cat, names


def _port_name(view: RoutingView, link: int, width: int = 34) -> str:
    f = view.fabric
    if view.link_switch[link] >= 0:
        row = int(f.port_start[view.sw_node[view.link_switch[link]]]) + int(view.link_port[link])
    else:
        row = int(view.ep_row[view.link_ep[link]])
    peer = int(f.port_peer[row])

    def one(r: int) -> str:
        d = " ".join(f.node_desc[int(f.port_node[r])].split())
        d = d if len(d) <= width else d[:width - 1] + "…"
        return f'"{d}"[{int(f.port_num[r])}]'

    return f"{one(row)} → {one(peer)}" if peer >= 0 else one(row)


def hot_spots(view: RoutingView, values: LinkValues, cat: IntArray, names: list[str],
              count: int = _HOT) -> list[HotSpot]:
    """The ``count`` ports with the highest values (ties: lowest link id first)."""
    v = values.value
    pos = np.flatnonzero((v > 0) & (cat >= 0))
    pos = pos[np.lexsort((pos, -v[pos]))][:count]
    out = []
    for k in pos.tolist():
        st = int(values.stage[k])
        out.append(HotSpot(
            link=k, value=int(v[k]), name=_port_name(view, k), full_name=view.describe_link(k),
            category=names[int(cat[k])],
            stage=values.stage_labels[st] if 0 <= st < len(values.stage_labels) else ""))
    return out


# --------------------------------------------------------------------------- drawing
def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        from smroute.errors import SmrouteError

        raise SmrouteError("--plot needs matplotlib (pip install 'smroute[study]'; "
                           "scripts/setup.sh installs it)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_link_values(view: RoutingView, values: LinkValues, path: str | os.PathLike[str], *,
                     title: str) -> list[HotSpot]:
    """Draw ``values`` (module doc) into ``path`` (``.png`` or ``.svg``),
    atomically; returns the hot spots named on it."""
    from smroute.fileio import atomic_writer

    out = Path(path)
    fmt = PLOT_FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise ValueError(f"{out}: expected a .png or .svg file name")
    cat, names = link_categories(view)
    spots = hot_spots(view, values, cat, names)
    v = values.value
    plt = _pyplot()
    staged = len(values.stage_max) > 0
    fig = plt.figure(figsize=(12.5 if staged else 10, 7.4))
    grid = fig.add_gridspec(2, 2 if staged else 1, height_ratios=[3.2, 1],
                            width_ratios=[3, 1.15] if staged else None, hspace=0.32,
                            wspace=0.16, left=0.07, right=0.98, top=0.9, bottom=0.03)
    ax = fig.add_subplot(grid[0, 0])
    top = int(v.max()) if len(v) else 0
    used = [i for i in range(len(names)) if bool((cat == i).any())]
    n_max = 1
    cols: list[tuple[int, IntArray, IntArray]] = []
    for x, i in enumerate(used):
        vals, counts = np.unique(v[cat == i], return_counts=True)
        cols.append((x, vals, counts))
        n_max = max(n_max, int(counts.max()))
    marks: dict[tuple[int, int], list[int]] = {}  # hot spots numbered at their dots
    for k, hs in enumerate(spots, 1):
        marks.setdefault((used.index(int(cat[hs.link])), hs.value), []).append(k)
    for x, vals, counts in cols:
        hot = vals == top
        size = 25 + 700 * np.sqrt(counts / n_max)
        ax.scatter(np.full(len(vals), x), vals, s=size, color=np.where(
            hot, "#d62728", "#4c72b0"), alpha=0.55, edgecolors="none", zorder=2)
        ax.text(x, -0.08, f"{int(counts.sum()):,} ports", ha="center", va="top",
                fontsize=7.5, color="#555555", transform=ax.get_xaxis_transform())
        few = len(vals) <= 8
        for y, cnt, sz in zip(vals.tolist(), counts.tolist(), size.tolist(), strict=True):
            ks = marks.get((x, int(y)), [])
            if not few and not ks and y != int(vals.max()):
                continue
            text = f"{cnt:,}"
            if ks:
                text += "  #" + (str(ks[0]) if len(ks) == 1 else f"{ks[0]}-{ks[-1]}")
            ax.annotate(text, (x, y), xytext=(np.sqrt(sz) / 2 + 4, 0),
                        textcoords="offset points", va="center", fontsize=8,
                        fontweight="bold" if ks else "normal",
                        color="#d62728" if ks or y == top else "#333333")
    ax.set_xticks(range(len(used)))
    ax.set_xticklabels([names[i] for i in used], fontsize=9)
    ax.set_xlim(-0.6, len(used) - 0.4)
    ax.set_ylim(bottom=min(-0.5, float(v.min()) - 0.5) if len(v) else -0.5,
                top=top * 1.12 + 1)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(values.axis, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"{values.quantity}\nby level, up from the hosts then down (a dot: how many "
                 "ports have that value; r = rank above the leaves)", fontsize=9)
    if staged:
        sx = fig.add_subplot(grid[0, 1])
        k = len(values.stage_max)
        xs = np.arange(k)
        sx.plot(xs, values.stage_max, lw=0.9 if k > 60 else 1.4, color="#4c72b0",
                marker="" if k > 60 else "o", ms=3)
        worst = int(np.argmax(values.stage_max))
        sx.scatter([worst], [values.stage_max[worst]], color="#d62728", zorder=3, s=25)
        sx.annotate(f"stage {values.stage_labels[worst]}: {int(values.stage_max[worst])}",
                    (worst, values.stage_max[worst]), xytext=(0, 8),
                    textcoords="offset points", fontsize=8, color="#d62728",
                    ha="left" if worst < k / 3 else ("right" if worst > 2 * k / 3 else "center"))
        sx.set_ylim(0, max(int(values.stage_max.max()), 1) * 1.2)
        sx.yaxis.set_major_locator(MaxNLocator(integer=True))
        sx.set_xlabel("stage", fontsize=8)
        sx.set_title("hottest port per stage", fontsize=9)
        sx.grid(True, alpha=0.3)
        sx.tick_params(labelsize=8)
    tx = fig.add_subplot(grid[1, :])
    tx.axis("off")
    rows = [f"hot spots ({values.summary}):"]
    for k, hs in enumerate(spots, 1):
        where = f", stage {hs.stage}" if hs.stage else ""
        rows.append(f"#{k}  {values.unit.format(hs.value)} on {hs.name}   "
                    f"({hs.category}{where})")
    at_top = int((v == top).sum()) if top else 0
    if at_top > len([s for s in spots if s.value == top]):
        rows.append(f"… {at_top:,} ports in all carry the maximum {top}")
    if not spots:
        rows.append("no flow crosses the network")
    tx.text(0, 1, "\n".join(rows), va="top", ha="left", fontsize=8.5, family="DejaVu Sans",
            transform=tx.transAxes)
    fig.suptitle(title, fontsize=11)
    meta_text = "\n".join(rows)
    meta = {"Title": title, "Description": meta_text}
    with atomic_writer(out, "wb") as fh:
        fig.savefig(fh, format=fmt, dpi=90, metadata=meta)
    plt.close(fig)
    return spots


def plot_analysis(path: str, view: RoutingView, paths: PairPaths, pattern: str,
                  order: npt.ArrayLike, rng: np.random.Generator, *, samples: int = 1000,
                  random_order: bool = False, title: str = "",
                  progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """:func:`link_values` then :func:`plot_link_values`; the hot spots as
    JSON-ready dicts."""
    values = link_values(view, paths, pattern, order, rng, samples=samples,
                         random_order=random_order, progress=progress)
    spots = plot_link_values(view, values, path, title=title or pattern)
    return [s.to_dict() for s in spots]
