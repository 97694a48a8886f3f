"""Translation between the daemon's core objects and the protobuf messages of
``smroute.v1`` (no gRPC here): epochs, validations, diffs, fabric summaries,
fault events (the fault kinds map to the proto enum here, at the edge) and
the streamed tables (LFT blocks encoded once per row, as protobuf bytes).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.routing.validate import Validation
from smroute.service.core import MAX_LISTED_ENTRIES
from smroute.service.epochs import Epoch, FaultRecord, padded_blocks
from smroute.service.errors import ServiceError, Status
from smroute.service.rpc._gen import smroute_pb2 as pb
from smroute.service.sequencer import FaultEvent
from smroute.tables.diff import TableDiff, diff_tables
from smroute.tables.lft import BLOCK

__all__ = [
    "changes_msg",
    "diff_summary_msg",
    "down_items_msgs",
    "epoch_msg",
    "event_msgs",
    "events_from_msgs",
    "fabric_summary_msg",
    "table_messages",
]

_KIND_NAMES = {
    pb.FaultEvent.LINK_DOWN: "link_down", pb.FaultEvent.LINK_UP: "link_up",
    pb.FaultEvent.SWITCH_DOWN: "switch_down", pb.FaultEvent.SWITCH_UP: "switch_up",
    pb.FaultEvent.CA_DOWN: "ca_down", pb.FaultEvent.CA_UP: "ca_up",
}
_KIND_ENUM = {v: k for k, v in _KIND_NAMES.items()}

def _validation_msg(v: Validation | str) -> pb.Validation:
    if isinstance(v, str):
        if v == "pending":
            return pb.Validation(state=pb.Validation.PENDING, summary="validation pending")
        return pb.Validation(state=pb.Validation.SKIPPED, summary=v)
    return pb.Validation(
        state=pb.Validation.DONE, ok=v.ok, pairs=v.pairs, delivered=v.delivered,
        dead_ends=v.dead_ends, loops=v.loops, updown_violations=v.updown_violations,
        non_minimal=v.non_minimal, ca_pairs_unroutable=v.ca_pairs_unroutable,
        summary=v.summary(), failures=[str(f) for f in v.failures],
    )


def diff_summary_msg(d: TableDiff | None) -> pb.DiffSummary:
    """The DiffSummary message of ``d`` (empty for ``None``)."""
    if d is None:
        return pb.DiffSummary()
    return pb.DiffSummary(
        identical=d.identical, switches_compared=d.switches_compared,
        switches_changed=d.switches_changed, entries_changed=d.entries_changed,
        lids_changed=d.lids_changed, blocks_changed=d.blocks_changed,
        switches_only_a=len(d.only_old_guid), switches_only_b=len(d.only_new_guid),
    )


def changes_msg(d: TableDiff, max_entries: int) -> tuple[list[pb.SwitchChange], bool]:
    limit = min(max_entries, MAX_LISTED_ENTRIES)
    listed = 0
    out = []
    for sd in d.switches():
        k = min(len(sd.lids), max(0, limit - listed))
        listed += k
        out.append(pb.SwitchChange(
            guid=sd.guid, desc=sd.desc, old_lid=sd.old_lid, new_lid=sd.new_lid,
            lids_changed=len(sd.lids), blocks=sd.blocks.tolist(),
            changes=[pb.EntryChange(lid=lid, old_port=o, new_port=n) for lid, o, n in zip(
                sd.lids[:k].tolist(), sd.old_ports[:k].tolist(), sd.new_ports[:k].tolist(),
                strict=True)],
        ))
    return out, listed < d.entries_changed


def epoch_msg(ep: Epoch, validation: Validation | str | None = None) -> pb.Epoch:
    """The wire form of an epoch (``validation``: the store's result, if known)."""
    t = ep.tables
    return pb.Epoch(
        id=ep.id, parent_id=ep.parent_id, cause=ep.cause, fabric_hash=ep.fabric_hash,
        base_fabric_hash=ep.base_hash, algorithm=ep.algorithm, lmc=ep.lmc,
        switches=t.n_switches, max_lid=t.max_lid, tables_sha256=ep.tables_sha256,
        committed_unix_s=ep.committed_at, timings=dict(ep.timings),
        faults=event_msgs(ep.faults),
        down_links=ep.down[0], down_switches=ep.down[1], down_cas=ep.down[2],
        validation=_validation_msg(validation if validation is not None else "skipped"),
        diff_from_parent=diff_summary_msg(ep.diff),
        routing_mode=ep.result.mode, routing_mode_reason=ep.result.mode_reason,
        turn_lids=ep.result.turn_lids, instance_id=ep.instance, resumed=ep.resumed,
        vls=ep.result.lanes.n_vls if ep.result.lanes is not None else 1,
        sls=ep.result.lanes.n_sls if ep.result.lanes is not None else 1,
        max_vls=ep.max_vls, max_vls_reason=ep.max_vls_reason,
    )


def down_items_msgs(ep: Epoch) -> list[pb.FaultEvent]:
    """Every item down in ``ep`` as a ``*_DOWN`` event (links by their first
    end), sorted (``GetEpoch(include_down_items)``)."""
    kinds = {"link": pb.FaultEvent.LINK_DOWN, "switch": pb.FaultEvent.SWITCH_DOWN,
             "ca": pb.FaultEvent.CA_DOWN}
    return [pb.FaultEvent(kind=kinds[k], node_guid=g, port=p)
            for k, g, p in sorted(ep.down_items)]


def fabric_summary_msg(f: Fabric, source: str) -> pb.FabricSummary:
    """The FabricSummary message of ``f`` loaded from ``source``."""
    return pb.FabricSummary(
        content_hash=f.content_hash, switches=len(f.switches), cas=len(f.cas),
        routers=int((f.node_type == NodeType.ROUTER).sum()), links=f.n_links,
        max_lid=max(len(f.lid_to_port) - 1, 0), source=source,
    )


def event_msgs(events: Iterable[FaultEvent | FaultRecord]) -> list[pb.FaultEvent]:
    """:class:`FaultEvent` (or an epoch's :class:`FaultRecord`) -> FaultEvent messages."""
    return [pb.FaultEvent(kind=_KIND_ENUM[e.kind], node_guid=e.guid, port=e.port)
            for e in events]


def events_from_msgs(msgs: Sequence[pb.FaultEvent]) -> list[FaultEvent]:
    """FaultEvent messages -> :class:`FaultEvent` (INVALID_ARGUMENT naming ``events[i]``)."""
    out = []
    for i, m in enumerate(msgs):
        kind = _KIND_NAMES.get(m.kind)
        if kind is None:
            raise ServiceError(Status.INVALID_ARGUMENT,
                               f"events[{i}]: kind is unset or unknown ({m.kind}); expected "
                               "LINK_DOWN, LINK_UP, SWITCH_DOWN, SWITCH_UP, CA_DOWN or CA_UP")
        if kind.startswith("link") and m.port == 0:
            raise ServiceError(Status.INVALID_ARGUMENT,
                               f"events[{i}] ({kind} {m.node_guid:#018x}): port is 0; "
                               "expected the port number of the link on that node")
        out.append(FaultEvent(kind, int(m.node_guid), int(m.port)))
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@functools.lru_cache(maxsize=1024)
def _block_prefix(index: int) -> bytes:
    """Wire bytes of ``SwitchTable.blocks`` (field 4) entry ``index`` up to its
    64 port bytes: tag, length, ``index`` (field 1), ``ports`` tag and length."""
    body = b"\x08" + _varint(index) + b"\x12" + _varint(BLOCK)
    return b"\x22" + _varint(len(body) + BLOCK) + body


def _encode_full(ports: np.ndarray) -> np.ndarray:
    """Every block of every row of ``ports`` (``(R, W)`` uint8) in wire form,
    ``(R, L)`` uint8: row ``r`` is what :func:`_encode_blocks` gives for all of
    its blocks, laid out with numpy for all rows at once."""
    padded = padded_blocks(ports)  # (R, nb, 64)
    r, nb, _ = padded.shape
    prefixes = [_block_prefix(i) for i in range(nb)]
    plen = np.array([len(p) for p in prefixes], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(plen + BLOCK)])
    pre_pos = np.repeat(off[:-1], plen) + (np.arange(int(plen.sum()))
                                           - np.repeat(np.cumsum(plen) - plen, plen))
    data_pos = (np.repeat(off[:-1] + plen, BLOCK) + np.tile(np.arange(BLOCK), nb))
    out = np.empty((r, int(off[-1])), dtype=np.uint8)
    out[:, pre_pos] = np.frombuffer(b"".join(prefixes), dtype=np.uint8)[None, :]
    out[:, data_pos] = padded.reshape(r, nb * BLOCK)
    return out


def _encode_blocks(row: bytes, idx: Iterable[int]) -> bytes:
    """The ``blocks`` of a SwitchTable in protobuf wire form (parsed by
    ``MergeFromString``: building 200+ LftBlock objects per switch in Python was
    the main cost of a GetTables stream)."""
    return b"".join(_block_prefix(i) + row[i * BLOCK:(i + 1) * BLOCK] for i in idx)


def table_messages(ep: Epoch, guids: Sequence[int], since: Epoch | None
                   ) -> tuple[pb.TablesHeader, Iterator[pb.SwitchTable]]:
    """Header and per-switch messages of ``ep`` (only the blocks changed since
    ``since`` if given), restricted to ``guids`` (empty: all)."""
    t = ep.tables
    want: set[int] | None = None
    if guids:
        want = set(int(g) for g in guids)
        have = set(int(g) for g in t.switch_guid.tolist())
        if since is not None:
            have |= set(int(g) for g in since.tables.switch_guid.tolist())
        missing = sorted(want - have)
        if missing:
            raise ServiceError(Status.NOT_FOUND,
                               f"switch {missing[0]:#018x} is not in epoch {ep.id}"
                               + (f" ({len(missing)} unknown GUIDs)" if len(missing) > 1 else ""))
    order = ep.guid_order
    rows_all = order if want is None else np.array(
        [r for r in order.tolist() if int(t.switch_guid[r]) in want], dtype=np.int64)
    removed: list[tuple[int, str]] = []
    if since is None:
        blocks_of: dict[int, np.ndarray | None] = {int(r): None for r in rows_all.tolist()}
    else:
        d = ep.diff if (ep.diff is not None and ep.parent_id == since.id) else diff_tables(
            since.tables, t)
        blocks_of = {}
        row_in_new = {int(g): i for i, g in enumerate(t.switch_guid.tolist())}
        sel = set(rows_all.tolist())
        for ci in d.changed_switch_indices().tolist():
            r = row_in_new[int(d.common_guid[ci])]
            if r in sel:
                lo, hi = np.searchsorted(d.block_switch, [ci, ci + 1])
                blocks_of[r] = d.block[lo:hi]
        for g in d.only_new_guid.tolist():
            r = row_in_new[int(g)]
            if r in sel:
                blocks_of[r] = None
        for g, desc in zip(d.only_old_guid.tolist(), d.only_old_desc, strict=True):
            if want is None or int(g) in want:
                removed.append((int(g), desc))
        blocks_of = {r: blocks_of[r] for r in sorted(blocks_of, key=lambda r: int(
            t.switch_guid[r]))}
    header = pb.TablesHeader(epoch=ep.id, since_epoch=since.id if since else 0,
                             max_lid=t.max_lid, switches=len(blocks_of) + len(removed),
                             tables_sha256=ep.tables_sha256, instance_id=ep.instance)

    def gen() -> Iterator[pb.SwitchTable]:
        rows = list(blocks_of)
        for c0 in range(0, len(rows), 256):  # encode full rows 256 switches at a time
            chunk = rows[c0:c0 + 256]
            full = [r for r in chunk if blocks_of[r] is None]
            enc = _encode_full(t.ports[full]) if full else None
            at = {r: i for i, r in enumerate(full)}
            for r in chunk:
                msg = pb.SwitchTable(guid=int(t.switch_guid[r]), lid=int(t.switch_lid[r]),
                                     desc=t.switch_desc[r])
                blocks = blocks_of[r]
                if blocks is None:
                    assert enc is not None
                    msg.MergeFromString(enc[at[r]].tobytes())
                else:
                    msg.MergeFromString(_encode_blocks(
                        padded_blocks(t.ports[r:r + 1]).tobytes(), blocks.tolist()))
                yield msg
        for g, desc in removed:
            yield pb.SwitchTable(guid=g, desc=desc, removed=True)

    return header, gen()
