"""``swaptrace run --first-look`` (``make demo``): what it leaves out is left out, said in the report, and costed."""

from __future__ import annotations

import json
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
    manifest["ssd-thesis"]["params"] = {}
    manifest["fio-run"]["params"]["runtime_s"] = 3
    (tmp_path / "pipeline.json").write_text(json.dumps(manifest))
    assert first_look_left_out(tmp_path) == []  # a full run leaves nothing out


def test_the_flag_reaches_the_pipeline(tmp_path, monkeypatch):
    got = {}

    def fake_run(opts, folder, **kw):
        got["opts"] = opts
        raise SystemExit(0)

    monkeypatch.setattr("swaptrace.pipeline.run.run_pipeline", fake_run)
    CliRunner().invoke(cli, ["run", "--preset", "tiny", "--first-look", "-o", str(tmp_path / "r")])
    assert got["opts"].first_look and got["opts"].fio_runtime_s == 1
    CliRunner().invoke(cli, ["run", "--preset", "tiny", "--first-look", "--fio-runtime", "2", "-o", str(tmp_path / "r")])
    assert got["opts"].fio_runtime_s == 2  # a runtime given is kept
