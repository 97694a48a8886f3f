"""What ``smroute ctl`` prints: the daemon's answers as text lines or JSON.

:func:`to_json` turns any message of the API into plain JSON values: every
field, defaults included, enums by name, GUIDs as ``0x``-hex strings, bytes
as hex.  The ``*_lines`` functions give the text a person reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from smroute.service.rpc._gen import smroute_pb2 as pb

__all__ = ["to_json", "epoch_line", "epoch_lines", "diff_lines", "fault_name",
           "analyze_lines", "lanes_text", "validation_text"]

_KIND_NAME = {pb.FaultEvent.LINK_DOWN: "link down", pb.FaultEvent.LINK_UP: "link up",
              pb.FaultEvent.SWITCH_DOWN: "switch down", pb.FaultEvent.SWITCH_UP: "switch up",
              pb.FaultEvent.CA_DOWN: "ca down", pb.FaultEvent.CA_UP: "ca up"}


def _value(fd: FieldDescriptor, v: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(v)
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return fd.enum_type.values_by_number[int(v)].name if int(
            v) in fd.enum_type.values_by_number else int(v)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return bytes(v).hex()
    if "guid" in fd.name and fd.type in (FieldDescriptor.TYPE_UINT64,):
        return f"{int(v):#018x}"
    return v


def to_json(msg: Message) -> dict[str, Any]:
    """Every field of ``msg`` as JSON values (module doc)."""
    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        v = getattr(msg, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vf = fd.message_type.fields_by_name["value"]
            out[fd.name] = {str(k): _value(vf, x) for k, x in sorted(v.items())}
        elif fd.is_repeated:
            out[fd.name] = [_value(fd, x) for x in v]
        elif fd.type == FieldDescriptor.TYPE_MESSAGE and not msg.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _value(fd, v)
    return out


def fault_name(ev: pb.FaultEvent) -> str:
    """``link down 0x...[3]``, ``switch up 0x...``."""
    kind = _KIND_NAME.get(ev.kind, "unknown")
    port = f"[{ev.port}]" if ev.kind in (pb.FaultEvent.LINK_DOWN, pb.FaultEvent.LINK_UP) else ""
    return f"{kind} {ev.node_guid:#018x}{port}"


def validation_text(v: pb.Validation) -> str:
    """``valid (N pairs)``, ``INVALID: ...``, ``pending``, ``skipped``."""
    if v.state == pb.Validation.PENDING:
        return "validation pending"
    if v.state == pb.Validation.SKIPPED:
        return "validation skipped"
    if v.state != pb.Validation.DONE:
        return "not validated"
    if v.ok:
        return f"valid ({v.delivered} of {v.pairs} pairs delivered)"
    return f"INVALID: {v.summary or 'validation failed'}"


def _when(unix_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_s)) if unix_s else "-"


def epoch_line(ep: pb.Epoch) -> str:
    """One line per epoch (``epochs``, ``watch``)."""
    d = ep.diff_from_parent
    change = (f", {d.entries_changed} entries on {d.switches_changed} switches changed"
              if ep.parent_id else "")
    n = len(ep.faults)
    faults = f", {n} fault event{'s' if n != 1 else ''}" if n else ""
    return (f"epoch {ep.id}  {_when(ep.committed_unix_s)}  {ep.cause or '-'}  "
            f"{ep.algorithm} {ep.routing_mode or '-'}  {validation_text(ep.validation)}"
            f"{faults}{change}")


def epoch_lines(ep: pb.Epoch) -> Iterator[str]:
    """The full description of one epoch (``status``, ``epoch``, ``route``)."""
    yield (f"epoch {ep.id} (instance {ep.instance_id}{', resumed' if ep.resumed else ''}), "
           f"parent {ep.parent_id or '-'}, committed {_when(ep.committed_unix_s)}, "
           f"cause {ep.cause or '-'}")
    mode = ep.routing_mode + (f" ({ep.routing_mode_reason})" if ep.routing_mode_reason else "")
    yield (f"  routing: {ep.algorithm}, mode {mode or '-'}, LMC {ep.lmc}, {ep.switches} "
           f"switches, max LID {ep.max_lid}, VLs {ep.vls or 1}, SLs {ep.sls or 1}")
    if ep.max_vls_reason:
        yield f"  VLs allowed: {ep.max_vls or 1} ({ep.max_vls_reason})"
    yield f"  fabric: {ep.fabric_hash[:16]} (loaded {ep.base_fabric_hash[:16]})"
    yield (f"  down: {ep.down_links} links, {ep.down_switches} switches, {ep.down_cas} CAs")
    yield f"  validation: {validation_text(ep.validation)}"
    yield from (f"    {f}" for f in ep.validation.failures)
    yield f"  tables: sha256 {ep.tables_sha256}"
    if ep.parent_id:
        d = ep.diff_from_parent
        yield (f"  from epoch {ep.parent_id}: {d.entries_changed} entries, {d.lids_changed} "
               f"LIDs, {d.blocks_changed} blocks on {d.switches_changed} switches changed")
    yield from (f"  fault: {fault_name(f)}" for f in ep.faults)
    yield from (f"  down item: {fault_name(f)}" for f in ep.down_items)
    if ep.timings:
        yield "  timings: " + ", ".join(f"{k} {v:.3f}s" for k, v in sorted(ep.timings.items()))


def diff_lines(summary: pb.DiffSummary, switches: Any, truncated: bool) -> Iterator[str]:
    """A diff's totals, then per switch its changed blocks and entries."""
    s = summary
    if s.identical:
        yield "identical"
        return
    yield (f"{s.entries_changed} entries ({s.lids_changed} LIDs, {s.blocks_changed} blocks) "
           f"changed on {s.switches_changed} of {s.switches_compared} switches; "
           f"{s.switches_only_a} switches only before, {s.switches_only_b} only after")
    for sw in switches:
        lid = f"LID {sw.old_lid}" + (f" -> {sw.new_lid}" if sw.new_lid != sw.old_lid else "")
        blocks = ",".join(str(b) for b in sw.blocks)
        yield f'switch {sw.guid:#018x} "{sw.desc}" ({lid}): {sw.lids_changed} LIDs, ' \
              f"blocks {blocks or '-'}"
        for c in sw.changes:
            old = "-" if c.old_port == 255 else str(c.old_port)
            new = "-" if c.new_port == 255 else str(c.new_port)
            yield f"  LID {c.lid}: port {old} -> {new}"
    if truncated:
        yield "(changed entries cut short: raise --max-entries)"


def analyze_lines(r: pb.AnalyzeResponse) -> Iterator[str]:
    """The congestion metrics of one epoch."""
    yield f"epoch {r.epoch}: {r.end_ports} end-ports, order {r.order}, {r.seconds:.2f} s"
    yield f"  all-to-all risk:        {r.a2a_risk}"
    yield f"  random permutations:    median risk {r.rp_risk_median:g}"
    yield f"  shift permutations:     max risk {r.sp_risk_max}, HSD avg {r.sp_hsd_avg:.3f} " \
          f"max {r.sp_hsd_max}"
    bad = r.unroutable_a2a + r.unroutable_rp + r.unroutable_sp
    yield f"  unroutable flows:       {bad}"


def _ranges(values: Any) -> str:
    v = list(values)
    pairs = zip(v[::2], v[1::2], strict=False)
    parts = [(f"{a:#06x}" if a == b else f"{a:#06x}-{b:#06x}") for a, b in pairs]
    return ",".join(parts) or "-"


def lanes_text(lanes: pb.Lanes) -> str:
    """The lanes file (:mod:`smroute.routing.lanesfile`) of a GetLanes answer,
    which ``smroute trace --lanes`` reads."""
    from smroute.routing.lanesfile import MAGIC

    out = [MAGIC, f"# epoch {lanes.epoch}", f"vls {lanes.vls or 1}", f"sls {lanes.sls or 1}",
           f"escape_sl {lanes.escape_sl}"]
    for p in lanes.paths:
        src = "*" if p.from_all else ",".join(f"{g:#018x}" for g in p.from_switches) or "-"
        out.append(f"sl {p.sl} {p.target_guid:#018x} {_ranges(p.dlid_ranges)} from {src}")
    for t in lanes.tables:
        port = f"{t.out_port}" if t.any_in_port else f"{t.out_port}/{t.in_port}"
        out.append(f"vl {t.guid:#018x} {port} {''.join(f'{b:x}' for b in bytes(t.vl))}")
    return "\n".join(out) + "\n"
