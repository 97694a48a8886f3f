"""The subnet manager's VL facts in the state database (pure; no SQL here).

``max_vls: auto`` chooses the VLs of every route from the facts of the
last ``RouteSubnet`` (:class:`~smroute.service.vlchoice.VlFacts`).  They are
kept in the ``meta`` row :data:`KEY` (checksummed like every row, salvaged
with the others from a damaged database) so that a restarted daemon
reroutes link and switch events with the VLs it was allowed before the
subnet manager speaks again: the arrays packed as the fabrics are
(:func:`~smroute.service.state.codec.pack`), as base64 text; ``""``: none
(a fabric from any other source).  A database without the row (an older
smroute's, or a damaged row) gives none: one VL until the next
``RouteSubnet``.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np

from smroute.service.state.codec import CodecError, pack, unpack
from smroute.service.vlchoice import VlFacts

__all__ = ["KEY", "decode_facts", "encode_facts"]

#: The ``meta`` key of the facts.
KEY = "vl_facts"
#: Per node ``(N,)`` and per cable ``(L,)``, with their dtypes.
_NODES = {"guid": np.uint64, "type": np.int64, "sl2vl": np.bool_}
_CABLES = {"guid_a": np.uint64, "port_a": np.int64, "guid_b": np.uint64, "port_b": np.int64,
           "vl_cap_a": np.int64, "op_vls_a": np.int64, "vl_cap_b": np.int64,
           "op_vls_b": np.int64}


def encode_facts(facts: VlFacts | None) -> str:
    """``facts`` as the text of the ``meta`` row (``""``: none)."""
    if facts is None:
        return ""
    arrays = {k: np.asarray(getattr(facts, k), dtype=t) for k, t in (_NODES | _CABLES).items()}
    arrays["flags"] = np.array([facts.programs_lanes, facts.qos, facts.max_op_vls], np.int64)
    return base64.b64encode(pack(arrays, {})).decode("ascii")


def decode_facts(text: str) -> VlFacts | None:
    """The facts of an :func:`encode_facts` text (``None`` for ``""``);
    :class:`~smroute.service.state.codec.CodecError` if it does not decode
    to facts (arrays missing, of other kinds or lengths)."""
    if not text:
        return None
    try:
        arrays, _ = unpack(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as err:
        raise CodecError(f"the stored VL facts do not decode: {err}") from None
    out: dict[str, np.ndarray] = {}
    for group in (_NODES, _CABLES):
        sizes = set()
        for k, t in group.items():
            a = arrays.get(k)
            if a is None or a.ndim != 1 or np.dtype(t) != a.dtype:
                raise CodecError(f"the stored VL facts lack a 1-D {np.dtype(t)} array {k!r}")
            sizes.add(len(a))
            out[k] = a
        if len(sizes) > 1:
            raise CodecError(f"the stored VL facts' arrays {sorted(group)} differ in length")
    flags = arrays.get("flags")
    if flags is None or flags.shape != (3,) or flags.dtype != np.int64:
        raise CodecError("the stored VL facts lack their flags")
    return VlFacts(programs_lanes=bool(flags[0]), qos=bool(flags[1]),
                   max_op_vls=int(flags[2]), **out)
