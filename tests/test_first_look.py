"""``swaptrace run --first-look`` (``make demo``): what it leaves out is left out, said in the report, and costed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from swaptrace.cli import cli
from swaptrace.pipeline import stages
from swaptrace.pipeline.report import first_look_left_out
from swaptrace.pipeline.run import PipelineOptions, plan


def _params(opts: PipelineOptions) -> dict[str, dict]:
    return {s.name: s.params for s in plan(opts, Path("unused"))}


def test_a_first_look_changes_only_the_thesis_and_fio_parameters():
    full, first = _params(PipelineOptions()), _params(PipelineOptions(first_look=True, fio_runtime_s=1))
    assert first["ssd-thesis"] == {"first_look": True} and full["ssd-thesis"] == {}
    assert first["fio-run"]["runtime_s"] == 1 and full["fio-run"]["runtime_s"] == 3
    changed = {name for name in full if full[name] != first[name]}
    assert changed == {"ssd-thesis", "fio-run"}


@pytest.mark.parametrize("first_look", [False, True])
def test_the_thesis_stage_runs_the_real_drive_only_in_a_full_run(tmp_path, monkeypatch, first_look):
    seen = {}

    def fake_thesis(**kw):
        seen.update(kw)
        return {"request_size_gain": 1.0, "sequential_write_gain": 1.0, "bandwidth_decline": 1.0}

    monkeypatch.setattr("swaptrace.ssd.thesis.run_thesis", fake_thesis)
    stages.run_thesis(tmp_path, PipelineOptions(first_look=first_look), lambda _m: None, None)
    assert seen["real_drive"] is (not first_look)


def test_the_report_names_what_a_first_look_left_out(tmp_path):
    manifest = {"generate": {"params": {"preset": "demo"}}, "ssd-thesis": {"params": {"first_look": True}},
                "fio-run": {"params": {"runtime_s": 1}}}
    (tmp_path / "pipeline.json").write_text(json.dumps(manifest))
    left = first_look_left_out(tmp_path)
    assert len(left) == 3
    assert "swaptrace ssd thesis --real" in left[0] and "--fio-runtime 3" in left[1] and "make reproduce" in left[2]
    manifest["fio-run"]["params"]["overlapped"] = True
    (tmp_path / "pipeline.json").write_text(json.dumps(manifest))
    left = first_look_left_out(tmp_path)
    assert len(left) == 4 and "fio measured on its own" in left[2] and "make reproduce" in left[3]
    manifest["ssd-thesis"]["params"] = {}
    manifest["fio-run"]["params"] = {"runtime_s": 3}
    (tmp_path / "pipeline.json").write_text(json.dumps(manifest))
    assert first_look_left_out(tmp_path) == []  # a full run leaves nothing out


def test_the_flag_reaches_the_pipeline(tmp_path, monkeypatch):
    got = {}

    def fake_run(opts, folder, **kw):
        got["opts"] = opts
        raise SystemExit(0)

    monkeypatch.setattr("swaptrace.pipeline.run.run_pipeline", fake_run)
    CliRunner().invoke(cli, ["run", "--preset", "tiny", "--first-look", "-o", str(tmp_path / "r")])
    assert got["opts"].first_look and got["opts"].fio_runtime_s == 1 and got["opts"].overlap
    CliRunner().invoke(cli, ["run", "--preset", "tiny", "--first-look", "--fio-runtime", "2", "-o", str(tmp_path / "r")])
    assert got["opts"].fio_runtime_s == 2  # a runtime given is kept


# --- fio beside the CPU stages (PipelineOptions.overlap) ------------------------------------------------------


def _fake_plan(stage_run):
    """The real plan's stage names, inputs and outputs, each stage's work replaced by ``stage_run(name)``."""
    import dataclasses

    def fake(real_plan):
        def planned(opts, out):
            return [dataclasses.replace(s, run=lambda d, say, bar, n=s.name: stage_run(n, d))
                    for s in real_plan(opts, out)]
        return planned
    return fake


def test_fio_runs_beside_the_cpu_stages_and_its_readers_wait_for_it(tmp_path, monkeypatch):
    import threading
    import time

    from swaptrace.pipeline import run as run_mod

    events: list[tuple[str, str, float]] = []
    fio_may_end = threading.Event()

    def stage_run(name, d):
        events.append((name, "start", time.monotonic()))
        if name == "fio-run":
            assert fio_may_end.wait(20), "the ssd stage never ran while fio was running"
        if name == "ssd":
            fio_may_end.set()  # the ssd stage runs while fio is still running: fio may now end
        for o in next(s for s in real if s.name == name).outputs:
            (d / o).parent.mkdir(parents=True, exist_ok=True)
            (d / o).write_text(name)
        events.append((name, "end", time.monotonic()))
        return {"stage": name}

    opts = PipelineOptions(preset="tiny", overlap=True, fio_target=str(tmp_path / "target"))
    real = run_mod.plan(opts, tmp_path / "r")
    monkeypatch.setattr(run_mod, "shutil", type("W", (), {"which": staticmethod(lambda _n: "/bin/fio")}))
    monkeypatch.setattr(run_mod, "plan", _fake_plan(stage_run)(run_mod.plan))
    result = run_mod.run_pipeline(opts, tmp_path / "r")
    order = [(n, e) for n, e, _ in events]
    assert order.index(("ssd", "start")) < order.index(("fio-run", "end"))  # beside: ssd ran while fio did
    for reader in ("model-vs-fio", "time", "report"):  # every stage that reads fio's output waited for it
        assert order.index(("fio-run", "end")) < order.index((reader, "start"))
    assert set(result.ran) >= {"fio-run", "ssd", "model-vs-fio"} and result.summaries["fio-run"] == {"stage": "fio-run"}
    manifest = json.loads((tmp_path / "r" / "pipeline.json").read_text())
    assert manifest["fio-run"]["params"]["overlapped"] is True and manifest["fio-run"]["summary"] == {"stage": "fio-run"}


def test_an_interrupt_stops_the_stage_beside_and_its_program(tmp_path, monkeypatch):
    import subprocess
    import time

    from swaptrace.pipeline import run as run_mod

    started = {}

    def stage_run(name, d):
        if name == "fio-run":  # a program that would run for a minute, as fio would
            proc = subprocess.Popen(["sleep", "60"])
            started["pid"] = proc.pid
            if proc.wait() != 0:
                raise RuntimeError(f"fio stand-in ended by signal {-proc.returncode}")
            return {}
        if name == "ssd":
            deadline = time.monotonic() + 20
            while "pid" not in started and time.monotonic() < deadline:
                time.sleep(0.01)
            raise KeyboardInterrupt  # Ctrl-C (or SIGTERM, turned into one) while fio runs beside
        for o in next(s for s in real if s.name == name).outputs:
            (d / o).parent.mkdir(parents=True, exist_ok=True)
            (d / o).write_text(name)
        return {}

    opts = PipelineOptions(preset="tiny", overlap=True, fio_target=str(tmp_path / "target"))
    real = run_mod.plan(opts, tmp_path / "r")
    monkeypatch.setattr(run_mod, "shutil", type("W", (), {"which": staticmethod(lambda _n: "/bin/fio")}))
    monkeypatch.setattr(run_mod, "plan", _fake_plan(stage_run)(run_mod.plan))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_mod.run_pipeline(opts, tmp_path / "r")
    assert time.monotonic() - t0 < 15  # the program beside was stopped, not waited for (60 s)
    with pytest.raises(ProcessLookupError):
        os.kill(started["pid"], 0)
    manifest = json.loads((tmp_path / "r" / "pipeline.json").read_text())
    assert "fio-run" not in manifest  # an interrupted stage is not recorded as done
