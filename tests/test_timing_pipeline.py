"""`swaptrace run` predicts the step times and the report shows the slowdown and the per-step figure."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace
from swaptrace.pipeline import filenames as S

pytestmark = pytest.mark.slow

SMALL_DRIVE = ("--ssd-capacity", "8GiB")


def test_run_writes_timing_and_report_shows_it(tmp_path):
    folder = tmp_path / "tiny"
    # nvme-tlc resized to 8 GiB (SMALL_DRIVE): the stages' wiring as on the full 512 GiB drive, in seconds
    r = CliRunner().invoke(cli, ["run", "--preset", "tiny", "--steps", "4", "--memory-fraction", "0.3", "--no-fio",
                                 "--no-thesis", *SMALL_DRIVE, "-o", str(folder)])
    assert r.exit_code == 0, r.output
    tf = open_trace(folder / S.TIMING, "timing-steps")
    cols = tf.read_all()
    assert cols["step"].tolist() == [0, 1, 2, 3]
    assert (cols["step_us"] >= cols["compute_us"]).all() and (cols["compute_us"] > 0).all()
    s = tf.meta["summary"]
    assert s["slowdown"] == pytest.approx(cols["step_us"].sum() / cols["compute_us"].sum())
    assert not (folder / S.TIMING_DISK).exists()  # no fio run, no disk profile
    text = (folder / S.REPORT / "report.md").read_text()
    assert "## Training time (time model)" in text and f"{s['slowdown']:.2f}x" in text
    assert (folder / S.REPORT / "step_time.png").read_bytes()[:4] == b"\x89PNG"


def test_run_takes_the_time_stage_costs_from_a_host_costs_file(tmp_path):
    from swaptrace.timing import model as timing

    costs = timing.save_costs(timing.CpuCosts(30.0, 0.3, 12.0, "measured elsewhere"), tmp_path / "host.toml")
    folder = tmp_path / "tiny"
    args = ["run", "--preset", "tiny", "--steps", "4", "--memory-fraction", "0.3", "--no-fio", "--no-thesis",
            *SMALL_DRIVE, "--time-costs", str(costs), "-o", str(folder)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    c = open_trace(folder / S.TIMING, "timing-steps").meta["summary"]["cpu_costs"]
    assert (c["fault_cpu_us"], c["reclaim_cpu_us"], c["write_cpu_us"]) == (30.0, 0.3, 12.0)
    assert "measured elsewhere" in c["source"]
    # other costs are other parameters: the time stage runs again, the stages before it do not
    timing.save_costs(timing.CpuCosts(60.0, 0.3, 12.0, "dearer faults"), costs, force=True)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    s = open_trace(folder / S.TIMING, "timing-steps").meta["summary"]
    assert s["cpu_costs"]["fault_cpu_us"] == 60.0
    assert "emulate: up to date" in r.output and "report: up to date" not in r.output
    assert f"{s['slowdown']:.2f}x" in (folder / S.REPORT / "report.md").read_text()  # the report follows the stage
    # a measured spread of the fault cost: the stage prices the stream at both ends, the report shows them
    timing.save_costs(timing.CpuCosts(60.0, 0.3, 12.0, "spread", fault_cpu_us_range=(40.0, 90.0)), costs, force=True)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    s = open_trace(folder / S.TIMING, "timing-steps").meta["summary"]
    lo, hi = s["slowdown_range"]
    assert lo < s["slowdown"] < hi and s["cpu_costs"]["fault_cpu_us_range"] == [40.0, 90.0]
    text = (folder / S.REPORT / "report.md").read_text()
    assert f"{s['slowdown']:.2f}x ({lo:.2f}-{hi:.2f}x)" in text and "(40.0-90.0 us per fault)" in text
