"""Validation of forwarding tables by walking them.

From every routed switch (every CA's traffic enters at its leaf switch, so
this covers every CA source) to every destination LID, follow the tables hop
by hop, all pairs at once (numpy, in column chunks), and classify each walk:
delivered, dead end (no route, unlinked port, or a port to the wrong
end-port), loop (more hops than any up*/down* path needs), up*/down*
violation (an up or sideways move after a down move, or a sideways move),
and whether the hop count is minimal (equals the up*/down* cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smroute.routing.dmodc import INF, NO_ROUTE, Destinations
from smroute.routing.topology import SwitchGraph, next_switch

__all__ = ["Validation", "Failure", "validate", "walk"]

OK, DEAD_END, LOOP, UPDOWN = 0, 1, 2, 3
REASONS = {DEAD_END: "no route (dead end)", LOOP: "forwarding loop",
           UPDOWN: "not an up*/down* path"}
_CHUNK = 2048


@dataclass(frozen=True)
class Failure:
    """One unroutable (source switch, destination LID) pair, by name."""

    source_guid: int
    source_desc: str
    lid: int
    dest_desc: str
    reason: str

    def __str__(self) -> str:
        return (f'{self.source_guid:#018x} "{self.source_desc}" -> LID {self.lid} '
                f'"{self.dest_desc}": {self.reason}')


@dataclass(frozen=True)
class Validation:
    """Result of :func:`validate`.

    pairs: (switch, LID) pairs walked; delivered / dead_ends / loops /
    updown_violations / non_minimal: counts; ca_pairs_unroutable: CA-to-CA
    pairs affected (each CA source enters at its leaf); failures: the first
    ``max_failures`` failing pairs by name.
    """

    pairs: int
    delivered: int
    dead_ends: int
    loops: int
    updown_violations: int
    non_minimal: int
    ca_pairs_unroutable: int
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.delivered == self.pairs and self.updown_violations == 0

    def summary(self) -> str:
        if self.ok:
            return (f"valid: {self.pairs} switch-to-LID walks delivered, up*/down* only, "
                    f"{self.non_minimal} non-minimal")
        return (f"INVALID: {self.pairs - self.delivered} of {self.pairs} walks fail "
                f"({self.dead_ends} dead ends, {self.loops} loops, "
                f"{self.updown_violations} up*/down* violations); "
                f"{self.ca_pairs_unroutable} CA pairs unroutable")


def walk(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, sources: np.ndarray,
    *, nxt: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Walk from every switch in ``sources`` to every destination of ``dest``.

    Returns ``(status, hops)``, both shape ``(len(sources), D)``: status int8
    (OK, DEAD_END, LOOP, UPDOWN) and hops int16 (switch-to-switch moves).
    """
    if nxt is None:
        nxt = next_switch(g)
    max_hops = 2 * max(g.max_rank, 0) + 2
    rank = g.rank
    n_src, n_d = len(sources), len(dest.lid)
    status = np.zeros((n_src, n_d), dtype=np.int8)
    hops = np.zeros((n_src, n_d), dtype=np.int16)
    for c0 in range(0, n_d, _CHUNK):
        sl = slice(c0, min(c0 + _CHUNK, n_d))
        lid, tgt, local = dest.lid[sl], dest.target[sl], dest.local_port[sl]
        cur = np.repeat(sources[:, None], sl.stop - sl.start, axis=1)
        lid_b = np.broadcast_to(lid[None, :], cur.shape)
        tgt_b = np.broadcast_to(tgt[None, :], cur.shape)
        local_b = np.broadcast_to(local[None, :], cur.shape)
        went_down = np.zeros(cur.shape, dtype=bool)
        active = np.ones(cur.shape, dtype=bool)
        st = np.full(cur.shape, LOOP, dtype=np.int8)
        hp = np.zeros(cur.shape, dtype=np.int16)
        for _ in range(max_hops + 1):
            ai = np.nonzero(active)
            if len(ai[0]) == 0:
                break
            cc = cur[ai]
            p = ports[cc, lid_b[ai]].astype(np.int64)
            done = (cc == tgt_b[ai]) & (p == local_b[ai])
            nx = np.where(p == NO_ROUTE, -1, nxt[cc, np.minimum(p, nxt.shape[1] - 1)])
            dead = ~done & (nx < 0)  # includes TO_END_PORT of the wrong end-port
            moving = ~done & ~dead
            up = moving & (rank[np.maximum(nx, 0)] > rank[cc])
            down = moving & (rank[np.maximum(nx, 0)] < rank[cc])
            side = moving & ~up & ~down
            wd = went_down[ai]
            bad = (up & wd) | side
            new_st = st[ai]
            new_st[done] = OK
            new_st[dead] = DEAD_END
            new_st[bad] = UPDOWN
            st[ai] = new_st
            fin = done | dead | bad
            a2 = (ai[0][~fin], ai[1][~fin])
            active[ai[0][fin], ai[1][fin]] = False
            cur[a2] = nx[~fin]
            went_down[a2] = wd[~fin] | down[~fin]
            hp[a2] += 1
        status[:, sl] = st
        hops[:, sl] = hp
    return status, hops


def validate(
    g: SwitchGraph, ports: np.ndarray, dest: Destinations, costs: np.ndarray,
    *, switch_desc: tuple[str, ...] = (), lid_desc: tuple[str, ...] | None = None,
    max_failures: int = 50,
) -> Validation:
    """Walk all (routed switch, destination) pairs and report (see module doc)."""
    sources = np.flatnonzero(g.rank >= 0)
    status, hops = walk(g, ports, dest, sources)
    ok = status == OK
    minimal = costs[sources[:, None], dest.target[None, :]].astype(np.int64)
    non_min = int((ok & (minimal < INF) & (hops > minimal)).sum())
    # CA pairs: CA sources per leaf x CA destinations failing from that leaf
    ca_per_switch = np.bincount(g.ep_switch, minlength=g.n_switches)[sources]
    ca_dest = ~dest.is_switch
    ca_unroutable = int(((~ok[:, ca_dest]).sum(axis=1) * ca_per_switch).sum())
    failures = []
    bi, di = np.nonzero(~ok)
    for b, d in zip(bi[:max_failures].tolist(), di[:max_failures].tolist(), strict=True):
        s = int(sources[b])
        lid = int(dest.lid[d])
        failures.append(Failure(
            source_guid=int(g.sw_guid[s]),
            source_desc=switch_desc[s] if switch_desc else "",
            lid=lid,
            dest_desc=lid_desc[lid] if lid_desc is not None and lid < len(lid_desc) else "",
            reason=REASONS[int(status[b, d])],
        ))
    return Validation(
        pairs=int(status.size),
        delivered=int(ok.sum()),
        dead_ends=int((status == DEAD_END).sum()),
        loops=int((status == LOOP).sum()),
        updown_violations=int((status == UPDOWN).sum()),
        non_minimal=non_min,
        ca_pairs_unroutable=ca_unroutable,
        failures=failures,
    )
