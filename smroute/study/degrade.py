"""The degradation study's throw protocol (Gliksberg et al., Dmodc paper, sec. 4).

Each throw removes ``a`` random pieces of equipment -- switches
(``mode="switch"``) or switch-to-switch links (``mode="link"``) -- from the
complete fabric, with ``a`` drawn from the paper's shifted log-uniform law::

    a = floor(2 ** (m * u) - 1),   u uniform in [0, 1)

The paper writes ``a in [0, 2^m]``: ``2^m`` is the amount of equipment, so
here ``m = log2(M)`` with ``M`` the number of candidate switches or links,
and ``a`` ranges over ``0 .. M - 2`` (about a quarter of the throws remove
nothing or one piece, half remove at most ``sqrt(M)``).

Throw ``i`` of a study seeded with ``seed`` draws everything from
``numpy.random.SeedSequence(seed, spawn_key=(i,))``: its first child draws
``u`` and the removed equipment, its second the metrics' random
permutations and orders.  A throw's result therefore depends on
``(fabric, mode, seed, i)`` only, not on the executor or the worker.  The
mode is not part of the seed: throw ``i`` of the switch and of the link
study draw the same ``u`` (and the same metric flows), so the two modes are
sampled at the same degradation levels.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from smroute.errors import InputError
from smroute.fabric.generate.trees import degrade, pgft
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.text import excerpt

__all__ = [
    "MODES",
    "Throw",
    "PgftSpec",
    "parse_pgft",
    "equipment",
    "amount",
    "throw_rngs",
    "plan_throw",
]

MODES = ("switch", "link")


@dataclass(frozen=True)
class PgftSpec:
    """``PGFT(h; m_1..m_h; w_1..w_h; p_1..p_h)`` parameters."""

    h: int
    m: tuple[int, ...]
    w: tuple[int, ...]
    p: tuple[int, ...]

    def build(self) -> Fabric:
        """The complete fabric (:func:`smroute.fabric.generate.trees.pgft`)."""
        return pgft(self.h, self.m, self.w, self.p)

    @property
    def nodes(self) -> int:
        """Hosts and switches the fabric has (known before building it; exact
        Python integers, as :func:`~smroute.fabric.generate.trees.level_sizes` counts)."""
        return sum(math.prod(self.w[:lv] + self.m[lv:]) for lv in range(self.h + 1))

    @property
    def label(self) -> str:
        """``PGFT(h;m..;w..;p..)``, the fabric's name in the study CSV."""
        j = ",".join
        return (f"PGFT({self.h};{j(map(str, self.m))};{j(map(str, self.w))};"
                f"{j(map(str, self.p))})")


_PGFT_RE = re.compile(r"^\s*(?:PGFT\s*\()?\s*([0-9;, ]+?)\s*\)?\s*$", re.IGNORECASE)


def parse_pgft(text: str) -> PgftSpec:
    """Parse ``"h;m1,..,mh;w1,..,wh;p1,..,ph"`` (optionally as ``PGFT(...)``).

    Raises :class:`~smroute.errors.InputError` naming what was expected."""
    mo = _PGFT_RE.match(text)
    parts = mo.group(1).split(";") if mo else []
    want = "expected h;m1,..,mh;w1,..,wh;p1,..,ph, e.g. 2;18,36;1,18;1,1"
    if len(parts) != 4:
        raise InputError(f"bad PGFT tuple {excerpt(text)}: {want}", source="--pgft")
    try:
        h = int(parts[0])
        m, w, p = (tuple(int(x) for x in s.split(",")) for s in parts[1:])
    except ValueError:
        raise InputError(f"bad PGFT tuple {excerpt(text)}: {want}", source="--pgft") from None
    if h < 1 or not (len(m) == len(w) == len(p) == h) or min(m + w + p) < 1:
        raise InputError(f"bad PGFT tuple {excerpt(text)}: h={h} needs h positive values in each "
                         "of m, w, p", source="--pgft")
    return PgftSpec(h, m, w, p)


def equipment(fabric: Fabric, mode: str) -> int:
    """``M``: switches (``"switch"``) or switch-to-switch links (``"link"``)."""
    if mode == "switch":
        return len(fabric.switches)
    if mode == "link":
        is_sw = fabric.node_type == NodeType.SWITCH
        pn = fabric.port_node
        return int((is_sw[pn[fabric.link_a]] & is_sw[pn[fabric.link_b]]).sum())
    raise InputError(f"unknown degradation mode {mode!r}; expected one of {', '.join(MODES)}")


def amount(u: float, total: int) -> int:
    """``floor(2 ** (m * u) - 1)`` with ``m = log2(total)``: equipment removed by
    a throw drawing ``u`` in ``[0, 1)`` (0 when ``total <= 1``)."""
    if not 0.0 <= u < 1.0:
        raise ValueError(f"u must be in [0, 1), got {u}")
    if total <= 1:
        return 0
    return max(0, min(total - 1, math.floor(2.0 ** (math.log2(total) * u) - 1.0)))


def throw_rngs(seed: int, index: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The two generators of throw ``index``: (degradation, metrics)."""
    ss = np.random.SeedSequence(seed, spawn_key=(index,))
    a, b = ss.spawn(2)
    return np.random.default_rng(a), np.random.default_rng(b)


@dataclass(frozen=True)
class Throw:
    """One throw: the degraded fabric and what was removed.

    total: ``M``; removed: ``a``; removed_guids: node GUIDs of removed
    switches (switch mode); metrics_rng: the generator for the metrics.
    """

    index: int
    mode: str
    total: int
    removed: int
    u: float
    fabric: Fabric
    removed_guids: tuple[int, ...]
    metrics_rng: np.random.Generator


def plan_throw(full: Fabric, mode: str, seed: int, index: int) -> Throw:
    """Degrade ``full`` for throw ``index`` of a study seeded with ``seed``."""
    total = equipment(full, mode)
    deg_rng, met_rng = throw_rngs(seed, index)
    u = float(deg_rng.random())
    a = amount(u, total)
    if mode == "switch":
        fab, rem = degrade(full, deg_rng, switches=a)
    else:
        fab, rem = degrade(full, deg_rng, links=a)
    return Throw(index, mode, total, a, u, fab,
                 tuple(int(g) for g in rem.node_guids.tolist()), met_rng)
