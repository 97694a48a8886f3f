"""What an operator meets first, through the real CLI: the routing mode the
fabric summary states, ``-q`` on every command, progress lines in logs, and
``lids`` on a fabric without LMC."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from smroute.cli.main import build_parser
from smroute.cli.main import main as cli_main
from smroute.cli.quiet import QuietStream
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.routing.engine import route

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.mark.parametrize("name,mode", [("quantum-2level-agg-spine-hosts.topo", "tree+turns"),
                                       ("pgft-2level-648.topo", "tree"),
                                       ("two-switch-4-4-p2.topo", "shortest")])
def test_summary_states_the_mode_route_takes(name: str, mode: str, capsys: Any) -> None:
    path = str(FIXTURES / name)
    r = route(read_fabric(path), workers=1)
    assert r.mode == mode
    assert cli_main(["fabric", "summary", path]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Routing"))
    assert line.startswith(f"Routing (as smroute route runs it): {mode}")
    assert "Dmodc over the tree" not in line
    if r.mode_reason:
        assert r.mode_reason in line
    assert cli_main(["fabric", "summary", "--json", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["routing_mode"], doc["routing_reason"], doc["routed"]) == (
        r.mode, r.mode_reason, True)


def _leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                   ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub._subparsers is None:
                    out.append(((*path, name), sub))
                else:
                    out += _leaf_commands(sub, (*path, name))
    return out


def test_every_command_accepts_quiet() -> None:
    leaves = _leaf_commands(build_parser())
    assert len(leaves) > 30
    missing = [" ".join(p) for p, sub in leaves
               if not {"-q", "--quiet"} <= set(sub._option_string_actions)]
    assert missing == []


def test_quiet_drops_information_but_not_errors_nor_warnings(capsys: Any,
                                                             tmp_path: Path) -> None:
    topo = str(FIXTURES / "pgft-2level-648.topo")
    assert cli_main(["fabric", "draw", topo, "--out", "-", "--format", "dot"]) == 0
    assert "switches in" in capsys.readouterr().err
    assert cli_main(["fabric", "draw", topo, "--out", "-", "--format", "dot", "-q"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("graph") or out.startswith("digraph")
    assert err == ""
    assert cli_main(["slurm", "topology", topo, "--out", str(tmp_path / "t.conf"), "-q"]) == 0
    assert "slurm: " not in capsys.readouterr().err  # the count line, information
    assert cli_main(["fabric", "summary", str(tmp_path / "none.topo"), "-q"]) == 2
    assert "smroute: error: " in capsys.readouterr().err
    bad = tmp_path / "c.yaml"
    bad.write_text("workers: 3\nlisten: '127.0.0.1:50051'\n")
    assert cli_main(["check-config", str(bad), "--quiet"]) == 0
    assert "warning: mutating RPCs (LoadFabric, Route, ApplyFaults, RouteSubnet) are " \
           "refused" in capsys.readouterr().err


def test_quiet_stream_keeps_whole_error_lines() -> None:
    inner = io.StringIO()
    q = QuietStream(inner)
    q.write("smroute: routing...\nsmroute: er")
    q.write("ror: bad\nprogress 10%\r")
    q.write("x.topo: warning: odd")
    assert q.finish() is inner
    assert inner.getvalue() == "smroute: error: bad\nx.topo: warning: odd\n"


def test_lids_on_an_lmc_0_fabric_says_there_is_nothing_to_choose(tmp_path: Path,
                                                                  capsys: Any) -> None:
    from smroute.fabric.export.writers import write_topology
    from smroute.fabric.generate.trees import pgft

    def job_of(topo: Path) -> Path:
        f = read_fabric(str(topo))
        job = tmp_path / f"{topo.stem}.job"
        job.write_text("".join(f"{f.node_desc[c]}\n" for c in f.cas[:8]))
        return job

    flat = tmp_path / "lmc0.topo"
    write_topology(pgft(2, [4, 4], [1, 2], [1, 1]), flat)
    job = job_of(flat)
    argv = ["lids", "--fabric", str(flat), "--job", str(job), "--workers", "1", "-q"]
    assert cli_main(argv) == 0
    out, err = capsys.readouterr()
    assert "warning: " in err and "LMC 0 (one LID each): there is no LID to choose" in err
    assert "LMC 0" in out
    assert cli_main([*argv, "--lmc", "0"]) == 0  # asked for base LIDs: nothing to warn of
    assert "warning" not in capsys.readouterr().err
    assert cli_main([*argv, "--lmc", "1"]) == 2  # asked for more than the fabric has
    assert "LMC mismatch: --lmc 1 but the job's ports have LMC 0" in capsys.readouterr().err
    lmc2 = FIXTURES / "pgft-3-2.2.3-lmc2.topo"
    assert cli_main(["lids", "--fabric", str(lmc2), "--job", str(job_of(lmc2)),
                     "--workers", "1", "-q"]) == 0
    assert "warning" not in capsys.readouterr().err


REAL = Path("/work/shared/fabrics/real")


@pytest.mark.skipif(not (REAL / "NVIDIA-topograph-example.out").is_file(),
                    reason="the real captures (shared/fabrics/real) are absent")
def test_summary_of_a_real_capture_routed_with_turns(capsys: Any) -> None:
    """NVIDIA's topograph example: a tree whose routing needs turns; the
    summary used to call it plain Dmodc over the tree."""
    path = str(REAL / "NVIDIA-topograph-example.out")
    r = route(read_fabric(path), workers=1)
    assert r.mode == "tree+turns"
    assert cli_main(["fabric", "summary", path]) == 0
    out = capsys.readouterr().out
    assert f"Routing (as smroute route runs it): tree+turns ({r.mode_reason})" in out
