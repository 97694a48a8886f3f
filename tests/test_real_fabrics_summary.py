"""bench/real_fabrics.py's table of smroute's engines against the best
OpenSM engine that routed each capture completely."""

from __future__ import annotations

from typing import Any

from script_module import BENCH, load_script

real = load_script("real_fabrics", BENCH)


def _engine(name: str, sp: float, a2a: float, rp: float, hsd: float, *, status: str = "ok",
            left: int | None = 0) -> dict[str, Any]:
    return {"engine": name, "status": status, "unroutable_pairs": left,
            "values": {"sp": sp, "a2a": a2a, "rp": rp, "hsd_topo_shift": hsd}}


def _fabric(name: str, hosts: int, *engines: dict[str, Any]) -> dict[str, Any]:
    return {"file": name, "hosts": hosts, "engines": list(engines)}


def test_only_complete_opensm_engines_are_rivals_and_a_higher_value_is_marked() -> None:
    fabrics = [
        _fabric("a", 40,
                _engine("nmodc", 4, 18, 6, 3.5),
                _engine("dmodc", 4, 20, 6, 3.6),
                _engine("updn", 5, 18, 6, 3.7),
                _engine("dfsssp", 5, 18, 5, 3.4),
                # lower everywhere, but incomplete or fallen back: no rival
                _engine("minhop", 1, 1, 1, 1, left=12),
                _engine("ftree", 1, 1, 1, 1, status="failed", left=None)),
        _fabric("only ours", 40, _engine("nmodc", 9, 9, 9, 9)),
        _fabric("one host", 1, _engine("nmodc", 9, 9, 9, 9), _engine("updn", 1, 1, 1, 1)),
    ]
    lines, ok, total = real.against_best(fabrics, "nmodc")
    assert (ok, total) == (2, 4)  # SP and A2A at or below; RP and HSD above dfsssp
    assert len(lines) == 3 and lines[2].startswith("| a | 40 | ")
    assert lines[2].split(" | ")[2:] == ["4 <= 5 updn/dfsssp", "18 <= 18 updn/dfsssp",
                                          "6 > 5 dfsssp", "3.5 > 3.4 dfsssp |"]
    assert real.against_best(fabrics, "dmodc")[1:] == (1, 4)
    text = "\n".join(real.summary(fabrics))
    assert "nmodc: at or below the best complete OpenSM engine in 2 of 4" in text
    assert "dmodc: at or below the best complete OpenSM engine in 1 of 4" in text


def test_ties_name_the_first_two_engines_and_count_the_rest() -> None:
    fabrics = [_fabric("t", 8, _engine("nmodc", 2, 2, 2, 2),
                       *(_engine(e, 2, 2, 2, 2) for e in ("updn", "dnup", "minhop", "nue")))]
    lines, ok, total = real.against_best(fabrics, "nmodc")
    assert (ok, total) == (4, 4) and "2 <= 2 updn/dnup +2" in lines[2]
