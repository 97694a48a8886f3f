"""Slurm names of hosts and switches (see :mod:`smroute.fabric.export.slurm` for the rules).

The operator's :class:`HostMap` (``GUID NAME`` / ``DESCRIPTION NAME`` lines:
:func:`parse_host_map`, :func:`read_host_map`), the names it gives by GUID
(:func:`guid_names`), host names derived from node descriptions
(:func:`derived_names`), switch names from theirs (:func:`switch_base_name`)
and making names unique (:func:`unique_names`), all within Slurm's limits
(:data:`MAX_NAME`).  Re-exported by :mod:`smroute.fabric.export.slurm`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from smroute.errors import InputError
from smroute.fabric.model.arrays import Fabric

__all__ = [
    "MAX_NAME",
    "HostMap",
    "derived_names",
    "guid_names",
    "parse_host_map",
    "read_host_map",
    "switch_base_name",
    "unique_names",
]

IntArray = npt.NDArray[np.int64]

#: Longest switch or node name Slurm takes (``topology.yaml(5)``: "cannot be
#: longer than 64 characters"; ``MAX_SLURM_NAME``).
MAX_NAME = 64

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VENDOR_DESC = re.compile(
    r"^\s*$|^\s*(MT\d+|localhost|\(none\))(\s|$)|Mellanox Technologies|QLogic|Voltaire",
    re.IGNORECASE)
_MF0 = re.compile(r"^\s*MF0;([^:]+)")
_HASH_NAME = re.compile(r"#\s*(\S+)\s*$")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class HostMap:
    """Operator-given Slurm names: by node or port GUID, and by node
    description (or the host name derived from it).  A GUID of a switch names
    the switch."""

    by_guid: dict[int, str] = field(default_factory=dict)
    by_desc: dict[str, str] = field(default_factory=dict)
    source: str = "<host map>"

    def __bool__(self) -> bool:
        return bool(self.by_guid or self.by_desc)


def _check_name(name: str, what: str) -> str | None:
    """Why ``name`` is no usable Slurm name (``None`` if it is)."""
    if len(name) > MAX_NAME:
        return f"{what} {name[:80]!r} is longer than {MAX_NAME} characters"
    if not _NAME_OK.match(name):
        return (f"{what} {name[:80]!r} is not a Slurm name (letters, digits, '.', '_', '-'; "
                "starting with a letter or digit)")
    return None


def parse_host_map(lines: Iterable[str] | str, source: str = "<host map>") -> HostMap:
    """A host map: one ``KEY NAME`` per line, ``NAME`` the last word and
    ``KEY`` the rest: a ``0x``-prefixed node or port GUID, or a node
    description (whole, or the host name derived from it; a description
    with ``#`` in it is written in double quotes).  Blank lines are ignored;
    ``#`` starts a comment at the start of a line or after a blank.
    :class:`InputError` names a bad line or a key given twice."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    by_guid: dict[int, str] = {}
    by_desc: dict[str, str] = {}
    for no, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith('"'):
            end = text.find('"', 1)
            if end < 0:
                raise InputError("unterminated quoted description", source=source, line=no)
            key, name = text[1:end], re.split(r"\s#", text[end + 1:], maxsplit=1)[0].strip()
            if not name or len(name.split()) != 1:
                raise InputError(f"expected one node name after the quoted description, got "
                                 f"{name[:80]!r}", source=source, line=no)
        else:
            m = re.match(r"^(.*?\S)\s+(\S+)$", re.split(r"\s#", text, maxsplit=1)[0].strip())
            if not m:
                raise InputError(f"expected 'KEY NAME' (a GUID or node description, then the "
                                 f"Slurm node name), got {text[:80]!r}", source=source, line=no)
            key, name = m.group(1), m.group(2)
        why = _check_name(name, "node name")
        if why:
            raise InputError(why, source=source, line=no)
        if re.fullmatch(r"0[xX][0-9a-fA-F]{1,16}", key):
            g = int(key, 16)
            if g in by_guid:
                raise InputError(f"GUID {key} given twice", source=source, line=no)
            by_guid[g] = name
        else:
            if key in by_desc:
                raise InputError(f"description {key[:80]!r} given twice", source=source, line=no)
            by_desc[key] = name
    return HostMap(by_guid=by_guid, by_desc=by_desc, source=source)


def read_host_map(path: str | os.PathLike[str]) -> HostMap:
    """:func:`parse_host_map` of a file."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_host_map(fh, str(path))


def guid_names(f: Fabric, nodes: IntArray, hmap: HostMap) -> list[str | None]:
    """Per node of ``nodes``: the host map's name for its node GUID, else for
    its first listed port GUID, else ``None``."""
    out: list[str | None] = [None] * len(nodes)
    if not hmap.by_guid or not len(nodes):
        return out
    keys = np.fromiter(hmap.by_guid, dtype=np.uint64, count=len(hmap.by_guid))
    vals = list(hmap.by_guid.values())
    order = np.argsort(keys)
    keys = keys[order]

    def find(g: np.ndarray) -> IntArray:
        i = np.minimum(np.searchsorted(keys, g), len(keys) - 1)
        return np.where(keys[i] == g, order[i], -1).astype(np.int64)

    hit = find(f.node_guid[nodes])
    # port GUIDs: rows of the nodes' ports
    counts = f.num_ports[nodes].astype(np.int64) + 1
    rows = np.repeat(f.port_start[nodes], counts) + (
        np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
    owner = np.repeat(np.arange(len(nodes)), counts)
    ok = f.port_exists[rows] & (f.port_guid[rows] != 0)
    phit = find(f.port_guid[rows[ok]])
    pown = owner[ok]
    first_port = np.full(len(nodes), -1, dtype=np.int64)
    sel = phit >= 0
    first_port[pown[sel][::-1]] = phit[sel][::-1]
    best = np.where(hit >= 0, hit, first_port)
    for i in np.flatnonzero(best >= 0).tolist():
        out[i] = vals[int(best[i])]
    return out


def derived_names(
    descs: Sequence[str], name_regex: re.Pattern[str] | None,
) -> list[str | None]:
    """Per description, the host name derived from it (``None`` if none)."""
    out: list[str | None] = []
    grp: int | str = 0
    if name_regex is not None:
        grp = "host" if "host" in name_regex.groupindex else (1 if name_regex.groups else 0)
    for d in descs:
        name: str | None
        if name_regex is not None:
            m = name_regex.search(d)
            name = m.group(grp) if m else None
        else:
            name = None if _VENDOR_DESC.search(d) else d.split(None, 1)[0]
        if name is not None and _check_name(name, "name") is not None:
            name = None
        out.append(name)
    return out


def switch_base_name(desc: str, guid: int) -> str:
    """A switch's name from its description (:mod:`smroute.fabric.export.slurm`), sanitized."""
    m = _MF0.match(desc)
    cand: str | None = None
    if m:
        cand = m.group(1).strip()
    elif (h := _HASH_NAME.search(desc)) is not None:
        cand = h.group(1)
    elif desc.strip() and len(desc.split()) == 1:
        cand = desc.strip()
    if cand is not None:
        cand = _BAD_CHARS.sub("-", cand).strip("-._")[:MAX_NAME]
    return cand or f"sw-{guid:016x}"


def unique_names(names: list[str], guids: Sequence[int]) -> list[str]:
    """Names made unique: a name used twice gets ``-<GUID>`` appended (the
    base cut to fit :data:`MAX_NAME`); a last resort appends a counter."""
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    out = []
    for n, g in zip(names, guids, strict=True):
        if seen[n] > 1:
            suffix = f"-{g:016x}"
            n = n[: MAX_NAME - len(suffix)] + suffix
        out.append(n)
    used: set[str] = set()
    for i, n in enumerate(out):
        k = 2
        base = n
        while n in used:
            suffix = f"-{k}"
            n = base[: MAX_NAME - len(suffix)] + suffix
            k += 1
        out[i] = n
        used.add(n)
    return out
