"""``smroute fabric compare``: a real capture against copies of it edited as a
technician would change the fabric (a cable pulled, a cable moved to another
port, a cable come up slower), and compressed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from smroute.cli.main import main
from smroute.fabric.compare import compare_fabrics
from smroute.fabric.ibnetdiscover.parse import read_fabric

REAL = Path("/work/shared/fabrics/real")
for _up in Path(__file__).resolve().parents:
    if (_up / "shared" / "fabrics" / "real").is_dir():
        REAL = _up / "shared" / "fabrics" / "real"
        break
LOGINOFF = REAL / "loginoff-infiniband_topology-topo"
SELENE = REAL / "Mellanox-ufm_sdk_3.0-selene.storage.txt"
pytestmark = pytest.mark.skipif(not LOGINOFF.exists(),
                                reason="the real captures (shared/fabrics/real) are absent")
SW = '"S-f4521403001165a0"'  # "MF0;ib5:SX6036/U1": port 1 to stage114, port 17 free
HOST = '"H-24be05ffff980030"'  # "stage114 mlx4_0"


def _edit(tmp_path: Path, name: str, edit: dict[str, str | None]) -> Path:
    """A copy of the capture with each line starting with a key of ``edit``
    (after stripping) replaced by its value (``None``: removed)."""
    out = []
    hits = set()
    for line in LOGINOFF.read_text().splitlines():
        key = next((k for k in edit if line.startswith(k)), None)
        if key is None:
            out.append(line)
            continue
        hits.add(key)
        if edit[key] is not None:
            out.append(line.replace(key, str(edit[key]), 1))
    assert hits == set(edit), set(edit) - hits
    p = tmp_path / name
    p.write_text("\n".join(out) + "\n")
    return p


def _rated(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the capture whose stage114 cable (both ends) is ``new`` not ``old``."""
    ends = (f"[1]\t{HOST}[1]", f"[1](24be05ffff980031) \t{SW}[1]")
    lines = [s.replace(old, new) if s.startswith(ends) else s
             for s in LOGINOFF.read_text().splitlines()]
    p = tmp_path / f"{new}.topo"
    p.write_text("\n".join(lines) + "\n")
    return p


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    rc = main(["fabric", "compare", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_same_capture_is_same_also_compressed(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    packed = tmp_path / "now.topo.gz"
    packed.write_bytes(gzip.compress(LOGINOFF.read_bytes()))
    rc, out, _ = _run(capsys, LOGINOFF, packed)
    assert rc == 0 and "192 cables in the reference, 192 now: same" in out


def test_pulled_cable_is_missing_named_by_both_ends(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cur = _edit(tmp_path, "pulled.topo", {f"[1]\t{HOST}[1]": None,
                                           f"[1](24be05ffff980031) \t{SW}[1]": None})
    rc, out, _ = _run(capsys, LOGINOFF, cur, "--json")
    doc = json.loads(out)
    assert rc == 1 and not doc["same"]
    assert doc["cables"] == {"reference": 192, "current": 191}
    assert doc["missing"] == [{
        "a": {"desc": "stage114 mlx4_0", "guid": "0x24be05ffff980030", "port": 1},
        "b": {"desc": "MF0;ib5:SX6036/U1", "guid": "0xf4521403001165a0", "port": 1},
        "width": 4, "speed": "QDR", "class": "switch-ca"}]
    assert doc["extra"] == doc["moved"] == doc["slower"] == []
    rc, text, _ = _run(capsys, LOGINOFF, cur)
    assert rc == 1 and "missing cables (1):" in text
    assert ('"stage114 mlx4_0" (0x24be05ffff980030)[1] -- "MF0;ib5:SX6036/U1" '
            '(0xf4521403001165a0)[1] 4xQDR') in text
    # the other way round: an extra cable
    rc, out, _ = _run(capsys, cur, LOGINOFF, "--json")
    assert rc == 1 and len(json.loads(out)["extra"]) == 1


def test_moved_and_slowed_cables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    moved = _edit(tmp_path, "moved.topo", {
        f"[1]\t{HOST}[1]": f"[17]\t{HOST}[1]",
        f"[1](24be05ffff980031) \t{SW}[1]": f"[1](24be05ffff980031) \t{SW}[17]"})
    rc, out, _ = _run(capsys, LOGINOFF, moved, "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["missing"] == [] and doc["extra"] == []
    (m,) = doc["moved"]
    assert m["reference"]["b"]["port"] == 1 and m["current"]["b"]["port"] == 17
    assert m["current"]["a"]["desc"] == "stage114 mlx4_0"
    slow = _rated(tmp_path, "4xQDR", "1xDDR")
    rc, out, _ = _run(capsys, LOGINOFF, slow, "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["missing"] == doc["extra"] == doc["moved"] == []
    (s,) = doc["slower"]
    assert (s["reference"]["width"], s["reference"]["speed"]) == (4, "QDR")
    assert (s["current"]["width"], s["current"]["speed"]) == (1, "DDR")
    assert doc["below_usual"] == []  # reported once, as slower than the reference
    rc, text_out, _ = _run(capsys, LOGINOFF, slow)
    assert "1xDDR (reference 4xQDR)" in text_out


def test_cable_below_the_usual_rate_without_a_reference_rate(tmp_path: Path) -> None:
    """A new cable that comes up slower than the fabric's others is named even
    though the reference has no rate for it."""
    ref = read_fabric(LOGINOFF)
    p = _rated(tmp_path, "4xQDR", "4xSDR")
    c = compare_fabrics(ref, read_fabric(p))
    assert [(x.a.desc, r.speed, x.speed) for r, x in c.slower] == [("stage114 mlx4_0", 3, 1)]
    same = compare_fabrics(read_fabric(p), read_fabric(p))
    assert same.same and [(x.a.desc, u, k) for x, u, k in same.below_usual] == [
        ("stage114 mlx4_0", "4xQDR", True)]


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(capsys, LOGINOFF, tmp_path / "none.topo")
    assert rc == 2 and "none.topo" in err and "Traceback" not in err


@pytest.mark.skipif(not SELENE.exists(), reason="selene capture absent")
def test_large_capture_with_a_switch_removed() -> None:
    ref = read_fabric(SELENE)
    sw = int(ref.switches[3])
    cur = ref.with_removed(nodes=[sw])
    c = compare_fabrics(ref, cur)
    n = int((ref.port_peer[ref.port_start[sw]:ref.port_start[sw] + ref.num_ports[sw] + 1]
             >= 0).sum())
    assert len(c.missing) == n and c.extra == [] and c.moved == []
    assert c.missing_nodes == [ref.describe_node(sw)] and not c.same
