"""The designs' fio replay (swaptrace.designs.ondisk, compare.add_disk): the common steps every design
replays, the median of repeated runs, the ``complete`` flag and the gains put into the table.

fio itself is replaced by a scripted runner here (fio's own runs are tests/test_fio_*.py and
test_designs_cli.py's replay); the expected values come from the definitions in the docstrings,
computed independently (a brute-force search for the common steps, :func:`statistics.median`).
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from swaptrace.core import traceio
from swaptrace.designs import ondisk
from swaptrace.designs.table import DesignComparison, add_disk
from swaptrace.errors import ConfigError


def _stream(path, requests_per_step, first_step=0):
    step = np.repeat(np.arange(len(requests_per_step)) + first_step, requests_per_step).astype(np.uint32)
    n = step.size
    meta = {"source": "emulator", "page_bytes": 4096, "device_bytes": 16 << 20, "first_step": first_step,
            "steps": len(requests_per_step)}
    with traceio.TraceWriter(path, "swapio", meta, force=True) as w:
        w.write(t_us=np.arange(n, dtype=np.float64), step=step, op=np.full(n, traceio.OP_READ, np.int8),
                offset=(np.arange(n) * 4096).astype(np.uint64), length=np.full(n, 4096, np.uint32),
                cause=np.full(n, traceio.CAUSE_FAULT, np.int8))
    return path


def _brute_common_steps(per_step: dict[str, list[int]], max_rows: int) -> tuple[int, dict[str, int]]:
    """The docstring's definition, searched: the most leading steps whose requests fit in every stream."""
    best = 0
    for k in range(1, max(len(v) for v in per_step.values()) + 1):
        if all(sum(v[:k]) <= max_rows for v in per_step.values()):
            best = k
    return best, {name: sum(v[:best]) for name, v in per_step.items()}


STREAMS = {"linux": [3, 5, 2, 4, 0], "log": [1, 1, 10, 1, 0], "zoned": [2, 2, 2, 2, 9]}


@pytest.mark.parametrize("max_rows", [3, 8, 9, 10, 12, 13, 14, 20, 100])
@pytest.mark.parametrize("first_step", [0, 7])
def test_common_steps_is_the_most_steps_every_stream_fits(tmp_path, max_rows, first_step):
    paths = {name: _stream(tmp_path / f"{name}.swapio.parquet", rows, first_step) for name, rows in STREAMS.items()}
    want = _brute_common_steps(STREAMS, max_rows)
    assert want[0] >= 1  # the parameters above all fit a first step
    assert ondisk.common_steps(paths, max_rows) == want


def test_common_steps_refuses_a_first_step_over_the_cap(tmp_path):
    paths = {name: _stream(tmp_path / f"{name}.swapio.parquet", rows) for name, rows in STREAMS.items()}
    with pytest.raises(ConfigError, match="first step"):
        ondisk.common_steps(paths, 2)  # linux's first step has 3 requests


class ScriptedFio:
    """``build_jobs``/``run_jobs`` stand-ins: run ``i`` of design ``name`` reports ``script[name][i]``.

    Each scripted run is ``(read_s, write_s, complete)``: fio's read and write rows of the replay job
    (runtime, and bandwidth = bytes / runtime for 1 MB moved each way) and whether it issued every request.
    """

    def __init__(self, script):
        self.script = script
        self.built: dict[str, int] = {}
        self.calls: list[tuple[str, int]] = []

    def build_jobs(self, stream, jobs, *, size_bytes, max_requests, force):
        self.built[jobs.name] = max_requests

    def run_jobs(self, jobs, target, *, size_bytes, runtime_s, only, out_dir, force, echo):
        assert only == [ondisk.JOB]
        rnd = int(out_dir.name.split("-")[1])
        self.calls.append((jobs.name, rnd))
        read_s, write_s, complete = self.script[jobs.name][rnd - 1]
        rows = [{"job": ondisk.JOB, "direction": d, "runtime_ms": s * 1e3, "bw_bytes": 1e6 / s,
                 "ios": 100 if complete else 60, "expected_ios": 100} for d, s in (("read", read_s), ("write", write_s))]
        rows.append({"job": "other", "direction": "read", "runtime_ms": 1e9, "bw_bytes": 1.0, "ios": 0,
                     "expected_ios": 1})  # another job's row: not this replay's
        return type("Result", (), {"rows": rows})()


def _replay(tmp_path, monkeypatch, script, repeats):
    import swaptrace.fio.jobs
    import swaptrace.fio.runner

    fio = ScriptedFio(script)
    monkeypatch.setattr(swaptrace.fio.jobs, "build_jobs", fio.build_jobs)
    monkeypatch.setattr(swaptrace.fio.runner, "run_jobs", fio.run_jobs)
    paths = {name: _stream(tmp_path / f"{name}.swapio.parquet", STREAMS[name]) for name in script}
    out = ondisk.replay_on_disk(paths, tmp_path / "out", target=tmp_path / "t.dat", size_bytes=1 << 20,
                                max_rows=12, repeats=repeats, say=lambda s: None)
    return fio, out


@pytest.mark.parametrize("repeats", [1, 2, 3, 4])
def test_replay_takes_turns_and_reports_the_median(tmp_path, monkeypatch, repeats):
    script = {"linux": [(5.0, 4.0, True), (1.0, 1.5, True), (3.0, 0.5, True), (2.0, 2.0, True)],
              "log": [(2.0, 2.5, True), (2.0, 1.0, True), (8.0, 1.0, True), (0.5, 0.1, True)]}
    fio, out = _replay(tmp_path, monkeypatch, script, repeats)
    # the designs take turns, round by round; each stream's jobs are built once, for the common steps
    assert fio.calls == [(name, rnd) for rnd in range(1, repeats + 1) for name in script]
    k, rows = _brute_common_steps({n: STREAMS[n] for n in script}, 12)
    assert fio.built == rows
    for name, runs in script.items():
        runs = runs[:repeats]
        times = [max(r, w) for r, w, _ in runs]  # a replay lasts as long as its slower direction
        got = out[name]
        assert (got["steps"], got["requests"]) == (k, rows[name])
        assert got["disk_s_runs"] == pytest.approx(times, rel=1e-12)  # ms -> s: one division, a few ulps
        assert got["disk_s"] == pytest.approx(statistics.median(times), rel=1e-12)
        # the bandwidths are those of the median run (the lower middle one for an even count)
        mid = sorted(runs, key=lambda r: max(r[0], r[1]))[(repeats - 1) // 2]
        assert got["read_mb_s"] == pytest.approx(1.0 / mid[0], rel=1e-12)
        assert got["write_mb_s"] == pytest.approx(1.0 / mid[1], rel=1e-12)
        assert got["complete"] is True


def test_one_incomplete_run_marks_the_design_incomplete(tmp_path, monkeypatch):
    script = {"linux": [(1.0, 1.0, True), (1.0, 1.0, True), (1.0, 1.0, True)],
              "log": [(1.0, 1.0, True), (0.5, 0.5, False), (1.0, 1.0, True)]}
    _, out = _replay(tmp_path, monkeypatch, script, 3)
    assert out["linux"]["complete"] is True and out["log"]["complete"] is False


def test_replay_refuses_no_repeats_and_a_block_device(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="at least 1"):
        _replay(tmp_path, monkeypatch, {"linux": []}, 0)
    with pytest.raises(ConfigError, match="file target only"):
        ondisk.replay_on_disk({}, tmp_path, target="/dev/sda", size_bytes=1 << 20)


def _cmp(designs):
    return DesignComparison(rows=[{"design": d} for d in designs], runs={}, devices={}, steps=5)


def test_add_disk_gains_against_a_complete_linux_replay_only():
    disk = {"linux": {"steps": 4, "disk_s": 3.0, "disk_s_runs": [3.0], "complete": True},
            "log": {"steps": 4, "disk_s": 1.5, "disk_s_runs": [1.5], "complete": True},
            "zoned": {"steps": 4, "disk_s": 0.5, "disk_s_runs": [0.5], "complete": False}}
    cmp = _cmp(["linux", "log", "zoned", "zoned@ftl", "packed"])
    add_disk(cmp, disk)
    rows = {r["design"]: r for r in cmp.rows}
    assert rows["log"]["disk_time_gain"] == 2.0 and rows["linux"]["disk_time_gain"] == 1.0
    # an incomplete replay has no disk time (it stopped at the runtime cap): neither it nor its gain is shown
    for name in ("zoned", "zoned@ftl"):  # zoned@ftl is the zoned stream (the same requests)
        assert rows[name]["disk_s"] is None and "disk_time_gain" not in rows[name]
        assert rows[name]["fio_steps"] == 4
    assert "fio_steps" not in rows["packed"]  # not replayed
    # linux stopped at the cap: its time is a lower bound, so no design gets a gain against it
    disk["linux"]["complete"] = False
    cmp = _cmp(["linux", "log"])
    add_disk(cmp, disk)
    assert all("disk_time_gain" not in r for r in cmp.rows)
    assert cmp.rows[1]["disk_s"] == 1.5
