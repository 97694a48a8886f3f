"""What the previous daemon acknowledged, rebuilt from a state database that
may be damaged (:func:`in_force`; used by :mod:`smroute.service.state.resume`).

Sources, each checked (row checksums, :mod:`smroute.service.state.salvage`):

* the last commit as recorded in ``meta`` (base fabric, down set, journal
  position, epoch id);
* the high-water mark beside the database (epoch id, base fabric, the down
  set or its digest, journal position), written after it: it says which
  commit was the last one and what its down set was;
* the stored epochs (each with its down set and journal position): the last
  commit's down set when ``meta`` lost it;
* the journal after that position, which must be whole: no damaged row, no
  gap up to the last position ever given, every event applicable.

Whatever cannot be rebuilt is named in :attr:`InForce.lost`; the daemon then
starts degraded (:mod:`smroute.service.degraded`).
Epoch ids continue after the highest of every source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from smroute.fabric.faults import DownSet, FaultEvent, FaultEventError, apply_events
from smroute.fabric.model.arrays import Fabric
from smroute.service.state import codec
from smroute.service.state.salvage import MAX_EPOCH_ID, HighWater, down_digest, read_high_water
from smroute.service.state.store import JournalRow, StateStore

__all__ = ["InForce", "describe", "in_force"]

LogFn = Callable[..., None]


@dataclass
class InForce:
    """The acknowledged state as rebuilt: base fabric (``None`` if none or
    lost), its down set, the journal position included and events replayed,
    the highest epoch id ever committed, and what was lost (empty: all of it
    was rebuilt)."""

    base: Fabric | None = None
    down: DownSet = field(default_factory=DownSet)
    seq: int = 0
    journal_events: int = 0
    last_epoch_id: int = 0
    lost: list[str] = field(default_factory=list)
    high_water: HighWater | None = None
    #: the last commit's down set and journal position (before the replay)
    commit: tuple[DownSet, int] = (DownSet(), 0)


def _id(text: str | None) -> int:
    """An epoch id from ``meta`` (0 if absent or not a sane id)."""
    try:
        v = int(text or "0")
    except ValueError:
        return 0
    return v if 0 <= v <= MAX_EPOCH_ID else 0


def _digest(down: DownSet) -> str:
    return down_digest(codec.down_to_json(down))


def _from_meta(meta: dict[str, str], base_hash: str) -> tuple[DownSet, int] | None:
    """The last commit's down set and journal position per ``meta`` (``None``
    if ``meta`` lost them)."""
    if "down_base" not in meta:
        return None
    if meta["down_base"] != base_hash:  # a fabric loaded after the last commit
        return DownSet(), 0
    try:
        seq = int(meta["down_seq"])
        return codec.down_from_json(meta["down"]), seq
    except (KeyError, ValueError):
        return None


def _fold(base: Fabric, down: DownSet, rows: list[JournalRow]) -> DownSet | None:
    """``down`` with journaled ``rows`` applied (``None`` if one does not apply)."""
    try:
        for j in rows:
            down = apply_events(base, down, [FaultEvent(j.kind, j.guid, j.port)], "journal")
    except FaultEventError:
        return None
    return down


def _from_epochs(store: StateStore, base: Fabric, hw: HighWater) -> tuple[DownSet, int] | None:
    """The down set the high-water mark names: a stored epoch's, with the
    journal between its position and the mark's folded in."""
    if hw.down_sha == _digest(DownSet()):
        return DownSet(), hw.journal_seq
    try:  # the mark's own copy
        down = codec.down_from_json(hw.down) if hw.down else None
    except codec.CodecError:
        down = None
    if down is not None and _digest(down) == hw.down_sha:
        return down, hw.journal_seq
    rows, _ = store.journal_rows(0)
    for eid in store.epoch_ids():
        row = store.epoch(eid)
        if row is None or row.base_hash != hw.base_hash or row.journal_seq > hw.journal_seq:
            continue
        try:
            down = codec.down_from_json(row.down)
        except codec.CodecError:
            continue
        step = [j for j in rows if row.journal_seq < j.seq <= hw.journal_seq]
        if len(step) == hw.journal_seq - row.journal_seq and down is not None:
            down = _fold(base, down, step)
            if down is not None and _digest(down) == hw.down_sha:
                return down, hw.journal_seq
    return None


def _last_commit(store: StateStore, meta: dict[str, str], hw: HighWater | None,
                 base: Fabric, damaged: bool) -> tuple[DownSet, int] | None:
    """The down set and journal position of the last commit (``None``: lost)."""
    base_hash = base.content_hash
    got = _from_meta(meta, base_hash)
    if hw is None or hw.base_hash != base_hash:
        # no mark (an older daemon's database), or meta is newer than it
        if got is None and not damaged and "last_epoch_id" not in meta:
            return DownSet(), 0  # nothing committed on this base yet
        return got
    if got is not None and (_id(meta.get("last_epoch_id")) > hw.epoch_id
                            or (_digest(got[0]), got[1]) == (hw.down_sha, hw.journal_seq)):
        return got
    return _from_epochs(store, base, hw)


def in_force(store: StateStore, fabric: Callable[[str], Fabric], log: LogFn) -> InForce:
    """Rebuild what was acknowledged (module doc); ``fabric(hash)``: a stored
    base fabric (:class:`~smroute.service.state.codec.CodecError` if it
    cannot be read).  :class:`StateError` if the database cannot be read."""
    out = InForce()
    meta = store.meta()
    hw, problem = read_high_water(store.path)
    if problem:
        log("error", "state_high_water_unreadable", error=problem)
    out.high_water = hw
    ids = [_id(meta.get("last_epoch_id")), hw.epoch_id if hw else 0]
    ids += [i for i in store.epoch_ids()[:1] if 0 <= i <= MAX_EPOCH_ID]
    out.last_epoch_id = max(ids)
    damaged = bool(store.damage) or store.moved_aside is not None
    base_hash = meta.get("base_hash") or (hw.base_hash if hw else "")
    if not base_hash:  # lost if anything was ever committed (or the mark is damaged)
        if out.last_epoch_id or problem:
            out.lost.append("the base fabric in force" + (
                f" (epoch {out.last_epoch_id} was committed)" if out.last_epoch_id else ""))
        return out
    try:
        out.base = fabric(base_hash)
    except codec.CodecError as err:
        out.lost.append(f"the base fabric {base_hash[:12]} ({err})")
        return out
    point = _last_commit(store, meta, hw, out.base, damaged)
    if point is None:
        out.lost.append("the down set of the last commit" + (
            f" (epoch {hw.epoch_id})" if hw is not None else ""))
        return out
    out.down, out.seq = out.commit = point
    _replay(store, out, log)
    return out


def _replay(store: StateStore, out: InForce, log: LogFn) -> None:
    """Fold the journal after ``out.seq`` into ``out.down`` (a damaged row, a
    gap or an event that no longer applies is a loss)."""
    assert out.base is not None
    base = out.base
    got, bad = store.journal_rows(out.seq)
    hw = out.high_water
    high = max(store.journal_high(), hw.journal_high if hw is not None else 0)
    rows = {j.seq: j for j in got}
    if hw is not None and hw.base_hash == base.content_hash:  # the mark's copies
        for s, kind, guid, port in hw.pending:
            if s > out.seq:
                rows.setdefault(s, JournalRow(s, base.content_hash, kind, guid, port))
    missing = [s for s in range(out.seq + 1, high + 1) if s not in rows]
    if missing or (bad and max(rows, default=0) < high):
        out.lost.append(f"journaled fault events (of positions {out.seq + 1}..{high}, "
                        f"{len(missing) or bad} are missing or damaged)")
    down, seq = out.down, out.seq
    for j in sorted(rows.values(), key=lambda r: r.seq):
        if j.base_hash != base.content_hash:
            continue
        try:
            down = apply_events(base, down, [FaultEvent(j.kind, j.guid, j.port)], "journal")
        except FaultEventError as err:
            out.lost.append(f"journaled fault event {j.seq} ({err})")
        seq, out.journal_events = j.seq, out.journal_events + 1
    out.down, out.seq = down, max(seq, out.seq)


def describe(out: InForce) -> dict[str, Any]:
    """Log fields for what was rebuilt."""
    return {"down": out.down.summary(), "journal_events": out.journal_events,
            "last_committed": out.last_epoch_id, "lost": "; ".join(out.lost) or None}

