"""research/kernel_floor.py: kernel runs collected from captures, and scored against the other session's references."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from research_scripts import load

from swaptrace.core.traceio import TraceWriter

_DIR = Path(__file__).parents[1]  # research/
sys.path[:0] = [str(_DIR), str(_DIR.parent / "analysis")]  # kernel_floor imports variants.py and analysis/calibrate.py
variants = load("variants")
kernel_floor = load("kernel_floor")

SCALES = (0.98, 0.99, 1.0, 1.01, 1.02)
MEMORY = 100 * 4096 * 10  # a whole number of pages at every scale


def _write_run(path: Path, pages_in: int, pages_out: int) -> None:
    with TraceWriter(path, "swapio", {"source": "kernel", "page_bytes": 4096, "first_step": 0, "steps": 1}) as w:
        w.write(t_us=[0.0], step=[0], op=["read"], offset=[4096], length=[4096], cause=["fault"])
        w.metadata["summary"] = {"pages_in": pages_in, "pages_out": pages_out}


def _session(folder: Path, runs: dict[float, list[tuple[int, int]]], reference: dict[float, tuple[int, int]]) -> Path:
    """A calibration.json for demo 20 % with band references, and its captures in ``folder`` (band ones as files)."""
    folder.mkdir(parents=True)
    (folder / "band").mkdir()
    tag = "demo-20-0.2"
    for scale, members in runs.items():
        if scale == 1.0:
            continue
        for i, (a, b) in enumerate(members, 1):
            _write_run(folder / "band" / f"{tag}-{scale:g}.kernel{'' if i == 1 else i}.swapio.parquet", a, b)
    _write_run(folder / "band" / f"{tag}-0.98.kernel-reclaim.swapio.parquet", 1, 1)  # not a run of the replay
    results = {
        "captures": [{"preset": "demo", "fraction": 0.2, "reference": f"{tag}.kernel.swapio.parquet",
                      "runs": [{"path": str(folder / f"{tag}.kernel{'' if i == 1 else i}.swapio.parquet"),
                                "device_bytes": 1 << 30, "pages_in": a, "pages_out": b}
                               for i, (a, b) in enumerate(runs[1.0], 1)]}],
        "band": [{"setting": "default", "preset": "demo", "fraction": 0.2, "memory_bytes": MEMORY, "band": 0.02,
                  "kernel_pages_in": [reference[s][0] for s in SCALES],
                  "kernel_pages_out": [reference[s][1] for s in SCALES]}],
    }
    path = folder / "calibration.json"
    path.write_text(json.dumps(results))
    return path


def _runs(base: int) -> dict[float, list[tuple[int, int]]]:
    """Three runs at each scale: base, base + 10 %, base + 30 % pages in; pages out 2 x base."""
    return {s: [(base, 2 * base), (base * 11 // 10, 2 * base), (base * 13 // 10, 2 * base)] for s in SCALES}


def test_collect_reads_every_run_and_checks_their_median_is_the_reference(tmp_path):
    runs = _runs(1000)
    ref = {s: (1100, 2000) for s in SCALES}  # the median run of each scale
    path = _session(tmp_path / "one", runs, ref)
    data = kernel_floor.collect({"one": (path,)})
    assert json.loads(kernel_floor.dumps({"sessions": {**data["sessions"], "two": []}})) == {
        "sessions": {**data["sessions"], "two": []}}
    rows = data["sessions"]["one"]
    assert [r["scale"] for r in rows] == list(SCALES)
    assert all(sorted(map(tuple, r["runs"])) == sorted(runs[r["scale"]]) for r in rows)  # reclaim capture left out
    assert [r["memory_bytes"] for r in rows] == [int(MEMORY * s) // 4096 * 4096 for s in SCALES]
    bad = _session(tmp_path / "two", runs, {**ref, 1.01: (1000, 2000)})
    with pytest.raises(ValueError, match=r"x1.01: the runs .* do not give the reference"):
        kernel_floor.collect({"two": (bad,)})


def test_a_budget_without_runs_is_an_error(tmp_path):
    runs = _runs(1000)
    path = _session(tmp_path / "one", runs, {s: (1100, 2000) for s in SCALES})
    for p in (tmp_path / "one" / "band").glob("*-1.02.kernel*"):
        p.unlink()
    with pytest.raises(ValueError, match="x1.02: no kernel runs"):
        kernel_floor.collect({"one": (path,)})


def _naive(refs, runs, run):
    """The count, written out: the other session's run ``run`` (None: each) against each reference value."""
    within = values = 0
    for ref in refs:
        other = runs[next(s for s in runs if s != ref.session)]
        for scale, k_in, k_out in zip(ref.scales, ref.pages_in, ref.pages_out, strict=True):
            members = other[(ref.preset, ref.steps, int(ref.memory_bytes * scale) // 4096 * 4096)]
            if run == "median":
                members = [sorted(members)[(len(members) - 1) // 2]]
            elif run is not None:
                members = [members[run]]
            for p_in, p_out in members:
                for value, k in ((p_in, k_in), (p_out, k_out)):
                    values += 1
                    within += abs(value / k - 1) <= 0.15
    return within, values


def test_scores_equal_a_written_out_count_and_the_table_says_them(tmp_path):
    # first session: runs 1000, 1100, 1300 (reference 1100); second: 1200, 1320, 1560 (reference 1320)
    a = _session(tmp_path / "a", _runs(1000), {s: (1100, 2000) for s in SCALES})
    b = _session(tmp_path / "b", _runs(1200), {s: (1320, 2400) for s in SCALES})
    sessions = {"first": (a,), "second": (b,)}
    runs = kernel_floor.runs_by_budget(kernel_floor.collect(sessions))
    refs = [r for s, (f,) in sessions.items() for r in variants.references(s, json.loads(f.read_text()))]
    for run in (0, 1, 2, None, "median"):
        rows = kernel_floor.score_runs(refs, runs, run)
        tot = variants.totals(rows)
        for session in ("first", "second"):
            mine = [r for r in refs if r.session == session]
            assert (tot[session]["within"], tot[session]["values"]) == _naive(mine, runs, run)
    # second's run 1 (1200 in, 2400 out) against first's reference (1100, 2000): +9.1 % in, +20 % out
    tot = variants.totals(kernel_floor.score_runs(refs, runs, 0))
    assert tot["first"] == {"within": 5, "values": 10, "worst": pytest.approx(0.2)}
    text = kernel_floor.markdown(refs, runs, verbose=True)
    assert "| 1 | 5 of 10 (20.0%) |" in text
    assert "| every run | " in text
    # the median runs are the references: second's (1320, 2400) against first's (1100, 2000): +20 % both
    assert "| the median run | 0 of 10 (20.0%) | 0 of 10 (16.7%) |" in text
    assert "| first | demo | 20.0% | ×0.98 | out | 1 | 2400 | 2000 | +20.0% |" in text


def test_main_reads_the_stored_runs_and_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert kernel_floor.main(["--runs", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "make it with --collect" in err
    (tmp_path / "bad.json").write_text("{")
    assert kernel_floor.main(["--runs", str(tmp_path / "bad.json")]) == 2
    assert capsys.readouterr().err.startswith("kernel_floor.py: ")
    three = {"sessions": {s: [] for s in ("a", "b", "c")}}
    (tmp_path / "three.json").write_text(json.dumps(three))
    assert kernel_floor.main(["--runs", str(tmp_path / "three.json")]) == 2
    assert "exactly two sessions" in capsys.readouterr().err


def test_the_stored_runs_give_the_stored_references():
    """research/results/kernel-runs.json and the calibration files agree: each budget's median run is its reference."""
    runs = kernel_floor.runs_by_budget(json.loads(kernel_floor.RUNS.read_text()))
    checked = 0
    for session, files in variants.SESSIONS.items():
        for f in files:
            for ref in variants.references(session, json.loads(f.read_text())):
                for scale, k_in, k_out in zip(ref.scales, ref.pages_in, ref.pages_out, strict=True):
                    members = runs[session][(ref.preset, ref.steps, kernel_floor.budget_memory(ref, scale))]
                    assert variants.median_member(members) == (k_in, k_out), (
                        f"{kernel_floor.RUNS.name} does not give {f}'s reference at {ref.preset} {ref.fraction:.1%} "
                        f"x{scale}: after a new calibration, run research/kernel_floor.py --collect")
                    checked += 1
    assert checked == 100
