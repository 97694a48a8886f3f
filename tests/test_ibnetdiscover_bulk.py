"""Topology text read at once with numpy (smroute.fabric.ibnetdiscover.bulk)
against the line loop (smroute.fabric.ibnetdiscover.records).

``parse_topology`` of a whole text (``str``) takes the numpy reading where
every line is in the form ibnetdiscover prints; given the lines (a list) it
always runs the line loop.  Both must give the same fabric, the same
warnings and the same errors, on every fixture, real capture and generated
fabric, and on variants of them (other separators, CRLF, noise, lines
dropped, doubled or changed).
"""

from __future__ import annotations

import random
import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ibnetdiscover import mutate

from smroute.fabric.export.writers import format_topology
from smroute.fabric.generate.shapes import with_aggregation_nodes
from smroute.fabric.generate.trees import degrade, kary_ntree, pgft
from smroute.fabric.ibnetdiscover.bulk import bulk_records, records_of
from smroute.fabric.ibnetdiscover.parse import (
    ParseWarning,
    TopologyError,
    parse_topology,
    read_fabric,
)
from smroute.fabric.ibnetdiscover.records import EXPECTED_ANY, parse_records
from smroute.fabric.ibnetdiscover.text import Skipper
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType
from smroute.fabric.model.builder import FabricBuilder

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "fabrics" / "real"
FILES = sorted((ROOT / "fixtures").glob("*.topo")) + sorted(
    p for p in REAL.glob("*") if p.is_file() and p.name != "README.md")
#: variants are made of the files up to this size (the line loop is the slow side)
SMALL = 200_000


def key(f: Fabric) -> list[object]:
    """Every array and description of ``f``, comparable with ``==``."""
    out: list[object] = []
    for fld in fields(f):
        v = getattr(f, fld.name)
        out.append((fld.name, str(v.dtype), v.tobytes()) if isinstance(v, np.ndarray) else v)
    return out


def outcome(text: str | list[str], strict: bool) -> tuple[object, list[str]]:
    warnings: list[ParseWarning] = []
    got: object
    try:
        got = key(parse_topology(text, "t.topo", strict=strict, warnings=warnings))
    except TopologyError as err:
        got = ("error", str(err), err.line, err.expected)
    return got, [str(w) for w in warnings]


def generated() -> dict[str, str]:
    trees = {
        "pgft-3": pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]),
        "pgft-2-agg": with_aggregation_nodes(pgft(2, [4, 4], [1, 4], [1, 1])),
        "kary-2-4": kary_ntree(2, 4),
        "degraded": degrade(pgft(2, [6, 6], [1, 6], [1, 1]), np.random.default_rng(7),
                            switches=1, links=3)[0],
    }
    return {name: "\n".join(format_topology(f)) + "\n" for name, f in trees.items()}


def variants(text: str, seed: int) -> dict[str, str]:
    """Ways the same capture is kept, and ways it goes wrong."""
    rng = random.Random(seed)
    lines = text.split("\n")

    def pick(*starts: str) -> int:
        idx = [i for i, ln in enumerate(lines) if ln.lstrip().startswith(starts)]
        return rng.choice(idx) if idx else 0

    port, head = pick("["), pick("Switch", "Ca", "Rt")
    guid, blank = pick("switchguid", "caguid"), pick("")
    ln = lines[port]
    digits = [i for i, c in enumerate(ln) if c in "0123456789abcdef"] or [0]
    d = rng.choice(digits)

    def put(i: int, new: list[str], drop: int = 0) -> str:
        return "\n".join(lines[:i] + new + lines[i + drop:])

    return {
        "as-is": text,
        "crlf": text.replace("\n", "\r\n"),
        "spaces": text.replace("\t", " "),
        "squeezed": text.replace("\t", "").replace(' "', '"'),
        "blanks-around": "\n".join(f"  {x}\t " for x in lines),
        "no-final-newline": text.rstrip("\n"),
        "bom": "\ufeff" + text,
        "unicode": text.replace('# "', '# "\u00e9\u4e2d', 3),
        "line-separator": text.replace('# "', '# "\u2028', 1),
        "drop-port": put(port, [], 1),
        "drop-head": put(head, [], 1),
        "drop-guid-line": put(guid, [], 1),
        "double-port": put(port, [ln]),
        "changed-digit": put(port, [ln[:d] + ("1" if ln[d] != "1" else "2") + ln[d + 1:]], 1),
        "port-zero": put(port, ["[0" + ln[ln.find("]"):]], 1),
        "noise-first": "user@host:~$ ibnetdiscover\n" + text,
        "noise-between": put(blank, ["some text"]),
        "diagnostic": put(blank, ["ibwarn: [123] mad_rpc: _do_madrpc failed"]),
        "comment-inside": put(port, ["# a comment"]),
        "id-line-comment": put(guid, [lines[guid] + "  # note"], 1),
        "blank-lid": text.replace(" lid 1 ", " lid  ", 1),
        "big-lid": text.replace(" lid 1 ", " lid 70000 ", 1),
        "lmc-8": text.replace(" lmc 0", " lmc 8", 1),
        "ext": text.replace("]\t", "][ext 3]\t", 1),
        "full-info": text.replace("DR\n", "DR s=1 w=2 v=3\n", 1),
        "tail-lost": put(port, [ln[:ln.rfind(" ")]], 1),
    }


CASES = [(p.name, p.read_bytes().decode("utf-8", "replace")) for p in FILES]
CASES += sorted(generated().items())


@pytest.mark.parametrize(("name", "text"), CASES, ids=[c[0] for c in CASES])
def test_whole_text_reads_as_its_lines(name: str, text: str) -> None:
    """The same outcome (fabric, warnings, error) from the whole text as from
    its lines, for the text as kept and, for the smaller ones, its variants."""
    cases = variants(text, len(name)) if len(text) <= SMALL else {"as-is": text}
    for what, body in cases.items():
        for strict in (False, True):
            assert outcome(body, strict) == outcome(body.splitlines(), strict), (what, strict)


@pytest.mark.parametrize(("name", "text"), sorted(generated().items()))
def test_canonical_text_is_read_by_numpy(name: str, text: str) -> None:
    """Text as ibnetdiscover prints it is read at once, into the line loop's records."""
    cols = bulk_records(text, Skipper("t", False, [], EXPECTED_ANY))
    assert cols is not None
    loop = parse_records(text, "t", Skipper("t", False, [], EXPECTED_ANY))
    assert records_of(cols) == loop
    for what in ("spaces", "blanks-around", "no-final-newline", "bom", "unicode",
                 "comment-inside"):
        assert bulk_records(variants(text, 1)[what], Skipper("t", False, [], "")) is not None


@pytest.mark.parametrize("what", ["crlf", "squeezed", "noise-first", "noise-between",
                                  "diagnostic", "id-line-comment", "ext", "full-info",
                                  "drop-head", "double-port", "port-zero", "line-separator",
                                  "big-lid", "lmc-8", "tail-lost"])
def test_other_forms_and_defects_are_left_to_the_line_loop(what: str) -> None:
    text = generated()["pgft-3"]
    assert bulk_records(variants(text, 3)[what], Skipper("t", False, [], "")) is None


def test_ibdiagnet_labels_and_grouping_are_left_to_the_line_loop() -> None:
    text = generated()["pgft-3"]
    labelled = text.replace("[1]\t", "[1](1/1/1)\t", 1)
    grouped = text.replace("\nvendid", "\nChassis 1 (IS5100)\nvendid", 1)
    for body in (labelled, grouped):
        assert bulk_records(body, Skipper("t", False, [], "")) is None
        assert outcome(body, False) == outcome(body.splitlines(), False)


def test_a_check_with_something_to_say_names_the_line() -> None:
    """Read at once, then a check fails (a port GUID twice): the error names
    the line, as the line loop's does."""
    text = generated()["pgft-3"]
    lines = text.splitlines()
    cas = [i for i, ln in enumerate(lines) if ln.startswith("[1](")]
    first = lines[cas[0]]
    guid = first[first.index("(") + 1:first.index(")")]
    other = lines[cas[1]]
    lines[cas[1]] = other[:other.index("(") + 1] + guid + other[other.index(")"):]
    body = "\n".join(lines)
    assert bulk_records(body, Skipper("t", False, [], "")) is not None
    got = outcome(body, False)[0]
    assert isinstance(got, tuple) and got[0] == "error" and got[2] == cas[1] + 1, got
    assert "duplicate port GUID" in str(got[1])
    assert got == outcome(lines, False)[0]


def test_switch_without_lid_warns_as_the_line_loop_does() -> None:
    text = re.sub(r"port 0 lid [0-9]+", "port 0 lid 0", generated()["pgft-3"], count=1)
    assert bulk_records(text, Skipper("t", False, [], "")) is not None
    got, warned = outcome(text, False)
    assert isinstance(got, list) and len(warned) == 1 and "no LID (lid 0)" in warned[0]
    assert (got, warned) == outcome(text.splitlines(), False)


def test_read_fabric_reads_a_file_at_once(tmp_path: Path) -> None:
    text = generated()["pgft-2-agg"]
    path = tmp_path / "f.topo"
    path.write_text(text)
    assert key(read_fabric(path)) == key(parse_topology(text.splitlines(), "x"))


def test_add_node_rows_is_add_node_in_a_row() -> None:
    kinds = [NodeType.SWITCH, NodeType.CA, NodeType.ROUTER, NodeType.CA]
    one, rows = FabricBuilder(), FabricBuilder()
    for i, k in enumerate(kinds):
        one.add_node(k, 100 + i, 2 + i, f"n{i}", sysimg_guid=7 * i, vendor_id=i, device_id=2 * i)
    got = rows.add_node_rows(np.array([int(k) for k in kinds]), 100 + np.arange(4),
                             2 + np.arange(4), [f"n{i}" for i in range(4)],
                             sysimg_guids=7 * np.arange(4), vendor_ids=np.arange(4),
                             device_ids=2 * np.arange(4))
    assert got.tolist() == [0, 1, 2, 3]
    assert key(one.build()) == key(rows.build())


def test_long_runs_of_blanks_are_left_to_the_line_loop() -> None:
    """Blanks are stepped over a column at a time: a long run goes to the loop."""
    text = generated()["pgft-3"]
    wide = text.replace("\t\t#", " " * 100 + "#", 1)
    assert bulk_records(text.replace("\t\t#", " " * 60 + "#", 1), Skipper("t", False, [], ""))
    assert bulk_records(wide, Skipper("t", False, [], "")) is None
    assert outcome(wide, False) == outcome(wide.splitlines(), False)


#: characters of the grammar, separators and characters str.splitlines and strip treat apart
NASTY = '"[]()#-=x0123456789abcdefSHRxlidmc \t\r\x0b\x1c\x85\u2028\xa0\x00é?\\'
_BASES = [generated()["pgft-3"], generated()["pgft-2-agg"]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(_BASES))),
       st.lists(st.tuples(st.sampled_from(["del", "dup", "char", "insert", "drop_char"]),
                          st.integers(0, 10_000), st.integers(0, 10_000),
                          st.text(alphabet=NASTY, max_size=8)), min_size=1, max_size=3))
def test_fuzz_whole_text_reads_as_its_lines(base: int,
                                            ops: list[tuple[str, int, int, str]]) -> None:
    body = "\n".join(mutate(_BASES[base].split("\n"), ops))
    for strict in (False, True):
        assert outcome(body, strict) == outcome(body.splitlines(), strict)
