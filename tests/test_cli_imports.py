"""A command imports what it uses: ``smroute route`` loads no other
command's modules (grpc, the daemon, the lab, plotting, tqdm)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from smroute.cli.main import COMMANDS, build_parser

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pgft-2level-648.topo"


def test_every_command_is_registered_by_its_module() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == list(COMMANDS)  # type: ignore[arg-type]
    for name in COMMANDS:
        one = next(a for a in build_parser(name)._actions if a.dest == "command")
        assert list(one.choices) == [name]  # type: ignore[arg-type]


def test_route_command_imports_only_what_it_uses(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from smroute.cli.main import main\n"
        f"rc = main(['route', {str(FIXTURE)!r}, '--workers', '1', '-q', '--out', "
        f"{str(tmp_path / 'x.lfts')!r}])\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        check=True)
    rc, modules = json.loads(cp.stdout.strip().splitlines()[-1])
    assert rc == 0
    loaded = set(modules)
    for unused in ("grpc", "tqdm", "yaml", "smroute.service.config", "smroute.lab.sim",
                   "smroute.cli.ctl_cmd", "smroute.fabric.export.draw", "smroute.analysis.plot"):
        assert unused not in loaded, unused


def test_unknown_command_lists_every_command(capsys) -> None:  # type: ignore[no-untyped-def]
    from smroute.cli.main import main

    assert main(["rout"]) == 2
    err = capsys.readouterr().err
    assert all(f"'{name}'" in err for name in COMMANDS)
