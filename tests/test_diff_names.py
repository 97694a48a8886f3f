"""``smroute diff`` of real ``dump_fts`` output (infiniband-diags over ibsim,
after OpenSM routed the fabric; captured in fixtures/ and taken again live
when the tools are there): each switch with its own LID (dump_fts names
switches by their directed-route path), each changed LID with the host it
leads to, from the table's comments or from ``--fabric``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from smroute.cli.main import main as cli_main
from smroute.fabric.ibnetdiscover.parse import read_fabric
from smroute.tables.formats import read_tables

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DUMP = FIXTURES / "dump_fts-pgft-2-2.2-1.2-1.1.txt"
TOPO = FIXTURES / "ibsim-pgft-2-2.2-1.2-1.1.topo"
HAVE_TOOLS = all(shutil.which(t) for t in ("ibsim", "opensm", "ibnetdiscover", "dump_fts"))


def _changed(text: str, lid: int, port: int) -> str:
    """``text`` with the first entry of ``lid`` routed to ``port``."""
    return re.sub(rf"^0x{lid:04x} \d\d\d", f"0x{lid:04x} {port:03d}", text, count=1,
                  flags=re.M)


def _check(dump: Path, topo: Path, tmp_path: Path, capsys: Any) -> None:
    fabric = read_fabric(str(topo))
    t = read_tables(dump)
    # every switch's LID is the one the fabric gives it, never 0
    lid_of = {int(fabric.node_guid[n]): int(fabric.node_lid[n])
              for n in fabric.switches.tolist()}
    assert {int(g): int(lid) for g, lid in zip(t.switch_guid, t.switch_lid, strict=True)} \
        == lid_of and 0 not in lid_of.values()
    host = int(fabric.cas[0])
    lid, name = int(fabric.node_lid[host]), fabric.node_desc[host]
    new = tmp_path / "new.txt"
    new.write_text(_changed(dump.read_text(), lid, 9))
    assert cli_main(["diff", str(dump), str(new)]) == 1
    out = capsys.readouterr().out
    assert "(LID 0)" not in out
    first = next(g for g in t.switch_guid.tolist())
    assert f'switch {first:#018x} "{t.switch_desc[0]}" (LID {lid_of[first]})' in out
    assert re.search(rf'^  0x{lid:04x} "{re.escape(name)}": \d+ -> 9$', out, re.M), out
    # without comments (OpenSM's file written without port GUIDs): --fabric names them
    bare_old, bare_new = tmp_path / "a.txt", tmp_path / "b.txt"
    strip = re.compile(r" : \(.*\)$", re.M)
    bare_old.write_text(strip.sub("", dump.read_text()))
    bare_new.write_text(strip.sub("", new.read_text()))
    assert cli_main(["diff", str(bare_old), str(bare_new)]) == 1
    assert f'0x{lid:04x}: ' in capsys.readouterr().out
    assert cli_main(["diff", str(bare_old), str(bare_new), "--fabric", str(topo)]) == 1
    assert f'0x{lid:04x} "{name}": ' in capsys.readouterr().out
    assert cli_main(["diff", str(bare_old), str(bare_new), "--fabric", str(topo),
                     "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["lid_names"] == {str(lid): name}


def test_diff_of_captured_dump_fts_names_switch_lids_and_hosts(tmp_path: Path,
                                                               capsys: Any) -> None:
    _check(DUMP, TOPO, tmp_path, capsys)


@pytest.mark.real
@pytest.mark.skipif(not HAVE_TOOLS, reason="ibsim-utils, opensm, infiniband-diags not installed")
def test_diff_of_live_dump_fts(tmp_path: Path, capsys: Any) -> None:
    from smroute.fabric.export.writers import write_ibsim_net
    from smroute.fabric.generate.trees import pgft
    from smroute.lab.sim import IbSim, dump_switch_routes, run_opensm

    write_ibsim_net(pgft(2, [2, 2], [1, 2], [1, 1]), tmp_path / "f.net")
    with IbSim(tmp_path / "f.net", tmp_path / "sim") as sim:
        run_opensm(sim, tmp_path / "opensm")
        (tmp_path / "dump.txt").write_text(dump_switch_routes(sim))
        (tmp_path / "f.topo").write_text(sim.run(["ibnetdiscover"]).stdout)
    _check(tmp_path / "dump.txt", tmp_path / "f.topo", tmp_path, capsys)
