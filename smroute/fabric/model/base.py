"""The vocabulary of the fabric model (:mod:`smroute.fabric.model`): node
types, link speeds and widths, and :class:`FabricError`.
"""

from __future__ import annotations

from enum import IntEnum

from smroute.errors import InputError

__all__ = [
    "SPEEDS",
    "SPEED_GBPS",
    "WIDTHS",
    "FabricError",
    "NodeType",
    "speed_code",
    "speed_name",
]


class NodeType(IntEnum):
    """IB NodeInfo.NodeType values."""

    CA = 1
    SWITCH = 2
    ROUTER = 3


#: Link speed names, index = speed code stored in ``port_speed`` (0 = unknown, ``???``).
SPEEDS: tuple[str, ...] = ("???", "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
#: Per-lane data rate in Gb/s of each speed code (0 = unknown).
SPEED_GBPS: tuple[float, ...] = (
    0.0, 2.5, 5.0, 10.0, 10.0, 14.0625, 25.78125, 53.125, 106.25, 212.5,
)
#: Link widths allowed by the IB spec, in lanes (0 = unknown).
WIDTHS: tuple[int, ...] = (1, 2, 4, 8, 12)


def speed_code(name: str) -> int:
    """Speed code for a name such as ``"EDR"``; raises ``KeyError`` if unknown."""
    if name not in SPEEDS:
        raise KeyError(name)
    return SPEEDS.index(name)


def speed_name(code: int) -> str:
    """Name of a speed code (``"???"`` for 0)."""
    return SPEEDS[int(code)]


class FabricError(InputError):
    """A fabric is inconsistent (duplicate GUID, one-sided link, ...)."""
