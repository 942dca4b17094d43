"""``swaptrace designs`` and ``generate --row-layout`` end to end on a tiny trace (CliRunner)."""

from __future__ import annotations

import json

import naive_timing
import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace
from swaptrace.ssd.swapdrive import swap_drive
from swaptrace.timing import model as timing


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("designs")
    runner = CliRunner()
    for name, extra in (("scattered", []), ("packed", ["--row-layout", "packed"]), ("default", []),
                        ("noscatter", ["--no-scatter"])):
        r = runner.invoke(cli, ["generate", "--preset", "tiny", "--steps", "6", "-o", str(d / f"{name}.parquet"),
                                *extra, *(["--row-layout", "scattered"] if name == "scattered" else [])])
        assert r.exit_code == 0, r.output
    return d


def test_row_layout_default_is_todays_and_packed_is_rank_order(traces):
    t = {n: pq.read_table(traces / f"{n}.parquet") for n in ("scattered", "default", "packed", "noscatter")}
    assert t["scattered"].equals(t["default"])
    assert t["packed"].equals(t["noscatter"])
    # hot rows share pages: fewer distinct table pages per step than the scattered layout
    def pages_per_step(tab):
        steps, pages = tab.column("step").to_numpy(), tab.column("page").to_numpy()
        return np.mean([np.unique(pages[steps == s]).size for s in np.unique(steps)])
    assert pages_per_step(t["packed"]) < pages_per_step(t["scattered"])


def test_row_layout_contradiction_is_one_line_exit_2(traces):
    r = CliRunner().invoke(cli, ["generate", "--preset", "tiny", "--steps", "1", "--row-layout", "packed",
                                 "--scatter", "-o", str(traces / "x.parquet")])
    assert r.exit_code == 2 and "contradicts" in r.output
    assert not (traces / "x.parquet").exists()


def test_designs_command_writes_table_streams_and_figures(traces, tmp_path):
    out = tmp_path / "d"
    r = CliRunner().invoke(cli, ["designs", str(traces / "default.parquet"), "--memory-fraction", "0.3",
                                 "--packed", str(traces / "packed.parquet"), "--segment-size", "64KiB",
                                 "--zone-size", "256KiB", "--device", "tiny", "--verify", "--step-compute-us", "2000",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    table = pq.read_table(out / "designs.parquet").to_pylist()
    names = [row["design"] for row in table]
    assert names == ["linux", "log", "log-prefetch", "zoned", "zoned@ftl", "packed", "packed+log"]
    rows = {row["design"]: row for row in table}
    assert rows["zoned"]["device_waf"] == 1.0
    # one write per 64 KiB segment but the last (partial) one
    assert rows["log"]["mean_write_kib"] > max(rows["linux"]["mean_write_kib"], 0.9 * 64)
    assert rows["log"]["write_request_gain"] > 1.0
    for name in ("log", "zoned"):
        assert rows[name]["host_write_amplification"] >= 1.0
    # every design's stream is a swapio file the other stages read
    for name in names:
        if name != "zoned@ftl":  # the zoned stream on the conventional SSD
            assert open_trace(out / f"{name}.swapio.parquet", kind="swapio").num_rows > 0
    assert {p.name for p in out.glob("designs-*.png")} == {"designs-write-sizes.png", "designs-read-sizes.png",
                                                          "designs-device-time.png"}
    doc = json.loads((out / "designs.json").read_text())
    assert doc["steps"] == 6 and doc["step_compute_us"] == 2000.0
    assert "1.75x" in (out / "designs.md").read_text()
    check_step_times(out, rows, 2000.0)
    assert "| step_time_ms | slowdown |" in (out / "designs.md").read_text()


def check_step_times(out, rows, compute_us):
    """Each design's step time and slowdown: its stream read and run by the reference (tests/naive_timing.py,
    written from docs/timing.md, not the product's reader or kernel) on the latency table of the SSD model
    the streams were replayed on, at the device WAF the table reports (the zoned device's 1)."""
    streams = {r: out / f"{'zoned' if r == 'zoned@ftl' else r}.swapio.parquet" for r in rows}
    cfg = swap_drive("tiny")
    for name, row in rows.items():
        step_us, slowdown = naive_timing.mean_step_us(
            streams[name], timing.device_from_ssd(cfg, waf=row["device_waf"]), compute_us)
        # the reference sums the same terms in another order: a few hundred terms of ~1e3 us, 1e-12 relative
        assert row["step_time_ms"] * 1e3 == pytest.approx(step_us, rel=1e-12), name
        assert row["step_time_ms"] * 1e3 >= compute_us
        if compute_us:
            # docs/timing.md: slowdown = sum(step) / sum(C), C the given compute of every step
            assert row["slowdown"] == pytest.approx(slowdown, rel=1e-12) and row["slowdown"] >= 1.0
            assert row["slowdown"] == pytest.approx(row["step_time_ms"] * 1e3 / compute_us, rel=1e-12)
        else:
            assert row["slowdown"] is None
    # the drive's GC spared: the zoned stream is no slower on the zoned device than on the conventional one
    assert rows["zoned"]["step_time_ms"] <= rows["zoned@ftl"]["step_time_ms"] * (1 + 1e-9)


def test_designs_bad_option_is_one_line_exit_2(traces, tmp_path):
    r = CliRunner().invoke(cli, ["designs", str(traces / "default.parquet"), "--memory-fraction", "0.3",
                                 "--segment-size", "1000", "--device", "none", "-o", str(tmp_path / "d")])
    assert r.exit_code == 2 and "multiple of the page size" in r.output


def test_designs_fio_replays_each_stream_on_a_file(traces, tmp_path):
    from conftest import require_fio

    require_fio()
    out = tmp_path / "d"
    r = CliRunner().invoke(cli, ["designs", str(traces / "default.parquet"), "--memory-fraction", "0.3",
                                 "--segment-size", "64KiB", "--zone-size", "256KiB", "--device", "none",
                                 "--fio-target", str(tmp_path / "t.dat"), "--fio-size", "64MiB", "--fio-runtime", "1",
                                 "--fio-requests", "3000", "--fio-repeats", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    rows = {row["design"]: row for row in pq.read_table(out / "designs.parquet").to_pylist()}
    steps = {row["fio_steps"] for row in rows.values()}
    assert len(steps) == 1 and steps.pop() >= 1  # every design replays the same training steps
    assert rows["linux"]["disk_time_gain"] == 1.0
    assert rows["zoned@ftl"]["disk_s"] == rows["zoned"]["disk_s"]
    assert (out / "fio" / "log" / "run-2" / "results.parquet").exists()


def test_designs_refuses_a_block_device_target(traces, tmp_path):
    r = CliRunner().invoke(cli, ["designs", str(traces / "default.parquet"), "--memory-fraction", "0.3",
                                 "--device", "none", "--fio-target", "/dev/sda", "-o", str(tmp_path / "d")])
    assert r.exit_code == 2 and "file target only" in r.output


def test_report_shows_the_designs_of_its_folder(traces, tmp_path):
    from swaptrace.pipeline.report import build_report

    r = CliRunner().invoke(cli, ["designs", str(traces / "default.parquet"), "--memory-fraction", "0.3",
                                 "--segment-size", "64KiB", "--zone-size", "256KiB", "--device", "tiny",
                                 "-o", str(tmp_path / "designs-30")])
    assert r.exit_code == 0, r.output
    rep = build_report(tmp_path)
    text = rep.path.read_text()
    assert "## Linux swap vs the fixes" in text and "### designs-30" in text and "| zoned |" in text
    assert (rep.path.parent / "designs-30-device-time.png").exists()
    # no --step-compute-us: step time is paging time alone, and no slowdown is defined
    rows = {row["design"]: row for row in pq.read_table(tmp_path / "designs-30" / "designs.parquet").to_pylist()}
    check_step_times(tmp_path / "designs-30", rows, 0.0)
    assert rows["linux"]["step_time_ms"] > 0


def test_run_designs_stage(tmp_path):
    from swaptrace.pipeline.run import PipelineOptions, run_pipeline

    # nvme-tlc resized to 8 GiB: the stage's wiring as on the full 512 GiB drive, in a fraction of the time
    small = 8 << 30
    opts = PipelineOptions(preset="tiny", steps=3, memory_fraction=0.3, fio=False, thesis=False, designs=True,
                           ssd_capacity_bytes=small)
    first = run_pipeline(opts, tmp_path)
    assert "designs" in first.ran
    assert "## Linux swap vs the fixes" in (tmp_path / "report" / "report.md").read_text()
    again = run_pipeline(opts, tmp_path)
    assert "designs" not in again.ran  # unchanged inputs and parameters: skipped
    off = run_pipeline(PipelineOptions(preset="tiny", steps=3, memory_fraction=0.3, fio=False, thesis=False,
                                       ssd_capacity_bytes=small), tmp_path / "off")
    assert "designs" in off.skipped and not (tmp_path / "off" / "designs").exists()


def test_designs_replay_on_the_pipelines_drive_state():
    from swaptrace.ssd.steady import Background
    from swaptrace.ssd.swapdrive import BACKGROUND as SSD_BACKGROUND

    # compare._device replays on Background(); the pipeline on Background(**SSD_BACKGROUND): one state
    assert Background(**SSD_BACKGROUND) == Background()
