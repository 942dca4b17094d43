"""The study's checks (``analysis/validate_real.py``: ``checks``, ``tally``, ``score``) on hand-worked runs.

Every expected verdict below is worked from the issue's targets by hand (pages in and out within ±15 % or
2,000 pages, mean write ±25 %, write-size KS ≤ 0.2, slowdown ±25 %), each on both sides of its bound, so a
rule that drifts (a floor applied only when both counts are small, a strict bound, a check reading another
phase) fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))
import validate_real as vr  # noqa: E402  (analysis/validate_real.py, a script)


def run(pages=(10_000, 10_000), out=(20_000, 20_000), write=(100.0, 100.0), ks=0.1, slowdown=(2.0, 2.0),
        writes=(5, 5)) -> dict:
    """One ``runs`` entry of results.json: (kernel, emulator) pairs; only the ``all`` phase is scored, so the
    ``training`` phase carries values that would fail every check."""
    def phase(i):
        return {"pages_in": pages[i], "pages_out": out[i], "write_kib": write[i], "writes": writes[i]}
    bad = {"pages_in": 1, "pages_out": 1, "write_kib": 1.0, "writes": 1}
    return {"run": 0, "limit_bytes": 256 << 20, "kernel": {"all": phase(0), "training": bad}, "emulator": {"all": phase(1), "training": bad},
            "ks_write": {"all": ks, "training": 0.9}, "slowdown_measured": slowdown[0],
            "slowdown_predicted": slowdown[1]}


@pytest.mark.parametrize("pages, out, ok", [
    ((20_000, 22_800), (20_000, 20_000), True),     # +14 %, 2,800 pages
    ((20_000, 23_400), (20_000, 20_000), False),    # +17 %, 3,400 pages: beyond both
    ((20_000, 20_000), (100_000, 85_500), True),    # -14.5 % out
    ((20_000, 20_000), (100_000, 84_000), False),   # -16 % out, in alone fine
    ((3_000, 4_900), (20_000, 20_000), True),       # +63 %, but 1,900 pages: the floor
    ((3_000, 5_100), (20_000, 20_000), False),      # 2,100 pages and +70 %
    ((0, 1_999), (0, 0), True),                     # nothing swapped by the kernel, under 2,000 by the model
])
def test_pages_within_fifteen_percent_or_two_thousand(pages, out, ok):
    assert vr.checks(run(pages=pages, out=out))["pages"] is ok


@pytest.mark.parametrize("write, ok", [((100.0, 124.0), True), ((100.0, 126.0), False), ((100.0, 76.0), True),
                                       ((100.0, 74.0), False), ((None, None), True), ((None, 50.0), False),
                                       ((50.0, None), False)])
def test_mean_write_within_a_quarter(write, ok):
    assert vr.checks(run(write=write))["write"] is ok


@pytest.mark.parametrize("ks, writes, ok", [(0.2, (5, 5), True), (0.21, (5, 5), False), (None, (0, 0), True),
                                            (None, (5, 0), False)])
def test_ks_at_most_a_fifth(ks, writes, ok):
    assert vr.checks(run(ks=ks, writes=writes))["ks"] is ok


@pytest.mark.parametrize("slowdown, ok", [((2.0, 2.4), True), ((2.0, 2.6), False), ((4.0, 3.1), True),
                                          ((4.0, 2.9), False)])
def test_slowdown_within_a_quarter(slowdown, ok):
    assert vr.checks(run(slowdown=slowdown))["slowdown"] is ok


def results() -> list[dict]:
    """Two points: a fit one whose two runs pass everything, a held-out one with one run missing pages and
    write, the other run missing the slowdown."""
    return [{"shape": "a", "frac": 0.5, "held_out": False, "profile": "a.recording.parquet", "runs": [run(), run()]},
            {"shape": "b", "frac": 0.5, "held_out": True, "profile": "b.recording.parquet",
             "runs": [run(pages=(20_000, 26_000), write=(100.0, 60.0)), run(slowdown=(2.0, 3.0))]}]


def test_tally_counts_each_group():
    t = vr.tally(results())
    assert {name: (c["all"], c["fit"], c["held_out"]) for name, c in t.items()} == {
        "pages": (3, 2, 1), "write": (3, 2, 1), "ks": (4, 2, 2), "slowdown": (3, 2, 1)}
    assert all((c["n_all"], c["n_fit"], c["n_held_out"]) == (4, 2, 2) for c in t.values())
    # 1 of 2 held out is under 75 %; KS's 2 of 2 is not
    table = vr.render_tally(results())
    assert "| write-size KS ≤ 0.2 | 4 of 4 | 2 of 2 | 2 of 2 | yes |" in table
    assert "| mean write ±25% | 3 of 4 | 2 of 2 | 1 of 2 | no |" in table


def test_score_prints_each_set_and_renders_its_table(tmp_path):
    d = tmp_path / "take1"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(results()))
    r = subprocess.run([sys.executable, str(ROOT / "analysis" / "validate_real.py"), "score", str(d), "--render"],
                       capture_output=True, text=True, check=True)
    assert "| pages in and out ±15% (or 2,000) | 3 of 4 (1 of 2) |" in r.stdout
    assert (d / "results.md").read_text().startswith("| check | all | fit | held out |")
    bad = subprocess.run([sys.executable, str(ROOT / "analysis" / "validate_real.py"), "score",
                          str(tmp_path / "none")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no results.json" in bad.stderr
