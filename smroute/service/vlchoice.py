"""How many data VLs a route may use: the daemon's ``max_vls`` setting and,
for ``auto``, the subnet manager's VL facts (pure: arrays in, a choice out).

An integer ``max_vls`` is taken as it is.  ``auto`` (the default) gives
detours over virtual lanes (routing mode ``tree+detours``) only where the
subnet manager can program them: the facts a ``RouteSubnet`` carries
(:class:`VlFacts`, sent by the OpenSM plugin).  Every other source of a
fabric (``LoadFabric``, a configured ``fabric:``, the opensm-bridge, which
only writes files for OpenSM's file engine) has no facts: one VL.

With facts, :func:`choose_vls` takes one VL unless the subnet manager
answers path SLs and programs SL-to-VL tables (``programs_lanes``), OpenSM's
``qos`` is on (it programs SL-to-VL tables only then) and every switch with a
switch-to-switch cable has SL-to-VL tables; then the least, over both ends
of every switch-to-switch cable, of VLCap and OperationalVLs, capped by
``max_op_vls`` (the rule the plugin checks an epoch's lanes against).
Ports towards CAs do not count: detours change VL only between switches,
and every SL maps to VL 0 on end-ports and the ports towards them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from smroute.fabric.model.base import NodeType

__all__ = ["AUTO", "MAX_DATA_VLS", "MaxVls", "VlChoice", "VlFacts", "choose_vls",
           "data_vls", "parse_max_vls"]

#: The ``max_vls`` setting that chooses from the subnet manager's facts.
AUTO: Literal["auto"] = "auto"
#: The most data VLs an IB port has (VL0-14).
MAX_DATA_VLS = 15
#: A ``max_vls`` setting: 1..15 or ``"auto"``.
MaxVls = int | Literal["auto"]

_DATA_VLS = (1, 1, 2, 4, 8, 15)  # per VL code (PortInfo VLCap / OperationalVLs, max_op_vls)


def data_vls(code: int) -> int:
    """Data VLs of a VL code (IBA PortInfo: 1 VL0, 2 VL0-1, 3 VL0-3, 4 VL0-7,
    5 VL0-14); 0 (unknown) and reserved codes: VL0 only."""
    return _DATA_VLS[code] if 0 <= code < len(_DATA_VLS) else 1


def parse_max_vls(v: object) -> MaxVls:
    """A ``max_vls`` value (``"auto"``, an integer 1..15 or its text);
    ``ValueError`` saying what is expected."""
    if isinstance(v, str):
        t = v.strip().lower()
        if t == AUTO:
            return AUTO
        if t.isdigit():
            v = int(t)
    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_DATA_VLS:
        return v
    raise ValueError(f"auto or an integer 1..{MAX_DATA_VLS}")


@dataclass(frozen=True)
class VlFacts:
    """A subnet manager's VL facts (``RouteSubnetRequest``).

    ``programs_lanes``: it answers path SLs and programs the SL-to-VL tables
    of an epoch's lanes; ``qos``: OpenSM's qos; ``max_op_vls``: OpenSM's
    (a VL code).  Nodes ``(N,)``: guid uint64, type (:class:`NodeType`
    values), sl2vl bool (a switch with SL-to-VL tables).  Cables ``(L,)``:
    guid_a, guid_b uint64; vl_cap_a, op_vls_a, vl_cap_b, op_vls_b: each
    end's PortInfo VL codes; port_a, port_b name the ends in reasons.
    """

    programs_lanes: bool
    qos: bool
    max_op_vls: int
    guid: np.ndarray
    type: np.ndarray
    sl2vl: np.ndarray
    guid_a: np.ndarray
    port_a: np.ndarray
    guid_b: np.ndarray
    port_b: np.ndarray
    vl_cap_a: np.ndarray
    op_vls_a: np.ndarray
    vl_cap_b: np.ndarray
    op_vls_b: np.ndarray


@dataclass(frozen=True)
class VlChoice:
    """The data VLs a route may use (1..15) and why."""

    vls: int
    reason: str


NO_FACTS = "the fabric's source cannot program VLs (only the OpenSM plugin's RouteSubnet can)"


def choose_vls(setting: MaxVls, facts: VlFacts | None) -> VlChoice:
    """The VLs a route may use under ``setting`` given ``facts`` (module doc;
    ``None``: a source without facts)."""
    if setting != AUTO:
        return VlChoice(int(setting), f"max_vls {setting}")
    if facts is None:
        return VlChoice(1, f"max_vls auto: {NO_FACTS}")
    s2s = _switch_cables(facts)
    why = _refusal(facts, s2s)
    if why:
        return VlChoice(1, f"max_vls auto: {why}")
    n, limit = _least_port(facts, s2s)
    cap = data_vls(facts.max_op_vls)
    if n is None:
        return VlChoice(1, "max_vls auto: no switch-to-switch cable")
    if cap <= n:
        return VlChoice(cap, f"max_vls auto: OpenSM's max_op_vls {facts.max_op_vls} "
                             f"allows {cap} data VLs (every switch-to-switch port has "
                             f"{n} or more)")
    return VlChoice(n, f"max_vls auto: {limit}")


def _refusal(f: VlFacts, s2s: np.ndarray) -> str:
    """Why the subnet manager cannot program VLs at all (``""``: it can)."""
    if not f.programs_lanes:
        return ("the subnet manager does not say it answers path SLs and programs SL-to-VL "
                "tables (programs_lanes unset: an SM that cannot, or a plugin that sends no "
                "VL facts)")
    if not f.qos:
        return "OpenSM's qos is FALSE, so it programs no SL-to-VL tables"
    if data_vls(f.max_op_vls) < 2:
        return f"OpenSM's max_op_vls {f.max_op_vls} allows 1 data VL"
    sw = f.type == int(NodeType.SWITCH)
    ends = np.union1d(f.guid_a[s2s], f.guid_b[s2s])
    lacking = np.flatnonzero(sw & ~f.sl2vl.astype(bool) & np.isin(f.guid, ends))
    if lacking.size:
        return (f"switch {int(f.guid[lacking[0]]):#018x} (and {lacking.size - 1} more) has "
                "no SL-to-VL tables (PortInfo CapabilityMask)")
    return ""


def _switch_cables(f: VlFacts) -> np.ndarray:
    """Mask of the cables between two switches."""
    switches = f.guid[f.type == int(NodeType.SWITCH)]
    return np.isin(f.guid_a, switches) & np.isin(f.guid_b, switches)


def _least_port(f: VlFacts, s2s: np.ndarray) -> tuple[int | None, str]:
    """The least data VLs over both ends of the switch-to-switch cables
    ``s2s`` (by VLCap and OperationalVLs) and the port that sets it
    (``None``: no cable)."""
    rows = np.flatnonzero(s2s)
    if not rows.size:
        return None, ""
    codes = np.stack([f.vl_cap_a[rows], f.op_vls_a[rows], f.vl_cap_b[rows], f.op_vls_b[rows]])
    lut = np.array(_DATA_VLS + (1,) * (256 - len(_DATA_VLS)), dtype=np.int64)
    have = lut[np.clip(codes.astype(np.int64), 0, 255)]
    k, j = np.unravel_index(int(np.argmin(have)), have.shape)
    r = int(rows[j])
    end_b = k >= 2
    guid = int((f.guid_b if end_b else f.guid_a)[r])
    port = int((f.port_b if end_b else f.port_a)[r])
    what = "OperationalVLs" if k % 2 else "VLCap"
    n = int(have[k, j])
    return n, (f"switch {guid:#018x} port {port} has {what} {int(codes[k, j])} "
               f"({n} data VL{'s' if n > 1 else ''}), the least of the switch-to-switch ports")
