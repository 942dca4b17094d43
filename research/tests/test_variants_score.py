"""research/variants.py: references read from calibration.json, the scoring, and the fast path against emulate()."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
from research_scripts import load

_DIR = Path(__file__).parents[1]  # research/
sys.path[:0] = [str(_DIR), str(_DIR.parent / "analysis")]  # variants imports analysis/calibrate.py
variants = load("variants")

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


def test_nearest_member_is_the_run_nearest_the_mean_in_relative_pages_in_and_out():
    # mean (20, 200): (18, 200) is 0.1 away, (21, 230) 0.2, (21, 170) 0.2
    assert variants.nearest_member([(21, 230), (18, 200), (21, 170)]) == (18, 200)
    assert variants.nearest_member([(0, 0), (0, 0)]) == (0, 0)  # no division by a zero mean


def test_median_member_is_ranked_by_pages_in_lower_middle_when_even():
    assert variants.median_member([(30, 1), (10, 2), (20, 3)]) == (20, 3)
    assert variants.median_member([(40, 1), (10, 2), (30, 3), (20, 4)]) == (20, 4)


def test_the_fast_path_equals_emulate(tmp_path):
    """Kernel values set to what pagecache.emulate writes at each budget: every error must be exactly 0."""
    from swaptrace import emulate_trace, open_trace

    trace = variants.calibrate.trace_for("tiny", 4, tmp_path)
    footprint = int(open_trace(trace, kind="access").meta["footprint_bytes"])
    memory = int(footprint * 0.3) // 4096 * 4096
    swap = 64 << 20
    kin, kout = [], []
    for scale in SCALES:
        r = emulate_trace(trace, tmp_path / f"{scale}.swapio.parquet", memory_bytes=int(memory * scale) // 4096 * 4096,
                    swap_bytes=swap, ensemble=None)
        kin.append(r.pages_in)
        kout.append(r.pages_out)
    assert min(kin) > 0 and min(kout) > 0  # the budget swaps, so the comparison is not 0 = 0
    res = _results(preset="tiny", steps=4, fraction=0.3, memory=memory, kin=kin, kout=kout)
    res["captures"][0]["runs"][0]["device_bytes"] = swap
    rows = variants.score(variants.references("s", res), variants.emulator_for(tmp_path, {}, []))
    assert rows[0]["err_pages_in"] == [0.0] * 5 and rows[0]["err_pages_out"] == [0.0] * 5
    # a variant changes the result: a synchronous device (lag 0) writes and reads differently
    sync = variants.emulator_for(tmp_path, {"writeback_completion": "lag", "writeback_lag": 0}, [])
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


def _with_fill(res, fill_step=1, runs=(10, 30, 20), memory=1 << 20, fraction=0.2, preset="demo", rest=100):
    """``res`` with a ``fill`` entry: every kernel run's pages in at the step after the fill and in the others."""
    res.setdefault("fill", []).append({"preset": preset, "fraction": fraction, "memory_bytes": memory,
                                       "fill_step": fill_step, "kernel_after_fill": list(runs),
                                       "kernel_rest": [rest + i for i in range(len(runs))]})
    return res


def test_after_fill_pools_every_files_runs_by_budget_and_step():
    a = _with_fill(_results(), runs=(10, 30, 20))
    b = _with_fill(_results(), runs=(40, 5))
    c = _with_fill(_results(), fill_step=2, runs=(7,))  # the kernel filled a step later here: a row of its own
    refs = variants.after_fill_references([a, b, c])
    assert [(r.step, r.kernel_pages_in) for r in refs] == [(2, (5, 10, 20, 30, 40)), (3, (7,))]
    # whole trace: each run's own after-fill and other steps, (10+100, 30+101, 20+102) and (40+100, 5+101)
    assert refs[0].kernel_totals == (106, 110, 122, 131, 140)
    assert (refs[0].preset, refs[0].steps, refs[0].swap_bytes) == ("demo", 60, 123 << 20)
    res = _with_fill({"captures": []})
    with pytest.raises(ValueError, match="fill demo 0.2 has no captures entry"):
        variants.after_fill_references([res])


def test_after_fill_steps_agree_with_emulate(tmp_path):
    """Pages in per step, fed a step at a time, equal those of the stream pagecache.emulate writes."""
    from swaptrace import emulate_trace, open_trace
    from swaptrace.compare import stream_profile

    trace = variants.calibrate.trace_for("tiny", 4, tmp_path)
    footprint = int(open_trace(trace, kind="access").meta["footprint_bytes"])
    memory, swap = int(footprint * 0.3) // 4096 * 4096, 64 << 20
    out = tmp_path / "s.swapio.parquet"
    emulate_trace(trace, out, memory_bytes=memory, swap_bytes=swap, ensemble=False)  # --after-fill looks at one run
    expected = [int(x) for x in stream_profile(out).pages_in_per_step]
    access = variants.calibrate.read_access(trace)
    assert sum(expected) > 0 and variants.pages_in_per_step(access, memory, swap, {}) == expected
    fill = int(next(i for i, x in enumerate(expected) if x > 0)) - 1  # the kernel "filled" a step before the reads
    res = _with_fill(_results(preset="tiny", steps=4, fraction=0.3, memory=memory), fill_step=fill,
                     runs=(1, 2, 3, 4), memory=memory, fraction=0.3, preset="tiny", rest=sum(expected) - 3)
    res["captures"][0]["runs"][0]["device_bytes"] = swap
    text = variants.after_fill_markdown(variants.after_fill_references([res]), tmp_path, {}, "the default")
    # each run's whole trace is its pages in after the fill plus those of its other steps
    whole = statistics.median([a + sum(expected) - 3 + i for i, a in enumerate((1, 2, 3, 4))])
    assert (f"| tiny | 30.0% | {fill + 1} | 4 | 1 / 2.5 / 4 | {expected[fill + 1]} | {whole:g} | {sum(expected)} "
            f"| {sum(expected) / whole - 1:+.1%} |") in text


def test_after_fill_says_when_the_emulator_fills_at_another_step(tmp_path):
    """A kernel that filled a step later than the emulator: the row and a note name both steps."""
    from swaptrace import open_trace

    trace = variants.calibrate.trace_for("tiny", 4, tmp_path)
    footprint = int(open_trace(trace, kind="access").meta["footprint_bytes"])
    memory, swap = int(footprint * 0.3) // 4096 * 4096, 64 << 20
    access = variants.calibrate.read_access(trace)
    pages_in, pages_out = variants.pages_per_step(access, memory, swap, {})
    assert pages_in == variants.pages_in_per_step(access, memory, swap, {})
    emu_fill = next(i for i, x in enumerate(pages_out) if x > 0)
    assert emu_fill + 2 < len(pages_in)  # room for a kernel that fills one step later
    res = _with_fill(_results(preset="tiny", steps=4, fraction=0.3, memory=memory), fill_step=emu_fill + 1,
                     runs=(1, 2, 3), memory=memory, fraction=0.3, preset="tiny", rest=10)
    res["captures"][0]["runs"][0]["device_bytes"] = swap
    text = variants.after_fill_markdown(variants.after_fill_references([res]), tmp_path, {}, "the default")
    assert f"| {pages_in[emu_fill + 2]} (fills before step {emu_fill + 1}) |" in text
    assert (f"* tiny 30.0%: the emulator's step after the fill is {emu_fill + 1}, the kernel's {emu_fill + 2}"
            in text)
    same = _with_fill(_results(preset="tiny", steps=4, fraction=0.3, memory=memory), fill_step=emu_fill,
                      runs=(1, 2, 3), memory=memory, fraction=0.3, preset="tiny", rest=10)
    same["captures"][0]["runs"][0]["device_bytes"] = swap
    assert "fills before" not in variants.after_fill_markdown(variants.after_fill_references([same]), tmp_path, {},
                                                              "the default")


def test_after_fill_bad_input_is_exit_2(tmp_path, capsys):
    assert variants.main(["--after-fill", "--ensemble-write-costs", "3", "4"]) == 2
    assert "leave out --ensemble-write-costs" in capsys.readouterr().err
    ref = tmp_path / "c.json"
    ref.write_text(json.dumps(_results()))  # band references but no fill entries
    assert variants.main(["--results", str(ref), "--after-fill"]) == 2
    err = capsys.readouterr().err
    assert "no fill entries" in err and err.count("\n") == 1
    broken = _with_fill(_results())
    del broken["fill"][0]["kernel_rest"]
    ref.write_text(json.dumps(broken))
    assert variants.main(["--results", str(ref), "--after-fill"]) == 2
    err = capsys.readouterr().err
    assert "a fill entry without 'kernel_rest'" in err and err.count("\n") == 1


def test_an_ensemble_over_room_and_device_is_the_median_or_mean_of_its_members(tmp_path):
    """Each member is the single emulation at budget x (1 + offset) with that write cost; none is left out."""
    res = _results(preset="tiny", steps=4, fraction=0.3, memory=3 << 20)
    (ref,) = variants.references("s", res)
    memory = 3 << 20
    members = [variants.emulator_for(tmp_path, {"write_cost": c}, [])(ref, int(memory * (1 + d)) // 4096 * 4096)
               for d in (-0.02, 0.02) for c in (2, 8)]
    assert len(set(members)) > 1  # the members differ, so the statistic below is not trivially any member
    mean = variants.emulator_for(tmp_path, {}, [2, 8], [-0.02, 0.02], pick="mean")(ref, memory)
    assert mean == pytest.approx((statistics.mean(m[0] for m in members), statistics.mean(m[1] for m in members)))
    median = variants.emulator_for(tmp_path, {}, [2, 8], [-0.02, 0.02])(ref, memory)
    assert median == variants.median_member(members)
    nearest = variants.emulator_for(tmp_path, {}, [2, 8], [-0.02, 0.02], pick="nearest")(ref, memory)
    assert nearest == variants.nearest_member(members) and nearest in members
    room_only = variants.emulator_for(tmp_path, {}, [], [-0.02, 0.02], pick="mean")(ref, memory)
    plain = variants.emulator_for(tmp_path, {}, [], single=True)
    lo, hi = (plain(ref, int(memory * (1 + d)) // 4096 * 4096) for d in (-0.02, 0.02))
    assert room_only == pytest.approx(((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2))


@pytest.mark.parametrize("argv, message", [
    (["--ensemble-room-offsets", "0.2"], "between -0.1 and 0.1"),
    (["--ensemble-pick", "mean"], "needs --ensemble-write-costs or --ensemble-room-offsets"),
    (["--after-fill", "--ensemble-room-offsets", "0.01"], "leave out --ensemble-write-costs and"),
])
def test_bad_ensemble_options_are_exit_2(argv, message, capsys):
    assert variants.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
