"""Fast table outputs: the streamed JSON writer (byte for byte ``json.dumps`` of
the smroute-lft/1 document), its numpy reader and the ``json.loads`` fallback,
and ``smroute route --no-port-guids``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from smroute.cli.main import main
from smroute.errors import InputError
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route
from smroute.tables.diff import diff_tables
from smroute.tables.formats import read_tables, write_tables
from smroute.tables.json_io import format_json, iter_json, parse_json
from smroute.tables.lft import NO_ROUTE, ForwardingTables


def reference_json(t: ForwardingTables) -> str:
    """The document as ``json.dumps`` makes it (the writer before streaming)."""
    sw = []
    for i in range(t.n_switches):
        lids = np.flatnonzero(t.ports[i] != NO_ROUTE)
        sw.append({
            "guid": f"{int(t.switch_guid[i]):#018x}",
            "lid": int(t.switch_lid[i]),
            "desc": t.switch_desc[i],
            "routes": np.stack([lids, t.ports[i, lids]], axis=1).tolist(),
        })
    end = {"switches": t.n_switches, "entries": sum(len(x["routes"]) for x in sw)}
    return json.dumps({"format": "smroute-lft/1", "max_lid": t.max_lid, "switches": sw,
                       "end": end})


def tables(ports: np.ndarray, descs: tuple[str, ...] | None = None) -> ForwardingTables:
    s = ports.shape[0]
    return ForwardingTables(
        switch_guid=np.arange(1, s + 1, dtype=np.uint64) * np.uint64(0x1000_0000_0001),
        switch_lid=np.arange(s, dtype=np.int64) + 1,
        switch_desc=descs if descs is not None else tuple(f"sw {i}" for i in range(s)),
        ports=ports.astype(np.uint8),
    )


def random_tables(seed: int, s: int, w: int, holes: float) -> ForwardingTables:
    rng = np.random.default_rng(seed)
    ports = rng.integers(0, 255, size=(s, w))
    ports[rng.random((s, w)) < holes] = NO_ROUTE
    return tables(ports)


def same(got: ForwardingTables, want: ForwardingTables) -> None:
    assert diff_tables(want, got).identical
    np.testing.assert_array_equal(got.switch_guid, want.switch_guid)
    np.testing.assert_array_equal(got.switch_lid, want.switch_lid)
    assert got.switch_desc == want.switch_desc


CASES = {
    "routed-fabric": lambda: route(pgft(3, [2, 2, 3], [1, 2, 2], [1, 2, 1]), workers=1).tables,
    "random": lambda: random_tables(1, 7, 300, 0.2),
    "wide-lids": lambda: random_tables(2, 3, 0xC000, 0.9),
    "all-ports": lambda: tables(np.tile(np.arange(255), (2, 1))),
    "empty-rows": lambda: tables(np.array([[NO_ROUTE] * 5, [1, 2, NO_ROUTE, 3, 0],
                                           [NO_ROUTE] * 5])),
    "no-switch": lambda: tables(np.zeros((0, 4))),
    "odd-descs": lambda: tables(np.array([[1, 2], [3, 4], [5, 6]]),
                                ('quote " and \\ back', "tab\there", "Zürich ✓")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_writer_is_json_dumps_byte_for_byte(case: str) -> None:
    t = CASES[case]()
    want = reference_json(t)
    assert format_json(t) == want
    assert b"".join(iter_json(t, chunk_entries=1)).decode() == want  # one switch per chunk
    assert b"".join(iter_json(t, chunk_entries=10**9)).decode() == want  # all in one


@pytest.mark.parametrize("case", sorted(CASES))
def test_reader_fast_path_and_fallback(case: str) -> None:
    t = CASES[case]()
    text = format_json(t)
    fast = parse_json(text, "t.json")
    same(fast, t)
    # any other layout of the same document goes through json.loads
    doc = json.loads(text)
    for other in (json.dumps(doc, indent=2), json.dumps(doc, separators=(",", ":")),
                  json.dumps({**doc, "max_lid": 1}), json.dumps(dict(reversed(doc.items())))):
        same(parse_json(other, "t.json"), fast)


def test_reader_near_misses_fall_back_to_json() -> None:
    t = tables(np.array([[1, 2, NO_ROUTE], [3, NO_ROUTE, 4]]))
    text = format_json(t)
    # routes out of order or repeated: the fast path's re-render differs, json.loads decides
    swapped = text.replace("[[0, 1], [1, 2]]", "[[1, 2], [0, 1]]")
    assert swapped != text
    same(parse_json(swapped), t)
    # a long number is not a LID
    with pytest.raises(InputError, match="bad JSON tables"):
        parse_json(text.replace("[[0, 1]", "[[12345678901, 1]"))


@pytest.mark.parametrize("text", [
    "", "{", "[]", '{"format": "other", "switches": []}',
    '{"format": "smroute-lft/1", "max_lid": 2, "switches": [{"guid": "0x1", "lid": 1, '
    '"desc": "", "routes": [[1, 2, 3]]}]}',
    '{"format": "smroute-lft/1", "max_lid": 2, "switches": [{"guid": "0x1", "lid": 1, '
    '"desc": "", "routes": [[1, 300]]}]}',
    '{"format": "smroute-lft/1", "max_lid": 2, "switches": [{"lid": 1, "routes": []}]}',
    '{"format": "smroute-lft/1", "max_lid": 2, "switches": [{"guid": "0x1", "lid": 99999999, '
    '"desc": "", "routes": []}]}',
])
def test_reader_errors(text: str) -> None:
    with pytest.raises(InputError, match="x.json: bad JSON tables"):
        parse_json(text, "x.json")


def test_written_file_reads_back(tmp_path: Path) -> None:
    t = CASES["random"]()
    out = tmp_path / "t.json"
    assert write_tables(t, out, "json") == [out]
    assert out.read_text() == reference_json(t)
    same(read_tables(out), t)
    spaced = tmp_path / "spaced.json"
    spaced.write_text("\n  " + json.dumps(json.loads(out.read_text()), indent=1))
    same(read_tables(spaced), t)


@pytest.mark.parametrize("fmt", ["opensm", "json"])
def test_route_no_port_guids(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = pgft(2, [4, 3], [1, 2], [1, 1])
    topo = tmp_path / "f.topo"
    write_topology(f, topo)
    with_guids, without = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    assert main(["route", str(topo), "--out", str(with_guids), "--format", fmt, "-q",
                 "--workers", "1"]) == 0
    assert main(["route", str(topo), "--out", str(without), "--format", fmt, "-q",
                 "--workers", "1", "--no-port-guids"]) == 0
    assert "validation: valid" in capsys.readouterr().out
    a, b = with_guids.read_text(), without.read_text()
    assert ("portguid" in a) == (fmt == "opensm")
    assert "portguid" not in b
    if fmt == "opensm":
        assert len(b) < len(a) / 2
        assert "0x0001 001\n" in b
    else:
        assert a == b
    assert diff_tables(read_tables(with_guids), read_tables(without)).identical
