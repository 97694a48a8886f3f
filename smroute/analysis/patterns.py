"""Node orders and communication patterns.

Node orders
-----------
An *order* is an ``(N,)`` int64 array of end-port indices of a
:class:`~smroute.analysis.paths.RoutingView`: participant ``i`` (an MPI rank)
runs on end-port ``order[i]``.  :func:`topological_order` follows Dmodc's
topological NIDs, :func:`random_order` shuffles with a passed
``numpy.random.Generator``, :func:`host_order` takes a job allocation's host
list (node descriptions or GUIDs).

Patterns
--------
A :class:`Pattern` over ``N`` participants is a sequence of stages; a stage is
a pair of ``(F,)`` int64 arrays ``(src_index, dst_index)`` of participant
indices (into the order).  Stages are generated on demand, so the ``N - 1``
stages of the shift pattern on 11,664 participants never exist all at once;
:meth:`Pattern.batch` concatenates a range of stages for vectorized analysis.

Gliksberg's patterns: :func:`all_to_all`, :func:`random_permutations`,
:func:`shift` / :func:`shifts`.  Zahavi's collective permutation sequences
(CPS, Table 2): unidirectional :func:`shifts`, :func:`ring`,
:func:`binomial`, :func:`dissemination`, :func:`tournament`; bidirectional
:func:`recursive_doubling`, :func:`recursive_halving` (with MPI's "pre" and
"post" stages when ``N`` is not a power of two, section VI) and the
topology-aware :func:`recursive_doubling_tree` (eq. 3-7).

Stage ranges: Table 2 writes ``0 <= s <= ceil(log2 N)`` for the log-stage
CPS; the stage ``s = ceil(log2 N)`` is empty for binomial and tournament (and
the text counts 11 stages for 1,024 nodes: ``s = 0..10``), so we generate
``s = 0 .. ceil(log2 N) - 1``, the rounds the MPI algorithms execute.

Node orders and job host lists are :mod:`smroute.analysis.jobs`; this module
has the patterns and re-exports the orders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from smroute.analysis.jobs import (
    host_order,
    parse_job,
    random_order,
    read_job,
    resolve_job,
    topological_order,
    topological_order_from,
)
from smroute.errors import InputError

__all__ = [
    "Stage",
    "Pattern",
    "topological_order",
    "topological_order_from",
    "random_order",
    "host_order",
    "parse_job",
    "read_job",
    "resolve_job",
    "explicit",
    "all_to_all",
    "random_permutations",
    "shift",
    "shifts",
    "ring",
    "binomial",
    "dissemination",
    "tournament",
    "recursive_doubling",
    "recursive_halving",
    "recursive_doubling_tree",
    "CPS",
    "UNIDIRECTIONAL",
    "BIDIRECTIONAL",
    "cps",
]

IntArray = npt.NDArray[np.int64]
Stage = tuple[IntArray, IntArray]

# =========================================================================== patterns
@dataclass(frozen=True, eq=False)
class Pattern(Sequence[Stage]):
    """A sequence of ``n_stages`` stages over ``n`` participants.

    ``gen(k)`` returns stage ``k`` as ``(src_index, dst_index)`` ``(F_k,)``
    int64 arrays; ``labels`` names the stages; ``permutation`` is True if in
    every stage each participant sends at most once and receives at most once
    (then a link's congestion risk equals its flow count).  ``batch_gen``
    (optional) returns several stages at once, see :meth:`batch`.
    ``shift_dist`` (optional, ``(n_stages,)`` int64): set when stage ``k`` is
    exactly ``i -> (i + shift_dist[k]) mod n`` for every ``i``, which lets the
    analysis skip generating flows.
    """

    name: str
    n: int
    n_stages: int
    gen: Callable[[int], Stage] = field(repr=False)
    labels: tuple[str, ...] = field(default=(), repr=False)
    permutation: bool = True
    batch_gen: Callable[[int, int], tuple[IntArray, IntArray, IntArray]] | None = field(
        default=None, repr=False)
    shift_dist: IntArray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.n_stages

    def __getitem__(self, k: int) -> Stage:  # type: ignore[override]
        if not isinstance(k, int | np.integer):
            raise TypeError("Pattern indices are ints")
        k = int(k)
        if k < 0:
            k += self.n_stages
        if not 0 <= k < self.n_stages:
            raise IndexError(k)
        return self.gen(k)

    def __iter__(self) -> Iterator[Stage]:
        for k in range(self.n_stages):
            yield self.gen(k)

    def label(self, k: int) -> str:
        return self.labels[k] if self.labels else str(k)

    def batch(self, start: int, stop: int) -> tuple[IntArray, IntArray, IntArray]:
        """Stages ``start .. stop - 1`` concatenated: ``(src, dst, stage)``,
        ``(F,)`` int64 each, ``stage`` counted from ``start``."""
        if self.batch_gen is not None:
            return self.batch_gen(start, stop)
        parts = [self.gen(k) for k in range(start, stop)]
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        src = np.concatenate([p[0] for p in parts]).astype(np.int64)
        dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
        stg = np.repeat(np.arange(len(parts), dtype=np.int64), [len(p[0]) for p in parts])
        return src, dst, stg

    @property
    def flows(self) -> int:
        """Total flows over all stages (generates every stage)."""
        return sum(len(s) for s, _ in self)


def _is_partial_permutation(stage: Stage) -> bool:
    s, d = stage
    return len(np.unique(s)) == len(s) and len(np.unique(d)) == len(d)


def explicit(name: str, n: int, stages: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
             labels: Sequence[str] = ()) -> Pattern:
    """A pattern from explicit stages (participant indices in ``0 .. n-1``)."""
    st: list[Stage] = []
    for s, d in stages:
        sa, da = np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64)
        if sa.shape != da.shape or sa.ndim != 1:
            raise InputError(f"{name}: a stage needs two 1-D arrays of equal length")
        if len(sa) and (min(int(sa.min()), int(da.min())) < 0
                        or max(int(sa.max()), int(da.max())) >= n):
            raise InputError(f"{name}: participant index out of 0..{n - 1}")
        st.append((sa, da))
    perm = all(_is_partial_permutation(x) for x in st)
    return Pattern(name, n, len(st), st.__getitem__, tuple(labels), perm)


def _ceil_log2(n: int) -> int:
    return max(int(n - 1).bit_length(), 0)


def _floor_log2(n: int) -> int:
    return int(n).bit_length() - 1


def all_to_all(n: int) -> Pattern:
    """Every participant to every other one, as one stage of ``n (n-1)`` flows
    (materialized: for large ``n`` use :func:`~smroute.analysis.congestion.a2a_risk`,
    which works on the (leaf, destination) paths instead)."""
    i = np.repeat(np.arange(n, dtype=np.int64), max(n - 1, 0))
    off = np.tile(np.arange(1, n, dtype=np.int64), n)
    stage = (i, (i + off) % n)
    return Pattern("all-to-all", n, 1, lambda _k: stage, ("A2A",), permutation=n <= 2)


def random_permutations(n: int, rng: np.random.Generator, count: int = 1) -> Pattern:
    """``count`` stages, each ``i -> pi(i)`` for a uniform random permutation
    ``pi`` drawn from ``rng`` (fixed points are kept: they are self flows, which
    the analysis skips).  All permutations are drawn at construction."""
    dt = np.int32 if n < 2**31 else np.int64
    perms = rng.permuted(np.tile(np.arange(n, dtype=dt), (count, 1)), axis=1)
    src = np.arange(n, dtype=np.int64)

    def batch(a: int, b: int) -> tuple[IntArray, IntArray, IntArray]:
        k = b - a
        return (np.tile(src, k), perms[a:b].ravel().astype(np.int64),
                np.repeat(np.arange(k, dtype=np.int64), n))

    return Pattern("random permutation", n, count,
                   lambda k: (src, perms[k].astype(np.int64)),
                   tuple(f"RP{k}" for k in range(count)), True, batch)


def _shift_pattern(name: str, n: int, dist: IntArray, labels: tuple[str, ...]) -> Pattern:
    src = np.arange(n, dtype=np.int64)

    def gen(k: int) -> Stage:
        return src, (src + dist[k]) % n

    def batch(a: int, b: int) -> tuple[IntArray, IntArray, IntArray]:
        k = b - a
        s = np.tile(src, k)
        stg = np.repeat(np.arange(k, dtype=np.int64), n)
        d = s + np.repeat(dist[a:b], n)
        d[d >= n] -= n
        return s, d, stg

    return Pattern(name, n, len(dist), gen, labels, True, batch, dist.astype(np.int64))


def shift(n: int, s: int) -> Pattern:
    """One shift stage ``i -> (i + s) mod n``."""
    return _shift_pattern(f"shift {s}", n, np.array([s % n if n else 0]), (f"s={s}",))


def shifts(n: int) -> Pattern:
    """All ``n - 1`` shift stages ``i -> (i + s) mod n``, ``s = 1 .. n-1``
    (Gliksberg's SP, Zahavi's Shift CPS)."""
    dist = np.arange(1, max(n, 1), dtype=np.int64)
    return _shift_pattern("shift", n, dist, tuple(f"s={s}" for s in dist.tolist()))


def ring(n: int) -> Pattern:
    """Ring CPS: one stage ``i -> (i + 1) mod n``."""
    return _shift_pattern("ring", n, np.array([1 % max(n, 1)]), ("s=1",))


def dissemination(n: int) -> Pattern:
    """Dissemination CPS: ``i -> (i + 2^s) mod n``, ``s = 0 .. ceil(log2 n) - 1``."""
    dist = (1 << np.arange(_ceil_log2(n), dtype=np.int64)) % max(n, 1)
    return _shift_pattern("dissemination", n, dist,
                          tuple(f"s={s}" for s in range(len(dist))))


def _log_stages(name: str, n: int, gen: Callable[[int], Stage], count: int,
                labels: tuple[str, ...]) -> Pattern:
    stages = [gen(k) for k in range(count)]
    keep = [k for k, s in enumerate(stages) if len(s[0])]
    kept = [stages[k] for k in keep]
    return Pattern(name, n, len(kept), kept.__getitem__, tuple(labels[k] for k in keep), True)


def binomial(n: int, *, reverse: bool = False) -> Pattern:
    """Binomial CPS: stage ``s`` sends ``i -> i + 2^s`` for ``i < 2^s``,
    ``i + 2^s < n`` (``s = 0 .. ceil(log2 n) - 1``; broadcast/scatter).
    ``reverse``: the gather/reduce form, arrows reversed and stages in reverse
    order."""
    ls = _ceil_log2(n)

    def gen(s: int) -> Stage:
        i = np.arange(min(1 << s, max(n - (1 << s), 0)), dtype=np.int64)
        return (i + (1 << s), i) if reverse else (i, i + (1 << s))

    order = list(range(ls))[::-1] if reverse else list(range(ls))
    return _log_stages("binomial" + (" (reverse)" if reverse else ""), n,
                       lambda k: gen(order[k]), ls, tuple(f"s={s}" for s in order))


def tournament(n: int) -> Pattern:
    """Tournament CPS: ``i + 2^s -> i`` for ``i = 0 mod 2^(s+1)``, ``i + 2^s < n``
    (``s = 0 .. ceil(log2 n) - 1``)."""
    ls = _ceil_log2(n)

    def gen(s: int) -> Stage:
        i = np.arange(0, n, 1 << (s + 1), dtype=np.int64)
        i = i[i + (1 << s) < n]
        return i + (1 << s), i

    return _log_stages("tournament", n, gen, ls, tuple(f"s={s}" for s in range(ls)))


def _xor_stage(n_core: int, bit: int) -> Stage:
    i = np.arange(n_core, dtype=np.int64)
    j = i ^ bit
    keep = j < n_core
    return i[keep], j[keep]


def _recursive(name: str, n: int, halving: bool) -> Pattern:
    lg = _floor_log2(n) if n >= 1 else 0
    p = 1 << lg if n >= 1 else 0
    stages: list[Stage] = []
    labels: list[str] = []
    rest = np.arange(max(n - p, 0), dtype=np.int64)
    if n > p:  # "pre": the remainder nodes hand their data to proxies
        stages.append((rest + p, rest))
        labels.append("pre")
    bits = list(range(lg))[::-1] if halving else list(range(lg))
    for s in bits:
        stages.append(_xor_stage(p, 1 << s))
        labels.append(f"s={s}")
    if n > p:  # "post": proxies return the result
        stages.append((rest, rest + p))
        labels.append("post")
    return Pattern(name, n, len(stages), stages.__getitem__, tuple(labels), True)


def recursive_doubling(n: int) -> Pattern:
    """Recursive doubling CPS: ``i <-> i XOR 2^s`` among the first
    ``P = 2^floor(log2 n)`` participants, ``s = 0 .. log2 P - 1``; if ``n > P``
    preceded by "pre" ``i <- i + P`` and followed by "post" ``i -> i + P``
    (``i < n - P``), as in MPI implementations (Zahavi, section VI)."""
    return _recursive("recursive doubling", n, False)


def recursive_halving(n: int) -> Pattern:
    """Recursive halving CPS: the stages of :func:`recursive_doubling` with the
    XOR distances in reverse order (``P/2, .., 2, 1``), same pre/post."""
    return _recursive("recursive halving", n, True)


def recursive_doubling_tree(n: int, radices: Sequence[int]) -> Pattern:
    """Zahavi's topology-aware recursive doubling (section VI, eq. 3-7) for a
    tree whose level-``l`` subtrees hold ``M_l = m_1 .. m_l`` consecutive
    participants (``radices = (m_1, .., m_h)``, e.g. hosts per leaf first).

    For each level ``l`` with ``L_l = floor(log2 m_l)``,
    ``E_l = M_{l-1} 2^L_l``: a "pre" stage ``j -> j - E_l`` for ``j mod M_l >=
    E_l`` (if ``E_l != M_l``), stages ``s = 0 .. L_l - 1`` exchanging
    ``i <-> i`` with digit ``a_l = floor(i / M_{l-1}) mod m_l`` XOR ``2^s``
    (for ``a_l < 2^L_l``), and a "post" stage ``i -> i + E_l``.  Pairs with an
    index ``>= n`` are dropped (partial allocations)."""
    m = [int(x) for x in radices]
    if any(x < 1 for x in m):
        raise InputError(f"radices must be >= 1, got {m}")
    stages: list[Stage] = []
    labels: list[str] = []
    i = np.arange(n, dtype=np.int64)
    m_prev = 1
    for lvl, ml in enumerate(m, start=1):
        m_l = m_prev * ml
        lg = _floor_log2(ml)
        e_l = m_prev << lg
        pos = i % m_l
        if e_l != m_l:
            j = i[pos >= e_l]
            stages.append((j, j - e_l))
            labels.append(f"{lvl}.pre")
        a = (i // m_prev) % ml
        core = a < (1 << lg)
        for s in range(lg):
            src = i[core]
            dst = src + ((a[core] ^ (1 << s)) - a[core]) * m_prev
            ok = dst < n
            stages.append((src[ok], dst[ok]))
            labels.append(f"{lvl}.{s}")
        if e_l != m_l:
            j = i[pos >= e_l]
            stages.append((j - e_l, j))
            labels.append(f"{lvl}.post")
        m_prev = m_l
    keep = [k for k, s in enumerate(stages) if len(s[0])]
    kept = [stages[k] for k in keep]
    return Pattern("recursive doubling (tree)", n, len(kept), kept.__getitem__,
                   tuple(labels[k] for k in keep), True)


#: Zahavi's CPS by name: unidirectional then bidirectional.
UNIDIRECTIONAL = ("shift", "ring", "binomial", "dissemination", "tournament")
BIDIRECTIONAL = ("recursive-doubling", "recursive-halving")
CPS = UNIDIRECTIONAL + BIDIRECTIONAL


def cps(name: str, n: int) -> Pattern:
    """A collective permutation sequence by name (one of :data:`CPS`)."""
    makers: dict[str, Callable[[int], Pattern]] = {
        "shift": shifts, "ring": ring, "binomial": binomial,
        "dissemination": dissemination, "tournament": tournament,
        "recursive-doubling": recursive_doubling, "recursive-halving": recursive_halving,
    }
    if name not in makers:
        raise InputError(f"unknown CPS {name!r}; expected one of {', '.join(CPS)}")
    return makers[name](n)
