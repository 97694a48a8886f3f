"""Read generated fabrics back: the tuple of a node from its description
(:func:`parse_tuple`, :func:`fabric_tuples`) and the topological host order
(:func:`topological_host_order`); descriptions and order as in
:mod:`smroute.fabric.generate.trees`.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import FabricError

__all__ = ["fabric_tuples", "parse_tuple", "topological_host_order"]

IntArray = npt.NDArray[np.int64]


_DESC_RE = re.compile(r"^(?:host|[A-Za-z][A-Za-z0-9_-]* L(\d+)) (\d+(?:\.\d+)*)$")


def parse_tuple(desc: str) -> tuple[int, tuple[int, ...]] | None:
    """``(level, (a_h, .., a_1))`` from a generated node description
    (``"pgft L2 1.0.3"`` -> ``(2, (1, 0, 3))``, ``"host 0.1.2"`` ->
    ``(0, (0, 1, 2))``); ``None`` if ``desc`` is not in that format."""
    mo = _DESC_RE.match(desc)
    if not mo:
        return None
    level = int(mo[1]) if mo[1] is not None else 0
    return level, tuple(int(x) for x in mo[2].split("."))


def fabric_tuples(fabric: Fabric) -> tuple[IntArray, IntArray]:
    """Tuples of all nodes from their descriptions: ``levels`` (N,) int64 (-1 if
    the description does not parse) and ``digits`` (N, h) int64 (``a_h`` in
    column 0, -1 where unknown; ``h`` is the longest tuple found)."""
    parsed = [parse_tuple(d) for d in fabric.node_desc]
    h = max((len(t[1]) for t in parsed if t is not None), default=0)
    levels = np.full(fabric.n_nodes, -1, dtype=np.int64)
    digits = np.full((fabric.n_nodes, h), -1, dtype=np.int64)
    for i, t in enumerate(parsed):
        if t is not None:
            levels[i] = t[0]
            digits[i, h - len(t[1]):] = t[1]
    return levels, digits


def topological_host_order(fabric: Fabric) -> IntArray:
    """CA node indices in topological (D-mod-K end-port index) order, shape
    ``(C,)`` int64: sorted by ``(a_h, .., a_1)`` of their ``"host ..."``
    descriptions, which equals ``j = sum_t a_t prod_{k<t} m_k``.  Raises
    :class:`FabricError` if a CA's description is not a generated one."""
    cas = fabric.cas
    keys = []
    for n in cas.tolist():
        t = parse_tuple(fabric.node_desc[n])
        if t is None or t[0] != 0:
            raise FabricError(f"CA {fabric.describe_node(n)} has no generated host tuple")
        keys.append(t[1])
    order = sorted(range(len(cas)), key=keys.__getitem__)
    return cas[np.asarray(order, dtype=np.int64)] if len(cas) else cas
