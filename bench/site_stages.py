"""Per-stage figures of the catalogue bench and the noise rule of its comparison.

RP (the median over random permutations of each permutation's max link
load) and shift HSD (the mean over the ``N - 1`` shifts of each shift's max
flows on one link) are statistics of samples: an integer median flips
between neighbours with the sample, a mean moves in its second digit.  The
bench keeps each stage's figure (:func:`encode`: zlib-compressed base64 of
unsigned 16- or 32-bit integers) beside the statistic, every engine on the
same permutations and the same shifts, so two engines' stages pair.

The rule (:func:`significant_miss`): a cell where smroute's figure is above
the best rival's is a **significant miss** only if, against a rival whose
figure is below smroute's, the two-sided sign test over the paired stages
(ties dropped; :func:`smroute.study.signtest.sign_test`) gives
``p < ALPHA`` with smroute worse on more stages.  SP (a max over the
shifts) and A2A (a max over the links) are exact: above is a miss.  A
sampled cell whose rows carry no stages cannot be tested and counts as a
miss (nothing is hidden).
"""

from __future__ import annotations

import base64
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from smroute.study.signtest import Paired

Row = dict[str, Any]
#: The sampled metrics and the key of their stages in a row's ``sets[hs][order]``.
STAGE_KEYS = {"rp": "rp_stages", "hsd": "shift_stages"}


def encode(stages: np.ndarray) -> str:
    """``(K,)`` non-negative integers as text: ``"u2:"`` or ``"u4:"`` then the
    base64 of their zlib-compressed little-endian bytes."""
    a = np.asarray(stages, dtype=np.int64)
    if a.size and (a.min() < 0 or a.max() >= 2 ** 32):
        raise ValueError("stage figures must be in [0, 2**32)")
    kind = "u2" if not a.size or a.max() < 2 ** 16 else "u4"
    raw = a.astype("<" + kind).tobytes()
    return f"{kind}:" + base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def decode(text: str) -> np.ndarray:
    """The ``(K,)`` int64 array of :func:`encode`'s text."""
    kind, _, b64 = text.partition(":")
    if kind not in ("u2", "u4"):
        raise ValueError(f"not encoded stages: {text[:20]!r}")
    raw = zlib.decompress(base64.b64decode(b64))
    return np.frombuffer(raw, dtype="<" + kind).astype(np.int64)


def stages(e: Row, hs: str, order: str, metric: str) -> np.ndarray | None:
    """The stages of ``metric`` (``rp`` or ``hsd``) of engine row ``e`` over
    host set ``hs`` in ``order``, or ``None`` (an exact metric, or a row
    without them)."""
    key = STAGE_KEYS.get(metric)
    s = (e.get("metrics") or {}).get("sets", {}).get(hs)
    if key is None or not s or not isinstance(s.get(order), dict):
        return None
    text = s[order].get(key)
    return decode(text) if isinstance(text, str) else None


@dataclass(frozen=True)
class StageTest(Paired):
    """smroute against one rival over paired stages (lower is better): a
    :class:`~smroute.study.signtest.Paired` of the stages, smroute's wins
    the stages where it is lower."""

    rival: str = ""

    @property
    def better(self) -> int:
        return self.wins

    @property
    def worse(self) -> int:
        return self.losses

    @property
    def significant(self) -> bool:
        """smroute worse on more stages and ``p < ALPHA``."""
        return self.loss


def paired(mine: np.ndarray, theirs: np.ndarray, rival: str = "") -> StageTest:
    """:class:`StageTest` of two engines' figures on the same stages."""
    a, b = np.asarray(mine), np.asarray(theirs)
    if a.shape != b.shape:
        raise ValueError(f"unpaired stages: {a.shape} against {b.shape}")
    return StageTest(int((a < b).sum()), int((a == b).sum()), int((a > b).sum()),
                     rival=rival)


@dataclass(frozen=True)
class Verdict:
    """One cell above the best rival: the tests against the rivals below
    smroute (none: an exact metric or rows without stages) and whether it
    counts as a significant miss."""

    tests: tuple[StageTest, ...]
    significant: bool
    exact: bool

    def mark(self) -> str:
        """The cell's note: ``""`` for an exact metric, else the test with
        the smallest p among the significant ones (among all where none is)
        and the rival it is against where several were tested."""
        if self.exact:
            return ""
        if not self.tests:
            return " (no stages: counted)"
        sig = [t for t in self.tests if t.significant]
        t = min(sig or self.tests, key=lambda t: t.p)
        p = f"{t.p:.2g}" if t.p >= 1e-15 else "< 1e-15"  # no "p 0" where it underflows
        return f" (p {p}{f' vs {t.rival}' if len(self.tests) > 1 else ''}, " + (
            "significant)" if sig else "within noise)")


def significant_miss(metric: str, mine: np.ndarray | None, value: float,
                     rivals: Sequence[tuple[str, float, np.ndarray | None]]) -> Verdict:
    """The rule (module doc) for one cell where smroute's ``value`` of
    ``metric`` is above the best of ``rivals`` (``(engine, value, stages)``):
    exact metrics (SP, A2A) miss whenever above; sampled ones only by a
    significant sign test against a rival below ``value``."""
    if metric not in STAGE_KEYS:
        return Verdict((), True, True)
    below = [(n, s) for n, v, s in rivals if not math.isnan(v) and v < value]
    if mine is None or any(s is None for _, s in below):
        return Verdict((), True, False)
    tests = tuple(paired(mine, s, n) for n, s in below if s is not None)
    return Verdict(tests, any(t.significant for t in tests), False)
