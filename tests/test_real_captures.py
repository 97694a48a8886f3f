"""Captures as operators keep them: the ibnetdiscover parsers on real files and
on hand-written snippets of each way real files differ from clean output.

* a UTF-8 BOM (and UTF-16 from a Windows shell);
* terminal prompts, ``script`` headers and other text before the first or
  after the last record, ibnetdiscover/libibmad diagnostics anywhere: skipped
  with a warning naming the line (``strict``: an error); unknown text between
  records stays an error;
* record heads and port lines whose separators were stripped;
* ibdiagnet's ``.ibnetdiscover`` dialect (port labels ``[1](1/1/1)``);
* the ``ibnetdiscover -p`` ports report, recognised by the CLI's reader;
* LIDs: unassigned (0, 0xffff) or shared LIDs are errors naming the ports;
* a partial discovery (CAs, no switch): a clear error from ``fabric summary``
  and ``route``, never a traceback.

The real captures are read from ``../shared/fabrics/real`` beside the checkout
(see its README.md); those tests skip when it is absent.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import pytest

from smroute.cli.main import build_parser, main
from smroute.errors import InputError
from smroute.fabric.ibnetdiscover.parse import (
    ParseWarning,
    TopologyError,
    detect_format,
    parse_ports_report,
    parse_topology,
    read_fabric,
    read_topology,
    require_switches,
)
from smroute.fabric.model.arrays import Fabric
from smroute.fabric.model.base import NodeType

REAL = Path(__file__).resolve().parents[2] / "shared" / "fabrics" / "real"
REAL_FILES = sorted(p for p in REAL.glob("*") if p.is_file() and p.name != "README.md")
needs_real = pytest.mark.skipif(
    not REAL_FILES, reason=f"real captures not found at {REAL} (../shared beside the checkout)"
)


def peer_of(f: Fabric, guid: int, port: int) -> tuple[int, int]:
    """(node GUID, port) at the other end of a port's link."""
    r = f.peer(f.port_row(f.node_by_guid(guid), port))
    assert r >= 0, f"{guid:#x}[{port}] is not linked"
    return int(f.node_guid[f.port_node[r]]), int(f.port_num[r])


def lid_of(f: Fabric, guid: int, port: int) -> int:
    return int(f.port_lid[f.port_row(f.node_by_guid(guid), port)])


def raises_at(lines: list[str], line: int | None, **kw: object) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        parse_topology(lines, "t.topo", **kw)  # type: ignore[arg-type]
    assert info.value.line == line, str(info.value)
    assert info.value.source == "t.topo"
    return info.value


# A small clean capture: a switch, a CA, one link.
CLEAN = [
    "#",
    "# Topology file: generated on Mon Jul 25 11:30:26 2016",
    "#",
    "",
    "vendid=0x2c9",
    "devid=0xcb20",
    "switchguid=0xe41d2d030003e470(e41d2d030003e470)",
    'Switch\t36 "S-e41d2d030003e470"\t\t# "sw" base port 0 lid 268 lmc 0',
    '[34]\t"H-e41d2d030061f956"[1](e41d2d030061f957) \t\t# "host HCA-1" lid 2 4xEDR',
    "",
    "vendid=0x2c9",
    "caguid=0xe41d2d030061f956",
    'Ca\t2 "H-e41d2d030061f956"\t\t# "host HCA-1"',
    '[1](e41d2d030061f957) \t"S-e41d2d030003e470"[34]\t\t# lid 2 lmc 0 "sw" lid 268 4xEDR',
]
SW, HCA = 0xE41D2D030003E470, 0xE41D2D030061F956


def clean_hash() -> str:
    return parse_topology(CLEAN).content_hash


# --------------------------------------------------------------------------
# 1. A byte order mark
# --------------------------------------------------------------------------
def test_utf8_bom_is_accepted_in_text_lines_bytes_and_files(tmp_path: Path) -> None:
    with_bom = ["\ufeff" + CLEAN[0], *CLEAN[1:]]
    assert parse_topology(with_bom).content_hash == clean_hash()
    assert parse_topology("\ufeff" + "\n".join(CLEAN)).content_hash == clean_hash()
    as_bytes = [b"\xef\xbb\xbf" + CLEAN[0].encode(), *(ln.encode() for ln in CLEAN[1:])]
    assert parse_topology(as_bytes).content_hash == clean_hash()  # type: ignore[arg-type]
    # a BOM right before the first record (no header comments)
    assert parse_topology(["\ufeff" + CLEAN[4], *CLEAN[5:]]).content_hash == clean_hash()
    p = tmp_path / "bom.topo"
    p.write_bytes(b"\xef\xbb\xbf" + ("\r\n".join(CLEAN) + "\r\n").encode())
    warnings: list[ParseWarning] = []
    assert read_topology(p, warnings=warnings).content_hash == clean_hash()
    assert warnings == []


def test_utf16_capture_from_a_windows_shell(tmp_path: Path) -> None:
    p = tmp_path / "win.topo"
    p.write_bytes(("\r\n".join(CLEAN) + "\r\n").encode("utf-16"))  # with its BOM
    assert read_topology(p).content_hash == clean_hash()


def test_binary_file_is_not_a_text_file(tmp_path: Path) -> None:
    p = tmp_path / "x.topo.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00" + bytes(100))
    with pytest.raises(InputError, match="cannot decompress \\(gzip data cut short or corrupt"):
        read_topology(p)


# --------------------------------------------------------------------------
# 2. Noise: prompts, script headers, diagnostics
# --------------------------------------------------------------------------
PREAMBLE = [
    'Script started on 2024-03-01 10:00:00+00:00 [TERM="xterm-256color" COLUMNS="200"]',
    "\x1b]0;root@mgmt01:~\x07[root@mgmt01 ~]# ibnetdiscover",
]
TRAILER = ["[root@mgmt01 ~]# exit", "exit", "", "Script done on 2024-03-01 10:00:05+00:00"]
DIAG = "src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad status 110; "\
    "Connection timed out"
IBWARN = "ibwarn: [12345] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1,3)"
IBERROR = "ibnetdiscover: iberror: failed: discover failed"


def test_terminal_log_around_the_records_is_skipped_with_warnings() -> None:
    lines = [*PREAMBLE, *CLEAN, *TRAILER]
    warnings: list[ParseWarning] = []
    f = parse_topology(lines, "log.txt", warnings=warnings)
    assert f.content_hash == clean_hash()
    n = len(PREAMBLE) + len(CLEAN)
    assert [w.line for w in warnings] == [1, 2, n + 1, n + 2, n + 4]
    assert [w.reason for w in warnings] == ["text before the first record"] * 2 + [
        "text after the last record"] * 3
    assert all(w.source == "log.txt" for w in warnings)
    assert warnings[0].text == PREAMBLE[0]
    text = str(warnings[1])
    assert text.startswith("log.txt:2: warning: skipped text before the first record: '")
    assert "\x1b" not in text and "\x07" not in text and "\\x1b" in text  # escaped
    assert str(warnings[-1]) == (
        "log.txt:20: warning: skipped text after the last record: "
        "'Script done on 2024-03-01 10:00:05+00:00'"
    )


def test_a_prompt_right_after_the_last_port_line_is_trailer() -> None:
    warnings: list[ParseWarning] = []
    f = parse_topology([*CLEAN, "[root@mgmt01 ~]# ", "[1]+  Done  ibnetdiscover > fabric.topo"],
                       warnings=warnings)
    assert f.content_hash == clean_hash()
    assert [w.line for w in warnings] == [len(CLEAN) + 1, len(CLEAN) + 2]


def test_diagnostics_anywhere_are_skipped() -> None:
    lines = list(CLEAN)
    lines.insert(0, DIAG)
    lines.insert(line_index(lines, "caguid=") + 1, IBWARN)  # between id lines and the head
    lines.insert(line_index(lines, '[34]\t"H-'), IBERROR)  # inside a record
    lines.append(DIAG)
    warnings: list[ParseWarning] = []
    assert parse_topology(lines, warnings=warnings).content_hash == clean_hash()
    assert [w.text for w in warnings] == [DIAG, IBERROR, IBWARN, DIAG]
    assert [w.line for w in warnings] == sorted(w.line or 0 for w in warnings)
    assert {w.reason for w in warnings} == {"a diagnostic line"}
    for other in ("ibwarn: [42] smp_query_via: attr 0x15 mod 0x0 route DR path 0,1",
                  "libibumad: iberror: umad_open_port: can't open UMAD port (mlx5_0:1)",
                  "ibpanic: [1] main: discover failed",
                  "ibnetdiscover: ibwarn: [9] no port"):
        warnings = []
        assert parse_topology([*CLEAN[:8], other, *CLEAN[8:]], warnings=warnings).content_hash \
            == clean_hash()
        assert [w.line for w in warnings] == [9], other


def line_index(lines: list[str], start: str) -> int:
    return next(i for i, ln in enumerate(lines) if ln.startswith(start))


def test_unknown_text_between_records_stays_an_error() -> None:
    lines = list(CLEAN)
    k = 9  # the blank line between the switch and the CA record
    assert lines[k] == ""
    lines.insert(k + 1, "[root@mgmt01 ~]# oops")
    e = raises_at(lines, k + 2)
    assert "unrecognised line '[root@mgmt01 ~]# oops' between records" in e.message
    assert e.expected and "a record head" in e.expected
    # also right after a port line, inside the record
    lines = [*CLEAN[:9], "some text", *CLEAN[9:]]
    e = raises_at(lines, 10)
    assert "between records" in e.message


def test_strict_makes_every_skipped_line_an_error() -> None:
    e = raises_at([*PREAMBLE, *CLEAN], 1, strict=True)
    assert "unrecognised line 'Script started" in e.message
    e = raises_at([*CLEAN, *TRAILER], len(CLEAN) + 1, strict=True)
    assert "unrecognised line '[root@mgmt01 ~]# exit'" in e.message
    e = raises_at([*CLEAN[:8], DIAG, *CLEAN[8:]], 9, strict=True)
    assert "diagnostic line 'src/query_smp.c:195;" in e.message
    assert parse_topology(CLEAN, strict=True).content_hash == clean_hash()


def test_warnings_are_kept_when_parsing_fails() -> None:
    warnings: list[ParseWarning] = []
    bad = [*PREAMBLE, *CLEAN[:8], '[34]\t"H-e41d2d030061f956"[1](zz)']
    with pytest.raises(TopologyError):
        parse_topology(bad, warnings=warnings)
    assert [w.line for w in warnings] == [1, 2]


def test_no_records_names_the_first_skipped_line() -> None:
    warnings: list[ParseWarning] = []
    with pytest.raises(TopologyError) as info:
        parse_topology(["Unicast lids [0x0-0x3] of switch Lid 2 guid 0x1 (SW1):",
                        "0x0001 001 : (Channel Adapter portguid 0x2: 'h')"], "x",
                       warnings=warnings)
    e = info.value
    assert e.line == 1 and "no node records found; unrecognised line 'Unicast lids" in e.message
    assert "(and 1 more skipped lines)" in e.message
    assert warnings == []  # the error sums them up


def test_malformed_record_lines_are_errors_not_noise() -> None:
    """Lines that look like a record head or port line are never skipped."""
    raises_at([*PREAMBLE, 'Switch 36 "S-e41d2d030003e470" junk'], 3)
    raises_at([*PREAMBLE, '[1]\t"S-e41d2d030003e470"[1]'], 3)  # port line outside a record
    e = raises_at([*CLEAN, '[2](e41d2d030061f958)\t"S-e41d2d030003e470"[35'], len(CLEAN) + 1)
    assert "malformed CA/router port line" in e.message
    e = raises_at([*CLEAN[:9], '[35]\t"H-e41d2d030061f956"[2'], 10)
    assert "malformed switch port line" in e.message
    e = raises_at([*CLEAN[:9], "[x]\tgarbage here"], 10)
    assert "malformed switch port line '[x]\\tgarbage here'" in e.message
    warnings: list[ParseWarning] = []
    parse_topology([*CLEAN, "[user@host]$ exit"], warnings=warnings)
    assert [w.line for w in warnings] == [len(CLEAN) + 1]


# --------------------------------------------------------------------------
# 3. Separators stripped or replaced
# --------------------------------------------------------------------------
@pytest.mark.parametrize("variant", [
    # whitespace instead of tabs (gary-minghuili-*, HyungKwang-*)
    {'Switch\t36 "S-': 'Switch  36 "S-', '"\t\t# "sw"': '"      # "sw"',
     '[34]\t"H-': '[34]    "H-', '\t"S-e41d': '    "S-e41d'},
    # separators stripped altogether
    {'Switch\t36 "S-e41d2d030003e470"\t\t#': 'Switch36"S-e41d2d030003e470"#',
     'Ca\t2 "H-e41d2d030061f956"\t\t#': 'Ca2"H-e41d2d030061f956"#',
     '[34]\t"H-e41d2d030061f956"[1](e41d2d030061f957) \t\t#':
         '[34]"H-e41d2d030061f956"[1](e41d2d030061f957)#',
     '[1](e41d2d030061f957) \t"S-e41d2d030003e470"[34]\t\t#':
         '[1](e41d2d030061f957)"S-e41d2d030003e470"[34]#'},
    # Switch41-style heads with a single space before the comment
    {'Switch\t36 "S-e41d2d030003e470"\t\t#': 'Switch36 "S-e41d2d030003e470" #',
     'Ca\t2 ': "Ca2 ", "# lid 2 lmc 0": "#lid 2 lmc 0"},
    # Hca alias, spaces inside brackets and parentheses
    {"Ca\t2 ": "Hca 2 ", "[1](e41d2d030061f957)": "[1]( e41d2d030061f957 )"},
])
def test_separator_variants_parse_the_same(variant: dict[str, str]) -> None:
    lines = list(CLEAN)
    for old, new in variant.items():
        hits = [i for i, ln in enumerate(lines) if old in ln]
        assert hits, old
        for i in hits:
            lines[i] = lines[i].replace(old, new)
    assert lines != CLEAN
    warnings: list[ParseWarning] = []
    f = parse_topology(lines, warnings=warnings)
    assert f.content_hash == clean_hash() and warnings == []
    assert f.node_desc == ("sw", "host HCA-1")


# --------------------------------------------------------------------------
# 4. ibdiagnet's dialect
# --------------------------------------------------------------------------
IBDIAGNET = [
    "# This database file was automatically generated by IBDIAG",
    '# Running version   : "IBDIAGNET 2.10.0","IBDIAG 2.1.1"',
    "# Running command   : /usr/bin/ibdiagnet ",
    "",
    "",
    "# Switch label port numbering explanation:",
    "#   Quantum2 switch split mode: ASIC/Cage/Port/Split, e.g 1/1/1/1",
    "",
    "vendid=0x2c9",
    "devid=0xd2f2",
    "sysimgguid=0xb0cf0e0300d33fc0",
    "switchguid=0xb0cf0e0300d33fc0(b0cf0e0300d33fc0)",
    'Switch  65 "S-b0cf0e0300d33fc0"      # "core" enhanced port 0 lid 180 lmc 0',
    '[1](1/1/1) "S-fc6a1c030091cf00"[63]      # "leaf" lid 13 4xNDR',
    '[2](1/1/2/2) "S-fc6a1c030091cf00"[64]      # "leaf" lid 13 2xNDR',
    "",
    "",
    "vendid=0x2c9",
    "devid=0xd2f2",
    "sysimgguid=0xfc6a1c030091cf00",
    "switchguid=0xfc6a1c030091cf00(fc6a1c030091cf00)",
    'Switch  65 "S-fc6a1c030091cf00"      # "leaf" base port 0 lid 13 lmc 0',
    '[1](1/1/1) "H-5c25730300e6706e"[1](5c25730300e6706e)      # "node1 mlx5_8" lid 164 4xNDR',
    '[2](1/1/2) "H-c470bd03001001a2"[1](c470bd03001001a2)      # "node1 mlx5_0" lid 223 4xNDR',
    '[63](1/32/1) "S-b0cf0e0300d33fc0"[1]      # "core" lid 180 4xNDR',
    '[64](1/32/2/2) "S-b0cf0e0300d33fc0"[2]      # "core" lid 180 2xNDR',
    '[65](65) "H-fc6a1c030091cf08"[1](fc6a1c030091cf08)      # '
    '"Mellanox Technologies Aggregation Node" lid 15 4xNDR',
    "",
    "",
    "vendid=0x2c9",
    "devid=0xcf09",
    "sysimgguid=0xfc6a1c030091cf00",
    "caguid=0xfc6a1c030091cf08",
    'Ca  1 "H-fc6a1c030091cf08"      # "Mellanox Technologies Aggregation Node"',
    '[1](1)(fc6a1c030091cf08) "S-fc6a1c030091cf00"[65] # lid 15 lmc 0 "leaf" lid 13 4xNDR',
    "",
    "",
    "caguid=0x5c25730300e6706e",
    'Ca  1 "H-5c25730300e6706e"      # "node1 mlx5_8"',
    '[1](5c25730300e6706e) "S-fc6a1c030091cf00"[1] # lid 164 lmc 0 "leaf" lid 13 4xNDR',
    "",
    "caguid=0xc470bd03001001a2",
    'Ca  1 "H-c470bd03001001a2"      # "node1 mlx5_0"',
    '[1](B9D0F0/0/0/1)(c470bd03001001a2) "S-fc6a1c030091cf00"[2] # lid 223 lmc 0 "leaf" '
    "lid 13 4xNDR",
    "",
    "",
    "",
    "",
    "# File closed at : 2025-03-31 23:43:20 UTC +0000",
]
CORE, LEAF, AN, N8, N0 = (0xB0CF0E0300D33FC0, 0xFC6A1C030091CF00, 0xFC6A1C030091CF08,
                          0x5C25730300E6706E, 0xC470BD03001001A2)


def test_ibdiagnet_dialect_port_labels() -> None:
    warnings: list[ParseWarning] = []
    f = parse_topology(IBDIAGNET, warnings=warnings)
    assert warnings == []
    assert (len(f.switches), len(f.cas), f.n_links) == (2, 3, 5)
    assert peer_of(f, CORE, 1) == (LEAF, 63)
    assert peer_of(f, CORE, 2) == (LEAF, 64)  # a split port
    assert peer_of(f, LEAF, 65) == (AN, 1)
    assert peer_of(f, N0, 1) == (LEAF, 2)
    # ibdiagnet prints a CA's port GUID equal to its node GUID
    for g in (AN, N8, N0):
        assert int(f.port_guid[f.port_row(f.node_by_guid(g), 1)]) == g
    assert (lid_of(f, AN, 1), lid_of(f, N0, 1), lid_of(f, CORE, 0)) == (15, 223, 180)
    assert int(f.port_width[f.port_row(f.node_by_guid(CORE), 2)]) == 2
    # the same fabric without labels
    plain = [re.sub(r"^(\[\d+\])\([0-9A-Za-z/]+\)(?=\()", r"\1", ln) for ln in IBDIAGNET]
    plain = [re.sub(r"^(\[\d+\])\([0-9A-Za-z]*/[0-9A-Za-z/]*\)", r"\1", ln) for ln in plain]
    plain = [ln.replace("[65](65)", "[65]") for ln in plain]
    assert all("/" not in ln.split('"')[0] and "(1)(" not in ln
               for ln in plain if ln.startswith("["))
    assert plain != IBDIAGNET
    assert parse_topology(plain).content_hash == f.content_hash


def test_ibdiagnet_label_edge_cases() -> None:
    # a label on a switch line must be a label, not a GUID in disguise: (65) is ignored
    f = parse_topology(IBDIAGNET)
    assert int(f.port_guid[f.port_row(f.node_by_guid(LEAF), 65)]) == 0
    # a malformed label is a malformed port line, at its line
    lines = [ln.replace("[1](1/1/1) \"S-fc6a", "[1](1/1/1 \"S-fc6a") for ln in IBDIAGNET]
    e = raises_at(lines, 14)
    assert "malformed switch port line" in e.message


# --------------------------------------------------------------------------
# 5. The ports report (ibnetdiscover -p)
# --------------------------------------------------------------------------
REPORT = [
    "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 "
    "( 'o0001 HCA-1' - 'ib-i1l1s01' )",
    "SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA   134  1 0x7cfe9003003b4bde "
    "( 'ib-i1l1s01' - 'o0001 HCA-1' )",
    "SW  1719  1 0x7cfe9003009ce5b0 4x EDR - SW  1516  1 0x7cfe900300b07320 "
    "( 'ib-i1l1s01' - 'ib-i1l2s01' )",
    "SW  1719 37 0x7cfe9003009ce5b0 4x ???                                    'ib-i1l1s01'",
]


def test_detect_format() -> None:
    assert detect_format(REPORT) == "ports"
    assert detect_format(["\ufeff# x", "", DIAG, "[root@h ~]# ibnetdiscover -p", *REPORT]) == \
        "ports"
    assert detect_format(CLEAN) == "topology"
    assert detect_format(IBDIAGNET) == "topology"
    assert detect_format([*PREAMBLE, *CLEAN]) == "topology"
    assert detect_format(['Switch41 "S-1"']) == "topology"
    assert detect_format([]) == "topology"


def test_ports_report_fragment_drops_links_to_unlisted_nodes() -> None:
    warnings: list[ParseWarning] = []
    f = parse_ports_report(["\ufeff" + REPORT[0], *REPORT[1:], *TRAILER], "r.out",
                           warnings=warnings)
    assert (len(f.switches), len(f.cas), f.n_links) == (1, 1, 1)
    assert [w.line for w in warnings] == [3, 5, 6, 8]
    assert "0x7cfe900300b07320[1], a port the report does not list" in str(warnings[0])
    assert str(warnings[0]).startswith("r.out:3: warning: skipped the link of port 1 to ")
    with pytest.raises(TopologyError) as info:
        parse_ports_report(REPORT, "r.out", strict=True)
    assert info.value.line == 3 and "not listed in the report" in info.value.message
    # a listed node whose port line is missing stays an error (one-sided link)
    with pytest.raises(TopologyError) as info:
        parse_ports_report(REPORT[:1] + REPORT[2:], "r.out")
    assert info.value.line == 1 and "one-sided" in info.value.message


def test_cli_reads_a_ports_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "ports.out"
    p.write_text("\n".join(["[root@h ~]# ibnetdiscover -p", *REPORT]) + "\n")
    assert main(["fabric", "summary", str(p)]) == 0
    cap = capsys.readouterr()
    assert f"{p}:1: warning: skipped text before the first record" in cap.err
    assert f"{p}:4: warning: skipped the link of port 1" in cap.err
    assert main(["fabric", "summary", str(p), "--strict"]) == 2
    assert f"smroute: error: {p}:1: unrecognised line" in capsys.readouterr().err


# --------------------------------------------------------------------------
# 6. LIDs
# --------------------------------------------------------------------------
def with_lids(sw: str = "268", ca: str = "2", lmc: str = "0") -> list[str]:
    return [ln.replace("base port 0 lid 268", f"base port 0 lid {sw}")
              .replace("# lid 2 lmc 0", f"# lid {ca} lmc {lmc}") for ln in CLEAN]


@pytest.mark.parametrize(("ca", "words"), [
    ("0", "has no LID (lid 0)"),
    ("65535", "has LID 65535 (0xffff, the permissive LID: not assigned)"),
    ("49152", "has LID 49152 (0xc000), which is not a unicast LID"),
])
def test_end_port_without_a_lid_is_an_error_naming_it(ca: str, words: str) -> None:
    lines = with_lids(ca=ca)
    e = raises_at(lines, len(CLEAN))
    assert e.exit_code == 2
    assert words in e.message
    assert 'port 1 (port GUID 0xe41d2d030061f957) of H-e41d2d030061f956 ("host HCA-1")' \
        in e.message
    assert e.expected and "unicast LID" in e.expected


def test_switch_port0_lids() -> None:
    e = raises_at(with_lids(sw="65535"), 8)
    assert 'port 0 of switch S-e41d2d030003e470 ("sw") has LID 65535' in e.message
    # LID 0 on a switch (real captures have them): a warning; strict: an error
    warnings: list[ParseWarning] = []
    f = parse_topology(with_lids(sw="0"), "t.topo", warnings=warnings)
    assert lid_of(f, SW, 0) == 0
    assert [(w.line, w.text) for w in warnings] == [(8, "")]
    assert str(warnings[0]).startswith(
        't.topo:8: warning: skipped port 0 of switch S-e41d2d030003e470 ("sw") as a route '
        "destination: it has no LID (lid 0)"
    )
    e = raises_at(with_lids(sw="0"), 8, strict=True)
    assert "has no LID" in e.message


def test_a_fabric_without_any_lid_is_accepted() -> None:
    """Captured before a subnet manager ran (ibsim without OpenSM): routing says so."""
    warnings: list[ParseWarning] = []
    f = parse_topology(with_lids(sw="0", ca="0"), warnings=warnings)
    assert int(f.port_lid.max()) == 0 and warnings == []


def test_shared_lids_name_both_ports() -> None:
    e = raises_at(with_lids(sw="2", ca="2"), len(CLEAN))
    assert "LID 2 is used by two ports: port 0 of switch S-e41d2d030003e470" in e.message
    assert "(LID 2, line 8) and port 1 (port GUID 0xe41d2d030061f957) of H-e41d2d030061f956" \
        in e.message
    # the 2^LMC range of a port: 4..7 with LMC 2
    e = raises_at(with_lids(sw="6", ca="4", lmc="2"), len(CLEAN))
    assert "LID 6 is used by two ports" in e.message and "(LIDs 4..7)" in e.message
    assert parse_topology(with_lids(sw="8", ca="4", lmc="2")).port_by_lid(7) >= 0
    assert parse_topology(with_lids(sw="3", ca="4", lmc="2")).n_links == 1


def test_ports_report_lid_checks() -> None:
    dup = [ln.replace("CA   134", "CA  1719") for ln in REPORT[:2]]
    dup = [ln.replace("SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA   134",
                      "SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA  1719") for ln in dup]
    with pytest.raises(TopologyError) as info:
        parse_ports_report(dup, "r")
    assert info.value.line == 2 and "LID 1719 is used by two ports" in info.value.message
    zero = [ln.replace("CA   134", "CA     0") for ln in REPORT[:2]]
    with pytest.raises(TopologyError) as info:
        parse_ports_report(zero, "r")
    assert info.value.line == 1 and "has no LID" in info.value.message


# --------------------------------------------------------------------------
# 7. A partial discovery
# --------------------------------------------------------------------------
PARTIAL = [
    "#", "# Topology file: generated on Fri Aug  8 06:33:24 2025", "#",
    "# Initiated from node b8e92403009ca838 port b8e92403009ca838", "",
    "vendid=0x2c9", "devid=0x1021", "sysimgguid=0xb8e92403009ca838", "caguid=0xb8e92403009ca838",
    'Ca\t1 "H-b8e92403009ca838"\t\t# "dgx-gb200-n01-c1 HCA-1"',
]


def test_partial_discovery_is_explained() -> None:
    f = parse_topology(PARTIAL)
    assert (len(f.switches), len(f.cas), f.n_links) == (0, 1, 0)
    with pytest.raises(TopologyError) as info:
        require_switches(f, "bad.out")
    e = info.value
    assert e.exit_code == 2 and e.source == "bad.out"
    assert "a partial discovery: it saw 1 CA and no switch" in e.message
    assert "rerun ibnetdiscover from a host whose port is up" in e.message
    require_switches(parse_topology(CLEAN))  # fine
    b2b = parse_topology([
        'Ca\t1 "H-0000000000000001"\t\t# "a"',
        '[1](2) \t"H-0000000000000003"[1] (4) \t\t# lid 1 lmc 0 "b" lid 2 4xEDR', "",
        'Ca\t1 "H-0000000000000003"\t\t# "b"',
        '[1](4) \t"H-0000000000000001"[1] (2) \t\t# lid 2 lmc 0 "a" lid 1 4xEDR',
    ])
    with pytest.raises(TopologyError, match="no switch: 2 CAs linked back to back, 1 link"):
        require_switches(b2b)


@pytest.mark.parametrize("command", ["summary", "route"])
def test_cli_partial_discovery_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "bad.out"
    p.write_text("\n".join(PARTIAL) + "\n")
    out = tmp_path / "x.lfts"
    argv = (["fabric", "summary", str(p)] if command == "summary"
            else ["route", str(p), "-q", "--out", str(out)])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"smroute: error: {p}: a partial discovery: it saw 1 CA and no switch")
    assert "Traceback" not in err and not out.exists()


# --------------------------------------------------------------------------
# 8. The CLI option, speed
# --------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["fabric", "summary", "F"],
    ["route", "F", "--out", "O"],
    ["analyze", "T", "--fabric", "F", "--pattern", "a2a"],
    ["lids", "--fabric", "F", "--job", "J"],
])
def test_strict_option_on_every_command_that_reads_a_fabric(argv: list[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(argv).strict is False
    assert parser.parse_args([*argv, "--strict"]).strict is True


def test_strict_cli_on_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "log.topo"
    p.write_text("\n".join([*PREAMBLE, *CLEAN, *TRAILER]) + "\n")
    assert main(["fabric", "summary", str(p)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: skipped") == 5 and f"{p}:1: warning: skipped text before" in err
    assert main(["route", str(p), "-q", "--strict", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"smroute: error: {p}:1: unrecognised line 'Script started" in err


def test_noise_handling_is_fast_on_long_lines() -> None:
    evil = [
        "x" * 50000 + ".c:1;",
        "ibnetdiscover" * 5000 + ": iberror",
        "[1](" + "1/" * 20000 + ') "S-1"[1]',
        "[1](" + "a" * 50000,
        "[" + " " * 50000 + "1",
        "Switch" + " " * 50000 + "x",
    ]
    for line in evil:
        for prefix in ([], CLEAN[:8], CLEAN[10:13]):
            t = time.perf_counter()
            with contextlib.suppress(TopologyError):
                parse_topology([*prefix, line])
            assert time.perf_counter() - t < 1.0, line[:20]


# --------------------------------------------------------------------------
# Every real capture (../shared/fabrics/real)
# --------------------------------------------------------------------------
#: file -> (switches, CAs, links, lines with a warning) for those that parse, or
#: (line, words) of the InputError (exit 2) expected from those that do not
#: parse or cannot be routed (load_fabric: parse + require_switches).
PARSES: dict[str, tuple[int, int, int, list[int]]] = {
    "HyungKwang-My-Programing-Topo.3.txt": (60, 2, 807, [1909]),  # a switch without LID
    "Mellanox-ufm_sdk_3.0-selene.storage.txt": (160, 1247, 3286, []),
    "Mellanox-ufm_sdk_3.0-small_topo_file": (2, 13, 16, []),
    "NVIDIA-topograph-example.out": (40, 582, 1114, []),
    "gary-minghuili-infiniband-exporter-ibdiagnet2.ibnetdiscover": (9, 263, 271, []),
    "jabl-ibtopotool-1.topo": (2, 4, 7, []),
    "jabl-ibtopotool-2.topo": (1, 2, 2, []),
    "jabl-ibtopotool-3.topo": (2, 6, 10, [1]),  # the diagnostic on line 1
    "jabl-ibtopotool-4.topo": (1, 1, 1, []),
    "loginoff-infiniband_topology-topo": (8, 144, 192, []),
    "ltaulell-HPC_toolset-X5.topofile": (11, 89, 159, []),
    "treydock-infiniband_exporter-ports-test.out": (3, 3, 3, [6]),  # a fragment
}
FAILS: dict[str, tuple[int | None, str]] = {
    "HyungKwang-My-Programing-Topo.8_-invalid_lid_Null.txt": (10, "its LID is blank"),
    "NVIDIA-topograph-example-bad.out": (None, "a partial discovery: it saw 1 CA and no switch"),
}


@needs_real
@pytest.mark.parametrize("path", REAL_FILES, ids=[p.name for p in REAL_FILES])
def test_every_real_capture(path: Path) -> None:
    from smroute.cli.inputs import load_fabric

    assert path.name in PARSES or path.name in FAILS, f"no expectation for {path.name}"
    if path.name in FAILS:
        line, words = FAILS[path.name]
        with pytest.raises(InputError) as info:
            load_fabric(str(path))
        assert info.value.source == str(path) and info.value.line == line, str(info.value)
        assert words in str(info.value)
        return
    switches, cas, links, warned = PARSES[path.name]
    warnings: list[ParseWarning] = []
    f = read_fabric(path, warnings=warnings)
    require_switches(f)
    assert (len(f.switches), len(f.cas), f.n_links) == (switches, cas, links)
    assert [w.line for w in warnings] == warned, [str(w) for w in warnings]
    if warned:
        with pytest.raises(TopologyError) as info:
            read_fabric(path, strict=True)
        assert info.value.line == warned[0]


@needs_real
def test_real_ibdiagnet_links_checked_by_hand() -> None:
    f = read_fabric(REAL / "gary-minghuili-infiniband-exporter-ibdiagnet2.ibnetdiscover")
    aggregation = [n for n in f.cas if f.node_desc[n] == "Mellanox Technologies Aggregation Node"]
    assert len(aggregation) == 7
    assert peer_of(f, CORE, 1) == (LEAF, 63)  # [1](1/1/1) "S-fc6a1c030091cf00"[63]
    assert peer_of(f, CORE, 4) == (0xFC6A1C03008A5C00, 63)
    assert peer_of(f, 0xFC6A1C03008A5C00, 65) == (0xFC6A1C03008A5C08, 1)  # [65](65) -> AN
    assert peer_of(f, LEAF, 1) == (0x5C25730300E6706E, 1)
    assert peer_of(f, 0xC470BD03001001A2, 1) == (0xFC6A1C030091F9C0, 18)  # (B9D0F0/0/0/1)
    assert lid_of(f, 0xC470BD03001001A2, 1) == 223 and lid_of(f, CORE, 0) == 180
    assert int(f.port_guid[f.port_row(f.node_by_guid(0xB0CF0E0300E5B948), 1)]) == \
        0xB0CF0E0300E5B948  # [1](1)(b0cf0e0300e5b948): port GUID = node GUID
    assert f.node_type[f.node_by_guid(CORE)] == NodeType.SWITCH


@needs_real
def test_real_ports_report_is_detected_by_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    path = REAL / "treydock-infiniband_exporter-ports-test.out"
    assert main(["fabric", "summary", str(path)]) == 0
    cap = capsys.readouterr()
    assert f"{path}:6: warning: skipped the link of port 1 to 0x7cfe900300b07320[1]" in cap.err


@needs_real
@pytest.mark.parametrize("name", sorted(FAILS))
@pytest.mark.parametrize("command", ["summary", "route"])
def test_real_bad_captures_exit_2_without_traceback(
    name: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = REAL / name
    argv = (["fabric", "summary", str(path)] if command == "summary"
            else ["route", str(path), "-q", "--out", str(tmp_path / "x.lfts")])
    assert main(argv) == 2
    err = capsys.readouterr().err
    line, words = FAILS[name]
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert err.startswith(f"smroute: error: {where} ") and words in err
    assert "Traceback" not in err
