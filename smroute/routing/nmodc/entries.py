"""Nmodc's entries into the leaves ranked apart (beyond the paper): each of
their end-port destinations enters the leaf by one cable of each block (or
through one top switch, where the leaf hangs off the tops), and their way
up is skewed (or by the tops' digit).

A leaf ranked apart (:func:`~smroute.fabric.ranking.switch_ranks`: a
site's first leaves or storage leaves cabled straight to the core
directors above pods behind spines) has every up cable skip a rank: it
hangs off line switches (a director's line ASICs) that also carry the
pods' spines.  Routing through closer groups only, every line switch
cabled to such a leaf delivers each of its destinations straight down:
a pod spine sends a destination up the one or two line switches it shares
with the leaf, the traffic of a whole pod enters the leaf over those few
cables, and the leaf's other cables stay idle.  On a site grown in phases
(``edr-two-depths-2xcs7500-850``: 20 leaves on two CS7500 directors beside
three pods) that costs SP, RP and the shifts' HSD against OpenSM's dfsssp.

:func:`enter_dealt` deals each such leaf's end-port destinations, in NID
order, over its cables into each *block* (the line switches cabled to the
leaf that share the switches above them: one director), each destination
to one cable of the block:

* the line switch of that cable delivers it;
* every other switch under the block's upper switches (the director's
  other line switches, cabled to the leaf or not) sends it up by the
  digit of its *strides*: ``sum floor(x / s) mod n`` over the distinct
  strides ``s`` of the switches below it (a switch's divider times its
  up groups), ``n`` its cables up.  A switch below sends it the
  destinations of one class of NIDs modulo its stride (a leaf ranked
  apart ``x mod 18``, a pod spine, which its leaves send ``x mod 9``,
  ``x mod 162``), and that digit spreads each class over the spines.  The
  line switch's own digit ``floor(x / 162)`` is one value for the NIDs of
  nine such leaves: one spine carried them all (five flows on one cable
  in a host-name shift where one sufficed);
* every switch above the block's line switches sends it down to that one.

A route a line switch sends up climbs one rank more, then goes down: it
stays up*/down* in the tree's ranks (free of credit loops on one VL with
every other route), delivered, at most two hops longer.  A block is dealt
only over the line switches cabled to every switch above it, so no switch
above sends a destination down to one that would send it up again.  Switch
LIDs keep their routes.

The switches below the line switches (the pods' leaves and spines) send
such a leaf's destinations up by Dmodc's digit over *every* up group that
reaches it, not only those that lead closer: a pod spine shares a line
switch with the leaf on two of its nine cables' worth, so the minimal
routes put a pod leaf's 18 flows into one such leaf on two spines.  The
other spines reach it over a line switch, a director spine and the
entry: two hops longer, up*/down*.

Over 24 generated sites of two depths (``research/two_depths.py``: 8-32
leaves on the directors, 1-4 pods of 6-14 leaves; one VL, compute hosts;
``research/ab_metrics.py`` against the code with neither of the last two
rules; a change counts where the sign test over the paired shifts,
permutations or orders gives p < 0.05) the shifts' HSD over 10 random
host orders is lower on 20 and higher on 3 (e.g. 5.94 to 4.77 with 24
leaves on the directors and one pod of 9; 5.02 to 5.19 with four pods of
6 leaves, whose traffic now also crosses the directors' spines),
host-name HSD lower on all 24 (7.16 to 5.24 with 32 leaves and three
pods of 14), RP lower on 18 and higher on 2, SP lower on 14 and higher
on 2 in GUID order, lower on 15 and never higher in host-name order, A2A
lower on 6 and never higher.

A leaf ranked apart can hang off the top switches themselves: two
leaf/spine clusters joined at their spines (the smaller one's spines the
tops, its leaves ranked apart below them), or two three-level trees
joined at their cores.  There the switches below the tops each picked the
top by a digit of their own, so a destination entered its leaf through two
or three tops and a shift loaded a top's cable into the leaf with more
than its share.  :func:`enter_dealt` then gives each destination one entry
cable, by the digit ``(floor(x / p) + x mod p) mod n`` (``n`` cables into
the leaf, ``p`` the largest divider of the switches below the tops: a
spine below takes the destinations of one ``x mod p``, and the digit still
spreads them over the tops), and a switch below the tops whose route
climbs to a switch the entry's top is not above climbs to one it is above
(or to the top), closer to the leaf.  So the rank that picks the top
follows the entry: the other cluster's spines, the leaves under a spine
cabled to one top alone, the cores of a three-level tree.  Routes stay
minimal and up*/down*.  The way back is the same digit: such a leaf sends
the other cluster's destinations into the top ``(floor(x / p) + x mod p)
mod n`` of the ``n`` tops the switches below reach, in GUID order (the
same top at every leaf), where it is cabled to it and it leads closer; by
its skewed digit, with 8 spines below and 4 tops, a destination of the
spine ``x mod 8`` came down from two tops only.  That only where every
switch below chooses among the tops (a spine cabled to every top, a leaf
to half of them or more) and the tops' way down to the spines is whole.
Measured on 30 merged sites (``research/merged_clusters.py``;
``docs/real-fabrics.md``).

The way up from such a leaf is skewed (:func:`up_skewed`).  The
leaf takes its up cable by its digit ``x mod m`` (``m`` cables, one per
line switch), and a line switch takes its cable into a pod by ``x mod``
its cables there (2 or 3): ``m`` a multiple of those, every destination of
a pod that the leaf sends through one line switch leaves it over the same
one of its cables into the pod (on the site above, in 89% of the (leaf,
line switch, pod) triples with two destinations or more).  The leaf
takes group ``(x + floor(x / m)) mod m`` for the destinations on the
leaves not ranked apart instead, the skewed digit of
:func:`~smroute.routing.nmodc.bundles.skewed_up` (1% of the triples left
on one cable).  Only the up cable changes, among those that lead closer,
so every route stays minimal and up*/down*.  With 4 VLs on the site above,
SP 8 to 7 (dfsssp's), shift HSD 5.55 to 5.26, host-name HSD 5.60 to 5.66;
on TACC Ranger, A2A 75 to 67.  Over the 24 generated sites
(``research/two_depths.py --part up_skewed``) the shifts' HSD is lower on
18 and higher on 5 (sign test p 0.011), SP lower on 4, RP lower on 5 and
higher on 2, and host-name HSD higher on 17 and lower on 2 (p 0.0007, by
0.6% on average, at most 2%): in host-name order a shift sends a leaf's
hosts to one other leaf's, whose NIDs ``x mod m`` spreads over the cables
as well.  Pure functions on arrays; a loop per leaf and block.
"""

from __future__ import annotations

import numpy as np

from smroute.fabric.graph import components
from smroute.routing.dmodc import INF, UP_PHASE, Destinations
from smroute.routing.nmodc.bundles import skewed_up
from smroute.routing.nmodc.descent import up_groups
from smroute.routing.topology import SwitchGraph

__all__ = ["apart_leaves", "enter_dealt", "up_skewed"]


def apart_leaves(g: SwitchGraph) -> np.ndarray:
    """``(L,)`` int64, ascending: the leaves whose every up cable skips a
    rank (the switches above them are of rank 2 or more)."""
    lo, hi = g.up_pairs()
    top = np.iinfo(np.int64).max
    low = np.full(g.n_switches, top, dtype=np.int64)
    np.minimum.at(low, lo, g.rank[hi])
    return np.flatnonzero(g.is_leaf & (low >= 2) & (low < top))


def up_skewed(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
              leaves: np.ndarray, pi: np.ndarray) -> None:
    """Each of ``leaves`` (:func:`apart_leaves`) sends the end-port
    destinations on the leaves not ranked apart up by the skewed digit
    (module doc; :func:`~smroute.routing.nmodc.bundles.skewed_up`), a leaf
    whose up-neighbours are all top switches by the tops' digit
    (:func:`_top_digit`, ``pi`` the dividers), in place in ``ports`` ``(S,
    W)`` uint8; ``c`` ``(S, S)`` the encoded costs."""
    if not len(leaves):
        return
    others = g.is_leaf.copy()
    others[leaves] = False
    skewed_up(g, c, dest, ports, leaves, others)
    n_up = np.bincount(g.up_pairs()[0], minlength=g.n_switches)
    d = np.flatnonzero(~dest.is_switch & others[dest.target])
    x, tg = dest.nid[d], dest.target[d]
    behind: np.ndarray | None = None  # (built for the first leaf below the tops)
    digits: dict[bytes, tuple[np.ndarray, int] | None] = {}  # (per set of tops)
    for leaf in leaves.tolist():
        ks = g.groups_of(leaf, up=True)
        ups = g.grp_remote[ks]
        if len(ks) < 2 or n_up[ups].any() or not len(d):
            continue  # (not below the tops)
        behind = g.behind() if behind is None else behind
        key = np.sort(ups).tobytes()
        if key not in digits:
            digits[key] = _tops_below(g, behind, n_up, ups, pi)
        got = digits[key]
        if got is None:
            continue
        tops, p = got
        top = tops[_top_digit(x, p, len(tops))]
        at = np.full(g.n_switches, -1, dtype=np.int64)
        at[ups] = ks
        k = at[top]
        ok = (k >= 0) & (c[top, tg] < c[leaf, tg])
        k = k[ok]
        cable = g.grp_ports[g.grp_port_first[k]
                            + (x[ok] // (p * len(tops))) % g.grp_port_count[k]]
        ports[leaf, dest.lid[d[ok]]] = cable


def _tops_below(g: SwitchGraph, behind: np.ndarray, n_up: np.ndarray, ups: np.ndarray,
                pi: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Of a leaf hanging off the tops ``ups``: every top the switches below
    them reach, by GUID (the same order at every such leaf), and the
    largest divider of those switches; ``None`` unless each leaf among
    them is cabled to half of ``ups`` or more and each other switch to
    every one.  Each then chooses among the tops (where a spine below
    reaches one top alone, the leaves under it choose), and a top's way
    down to the spines below is whole (where a cable between them is lost,
    the redirects by load place its destinations)."""
    below = np.flatnonzero(np.isin(behind, ups).any(axis=1) & (g.rank < g.rank[ups].min()))
    cabled = (behind[below][:, None, :] == ups[None, :, None]).any(axis=2)  # (below, ups)
    leaf_ok = 2 * cabled.sum(axis=1) >= len(ups)
    if len(below) < 2 or not np.where(g.is_leaf[below], leaf_ok, cabled.all(axis=1)).all():
        return None  # (the leaf alone, or some switch below chooses no top)
    tops = np.unique(behind[below][behind[below] >= 0])
    tops = tops[n_up[tops] == 0]
    return tops[np.argsort(g.sw_guid[tops], kind="stable")], int(pi[below].max())


def _top_digit(x: np.ndarray, p: int, n: int) -> np.ndarray:
    """Which of ``n`` top switches (or cables into them) NIDs ``x`` take
    (module doc): ``(floor(x / p) + x mod p) mod n``, ``p`` the largest
    divider of the switches below the tops.  A switch below takes the NIDs
    of one ``x mod p``, and ``floor(x / p)`` spreads those over the tops;
    ``x mod p`` spreads consecutive NIDs (a shift's) over them."""
    return (x // p + x % p) % n


def enter_dealt(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                leaves: np.ndarray, pi: np.ndarray) -> None:
    """Route the end-port destinations of ``leaves`` (:func:`apart_leaves`)
    into them by their dealt cables, up to the blocks by every cable of the
    switches below (module doc), in place in ``ports`` ``(S, W)`` uint8;
    ``c`` ``(S, S)`` the encoded costs and ``pi`` ``(S,)`` the dividers."""
    if not len(leaves):
        return
    behind, up_grp = g.behind(), up_groups(g)
    ca = np.flatnonzero(~dest.is_switch)
    strides, member = _child_strides(g, pi)
    unders: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
    climbing: dict[int, list[np.ndarray]] = {}  # (per rank of line switches)
    for leaf in leaves.tolist():
        d = ca[dest.target[ca] == leaf]
        if not len(d):
            continue
        d = d[np.argsort(dest.nid[d], kind="stable")]
        lines = g.grp_remote[g.groups_of(leaf, up=True)]
        above = [g.grp_remote[g.groups_of(x, up=True)] for x in lines.tolist()]
        n_above = np.asarray([len(u) for u in above], dtype=np.int64)
        _enter_tops(g, c, dest, ports, behind, up_grp, leaf, d, lines[n_above == 0], pi)
        # (the tops take no part in a block)
        above = [u for u, n in zip(above, n_above.tolist(), strict=True) if n]
        lines, n_above = lines[n_above > 0], n_above[n_above > 0]
        if not len(lines):
            continue
        # the blocks: the line switches joined by the switches above them
        a = np.concatenate([np.repeat(lines, n_above), *above])
        b = np.concatenate([*above, np.repeat(lines, n_above)])
        label = components(g.n_switches, a, b)
        for block in np.unique(label[lines]).tolist():
            sel = label[lines] == block
            uppers = np.unique(np.concatenate([u for u, x in zip(above, sel, strict=True)
                                               if x]))
            _deal(g, dest, ports, behind, leaf, d, lines[sel], uppers, strides, member,
                  unders)
        climbing.setdefault(int(g.rank[lines].min()), []).append(d)
    for line_rank, ds in climbing.items():
        _up_from_below(g, c, dest, ports, up_grp, leaves, np.concatenate(ds), line_rank, pi)


def _child_strides(g: SwitchGraph, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(strides, member)``: the distinct strides ``(K,)`` of the switches
    below others, and ``(S, K)`` int64 which of them each switch has below
    it.  A switch's stride is its divider times its up groups: it sends an
    upper switch the destinations of one class of NIDs modulo it."""
    lo, hi = g.up_pairs()
    n_up = np.bincount(lo, minlength=g.n_switches)
    of = pi[lo].astype(np.int64) * n_up[lo]
    strides, k = np.unique(of, return_inverse=True)
    member = np.zeros((g.n_switches, len(strides)), dtype=np.int64)
    member[hi, k.ravel()] = 1
    return strides, member


def _deal(g: SwitchGraph, dest: Destinations, ports: np.ndarray, behind: np.ndarray,
          leaf: int, d: np.ndarray, lines: np.ndarray, uppers: np.ndarray,
          strides: np.ndarray, member: np.ndarray,
          unders: dict[bytes, tuple[np.ndarray, np.ndarray]]) -> None:
    """The entries of ``d`` (the destinations on ``leaf``, in NID order)
    through the line switches ``lines`` of one block, ``uppers`` the
    switches above them; ``strides`` / ``member`` as :func:`_child_strides`'s;
    ``unders``: per set of uppers, the switches cabled to them below and
    their ports to them (filled here)."""
    if not len(uppers):
        return
    full = lines[(behind[lines][:, None, :] == uppers[None, :, None]).any(axis=2).all(axis=1)]
    cx, cp = np.nonzero(behind[full] == leaf)  # (each cable of those into the leaf)
    if not len(cx):
        return
    k = np.arange(len(d)) % len(cx)
    at, port = cx[k], cp[k]  # (the entry of each destination: full[at], its port)
    lid, nid = dest.lid[d], dest.nid[d].astype(np.int64)
    # every switch under the uppers climbs to one by the digit of its strides;
    # the entry delivers
    key = uppers.tobytes()
    if key not in unders:  # (the same for every leaf on these uppers)
        below = np.flatnonzero(np.isin(behind, uppers).any(axis=1)
                               & (g.rank < g.rank[uppers].min()))
        unders[key] = (below, np.isin(behind[below], uppers))
    under, up = unders[key]  # (U,), (U, 256)
    up, under = up[under != leaf], under[under != leaf]
    digit = (member[under] @ (nid[None, :] // strides[:, None])) % up.sum(axis=1)[:, None]
    climb = _nth(up, digit)  # (U, D)
    ports[np.ix_(under, lid)] = np.where(under[:, None] == full[at][None, :], port[None, :],
                                         climb)
    # the switches above: down to the entry (by NID among parallel cables)
    to = behind[uppers][:, None, :] == full[None, :, None]  # (uppers, full, 256)
    mask = to[:, at, :]  # (uppers, D, 256)
    ports[np.ix_(uppers, lid)] = _nth(mask, nid[None, :] % mask.sum(axis=2))


def _up_from_below(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                   up_grp: np.ndarray, leaves: np.ndarray, d: np.ndarray, line_rank: int,
                   pi: np.ndarray) -> None:
    """The switches below rank ``line_rank`` (the blocks' line switches),
    but ``leaves``, send the destinations ``d`` of leaves ranked apart up by
    Dmodc's digit over every up group that reaches their leaf, not only
    those that lead closer (module doc), in place in ``ports``; ``up_grp``
    ``(S, U)`` each switch's up groups (-1 padded)."""
    sw = np.flatnonzero((g.rank >= 0) & (g.rank < line_rank))
    sw = sw[~np.isin(sw, leaves)]
    n = (up_grp[sw] >= 0).sum(axis=1)
    sw, n = sw[n >= 2], n[n >= 2]
    lid, x, t = dest.lid[d], dest.nid[d].astype(np.int64), dest.target[d]
    p = np.maximum(pi[sw].astype(np.int64), 1)[:, None]
    k = np.take_along_axis(up_grp[sw], (x[None, :] // p) % n[:, None], axis=1)  # (N, D)
    cable = g.grp_ports[g.grp_port_first[k] + (x[None, :] // (p * n[:, None]))
                        % g.grp_port_count[k]]
    ok = c[g.grp_remote[k], t[None, :]] < INF
    ports[np.ix_(sw, lid)] = np.where(ok, cable, ports[np.ix_(sw, lid)])


def _enter_tops(g: SwitchGraph, c: np.ndarray, dest: Destinations, ports: np.ndarray,
                behind: np.ndarray, up_grp: np.ndarray, leaf: int, d: np.ndarray,
                tops: np.ndarray, pi: np.ndarray) -> None:
    """The entries of ``d`` (the destinations on ``leaf``) through the top
    switches ``tops`` cabled to it (module doc): each destination's entry
    cable by the tops' digit (:func:`_top_digit`, ``n`` the cables, ``pi``
    the dividers); a switch below the tops whose route climbs to a switch
    the entry's top is not above climbs to one it is above (or to the top),
    closer to the leaf; ``c`` the encoded costs, ``up_grp`` ``(S, U)`` each
    switch's up groups (-1 padded)."""
    if len(tops) < 2:
        return
    below = np.flatnonzero(g.rank < g.rank[tops].min())
    below = below[(below != leaf) & (up_grp[below, 0] >= 0)]
    if not len(below):
        return
    cx, cp = np.nonzero(behind[tops] == leaf)  # (each cable of the tops into the leaf)
    lid, x = dest.lid[d], dest.nid[d]
    p = int(pi[below].max())
    k = _top_digit(x, p, len(cx))
    entry = tops[cx[k]]
    ports[entry, lid] = cp[k]
    cur = np.take_along_axis(behind[below], ports[np.ix_(below, lid)].astype(np.int64), axis=1)
    up = (cur >= 0) & (g.rank[np.maximum(cur, 0)] > g.rank[below][:, None])
    under = (cur == entry[None, :]) | (c[entry[None, :], np.maximum(cur, 0)] < UP_PHASE)
    bi, di = np.nonzero(up & ~under)  # (the entries to move)
    if not len(bi):
        return
    s, grp = below[bi], up_grp[below[bi]]  # (K,), (K, U)
    rem = g.grp_remote[np.maximum(grp, 0)]
    t = entry[di][:, None]
    ok = ((grp >= 0) & ((rem == t) | (c[t, rem] < UP_PHASE))
          & (c[rem, leaf] < c[s, leaf][:, None]))
    n = ok.sum(axis=1)
    q = x[di] // np.maximum(pi[s], 1)
    pick = np.take_along_axis(grp, _nth(ok[None], (q % np.maximum(n, 1))[None])[0][:, None],
                              axis=1)[:, 0]
    port = g.grp_ports[g.grp_port_first[pick] + q % g.grp_port_count[pick]]
    keep = n > 0
    ports[s[keep], lid[di[keep]]] = port[keep]


def _nth(mask: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The index of the ``j``-th True of ``mask`` along its last axis: ``mask``
    ``(..., 256)`` bool, ``j`` broadcast against its other axes."""
    if mask.ndim == 2:
        mask = mask[:, None, :]
    return np.argmax(np.cumsum(mask, axis=-1) > j[..., None], axis=-1)
