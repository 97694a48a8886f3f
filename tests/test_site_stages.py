"""bench/site_stages.py: the per-stage figures of the catalogue bench and the
rule that counts a cell above the best rival only beyond its noise."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from script_module import BENCH, load_script

from smroute.study.signtest import ALPHA

site = load_script("site_compare", BENCH)
stg = sys.modules["site_stages"]  # the module site_compare itself uses
cache_mod = sys.modules["opensm_cache"]


def test_stages_round_trip_compactly() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(3, 7, 300)
    text = stg.encode(a)
    assert text.startswith("u2:") and len(text) < 300  # 300 small integers
    assert np.array_equal(stg.decode(text), a)
    big = np.array([0, 1, 70_000])
    assert stg.encode(big).startswith("u4:") and np.array_equal(stg.decode(stg.encode(big)), big)
    assert stg.decode(stg.encode(np.zeros(0, dtype=np.int64))).size == 0
    with pytest.raises(ValueError):
        stg.encode(np.array([-1]))
    with pytest.raises(ValueError, match="not encoded"):
        stg.decode("xx:abc")


def _split(worse: int, better: int, ties: int) -> tuple[np.ndarray, np.ndarray]:
    """smroute's and a rival's stages: worse, better and tied stages."""
    mine = np.array([5] * worse + [4] * better + [4] * ties)
    theirs = np.array([4] * worse + [5] * better + [4] * ties)
    return mine, theirs


def test_a_median_one_above_within_noise_is_no_significant_miss() -> None:
    # the same 300 permutations: smroute worse on 90, better on 87 (p 0.88), yet
    # its median may be one above
    mine, theirs = _split(90, 87, 123)
    v = stg.significant_miss("rp", mine, 5, [("nue", 4, theirs)])
    assert not v.significant and not v.exact
    assert v.tests[0].worse == 90 and v.tests[0].better == 87 and v.tests[0].ties == 123
    assert v.tests[0].p == pytest.approx(0.88, abs=0.01)
    assert v.mark() == " (p 0.88, within noise)"


def test_worse_on_clearly_more_stages_is_a_significant_miss() -> None:
    mine, theirs = _split(60, 20, 220)
    v = stg.significant_miss("hsd", mine, 4.2, [("nue", 4.1, theirs)])
    assert v.significant and v.tests[0].p < ALPHA
    assert v.mark().endswith("significant)")
    far = stg.significant_miss("hsd", *_split(3000, 0, 0)[:1], 4.2,
                               [("nue", 4.1, _split(3000, 0, 0)[1])])
    assert far.tests[0].p == 0.0 and far.mark() == " (p < 1e-15, significant)"
    # better on clearly more stages is no miss, whatever the direction of the p
    v = stg.significant_miss("hsd", theirs, 4.2, [("nue", 4.1, mine)])
    assert not v.significant and v.tests[0].p < ALPHA


def test_ties_are_dropped() -> None:
    # 5 worse and none better: p = 2 / 2**5 = 0.0625 whatever the ties; 6: 0.031
    for ties in (0, 1000):
        assert not stg.paired(*_split(5, 0, ties)).significant
        t = stg.paired(*_split(6, 0, ties))
        assert t.significant and t.p == pytest.approx(2 / 2 ** 6) and t.ties == ties
    same = stg.paired(*_split(0, 0, 50))
    assert same.p == 1.0 and not same.significant
    with pytest.raises(ValueError, match="unpaired"):
        stg.paired(np.array([1, 2]), np.array([1]))


def test_sp_and_a2a_are_exact() -> None:
    mine, theirs = _split(1, 0, 299)  # stages would say noise; SP and A2A have none
    for metric in ("sp", "a2a"):
        v = stg.significant_miss(metric, mine, 6, [("nue", 5, theirs)])
        assert v.significant and v.exact and v.tests == () and v.mark() == ""


def test_any_rival_below_can_make_it_significant_and_untested_cells_count() -> None:
    noise, sig = _split(90, 87, 123), _split(60, 10, 230)
    v = stg.significant_miss("rp", noise[0], 5, [("nue", 4, noise[1]), ("updn", 4, sig[1]),
                                                 ("dnup", 5, None)])  # dnup is not below
    assert v.significant and [t.rival for t in v.tests] == ["nue", "updn"]
    assert v.mark().startswith(" (p ") and "vs updn, significant)" in v.mark()
    # a sampled cell without stages (rows of an older run) cannot be tested: it counts
    assert stg.significant_miss("rp", None, 5, [("nue", 4, noise[1])]).significant
    v = stg.significant_miss("rp", noise[0], 5, [("nue", 4, None)])
    assert v.significant and v.mark() == " (no stages: counted)"


def _eng(name: str, rp: float, rp_stages: np.ndarray, sp: float) -> dict[str, Any]:
    per = {"sp": sp, "hsd": rp, "rp": rp, "rp_stages": stg.encode(rp_stages),
           "shift_stages": stg.encode(rp_stages)}
    return {"engine": name, "status": "ok", "metrics": {
        "missing_needed": 0, "credit_loop_free": True,
        "sets": {"compute": {"a2a": sp, "guid": per, "name": per}}}}


def test_the_table_shows_raw_and_significant_misses() -> None:
    mine, theirs = _split(90, 87, 123)
    fabrics = [{"fabric": "a", "compute": 10, "engines": [
        _eng("smroute", 5, mine, 6), _eng("nue", 4, theirs, 5)]}]
    lines, ok, total, sig = site.against_best(fabrics, "smroute", site.ONE_VL_ENGINES)
    # SP (guid, name) and A2A exact: 3 misses; RP and HSD in both orders: 4 within noise
    assert (ok, total, sig) == (0, 7, 3)
    assert "5 > 4 nue (p 0.88, within noise)" in lines[2] and "| 6 > 5 nue |" in lines[2]
    text = "\n".join(site.summary(fabrics))
    assert "above it in 7 (raw), 3 of them significant misses" in text
    assert "A miss counts as significant: SP and A2A exactly" in text


def test_the_cache_re_measures_rows_of_another_format(tmp_path: Path) -> None:
    cache = cache_mod.OpenSMCache(tmp_path, seed=1, rp_samples=20)
    row = {"engine": "updn", "status": "ok", "metrics": {"missing_needed": 0}}
    cache.put_engine("k", "updn", 300, row)
    assert cache.engine("k", "updn", 300) == row
    path = tmp_path / "k-updn.json"
    old = path.read_text().replace(f'"format": {cache_mod.FORMAT},', "")
    path.write_text(old)  # a row of the format before the per-stage figures
    assert '"format"' not in old and cache.engine("k", "updn", 300) is None
