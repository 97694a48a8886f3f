"""The CLI defects of the hostile audit (issue 16, part 5), each shown by the
real command (a subprocess where the point is an exit status, a pipe, a
signal or a file) failing before the fix:

1. ``--out`` writes only regular files (no device, FIFO, directory or
   symlink replaced), creates no directory, and ``-`` is standard output;
2. ``--workers`` is bounded 1..256 everywhere;
3. a closed pipe keeps the exit status and prints no traceback;
4. seeds and numeric options are checked by argparse, naming the option;
5. ``study plot/degrade --out EXISTING_FILE`` is a clear error;
6. ``study degrade`` checks its inputs before the first throw and a resumed
   study runs failed throws again;
7. ``serve`` exits 2 for a missing fabric and 130 on SIGINT;
8. table files cut short, and tables of another fabric, are errors;
9. ``check-config`` parses the fabric it names;
10. input echoed in errors is escaped and bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from smroute.cli.main import main
from smroute.fabric.export.writers import write_topology
from smroute.fabric.generate.trees import pgft
from smroute.routing.engine import route
from smroute.study.results import RETRY_STATUSES, done_throws, format_rows, read_rows
from smroute.tables.diff import diff_tables
from smroute.tables.formats import format_opensm, parse_lft_dump, read_tables, write_tables
from smroute.tables.lft import ForwardingTables

ROOT = Path(__file__).resolve().parent.parent
SMALL = "2;4,8;1,4;1,1"  # 32 hosts: a throw takes about a second
HAVE_SIM = all(shutil.which(t) for t in ("ibsim", "opensm", "ibnetdiscover"))


def smroute(*args: str, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``python -m smroute ARGS`` (the real CLI) and return what it did."""
    return subprocess.run([sys.executable, "-m", "smroute", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small PGFT (16 hosts, 6 switches), its tables, a job and a fabric of
    the same switches with fewer hosts."""
    d = tmp_path_factory.mktemp("defects")
    fabric = pgft(2, [4, 4], [1, 2], [1, 1])
    write_topology(fabric, d / "f.topo")
    write_topology(pgft(2, [4, 4], [1, 2], [1, 1], hosts_per_leaf=2), d / "fewer.topo")
    write_topology(pgft(2, [3, 3], [1, 3], [1, 1]), d / "other.topo")
    write_tables(route(fabric, workers=1).tables, d / "f.lfts")
    (d / "job.txt").write_text("".join(f"{fabric.node_desc[c]}\n" for c in fabric.cas[:8]))
    return {"topo": d / "f.topo", "lfts": d / "f.lfts", "job": d / "job.txt",
            "fewer": d / "fewer.topo", "other": d / "other.topo"}


def _commands(f: dict[str, Path], out: str) -> dict[str, list[str]]:
    """Every command that writes a file, with ``--out out``."""
    t, lfts, job = str(f["topo"]), str(f["lfts"]), str(f["job"])
    return {
        "route": ["route", t, "-q", "--workers", "1", "--out", out],
        "lids": ["lids", "--fabric", t, "--job", job, "-q", "--workers", "1", "--out", out],
        "order": ["order", "--fabric", t, "--job", job, "--out", out],
        "slurm": ["slurm", "topology", t, "--out", out],
        "generate": ["fabric", "generate", "ring", "3", "-q", "--out", out],
        "draw": ["fabric", "draw", t, "--format", "dot", "--out", out],
        "analyze": ["analyze", lfts, "--fabric", t, "--pattern", "a2a", "-q", "--out", out],
        "diff": ["diff", lfts, lfts, "--out", out],
    }


# --------------------------------------------------------------------------- 1. --out
def _specials(tmp_path: Path) -> dict[str, Path]:
    """A character device (root only: /dev/full's numbers), a FIFO, a
    directory and a symlink to a regular file, all in ``tmp_path``."""
    out = {}
    if os.geteuid() == 0:
        out["device"] = tmp_path / "full"
        os.mknod(out["device"], 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    out["fifo"] = tmp_path / "fifo"
    os.mkfifo(out["fifo"])
    out["directory"] = tmp_path / "dir"
    out["directory"].mkdir()
    (tmp_path / "target.txt").write_text("keep me\n")
    out["symlink"] = tmp_path / "link"
    out["symlink"].symlink_to(tmp_path / "target.txt")
    return out


@pytest.mark.parametrize("command", ["route", "lids", "order", "slurm", "generate", "draw",
                                     "analyze", "diff"])
def test_out_replaces_only_regular_files(command: str, files: dict[str, Path],
                                         tmp_path: Path) -> None:
    for kind, path in _specials(tmp_path).items():
        before = os.lstat(path)
        r = smroute(*_commands(files, str(path))[command])
        assert r.returncode == 2, (kind, r.stderr)
        assert "not a regular file" in r.stderr and str(path) in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        after = os.lstat(path)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino), kind
    assert (tmp_path / "target.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", ["route", "lids", "generate", "diff"])
def test_out_creates_no_directory(command: str, files: dict[str, Path], tmp_path: Path) -> None:
    r = smroute(*_commands(files, str(tmp_path / "missing" / "dir" / "x"))[command])
    assert r.returncode == 2 and "does not exist (smroute creates no directories)" in r.stderr
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("command", ["route", "lids", "order", "slurm", "generate", "draw",
                                     "analyze", "diff"])
def test_dash_is_standard_output_and_files_are_replaced(
        command: str, files: dict[str, Path], tmp_path: Path) -> None:
    to_stdout = smroute(*_commands(files, "-")[command])
    assert to_stdout.returncode == 0, to_stdout.stderr
    assert not (ROOT / "-").exists()
    out = tmp_path / "result"
    out.write_text("old\n")
    out.chmod(0o640)
    to_file = smroute(*_commands(files, str(out))[command])
    assert to_file.returncode == 0, to_file.stderr
    assert out.read_text() == to_stdout.stdout and len(to_stdout.stdout) > 20
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # replaced, keeping its mode
    if command == "route":  # the summary goes to stderr when the tables go to stdout
        assert "validation: valid" in to_stdout.stderr
        assert diff_tables(read_tables(out), read_tables(files["lfts"])).identical


def test_route_fdbs_needs_a_file_name(files: dict[str, Path]) -> None:
    r = smroute("route", str(files["topo"]), "--format", "fdbs", "--out", "-")
    assert r.returncode == 2 and "give --out a file name" in r.stderr


def test_analyze_plot_refuses_a_fifo(files: dict[str, Path], tmp_path: Path) -> None:
    fifo = tmp_path / "p.png"
    os.mkfifo(fifo)
    assert main(["analyze", str(files["lfts"]), "--fabric", str(files["topo"]), "--pattern",
                 "a2a", "-q", "--plot", str(fifo)]) == 2
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_bridge_lfts_file_must_be_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "opensm.lfts"
    os.mkfifo(fifo)
    r = smroute("opensm-bridge", "--daemon", "127.0.0.1:1", "--lfts-file", str(fifo),
                "--no-trigger")
    assert r.returncode == 2 and "--lfts-file: a FIFO, not a regular file" in r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --------------------------------------------------------------------------- 2. --workers
@pytest.mark.parametrize("argv", [
    ["lids", "--fabric", "F", "--job", "J", "--workers", "0"],
    ["lids", "--fabric", "F", "--job", "J", "--workers", "-3"],
    ["route", "F", "--out", "-", "--workers", "257"],
    ["route", "F", "--out", "-", "--workers", "100000"],
    ["study", "degrade", "--pgft", SMALL, "--out", "O", "--workers", "300"],
    ["serve", "--workers", "0"],
])
def test_workers_is_bounded(argv: list[str], files: dict[str, Path], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    subs = {"F": str(files["topo"]), "J": str(files["job"]), "O": str(tmp_path / "o")}
    t0 = time.monotonic()
    assert main([subs.get(a, a) for a in argv]) == 2
    assert time.monotonic() - t0 < 5  # refused before any process starts
    err = capsys.readouterr().err
    assert "argument --workers: expected an integer 1..256, got" in err


# --------------------------------------------------------------------------- 3. pipes
def _changed(t: ForwardingTables, n: int) -> ForwardingTables:
    """``t`` with ``n`` LFT entries moved to another port."""
    ports = t.ports.copy()
    rows, lids = np.nonzero(ports[:, 1:] < 250)
    ports[rows[:n], lids[:n] + 1] = np.where(ports[rows[:n], lids[:n] + 1] == 1, 2, 1)
    return ForwardingTables(switch_guid=t.switch_guid, switch_lid=t.switch_lid,
                            switch_desc=t.switch_desc, ports=ports)


@pytest.fixture(scope="module")
def big_diff(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two table sets whose full diff is far larger than a pipe's buffer."""
    d = tmp_path_factory.mktemp("pipe")
    t = route(pgft(2, [16, 32], [1, 16], [1, 1]), workers=1).tables
    write_tables(t, d / "a.lfts")
    write_tables(_changed(t, 20_000), d / "b.lfts")
    return d / "a.lfts", d / "b.lfts"


def test_diff_status_survives_head(big_diff: tuple[Path, Path]) -> None:
    a, b = big_diff
    cmd = f"set -o pipefail; {sys.executable} -m smroute diff --full {a} {{}} | head -1"
    for other, want in ((b, 1), (a, 0)):
        r = subprocess.run(["bash", "-c", cmd.format(other)], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
        assert r.returncode == want, r.stderr
        assert r.stdout.startswith("--- ") and "Traceback" not in r.stderr
        assert "Exception ignored" not in r.stderr


def _closed_pipe() -> int:
    """The write end of a pipe whose read end is already closed."""
    rd, wr = os.pipe()
    os.close(rd)
    return wr


def test_closed_stdout_keeps_the_status(big_diff: tuple[Path, Path],
                                        files: dict[str, Path]) -> None:
    a, b = big_diff
    for argv, want in ((["diff", "--full", str(a), str(b)], 1),
                       (["diff", str(a), str(a)], 0),
                       (["route", str(files["topo"]), "-q", "--workers", "1", "--out", "-"], 0),
                       (["fabric", "summary", str(files["topo"])], 0)):
        wr = _closed_pipe()
        try:
            r = subprocess.run([sys.executable, "-m", "smroute", *argv], stdout=wr,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
        finally:
            os.close(wr)
        assert r.returncode == want, (argv, r.stderr)
        assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr


def test_broken_pipe_before_the_status_is_141(files: dict[str, Path], tmp_path: Path) -> None:
    # the first progress line on a closed stderr stops the command: 128 + SIGPIPE
    wr = _closed_pipe()
    try:
        r = subprocess.run([sys.executable, "-m", "smroute", "route", str(files["topo"]),
                            "--workers", "1", "--out", str(tmp_path / "t.lfts")],
                           stdout=subprocess.PIPE, stderr=wr, cwd=ROOT, timeout=120)
    finally:
        os.close(wr)
    assert r.returncode == 128 + signal.SIGPIPE == 141


# --------------------------------------------------------------------------- 4. numbers
@pytest.mark.parametrize("argv,option,expected", [
    (["analyze", "T", "--fabric", "F", "--pattern", "a2a", "--seed", "-1"], "--seed",
     "0..2^63-1"),
    (["lids", "--fabric", "F", "--job", "J", "--seed", "-1"], "--seed", "0..2^63-1"),
    (["lids", "--fabric", "F", "--job", "J", "--seed", str(2**64)], "--seed", "0..2^63-1"),
    (["fabric", "generate", "ring", "3", "--seed", "-5"], "--seed", "0..2^63-1"),
    (["study", "degrade", "--pgft", SMALL, "--out", "O", "--seed", "x"], "--seed", "0..2^63-1"),
    (["analyze", "T", "--fabric", "F", "--pattern", "rp", "--samples", "0"], "--samples",
     "1..1000000"),
    (["analyze", "T", "--fabric", "F", "--pattern", "cps:ring", "--orders", "-2"], "--orders",
     "1..10000"),
    (["diff", "T", "T", "--max-entries", "-1"], "--max-entries", ">= 0"),
    (["route", "F", "--out", "-", "--lmc", "8"], "--lmc", "0..7"),
    (["route", "F", "--out", "-", "--max-failures", "-1"], "--max-failures", ">= 0"),
    (["order", "--fabric", "F", "--job", "J", "--tasks-per-host", "0"], "--tasks-per-host",
     "1..100000"),
    (["fabric", "summary", "F", "--max-items", "-1"], "--max-items", ">= 0"),
    (["fabric", "draw", "F", "--out", "-", "--max-boxes", "0"], "--max-boxes", ">= 1"),
    (["study", "degrade", "--pgft", SMALL, "--out", "O", "--opensm-timeout", "nan"],
     "--opensm-timeout", "> 0"),
    (["study", "degrade", "--pgft", SMALL, "--out", "O", "--throws", "0"], "--throws",
     "1..100000"),
    (["discover", "--timeout", "0"], "--timeout", "> 0"),
    (["opensm-bridge", "--daemon", "127.0.0.1:1", "--lfts-file", "O", "--poll-interval", "-1"],
     "--poll-interval", ">= 0"),
])
def test_numeric_options_are_checked_up_front(
        argv: list[str], option: str, expected: str, files: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    subs = {"F": str(files["topo"]), "T": str(files["lfts"]), "J": str(files["job"]),
            "O": str(tmp_path / "o")}
    assert main([subs.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected " in err and expected in err, err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_seed_error_from_the_real_command_has_no_traceback(files: dict[str, Path]) -> None:
    r = smroute("analyze", str(files["lfts"]), "--fabric", str(files["topo"]), "--pattern",
                "a2a", "--seed", "-1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "argument --seed: expected an integer 0..2^63-1, got '-1'" in r.stderr


# --------------------------------------------------------------------------- 5, 6. study
def test_study_out_is_an_existing_file(tmp_path: Path) -> None:
    existing = tmp_path / "results"
    existing.write_text("not a directory\n")
    csv = tmp_path / "s.csv"
    csv.write_text(format_rows([{"fabric": "F", "mode": "link", "throw": 0, "seed": 1,
                                 "total": 4, "removed": 1, "engine": "dmodc", "status": "ok",
                                 "a2a": 1.0, "rp": 1.0, "sp": 1.0}]))
    for argv in (["study", "plot", str(csv), "--out", str(existing)],
                 ["study", "degrade", "--pgft", SMALL, "--throws", "1", "--out", str(existing)]):
        r = smroute(*argv)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "exists and is not a directory; expected a results directory" in r.stderr
    assert existing.read_text() == "not a directory\n"


@pytest.mark.parametrize("source,message", [
    (["--fabric", "GARBAGE"], "no node records found"),
    (["--pgft", "2;4,4;1,2;1,300"], "cannot be built: PGFT needs more than 255 ports"),
    (["--pgft", "2;99999,99999;1,2;1,1"], "nodes, more than the"),
    (["--pgft", SMALL, "--seed", "-1"], "argument --seed"),
    (["--pgft", SMALL, "--workdir", "FILE"], "--workdir: exists and is not a directory"),
])
def test_study_checks_its_inputs_before_the_first_throw(
        source: list[str], message: str, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.topo"
    garbage.write_text("garbage\n")
    subs = {"GARBAGE": str(garbage), "FILE": str(garbage)}
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = smroute("study", "degrade", *(subs.get(a, a) for a in source), "--throws", "2",
                "--engines", "dmodc,minhop", "--no-plots", "-q", "--out", str(out))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (out / "study.csv").exists() and time.monotonic() - t0 < 30


def test_failed_rows_are_retried() -> None:
    rows = [{"fabric": "F", "mode": "link", "seed": 1, "throw": 0, "engine": e, "status": s}
            for e, s in (("dmodc", "ok"), ("minhop", "failed"))]
    assert done_throws(rows, ["dmodc", "minhop"]) == set()
    assert done_throws(rows, ["dmodc", "minhop"], retry=("error",)) == {("F", "link", 1, 0)}
    assert set(RETRY_STATUSES) == {"error", "timeout", "failed"}


@pytest.mark.real
@pytest.mark.skipif(not HAVE_SIM, reason="ibsim, opensm and ibnetdiscover needed")
def test_resumed_study_runs_failed_throws_again(tmp_path: Path) -> None:
    base = ["study", "degrade", "--pgft", SMALL, "--label", "small", "--mode", "link",
            "--throws", "1", "--seed", "3", "--engines", "dmodc,minhop", "--rp-samples", "10",
            "--random-orders", "0", "--no-plots", "-q", "--out", str(tmp_path)]
    csv = tmp_path / "study.csv"
    failed = [{"fabric": "small", "mode": "link", "throw": 0, "seed": 3, "total": 32,
               "removed": 0, "engine": e, "status": s, "error": "" if s == "ok" else "boom"}
              for e, s in (("dmodc", "ok"), ("minhop", "timeout"))]
    csv.write_text(format_rows(failed))
    r = smroute(*base, "--keep-failed", timeout=600)
    assert r.returncode == 0, r.stderr
    assert [row["status"] for row in read_rows(csv)] == ["ok", "timeout"]  # kept
    r = smroute(*base, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = read_rows(csv)
    assert [(row["engine"], row["status"]) for row in rows] == [("dmodc", "ok"),
                                                                 ("minhop", "ok")]
    assert all(row["error"] == "" and row["hosts"] == 32 for row in rows)


# --------------------------------------------------------------------------- 7. serve
def _serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "STATE_DIRECTORY": str(tmp_path / "state")}
    (tmp_path / "state").mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "smroute", "serve", "--listen",
                             f"unix:{tmp_path}/s.sock", "--metrics-listen", "off",
                             "--log-format", "text", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("fabric", ["missing", "directory", "fifo", "garbage"])
def test_serve_bad_fabric_exits_2(fabric: str, tmp_path: Path) -> None:
    path = tmp_path / fabric
    if fabric == "directory":
        path.mkdir()
    elif fabric == "fifo":
        os.mkfifo(path)
    elif fabric == "garbage":
        path.write_text("garbage\n")
    p = _serve(tmp_path, "--fabric", str(path))
    try:
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 2, err  # systemd's RestartPreventExitStatus=2: no restart loop
    assert str(path) in err and "Traceback" not in err


@pytest.mark.parametrize("sig,want", [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_serve_exit_status_on_signals(sig: signal.Signals, want: int, files: dict[str, Path],
                                      tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    p = _serve(tmp_path, "--fabric", str(files["topo"]), "--workers", "1",
               "--ready-file", str(ready))
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), p.stderr.read() if p.stderr else ""
        assert json.loads(ready.read_text())["pid"] == p.pid
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == want, err


# --------------------------------------------------------------------------- 8. tables
def test_table_file_cut_mid_line_is_an_error(files: dict[str, Path], tmp_path: Path) -> None:
    text = files["lfts"].read_text()
    mid = text.index("\n", len(text) // 2) - 5  # inside an entry line
    cut = tmp_path / "cut.lfts"
    cut.write_text(text[:mid])
    line = text[:mid].count("\n") + 1
    r = smroute("analyze", str(cut), "--fabric", str(files["topo"]), "--pattern", "a2a", "-q")
    assert r.returncode == 2, r.stdout
    assert f"{cut}:{line}: the file ends inside the block of switch" in r.stderr
    assert "congestion risk" not in r.stdout
    r = smroute("diff", str(files["lfts"]), str(cut))
    assert r.returncode == 2 and "cut short" in r.stderr


def _as_opensm_dumps(text: str) -> str:
    """smroute's OpenSM-format text without its header and trailer comments: as
    OpenSM's own opensm-lfts.dump has it."""
    return "".join(ln + "\n" for ln in text.splitlines() if not ln.startswith("# smroute"))


def test_table_blocks_are_checked_whole(files: dict[str, Path]) -> None:
    lines = _as_opensm_dumps(files["lfts"].read_text()).splitlines()
    trailer = next(i for i, s in enumerate(lines) if s.endswith("lids dumped"))
    with pytest.raises(ValueError, match=r"t:\d+: the block of switch 0x[0-9a-f]+ \(line 1\) "
                       "ends without its trailer"):
        parse_lft_dump(lines[:trailer] + lines[trailer + 1:], "t")
    # a line lost in a block whose trailer counts its entries (not its range's top,
    # as OpenSM's count does): a spine's, which leaves the other spine's LID unrouted
    def top_and_count(head: int) -> tuple[int, int]:
        trailer = next(i for i in range(head, len(lines)) if lines[i].endswith("lids dumped"))
        return int(lines[head].split("]")[0].split("-")[1]), int(lines[trailer].split()[0])

    start = next(i for i, s in enumerate(lines)
                 if s.startswith("Unicast") and len(set(top_and_count(i))) == 2)
    with pytest.raises(ValueError, match=r"t:\d+: the trailer counts \d+ LIDs but the block "
                       r"of switch .* lists \d+"):
        parse_lft_dump(lines[:start + 1] + lines[start + 2:], "t")
    head = lines[0].replace(lines[0][lines[0].index("["):lines[0].index("]") + 1], "[0-3]")
    with pytest.raises(ValueError, match=r"t:\d+: LID 0x4 or port \d+ out of range \(the "
                       r"block's LIDs are 1..3"):
        parse_lft_dump([head, *lines[1:]], "t")


def test_dump_formats_of_the_real_tools_are_read(files: dict[str, Path]) -> None:
    t = read_tables(files["lfts"])
    # ibroute / dump_fts: hex range, column headers, "N valid lids dumped " trailer
    ibroute = []
    for block in _as_opensm_dumps(format_opensm(t)).split("lids dumped\n")[:-1]:
        head, *entries, count = block.splitlines()
        lo_hi = head[head.index("[") + 1:head.index("]")].split("-")
        ibroute += [head.replace(f"[{lo_hi[0]}-{lo_hi[1]}]", f"[0x0-{int(lo_hi[1]):#x}]"),
                    "  Lid  Out   Destination", "       Port     Info "]
        ibroute += [e.replace(" # ", " : (") + ")" for e in entries]
        ibroute.append(f"{count.strip()} valid lids dumped ")
    assert diff_tables(parse_lft_dump(ibroute, "ibroute"), t).identical
    with pytest.raises(ValueError, match="ibroute:.*no trailer"):
        parse_lft_dump(ibroute[:-1], "ibroute")
    # OpenSM's dump counts the top of the range, not the entries listed
    osm = _as_opensm_dumps(format_opensm(t)).splitlines()
    top = int(osm[0][osm[0].index("-") + 1:osm[0].index("]")])
    sparse = [osm[0], osm[1], f"{top} lids dumped"]
    assert parse_lft_dump(sparse, "osm").n_switches == 1
    # opensm.fdbs as OpenSM writes it: unreachable LIDs, unknown hops, non-optimal routes
    fdbs = ["dump_ucast_routes: Switch 0x0002c90310000000", "LID    : Port : Hops : Optimal",
            "0x0001 : 001  : 01   : yes", "0x0002 : UNREACHABLE", "0x0003 : 004  : HOPS UNKNOWN",
            "0x0004 : 003  : 03   : No 2 hop path possible via port 5!"]
    from smroute.tables.formats import parse_fdbs

    got = parse_fdbs(fdbs, "fdbs")
    assert got.ports[0, 1:5].tolist() == [1, 255, 4, 3]
    with pytest.raises(ValueError, match="fdbs:4: expected a dump_ucast_routes entry"):
        parse_fdbs([*fdbs[:3], "0x0002 : 00"], "fdbs")


@pytest.mark.parametrize("fabric,message", [
    ("other", "are no switch of the fabric"),
    ("fewer", "the tables route LIDs up to 22 (8 above the fabric's highest LID 14)"),
    ("ports", "to port 40 but has"),
])
def test_tables_of_another_fabric_are_refused(fabric: str, message: str,
                                              files: dict[str, Path], tmp_path: Path) -> None:
    tables = files["lfts"]
    if fabric == "ports":
        text = tables.read_text().splitlines()
        i = next(i for i, s in enumerate(text) if s.startswith("0x0001 "))
        text[i] = "0x0001 040" + text[i][10:]
        tables = tmp_path / "ports.lfts"
        tables.write_text("\n".join(text) + "\n")
    topo = files["topo"] if fabric == "ports" else files[fabric]
    r = smroute("analyze", str(tables), "--fabric", str(topo), "--pattern", "a2a", "-q")
    assert r.returncode == 2, r.stdout
    assert message in r.stderr and f"--fabric {topo}" in r.stderr, r.stderr


def test_tables_of_some_switches_only_are_a_warning(files: dict[str, Path],
                                                    tmp_path: Path) -> None:
    blocks = files["lfts"].read_text().split("lids dumped\n")
    cut = tmp_path / "cut.lfts"  # smroute's file cut at a switch boundary: refused
    cut.write_text("lids dumped\n".join(blocks[:4]) + "lids dumped\n")
    r = smroute("analyze", str(cut), "--fabric", str(files["topo"]), "--pattern", "a2a", "-q")
    assert r.returncode == 2 and "without its trailer" in r.stderr, r.stderr
    # the blocks of some switches, without smroute's header (an excerpt, a dump
    # of a few switches): a warning
    part = tmp_path / "part.lfts"
    head = blocks[0].split("\n", 1)
    assert head[0] == "# smroute forwarding tables"
    part.write_text("lids dumped\n".join([head[1], *blocks[1:4]]) + "lids dumped\n")
    r = smroute("analyze", str(part), "--fabric", str(files["topo"]), "--pattern", "a2a", "-q")
    assert r.returncode == 1  # flows through the missing switches are not delivered
    assert "warning: 2 of the fabric's 6 switches have no table" in r.stderr


# --------------------------------------------------------------------------- 9. check-config
def test_check_config_parses_the_fabric(files: dict[str, Path], tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.topo"
    garbage.write_text("Switch 4 nonsense\n")
    cfg = tmp_path / "smroute.yaml"
    cfg.write_text(f"# daemon\nlisten: 127.0.0.1:50051\nfabric: {garbage}\n")
    r = smroute("check-config", str(cfg))
    assert r.returncode == 2
    assert f"{cfg}:3: fabric: the fabric cannot be loaded: {garbage}:1:" in r.stderr
    r = smroute("check-config", "--json", str(cfg))
    doc = json.loads(r.stdout)
    assert r.returncode == 2 and (doc["ok"], doc["key"], doc["line"]) == (False, "fabric", 3)
    cfg.write_text(f"listen: 127.0.0.1:50051\nfabric: {files['topo']}\n")
    assert smroute("check-config", str(cfg)).returncode == 0


# --------------------------------------------------------------------------- 10. echoes
def test_echoed_input_is_escaped_and_bounded(files: dict[str, Path], tmp_path: Path) -> None:
    evil = tmp_path / "a\x1b]0;owned\x07b.lfts"
    r = smroute("diff", str(evil), str(files["lfts"]))
    assert r.returncode == 2 and "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "a\\x1b]0;owned\\x07b.lfts" in r.stderr
    binary = tmp_path / "binary.lfts"
    binary.write_bytes(b"\x1b[2J\x00\xff" * 40_000 + b"\n")
    r = smroute("diff", str(binary), str(files["lfts"]))
    assert r.returncode == 2 and "\x1b" not in r.stderr and len(r.stderr) < 1000
    job = tmp_path / "job.txt"
    job.write_text("x\x1b" * 50_000 + "\n")
    r = smroute("lids", "--fabric", str(files["topo"]), "--job", str(job), "-q")
    assert r.returncode == 2 and "\x1b" not in r.stderr and len(r.stderr) < 5000, len(r.stderr)
    r = smroute("route", str(files["topo"]), "--out", "-", "--format", "\x1b" * 100_000)
    assert r.returncode == 2 and "\x1b" not in r.stderr and len(r.stderr) < 5000
    assert "argument --format: invalid choice: '\\x1b" in r.stderr
