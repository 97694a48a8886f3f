"""Input that is almost right: a partial discovery through LoadFabric, a
fabric buried in noise, a hard link in fabric_dirs, GUID 0 and peer LIDs
beyond the unicast range, a table file cut at a switch boundary, and one
table of exit codes (LMC mismatch and partial discovery are bad input, 2,
in every command, ``serve`` included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smroute.cli import exit_codes
from smroute.cli.main import main
from smroute.errors import InputError, LmcMismatchError, RoutingError
from smroute.fabric.export.writers import write_topology
from smroute.fabric.ibnetdiscover.parse import parse_topology, read_topology
from smroute.fabric.ibnetdiscover.ports import parse_ports_report
from smroute.fabric.ibnetdiscover.text import NOISE_MAX_LINES, ParseWarning, TopologyError
from smroute.service.errors import ServiceError, Status
from smroute.service.sources import parse_fabric_text, read_fabric_path, read_request_path
from smroute.tables.formats import format_fdbs, format_opensm, parse_fdbs, read_tables
from smroute.tables.json_io import format_json, parse_json

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo"
PARTIAL = "\n".join([
    "vendid=0x2c9", "devid=0x1021", "sysimgguid=0xb8e92403009ca838",
    "caguid=0xb8e92403009ca838", 'Ca\t1 "H-b8e92403009ca838"\t\t# "n01 HCA-1"', ""])
MB = 1 << 26


# ------------------------------------------------------------ partial discovery


def test_loadfabric_refuses_a_partial_discovery(tmp_path: Path) -> None:
    with pytest.raises(ServiceError) as ei:
        parse_fabric_text(PARTIAL, "request", MB)
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert "a partial discovery: it saw 1 CA and no switch" in ei.value.message
    d = tmp_path / "fab"
    d.mkdir()
    (d / "partial.topo").write_text(PARTIAL)
    with pytest.raises(ServiceError, match="a partial discovery") as ei:
        read_request_path(str(d / "partial.topo"), [str(d)], MB)
    assert ei.value.status == Status.INVALID_ARGUMENT
    with pytest.raises(ServiceError, match="a partial discovery"):
        read_fabric_path(str(d / "partial.topo"))
    assert parse_fabric_text(FIXTURE.read_text(), "request", MB).switches.size


def test_daemon_keeps_its_fabric_when_loadfabric_sends_a_partial_discovery(
        tmp_path: Path) -> None:
    import grpc
    from service_daemon import start_daemon

    from smroute.service.rpc.client import SmrouteClient, link_down

    d = start_daemon(tmp_path / "d", fabric=str(FIXTURE))
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            before = c.get_epoch()
            with pytest.raises(grpc.RpcError) as ei:
                c.load_fabric_text(PARTIAL, "partial.topo")
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "a partial discovery" in ei.value.details()
            f = read_topology(FIXTURE)
            guid = int(f.node_guid[int(f.switches[0])])
            out = c.apply_faults([link_down(guid, 1)])  # the base fabric is still there
            assert out.epoch.id > before.id
    finally:
        d.stop()


def test_loadfabric_logs_how_many_noise_lines_it_skipped(tmp_path: Path) -> None:
    """Below the budget, LoadFabric accepts noise as the CLI does, and says
    how much it skipped (a count, no text: the log may not be the client's)."""
    from service_daemon import start_daemon

    from smroute.service.rpc.client import SmrouteClient

    d = start_daemon(tmp_path / "d")
    try:
        with SmrouteClient(d.address, timeout=60) as c:
            noisy = FIXTURE.read_text() + "".join(f"secret {i}\n" for i in range(50))
            c.load_fabric_text(noisy, "noisy.topo")
        loaded = [e for e in d.log_events() if e.get("event") == "fabric_loaded"]
        assert loaded and loaded[-1]["skipped_lines"] == 50
        assert loaded[-1]["level"] == "warning"
        assert "secret" not in d.out.read_text()
    finally:
        d.stop()


def test_serve_with_a_partial_discovery_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "partial.topo"
    p.write_text(PARTIAL)
    r = subprocess.run([sys.executable, "-m", "smroute", "serve", "--state", "none",
                        "--listen", f"unix:{tmp_path}/s.sock", "--metrics-listen", "off",
                        "--fabric", str(p)], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120, check=False)
    assert r.returncode == exit_codes.BAD_INPUT, r.stderr[-2000:]
    assert "a partial discovery" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------ noise budget


def test_a_fabric_followed_by_junk_is_refused_quickly() -> None:
    lines = FIXTURE.read_text().splitlines() + [f"junk {i}" for i in range(1_000_000)]
    warnings: list[ParseWarning] = []
    t0 = time.monotonic()
    with pytest.raises(TopologyError, match="not ibnetdiscover output") as ei:
        parse_topology(lines, "big.topo", warnings=warnings)
    assert time.monotonic() - t0 < 10
    assert ei.value.line is not None and ei.value.line <= len(lines)
    assert "junk" not in str(ei.value)
    with pytest.raises(ServiceError, match="not ibnetdiscover output"):  # LoadFabric too
        parse_fabric_text("\n".join(lines), "request", 1 << 30)


def test_noise_warnings_are_few_then_counted_and_bounded_by_share() -> None:
    base = FIXTURE.read_text().splitlines()
    some = [*base, *(f"trailing text {i}" for i in range(50))]
    warnings: list[ParseWarning] = []
    fabric = parse_topology(some, "some.topo", warnings=warnings)
    assert len(fabric.switches) > 0
    assert len(warnings) == 11 and "40 more lines (not shown; 50 in all)" in str(warnings[-1])
    # more than 10% of the lines (and more than 100 of them): refused
    n = max(101, len(base) // 9 + 1)
    with pytest.raises(TopologyError, match=r"at most 10% of"):
        parse_topology([*base, *(f"x {i}" for i in range(n))], "noisy.topo")
    assert NOISE_MAX_LINES == 10_000


def test_cli_prints_a_few_warnings_then_a_count(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "f.topo"
    p.write_text(FIXTURE.read_text() + "".join(f"after {i}\n" for i in range(60)))
    assert main(["fabric", "summary", str(p)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: skipped") == 11 and "50 more lines" in err


# ------------------------------------------------------------ fabric_dirs


def test_fabric_dirs_refuses_hard_links_foreign_owners_and_never_echoes(tmp_path: Path) -> None:
    d = tmp_path / "fab"
    d.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:top-secret:/root:/bin/bash\n")
    os.link(secret, d / "linked.topo")
    with pytest.raises(ServiceError, match="hard links") as ei:
        read_request_path(str(d / "linked.topo"), [str(d)], MB)
    assert ei.value.status == Status.PERMISSION_DENIED and "top-secret" not in ei.value.message
    other = d / "other.topo"
    other.write_text(FIXTURE.read_text())
    os.chown(other, 65534, 65534)
    if os.geteuid() in (0, 65534):
        with pytest.raises(ServiceError, match="owned by uid 65534"):
            read_request_path(str(other), [str(d)], MB)
    # a file of the daemon's own that is not ibnetdiscover output: no text quoted
    copy = d / "copy.topo"
    copy.write_text(secret.read_text() * 3)
    with pytest.raises(ServiceError) as ei:
        read_request_path(str(copy), [str(d)], MB)
    assert "top-secret" not in ei.value.message and "root:x" not in ei.value.message
    assert "not ibnetdiscover output" in ei.value.message and "copy.topo:" in ei.value.message
    # a malformed topology file still gets its precise error
    bad = d / "bad.topo"
    bad.write_text(FIXTURE.read_text().replace("Switch\t", "Switch\tXX", 1))
    with pytest.raises(ServiceError, match=r"bad\.topo:\d+: port line outside a node record"):
        read_request_path(str(bad), [str(d)], MB)


# ------------------------------------------------------------ GUID 0, peer LIDs


def test_guid_zero_and_peer_lid_beyond_unicast_are_errors_naming_the_line() -> None:
    text = FIXTURE.read_text()
    lines = text.splitlines()
    head = next(i for i, s in enumerate(lines) if s.startswith("Switch"))
    guid = lines[head].split('"')[1]
    zero = text.replace(guid, "S-0000000000000000")
    with pytest.raises(TopologyError, match="GUID 0") as ei:
        parse_topology(zero, "zero.topo")
    assert ei.value.line is not None
    port = next(i for i, s in enumerate(lines) if s.startswith("[") and " lid " in s)
    m = lines[port]
    bad = m[:m.rindex(" lid ") + 5] + "65536" + m[m.rindex(" lid ") + 5:].lstrip("0123456789")
    with pytest.raises(TopologyError, match="peer LID 65536 out of range") as ei:
        parse_topology([*lines[:port], bad, *lines[port + 1:]], "lid.topo")
    assert ei.value.line == port + 1 and "0xbfff" in str(ei.value)
    # the permissive LID (not assigned) on a port line is no error there: the
    # peer's own record is where a LID is read (UFM captures of hosts not yet up)
    unset = m[:m.rindex(" lid ") + 5] + "65535" + m[m.rindex(" lid ") + 5:].lstrip("0123456789")
    parse_topology([*lines[:port], unset, *lines[port + 1:]], "unset.topo")
    with pytest.raises(TopologyError, match="port GUID 0"):
        parse_ports_report(["CA     2  1 0x0000000000000000 4x SDR - SW  1  1 0x0000000000000001 "
                            "( 'h1' - 's1' )"], "ports.out")


def test_end_ports_without_a_lid_are_named_when_routing_refuses() -> None:
    """A capture taken before the subnet manager assigned LIDs (every port
    lid 0) parses (it can be inspected) but cannot be routed: the error
    names an end-port by description and GUID, not an index."""
    import re

    from smroute.routing.engine import route

    text = FIXTURE.read_text()
    f = parse_topology(re.sub(r" lid \d+", " lid 0", text), "nolid.topo")
    with pytest.raises(RoutingError, match=r"(\d+) of \1 end-ports have no LID") as ei:
        route(f, workers=1)
    hosts = [s.split('"')[3] for s in text.splitlines() if s.startswith("Ca")]
    assert any(f'"{h}" (0x' in str(ei.value) for h in hosts) and "row" not in str(ei.value)


def test_a_subnet_lst_given_as_a_topology_is_named_for_what_it_is() -> None:
    """OpenSM's opensm-subnet.lst (as ``--format fdbs`` writes it beside the
    tables; ibdiagnet 1.x's subnet.lst alike), long or a few lines, is
    refused as a .lst file with the advice to capture ibnetdiscover output,
    not as noise to remove."""
    from smroute.tables.formats import format_subnet_lst

    lst = format_subnet_lst(read_topology(FIXTURE)).splitlines()
    for lines in (lst, lst[:3]):
        with pytest.raises(TopologyError, match="this is a subnet .lst file") as ei:
            parse_topology(lines, "opensm-subnet.lst")
        assert "run ibnetdiscover" in str(ei.value) and "remove the other" not in str(ei.value)


# ------------------------------------------------------------ table trailers


def _tables() -> object:
    from smroute.routing.engine import route

    return route(read_topology(FIXTURE), workers=1).tables


def _cut_at_last_switch(text: str, head: str) -> str:
    return text[:text.rindex(head)]


def test_table_files_cut_at_a_switch_boundary_are_seen_as_cut(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _tables()
    full = format_opensm(t)  # type: ignore[arg-type]
    assert full.startswith("# smroute forwarding tables\n")
    assert full.rstrip().splitlines()[-1].startswith("# smroute: end of tables: 16 switches, ")
    cut = tmp_path / "cut.lfts"
    cut.write_text(_cut_at_last_switch(full, "Unicast lids"))
    with pytest.raises(InputError, match="without its trailer"):
        read_tables(cut)
    good = tmp_path / "good.lfts"
    good.write_text(full)
    assert read_tables(good).n_switches == 16
    spliced = tmp_path / "spliced.lfts"
    spliced.write_text(full + full[full.index("Unicast"):])
    with pytest.raises(InputError, match="after the trailer"):
        read_tables(spliced)
    fdbs = format_fdbs(t)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="without its trailer"):
        parse_fdbs(_cut_at_last_switch(fdbs, "dump_ucast_routes").splitlines(), "cut.fdbs")
    assert parse_fdbs(fdbs.splitlines()).n_switches == 16
    js = format_json(t)  # type: ignore[arg-type]
    n_entries = int(full.rstrip().rsplit(", ", 1)[1].split()[0])
    assert js.endswith(f'], "end": {{"switches": 16, "entries": {n_entries}}}}}')
    assert parse_json(js).n_switches == 16
    doc = json.loads(js)
    doc["switches"].pop()  # spliced / lost a switch, still valid JSON
    with pytest.raises(InputError, match="does not count the 15 switches"):
        parse_json(json.dumps(doc), "short.json")
    with pytest.raises(InputError):
        parse_json(js[:js.rindex('{"guid"')], "cut.json")
    # the commands: bad input, never "only in old" or a partial analysis
    assert main(["diff", str(good), str(cut)]) == exit_codes.BAD_INPUT
    assert main(["analyze", "--fabric", str(FIXTURE), "--pattern", "shift", "-q",
                 str(cut)]) == exit_codes.BAD_INPUT
    assert "without its trailer" in capsys.readouterr().err


# ------------------------------------------------------------ exit codes


def test_one_table_of_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert InputError.exit_code == exit_codes.BAD_INPUT == LmcMismatchError.exit_code
    assert RoutingError.exit_code == exit_codes.CANNOT_ROUTE
    lmc2 = ROOT / "fixtures" / "pgft-3-2.2.3-1.2.2-1.2.1.topo"
    out = tmp_path / "x.lfts"
    assert main(["route", str(lmc2), "--lmc", "2", "-q", "--out", str(out)]) == 2
    assert "belongs to two ports" in capsys.readouterr().err and not out.exists()
    hosts = tmp_path / "job"
    f = read_topology(FIXTURE)
    hosts.write_text("".join(f"{f.node_desc[int(c)]}\n" for c in f.cas[:4]))
    assert main(["lids", "--fabric", str(FIXTURE), "--job", str(hosts), "--lmc", "2",
                 "--out", str(tmp_path / "l")]) == 2
    p = tmp_path / "partial.topo"
    p.write_text(PARTIAL)
    for argv in (["route", str(p), "-q", "--out", str(out)], ["fabric", "summary", str(p)]):
        assert main(argv) == 2
    assert main(["--help"]) == 0
    helptext = capsys.readouterr().out
    for code in exit_codes.EXIT_CODES:
        assert f"  {code} " in helptext
    unit = (ROOT / "deploy" / "smroute.service").read_text()
    assert "RestartPreventExitStatus=2" in unit
    ops = (ROOT / "deploy" / "OPERATORS.md").read_text()
    for code in (0, 1, 2, 3, 130):
        assert f"| {code} |" in ops
    lonely = tmp_path / "noswitch.topo"
    write_topology(f.with_removed(nodes=f.switches), lonely)
    assert main(["route", str(lonely), "-q", "--out", str(out)]) == 2
