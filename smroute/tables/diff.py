"""Differences between two sets of forwarding tables (pure, vectorized).

:func:`diff_tables` matches switches by node GUID and compares their linear
forwarding tables LID by LID.  What a subnet manager would have to send to go
from ``old`` to ``new`` is one ``SubnSet(LinearForwardingTable)`` per changed
64-LID block (block ``lid // 64``, :data:`~smroute.tables.lft.BLOCK`), so the
diff counts blocks as well as entries.

Both tables are compared over the wider of their two LID ranges, the narrower
one padded with :data:`~smroute.tables.lft.NO_ROUTE`; LID 0 (not a unicast
LID) is ignored.  The comparison runs on row chunks of at most
:data:`CHUNK_BYTES` so that 3,584 switches x 44,544 LIDs stay cheap in memory.

The result, :class:`TableDiff`, holds flat, sorted arrays of the changed
entries; :meth:`TableDiff.switches` yields them per switch,
:func:`format_diff` renders text and :meth:`TableDiff.to_dict` a JSON-able
dict.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from smroute.tables.lft import BLOCK, NO_ROUTE, ForwardingTables

__all__ = ["CHUNK_BYTES", "SwitchDiff", "TableDiff", "changed_blocks", "diff_tables", "lid_names",
           "format_diff"]

#: Largest ``(rows x LIDs)`` slab compared at once, in bytes of one table.
CHUNK_BYTES = 1 << 22


@dataclass(frozen=True)
class SwitchDiff:
    """Changes of one switch present in both tables.

    lids ``(K,)`` int64 ascending, old_ports / new_ports ``(K,)`` uint8
    (:data:`NO_ROUTE` = no route), blocks ``(B,)`` int64 ascending: the 64-LID
    blocks that would be rewritten.  ``old_lid`` / ``new_lid``: the switch's
    own LID in each table (0 if unknown).
    """

    guid: int
    desc: str
    old_lid: int
    new_lid: int
    lids: np.ndarray
    old_ports: np.ndarray
    new_ports: np.ndarray
    blocks: np.ndarray


@dataclass(frozen=True, eq=False)
class TableDiff:
    """Result of :func:`diff_tables`.

    common_guid ``(C,)`` uint64: GUIDs of the switches in both tables,
    ascending; common_desc: their descriptions (the new table's, else the
    old's); old_lid / new_lid ``(C,)`` int64: their LIDs in each table.
    Changed entries, sorted by (switch, LID), as flat arrays of length ``E``:
    entry_switch (int64 index into ``common_guid``), entry_lid (int64),
    entry_old / entry_new (uint8 ports).  Changed blocks, sorted, length
    ``B``: block_switch (int64 index into ``common_guid``), block (int64).
    only_old_guid / only_new_guid (uint64, ascending) and their descriptions:
    switches present in one table only.  width: LIDs compared (``max LID + 1``).
    """

    common_guid: np.ndarray
    common_desc: tuple[str, ...]
    old_lid: np.ndarray
    new_lid: np.ndarray
    entry_switch: np.ndarray
    entry_lid: np.ndarray
    entry_old: np.ndarray
    entry_new: np.ndarray
    block_switch: np.ndarray
    block: np.ndarray
    only_old_guid: np.ndarray
    only_old_desc: tuple[str, ...]
    only_new_guid: np.ndarray
    only_new_desc: tuple[str, ...]
    width: int

    # ----------------------------------------------------------- totals
    @property
    def identical(self) -> bool:
        """True if both tables hold the same switches with the same entries."""
        return (
            self.entries_changed == 0
            and len(self.only_old_guid) == 0
            and len(self.only_new_guid) == 0
        )

    @property
    def entries_changed(self) -> int:
        """Changed (switch, LID) entries."""
        return int(self.entry_lid.shape[0])

    @property
    def lids_changed(self) -> int:
        """Distinct destination LIDs whose route changed on at least one switch."""
        return int(np.count_nonzero(np.bincount(self.entry_lid)))  # (np.unique hashes: slower)

    @property
    def blocks_changed(self) -> int:
        """(switch, 64-LID block) pairs to rewrite: LFT SubnSet MADs needed."""
        return int(self.block.shape[0])

    @property
    def switches_changed(self) -> int:
        """Switches present in both tables with at least one changed entry."""
        return len(self.changed_switch_indices())

    @property
    def switches_compared(self) -> int:
        return int(self.common_guid.shape[0])

    def changed_switch_indices(self) -> np.ndarray:
        """Indices into ``common_guid`` of the changed switches, ascending."""
        e = self.entry_switch  # sorted: the runs' first elements
        return e[np.flatnonzero(np.diff(e, prepend=-1))]

    # ----------------------------------------------------------- views
    def switch(self, index: int) -> SwitchDiff:
        """The changes of ``common_guid[index]`` (empty arrays if unchanged)."""
        lo, hi = np.searchsorted(self.entry_switch, [index, index + 1])
        blo, bhi = np.searchsorted(self.block_switch, [index, index + 1])
        return SwitchDiff(
            guid=int(self.common_guid[index]),
            desc=self.common_desc[index],
            old_lid=int(self.old_lid[index]),
            new_lid=int(self.new_lid[index]),
            lids=self.entry_lid[lo:hi],
            old_ports=self.entry_old[lo:hi],
            new_ports=self.entry_new[lo:hi],
            blocks=self.block[blo:bhi],
        )

    def switches(self) -> Iterator[SwitchDiff]:
        """Per changed switch, in GUID order."""
        for i in self.changed_switch_indices().tolist():
            yield self.switch(i)

    def summary(self) -> str:
        """One line: identical, or the totals."""
        if self.identical:
            return (f"identical: {self.switches_compared} switches, "
                    f"LIDs 1-{max(self.width - 1, 0)}")
        return (
            f"{self.switches_changed} of {self.switches_compared} switches changed: "
            f"{self.entries_changed} entries, {self.lids_changed} LIDs, "
            f"{self.blocks_changed} LFT blocks to rewrite; "
            f"{len(self.only_old_guid)} switches only in old, "
            f"{len(self.only_new_guid)} only in new"
        )

    def to_dict(self, max_entries: int | None = None,
                names: Sequence[str] | None = None) -> dict[str, Any]:
        """JSON-able dict.  ``max_entries``: list at most that many changed
        entries in total (``None``: all); totals and blocks are always complete
        and ``truncated`` says whether entries were left out.  ``names``: the
        destination of each LID (:func:`lid_names`), given for the changed LIDs
        listed as ``{"lid_names": {"LID": name}}``."""
        listed = 0
        switches = []
        named: dict[str, str] = {}
        for sd in self.switches():
            room = len(sd.lids) if max_entries is None else max(0, max_entries - listed)
            k = min(room, len(sd.lids))
            listed += k
            named.update((str(lid), n) for lid in sd.lids[:k].tolist()
                         if (n := _name(names, lid)))
            switches.append({
                "guid": f"{sd.guid:#018x}",
                "desc": sd.desc,
                "old_lid": sd.old_lid,
                "new_lid": sd.new_lid,
                "lids_changed": int(len(sd.lids)),
                "blocks": sd.blocks.tolist(),
                "changes": [
                    [lid, _port_json(o), _port_json(n)]
                    for lid, o, n in zip(
                        sd.lids[:k].tolist(), sd.old_ports[:k].tolist(),
                        sd.new_ports[:k].tolist(), strict=True,
                    )
                ],
            })
        return {
            "identical": self.identical,
            "totals": {
                "switches_compared": self.switches_compared,
                "switches_changed": self.switches_changed,
                "entries_changed": self.entries_changed,
                "lids_changed": self.lids_changed,
                "blocks_changed": self.blocks_changed,
                "switches_only_old": int(len(self.only_old_guid)),
                "switches_only_new": int(len(self.only_new_guid)),
            },
            "block_size": BLOCK,
            "max_lid": max(self.width - 1, 0),
            "truncated": listed < self.entries_changed,
            "switches": switches,
            **({"lid_names": named} if names is not None else {}),
            "only_old": [
                {"guid": f"{g:#018x}", "desc": d}
                for g, d in zip(self.only_old_guid.tolist(), self.only_old_desc, strict=True)
            ],
            "only_new": [
                {"guid": f"{g:#018x}", "desc": d}
                for g, d in zip(self.only_new_guid.tolist(), self.only_new_desc, strict=True)
            ],
        }


def _port_json(p: int) -> int | None:
    return None if p == NO_ROUTE else int(p)


def _port_text(p: int) -> str:
    return "none" if p == NO_ROUTE else str(p)


def _padded(ports: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray:
    """``ports[rows]`` cut or padded with NO_ROUTE to ``width`` columns."""
    w = min(width, ports.shape[1])
    if w == width:
        return ports[rows, :width]
    out = np.full((len(rows), width), NO_ROUTE, dtype=np.uint8)
    out[:, :w] = ports[rows, :w]
    return out


def changed_blocks(e_sw: np.ndarray, e_lid: np.ndarray,
                   width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(block_switch, block)`` ``(K,)`` int64: the (switch, 64-LID block)
    pairs holding the changed entries ``e_sw`` / ``e_lid`` ``(N,)`` int64,
    sorted by switch then LID (so the blocks are runs, no sort needed), of
    tables ``width`` LIDs wide."""
    n_blocks = width // BLOCK + 1
    keys = e_sw * n_blocks + e_lid // BLOCK
    keys = keys[np.flatnonzero(np.diff(keys, prepend=-1))]
    return keys // n_blocks, keys % n_blocks


def diff_tables(old: ForwardingTables, new: ForwardingTables) -> TableDiff:
    """Compare ``old`` and ``new`` switch by switch (matched by node GUID)."""
    og = np.asarray(old.switch_guid, dtype=np.uint64)
    ng = np.asarray(new.switch_guid, dtype=np.uint64)
    common, oi, ni = np.intersect1d(og, ng, assume_unique=False, return_indices=True)
    only_old = np.setdiff1d(og, ng)
    only_new = np.setdiff1d(ng, og)
    width = max(int(old.ports.shape[1]), int(new.ports.shape[1]))
    c = len(common)

    # per slab of rows: the changed entries (int32 offsets in the slab) and
    # the changed 64-LID blocks; the entries' switch and LID arrays are
    # filled once at the end (no per-entry temporaries beyond the offsets)
    parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    keys: list[np.ndarray] = []
    n_blocks = width // BLOCK + 1
    step = max(1, CHUNK_BYTES // max(width, 1))
    for r0 in range(0, c, step):
        r1 = min(c, r0 + step)
        a = _padded(old.ports, oi[r0:r1], width)
        b = _padded(new.ports, ni[r0:r1], width)
        ne = a != b
        if width:
            ne[:, 0] = False
        at = np.flatnonzero(ne)  # row-major: by switch, then LID
        if len(at):
            parts.append((r0, at.astype(np.int32), a.ravel()[at], b.ravel()[at]))
            rr, bb = np.nonzero(np.logical_or.reduceat(ne, np.arange(0, width, BLOCK), axis=1))
            keys.append((rr + r0) * n_blocks + bb)
    n = sum(len(p[1]) for p in parts)
    e_sw, e_lid = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    o = 0
    for r0, at, _, _ in parts:
        np.divmod(at, width, out=(e_sw[o:o + len(at)], e_lid[o:o + len(at)]))
        e_sw[o:o + len(at)] += r0
        o += len(at)
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)

    def cat(k: int) -> np.ndarray:
        return (np.concatenate([p[k] for p in parts]) if parts
                else np.zeros(0, dtype=np.uint8))

    def descs(t: ForwardingTables, rows: np.ndarray) -> tuple[str, ...]:
        d = t.switch_desc
        return tuple(d[i] if i < len(d) else "" for i in rows.tolist())

    def rows_of(guids: np.ndarray, all_guids: np.ndarray) -> np.ndarray:
        order = np.argsort(all_guids, kind="stable")
        return order[np.searchsorted(all_guids[order], guids)]

    new_desc = descs(new, ni)
    old_desc = descs(old, oi)
    common_desc = tuple(n or o for n, o in zip(new_desc, old_desc, strict=True))
    return TableDiff(
        common_guid=common,
        common_desc=common_desc,
        old_lid=np.asarray(old.switch_lid, dtype=np.int64)[oi],
        new_lid=np.asarray(new.switch_lid, dtype=np.int64)[ni],
        entry_switch=e_sw,
        entry_lid=e_lid,
        entry_old=cat(2),
        entry_new=cat(3),
        block_switch=key // n_blocks,
        block=key % n_blocks,
        only_old_guid=only_old,
        only_old_desc=descs(old, rows_of(only_old, og)),
        only_new_guid=only_new,
        only_new_desc=descs(new, rows_of(only_new, ng)),
        width=width,
    )


def lid_names(width: int, *descs: Sequence[str] | None) -> tuple[str, ...] | None:
    """The destination of each LID below ``width``: the first non-empty name
    the per-LID descriptions ``descs`` give (e.g. the new table's, the old
    table's, a fabric's :func:`~smroute.tables.lft.lid_labels`); ``None`` if
    none is given."""
    given = [d for d in descs if d is not None]
    if not given:
        return None
    return tuple(next((d[lid] for d in given if lid < len(d) and d[lid]), "")
                 for lid in range(width))


def _quoted(name: str) -> str:
    return f' "{name}"' if name else ""


def _name(names: Sequence[str] | None, lid: int) -> str:
    return names[lid] if names is not None and lid < len(names) else ""


def format_diff(d: TableDiff, *, max_entries: int | None = 1000,
                names: Sequence[str] | None = None) -> list[str]:
    """Human-readable lines: totals, switches only in one table, then per changed
    switch its blocks and ``LID: old -> new`` entries (at most ``max_entries``
    entries in total, ``None`` for all; a line says how many were left out).
    ``names``: the destination of each LID (:func:`lid_names`), quoted after
    the LID."""
    out = [d.summary()]
    for g, desc in zip(d.only_old_guid.tolist(), d.only_old_desc, strict=True):
        out.append(f'- switch {g:#018x} "{desc}": only in old')
    for g, desc in zip(d.only_new_guid.tolist(), d.only_new_desc, strict=True):
        out.append(f'+ switch {g:#018x} "{desc}": only in new')
    listed = 0
    for sd in d.switches():
        if sd.old_lid == sd.new_lid or not (sd.old_lid and sd.new_lid):
            lid_note = f"LID {sd.new_lid or sd.old_lid}"  # 0: unknown in that table
        else:
            lid_note = f"LID {sd.old_lid} -> {sd.new_lid}"
        blocks = ", ".join(str(b) for b in sd.blocks.tolist())
        out.append(
            f'switch {sd.guid:#018x} "{sd.desc}" ({lid_note}): {len(sd.lids)} LIDs changed '
            f"in {len(sd.blocks)} blocks [{blocks}]"
        )
        room = len(sd.lids) if max_entries is None else max(0, max_entries - listed)
        k = min(room, len(sd.lids))
        listed += k
        out.extend(
            f"  0x{lid:04x}{_quoted(_name(names, lid))}: {_port_text(o)} -> {_port_text(n)}"
            for lid, o, n in zip(
                sd.lids[:k].tolist(), sd.old_ports[:k].tolist(), sd.new_ports[:k].tolist(),
                strict=True,
            )
        )
    if listed < d.entries_changed:
        out.append(f"... {d.entries_changed - listed} more changed entries not listed")
    return out
