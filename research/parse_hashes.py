"""Hash what the ibnetdiscover reader makes of a corpus, to check a change of
the reader changes no fabric, warning or error.

Reads, with the code on ``PYTHONPATH``: the fixtures (``fixtures/*.topo``),
the real captures (``--real``, default ``../shared/fabrics/real``), the texts
in ``--extra`` directories (e.g. the catalogue shapes written by ``smroute
fabric generate catalogue NAME --out DIR/NAME.topo``), and variants of each
small one (CRLF line ends, spaces for tabs, blanks around lines, a line
dropped, a line doubled, noise before and between records, a digit changed,
a port line's remote port changed), each with ``read_fabric`` as it is and
``strict``.  Prints ``case sha256`` per case (the fabric's arrays and
descriptions, the warnings, or the error message), sorted; ``diff`` two
runs::

    PYTHONPATH=/path/to/before python research/parse_hashes.py --extra DIR > before.txt
    PYTHONPATH=. python research/parse_hashes.py --extra DIR > after.txt
    diff before.txt after.txt
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import numpy as np

from smroute.errors import SmrouteError
from smroute.fabric.ibnetdiscover.parse import ParseWarning, read_fabric

ROOT = Path(__file__).resolve().parent.parent
#: variants are made of files up to this size
SMALL = 400_000


def digest_fabric(f: object) -> str:
    h = hashlib.sha256()
    for fld in fields(f):  # type: ignore[arg-type]
        v = getattr(f, fld.name)
        h.update(fld.name.encode())
        if isinstance(v, np.ndarray):
            h.update(str(v.dtype).encode())
            h.update(np.ascontiguousarray(v).tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def outcome(path: Path, strict: bool) -> str:
    warnings: list[ParseWarning] = []
    try:
        got = "fabric " + digest_fabric(read_fabric(path, strict=strict, warnings=warnings))
    except SmrouteError as err:
        got = f"error {err}"
    text = got + "\n" + "\n".join(str(w) for w in warnings)
    return hashlib.sha256(text.replace(str(path), "<file>").encode()).hexdigest()


def variants(text: str, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    lines = text.split("\n")
    n = len(lines)

    def pick(pred: Callable[[str], bool]) -> int:
        idx = [i for i, ln in enumerate(lines) if pred(ln)]
        return rng.choice(idx) if idx else 0

    port = pick(lambda ln: ln.startswith("["))
    head = pick(lambda ln: ln.startswith(("Switch", "Ca", "Rt")))
    guid = pick(lambda ln: "guid=0x" in ln)
    blank = pick(lambda ln: ln == "")
    out = {
        "crlf": text.replace("\n", "\r\n"),
        "spaces": text.replace("\t", " "),
        "no-separators": text.replace("\t", "").replace(" \"", "\""),
        "blanks-around": "\n".join(f"  {ln}\t " for ln in lines),
        "drop-port": "\n".join(lines[:port] + lines[port + 1:]),
        "drop-head": "\n".join(lines[:head] + lines[head + 1:]),
        "drop-guid-line": "\n".join(lines[:guid] + lines[guid + 1:]),
        "double-port": "\n".join(lines[:port + 1] + lines[port:]),
        "noise-first": "user@host:~$ ibnetdiscover\n" + text,
        "noise-between": "\n".join(lines[:blank] + ["some text"] + lines[blank:]),
        "diagnostic": "\n".join(lines[:blank] + ["ibwarn: [123] mad_rpc: _do_madrpc failed"]
                                + lines[blank:]),
        "no-final-newline": text.rstrip("\n"),
        "bom": "\ufeff" + text,
        "comment-inside": "\n".join(lines[:port] + ["# a comment"] + lines[port:]),
        "unicode-desc": text.replace('"', '"\u00e9', 1),
    }
    if n > port and "]" in lines[port]:
        ln = lines[port]
        digit = rng.choice([i for i, c in enumerate(ln) if c in "0123456789abcdef"] or [0])
        out["changed-digit"] = "\n".join(
            lines[:port] + [ln[:digit] + ("1" if ln[digit] != "1" else "2") + ln[digit + 1:]]
            + lines[port + 1:])
        out["remote-port"] = "\n".join(
            lines[:port] + [ln.replace("][", "][", 1).replace("[", "[9", 2)] + lines[port + 1:])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", type=Path, default=ROOT.parent / "shared" / "fabrics" / "real")
    ap.add_argument("--extra", type=Path, action="append", default=[])
    args = ap.parse_args()
    files = sorted((ROOT / "fixtures").glob("*.topo"))
    if args.real.is_dir():
        files += sorted(p for p in args.real.iterdir() if p.is_file() and p.name != "README.md")
    for d in args.extra:
        files += sorted(p for p in d.iterdir() if p.is_file())
    rows = []
    with tempfile.TemporaryDirectory(prefix="parse-hashes-") as tmp:
        for k, path in enumerate(files):
            for strict in (False, True):
                rows.append(f"{path.name}{' strict' if strict else ''} {outcome(path, strict)}")
            if path.stat().st_size > SMALL:
                continue
            text = path.read_bytes().decode("utf-8", "replace")
            for name, body in variants(text, k).items():
                v = Path(tmp) / f"{path.name}.{name}"
                v.write_bytes(body.encode("utf-8", "surrogatepass"))
                for strict in (False, True):
                    rows.append(f"{path.name}:{name}{' strict' if strict else ''} "
                                f"{outcome(v, strict)}")
    print("\n".join(sorted(rows)))


if __name__ == "__main__":
    main()
