"""Bytes for the state database (:mod:`smroute.service.state.store`): fabrics, forwarding
tables, down sets and validation results, and back (pure; no SQL here).

Arrays travel as their raw bytes behind a JSON header (names, plain numeric
dtypes, shapes; string lists), compressed with zlib (level 1: the tables of
the 11,664-host tree, 21.5 MB, become about 0.3 MB in 0.04 s) and are read
back as views of the decompressed bytes, so a damaged or foreign blob can
only fail to decode (:class:`CodecError`), never run code (no pickle).  A
decoded fabric must have the content hash it was stored under, tables the
SHA-256 they were committed with.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from smroute.fabric.faults import DownSet
from smroute.fabric.model.arrays import Fabric
from smroute.routing.validate import Failure, Validation

__all__ = [
    "CodecError",
    "decode_fabric",
    "decode_tables",
    "down_from_json",
    "down_to_json",
    "encode_fabric",
    "encode_tables",
    "pack",
    "unpack",
    "validation_from_json",
    "validation_to_json",
]


class CodecError(ValueError):
    """A stored blob or JSON value does not decode to what it should be."""


#: The first bytes of a (decompressed) blob: format and version.
MAGIC = b"SMRSTATE1\n"


def pack(arrays: Mapping[str, np.ndarray], strings: Mapping[str, Sequence[str]]) -> bytes:
    """``arrays`` and string lists as one compressed blob: :data:`MAGIC`, an
    8-byte header length, a JSON header (names, dtypes, shapes; the strings)
    and the arrays' bytes, zlib level 1 (see module doc)."""
    arrs = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    header = json.dumps({"arrays": [[k, a.dtype.str, list(a.shape)] for k, a in arrs.items()],
                         "strings": {k: list(v) for k, v in strings.items()}}).encode()
    z = zlib.compressobj(1)
    parts = [z.compress(MAGIC + len(header).to_bytes(8, "little") + header)]
    parts += [z.compress(a.data.cast("B")) for a in arrs.values() if a.size]
    return b"".join(parts) + z.flush()


def unpack(blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """The arrays (read-only views of the decompressed bytes) and string lists
    of a :func:`pack` blob; :class:`CodecError` if it does not decode."""
    try:
        body = zlib.decompress(blob)
        if not body.startswith(MAGIC):
            raise ValueError("not an smroute state blob")
        at = len(MAGIC) + 8
        size = int.from_bytes(body[len(MAGIC):at], "little")
        header = json.loads(body[at:at + size])
        at += size
        arrays: dict[str, np.ndarray] = {}
        for name, dt, shape in header["arrays"]:
            dtype = np.dtype(str(dt))
            if dtype.hasobject or dtype.kind not in "biuf":
                raise ValueError(f"array {name}: dtype {dt} is not plain numbers")
            n = int(np.prod(shape, dtype=np.int64))
            arrays[str(name)] = np.frombuffer(body, dtype, n, at).reshape(shape)
            at += n * dtype.itemsize
        strings = header["strings"]
        if at != len(body) or not isinstance(strings, dict):
            raise ValueError(f"{len(body) - at} bytes left over")
    except (zlib.error, ValueError, KeyError, TypeError) as err:
        raise CodecError(f"stored blob does not decode: {err}") from None
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
               for v in strings.values()):
        raise CodecError("stored blob: a string list is not a list of strings")
    return arrays, strings


_FABRIC_ARRAYS = tuple(f.name for f in dataclasses.fields(Fabric)
                       if f.name not in ("node_desc", "_cache"))


def encode_fabric(fabric: Fabric) -> bytes:
    """Every array of ``fabric`` and its node descriptions."""
    return pack({k: getattr(fabric, k) for k in _FABRIC_ARRAYS},
                {"node_desc": fabric.node_desc})


def decode_fabric(blob: bytes, content_hash: str) -> Fabric:
    """The fabric of an :func:`encode_fabric` blob; :class:`CodecError` unless
    it decodes to a fabric with ``content_hash``."""
    arrays, strings = unpack(blob)
    try:
        fields: dict[str, Any] = {k: arrays[k] for k in _FABRIC_ARRAYS}
        f = Fabric(**fields, node_desc=tuple(strings["node_desc"]))
    except KeyError as err:
        raise CodecError(f"stored fabric: no {err.args[0]} array") from None
    if len(f.node_desc) != f.n_nodes or f.content_hash != content_hash:
        raise CodecError(f"stored fabric: content hash {f.content_hash[:12]} is not the "
                         f"recorded {content_hash[:12]}")
    return f


def encode_tables(guid: np.ndarray, lid: np.ndarray, desc: Sequence[str],
                  ports: np.ndarray) -> bytes:
    """A table set: switch GUIDs ``(S,)`` uint64, LIDs ``(S,)``, descriptions,
    LFT ports ``(S, W)`` uint8."""
    return pack({"guid": np.asarray(guid, dtype=np.uint64),
                 "lid": np.asarray(lid, dtype=np.int64),
                 "ports": np.asarray(ports, dtype=np.uint8)}, {"desc": desc})


def decode_tables(blob: bytes) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray]:
    """``(guid, lid, desc, ports)`` of an :func:`encode_tables` blob."""
    arrays, strings = unpack(blob)
    try:
        guid, lid, ports, desc = arrays["guid"], arrays["lid"], arrays["ports"], strings["desc"]
    except KeyError as err:
        raise CodecError(f"stored tables: no {err.args[0]}") from None
    s = len(guid)
    if ports.dtype != np.uint8 or ports.ndim != 2 or ports.shape[0] != s or len(lid) != s \
            or len(desc) != s or guid.dtype != np.uint64:
        raise CodecError(f"stored tables: inconsistent shapes {ports.shape}, {len(lid)} "
                         f"LIDs, {len(desc)} descriptions for {s} switches")
    return guid, lid, tuple(desc), ports


def down_to_json(down: DownSet) -> str:
    """A down set as JSON (GUIDs are uint64: JSON integers, not SQLite's int64)."""
    return json.dumps({"links": sorted(down.links), "switches": sorted(down.switches),
                       "cas": sorted(down.cas)})


def down_from_json(text: str) -> DownSet:
    """The :class:`DownSet` of :func:`down_to_json`; :class:`CodecError` if malformed."""
    try:
        d = json.loads(text)
        return DownSet(frozenset((int(g), int(p)) for g, p in d["links"]),
                       frozenset(int(g) for g in d["switches"]),
                       frozenset(int(g) for g in d["cas"]))
    except (ValueError, TypeError, KeyError) as err:
        raise CodecError(f"stored down set does not decode: {err}") from None


_VALIDATION_INTS = ("pairs", "delivered", "dead_ends", "loops", "updown_violations",
                    "non_minimal", "ca_pairs_unroutable", "switch_pairs_no_updown",
                    "ca_pairs_disconnected")


def validation_to_json(v: Validation | str) -> str:
    """A validation result (or ``"pending"`` / ``"skipped: ..."``) as JSON."""
    if isinstance(v, str):
        return json.dumps(v)
    d: dict[str, Any] = {k: int(getattr(v, k)) for k in _VALIDATION_INTS}
    d["failures"] = [dataclasses.asdict(f) for f in v.failures]
    return json.dumps(d)


def validation_from_json(text: str) -> Validation | str:
    """The value :func:`validation_to_json` stored; :class:`CodecError` if malformed."""
    try:
        d = json.loads(text)
        if isinstance(d, str):
            return d
        fails = [Failure(**f) for f in d["failures"]]
        return Validation(**{k: int(d[k]) for k in _VALIDATION_INTS},
                          failures=cast(list[Failure], fails))
    except (ValueError, TypeError, KeyError) as err:
        raise CodecError(f"stored validation does not decode: {err}") from None
