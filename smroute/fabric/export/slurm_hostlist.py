"""Slurm hostlist syntax: :func:`hostlist` writes ``prefix[lo-hi,...]``
expressions, :func:`expand_hostlist` reads them back, :func:`natural_key` is
the natural sort order (``n2`` before ``n10``) both use.  Re-exported by
:mod:`smroute.fabric.export.slurm`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["expand_hostlist", "hostlist", "natural_key"]

_SPLIT_NUM = re.compile(r"^(.*[^0-9])([0-9]{1,18})$")
_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key comparing digit runs as numbers (``n2`` before ``n10``); ties
    (``n01`` / ``n1``) broken by the text itself."""
    parts: list[object] = []
    for i, tok in enumerate(_DIGITS.split(name)):
        parts.append(int(tok) if i % 2 else tok)
    return (tuple(parts), name)


def hostlist(names: Iterable[str], *, literal: Callable[[str], object] | None = None) -> str:
    """Slurm hostlist expression of ``names`` (duplicates dropped): names that
    end in a number (at most 18 digits, after a non-digit), unless ``literal``
    says a name's digits are no number of a series (``ib-<GUID>``: the tail of
    a hex GUID), are grouped by the
    text before it (and, for zero-padded numbers and others as wide, their
    width) into
    ``prefix[lo-hi,...]`` ranges of consecutive numbers, each written so that
    Slurm's parser (width of the lower bound) gives the names back; others are
    listed as they are.  Groups appear in the
    natural order of their first name.  ``expand_hostlist`` (and Slurm's
    parser) gives the names back."""
    uniq = sorted(set(names), key=natural_key)
    if not uniq:
        return ""
    keys: list[tuple[str, int]] = []
    nums = np.full(len(uniq), -1, dtype=np.int64)
    split = [None if literal is not None and literal(nm) else _SPLIT_NUM.match(nm)
             for nm in uniq]
    padded = {(m.group(1), len(m.group(2))) for m in split
              if m and m.group(2)[0] == "0" and len(m.group(2)) > 1}
    for i, (nm, m) in enumerate(zip(uniq, split, strict=True)):
        if m:
            d = m.group(2)
            # zero-padded numbers, and others as wide, group by width (n[08-12]);
            # the rest of any width together (n[8-12])
            wide = (m.group(1), len(d))
            keys.append(wide if wide in padded else (m.group(1), 0))
            nums[i] = int(d)
        else:
            keys.append((nm, -1))
    # group ids in order of first appearance
    gid: dict[tuple[str, int], int] = {}
    g = np.fromiter((gid.setdefault(k, len(gid)) for k in keys), dtype=np.int64, count=len(keys))
    order = np.lexsort((nums, g))
    gs, ns = g[order], nums[order]
    new_run = np.ones(len(order), dtype=bool)
    new_run[1:] = (gs[1:] != gs[:-1]) | (ns[1:] != ns[:-1] + 1) | (ns[1:] < 0)
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(order)) - 1
    run_group = gs[starts]
    out: list[str] = []
    groups = list(gid)
    for gi in range(len(groups)):
        prefix, width = groups[gi]
        runs = np.flatnonzero(run_group == gi)
        width = max(width, 1)
        if groups[gi][1] < 0:
            out.append(prefix)
            continue
        if len(runs) == 1 and starts[runs[0]] == ends[runs[0]]:
            out.append(f"{prefix}{int(ns[starts[runs[0]]]):0{width}d}")
            continue
        parts = []
        for r in runs.tolist():
            lo, hi = int(ns[starts[r]]), int(ns[ends[r]])
            parts.append(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}")
        out.append(f"{prefix}[{','.join(parts)}]")
    return ",".join(out)


def expand_hostlist(expr: str) -> list[str]:
    """The names of a Slurm hostlist expression (``a[01-03,7],b``): ranges take
    the width of their lower bound, as Slurm's parser does.  Raises
    ``ValueError`` on unbalanced or nested brackets."""
    out: list[str] = []
    depth, start = 0, 0
    tokens: list[str] = []
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested brackets in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced brackets in hostlist {expr!r}")
        elif ch == "," and depth == 0:
            tokens.append(expr[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced brackets in hostlist {expr!r}")
    tokens.append(expr[start:])
    for tok in (t.strip() for t in tokens):
        if not tok:
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]*)\]([^\[\]]*)", tok)
        if not m:
            if "[" in tok or "]" in tok:
                raise ValueError(f"bad hostlist element {tok!r}")
            out.append(tok)
            continue
        prefix, body, suffix = m.groups()
        for rng in body.split(","):
            lo_s, _, hi_s = rng.partition("-")
            if not lo_s.isdigit() or (hi_s and not hi_s.isdigit()):
                raise ValueError(f"bad range {rng!r} in hostlist {expr!r}")
            lo, hi, w = int(lo_s), int(hi_s or lo_s), len(lo_s)
            if hi < lo:
                raise ValueError(f"descending range {rng!r} in hostlist {expr!r}")
            out.extend(f"{prefix}{v:0{w}d}{suffix}" for v in range(lo, hi + 1))
    return out
