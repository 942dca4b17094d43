"""analysis/variants.py: references read from calibration.json, the scoring, and the fast path against emulate()."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_DIR = Path(__file__).parents[1] / "analysis"
sys.path.insert(0, str(_DIR))  # variants imports its sibling calibrate.py
_SPEC = importlib.util.spec_from_file_location("variants", _DIR / "variants.py")
variants = importlib.util.module_from_spec(_SPEC)
sys.modules["variants"] = variants  # its dataclass looks its module up while the class is made
_SPEC.loader.exec_module(variants)

SCALES = (0.98, 0.99, 1.0, 1.01, 1.02)


def _results(preset="demo", steps=60, fraction=0.2, memory=1 << 20, kin=(100,) * 5, kout=(200,) * 5):
    """A calibration.json with one default band row with kernel captures, and two rows that must be skipped."""
    band = {"setting": "default", "preset": preset, "fraction": fraction, "memory_bytes": memory, "band": 0.02,
            "kernel_pages_in": list(kin), "kernel_pages_out": list(kout)}
    return {"captures": [{"preset": preset, "fraction": fraction,
                          "reference": f"{preset}-{steps}-{fraction}.kernel.swapio.parquet",
                          "runs": [{"device_bytes": 123 << 20}]}],
            "band": [band, {**band, "setting": "linux, write cost 3"},
                     {k: v for k, v in band.items() if not k.startswith("kernel_")}]}


def test_references_take_the_default_rows_with_captures_and_the_captures_trace_and_device():
    (ref,) = variants.references("s", _results())
    assert (ref.session, ref.preset, ref.steps, ref.fraction) == ("s", "demo", 60, 0.2)
    assert ref.swap_bytes == 123 << 20 and ref.memory_bytes == 1 << 20
    assert ref.scales == SCALES and ref.pages_in == (100,) * 5 and ref.pages_out == (200,) * 5


def test_a_band_row_without_its_captures_entry_is_an_error():
    res = _results()
    res["captures"] = []
    with pytest.raises(ValueError, match="no captures entry"):
        variants.references("s", res)


def test_score_counts_values_within_the_target_and_emulates_a_shared_budget_once():
    kin = (100, 100, 100, 100, 100)
    refs = variants.references("first", _results(kin=kin)) + variants.references("second", _results(kin=kin))
    calls = []

    def emulate(ref, memory):
        calls.append(memory)
        # pages in: 116 below the middle budget (+16 %: outside), 100 at it and above; pages out exact
        return (116 if memory < ref.memory_bytes else 100, 200)

    rows = variants.score(refs, emulate, target=0.15)
    assert len(calls) == 5  # the second session's five budgets are the first's
    assert [round(e, 3) for e in rows[0]["err_pages_in"]] == [0.16, 0.16, 0.0, 0.0, 0.0]
    assert rows[0]["within"] == 8 and rows[0]["values"] == 10
    tot = variants.totals(rows)
    assert tot["first"] == {"within": 8, "values": 10, "worst": pytest.approx(0.16)}
    text = variants.markdown(rows, "x", verbose=True)
    assert "| first | demo | 20.0% | +16.0, +16.0, +0.0, +0.0, +0.0 |" in text
    assert "x, second: 8 of 10 within ±15% (worst |err| 16.0%)" in text


def test_median_member_is_ranked_by_pages_in_lower_middle_when_even():
    assert variants.median_member([(30, 1), (10, 2), (20, 3)]) == (20, 3)
    assert variants.median_member([(40, 1), (10, 2), (30, 3), (20, 4)]) == (20, 4)


def test_the_fast_path_equals_emulate(tmp_path):
    """Kernel values set to what pagecache.emulate writes at each budget: every error must be exactly 0."""
    from swaptrace.pagecache import emulate
    from swaptrace.traceio import open_trace

    trace = variants.calibrate._trace("tiny", 4, tmp_path)
    footprint = int(open_trace(trace, kind="access").meta["footprint_bytes"])
    memory = int(footprint * 0.3) // 4096 * 4096
    swap = 64 << 20
    kin, kout = [], []
    for scale in SCALES:
        r = emulate(trace, tmp_path / f"{scale}.swapio.parquet", memory_bytes=int(memory * scale) // 4096 * 4096,
                    swap_bytes=swap)
        kin.append(r.pages_in)
        kout.append(r.pages_out)
    assert min(kin) > 0 and min(kout) > 0  # the budget swaps, so the comparison is not 0 = 0
    res = _results(preset="tiny", steps=4, fraction=0.3, memory=memory, kin=kin, kout=kout)
    res["captures"][0]["runs"][0]["device_bytes"] = swap
    rows = variants.score(variants.references("s", res), variants._emulator(tmp_path, {}, []))
    assert rows[0]["err_pages_in"] == [0.0] * 5 and rows[0]["err_pages_out"] == [0.0] * 5
    # a variant changes the result: a synchronous device (lag 0) writes and reads differently
    sync = variants._emulator(tmp_path, {"writeback_completion": "lag", "writeback_lag": 0}, [])
    assert variants.score(variants.references("s", res), sync)[0]["err_pages_in"] != [0.0] * 5


@pytest.mark.parametrize("argv, message", [
    (["--variant", '{"bogus": 1}'], "unknown setting(s) bogus"),
    (["--variant", "[1]"], "must be a JSON object"),
    (["--variant", "{"], "is not JSON"),
    (["--ensemble-write-costs", "0"], "positive integers"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert variants.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_file_that_is_not_a_calibration_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"band": []}))
    assert variants.main(["--results", str(bad)]) == 2
    assert "no band references" in capsys.readouterr().err
    bad.write_text("not json")
    assert variants.main(["--results", str(bad)]) == 2
    assert "not a calibration.json" in capsys.readouterr().err


def test_a_setting_of_the_wrong_type_or_an_unusable_work_folder_is_exit_2(tmp_path, capsys):
    ref = tmp_path / "c.json"
    ref.write_text(json.dumps(_results(preset="tiny", steps=4, fraction=0.3, memory=4 << 20)))
    assert variants.main(["--results", str(ref), "--work", str(tmp_path), "--variant", '{"write_cost": "x"}']) == 2
    assert capsys.readouterr().err.startswith("variants.py: ")
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the traces' folder should be
    assert variants.main(["--results", str(ref), "--work", str(blocked / "sub")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
