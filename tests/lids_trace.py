"""Shared by the LID-selection tests: recount a pattern's hot-spot degree by
tracing every flow with its DLID through the tables (independent of
:mod:`smroute.lids.select`'s own counters)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from smroute.analysis.paths import RoutingView, trace


def recount(view: RoutingView, ranks: np.ndarray, pattern: Iterable[tuple[np.ndarray, np.ndarray]],
            dlids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per stage of ``pattern`` (``(src, dst)`` rank arrays), the most flows
    on one link and the undelivered flows, ``(K,)`` int each; flows use
    ``dlids[src, dst]`` (``(n, n)`` DLIDs) from end-port ``ranks[src]`` to
    ``ranks[dst]``; flows to oneself are skipped."""
    hsd, bad = [], []
    for s, d in pattern:
        s, d = s[s != d], d[s != d]
        t = trace(view, ranks[s], ranks[d], dlids[s, d])
        lk = t.links[t.ok].ravel()
        lk = lk[lk >= 0]
        hsd.append(int(np.bincount(lk).max()) if len(lk) else 0)
        bad.append(int((~t.ok).sum()))
    return np.array(hsd), np.array(bad)
