"""The whole pipeline on the `tiny` preset, end to end, and the report's figures."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from swaptrace.cli import cli
from swaptrace.core.traceio import open_trace
from swaptrace.pipeline import filenames as S

pytestmark = pytest.mark.slow

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One pipeline run shared by the tests below (fio on a small file when fio exists).

    The drive is nvme-tlc resized to 8 GiB: the same stages and wiring as the full 512 GiB drive (which
    tests/test_ssd_steady.py and tests/test_ssd_thesis_real.py cover), in seconds instead of minutes.
    """
    folder = tmp_path_factory.mktemp("pipeline") / "tiny"
    target = folder.parent / "fio-target.dat"
    args = ["run", "--preset", "tiny", "--steps", "20", "-o", str(folder), "--ssd-capacity", "8GiB"]
    if shutil.which("fio") is None:
        args.append("--no-fio")  # the fio options go only with fio (with --no-fio they are refused as unread)
    else:
        args += ["--fio-target", str(target), "--fio-size", "32MiB", "--fio-runtime", "1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return folder, result


def test_every_stage_output_exists_with_its_kind(tiny_run):
    folder, _ = tiny_run
    assert open_trace(folder / S.ACCESS).kind == "access"
    assert open_trace(folder / S.SWAPIO).kind == "swapio"
    assert open_trace(folder / S.SSD).kind == "ssd-timeline"
    header = (folder / S.MRC_CSV).read_text().splitlines()[0]
    assert header.startswith("memory_bytes,pages,miss_ratio")
    thesis = json.loads((folder / S.THESIS).read_text())
    assert thesis["request_size_gain"] > 1 and thesis["sequential_write_gain"] > 1
    if shutil.which("fio") is not None:
        assert (folder / S.FIO_JOBS / "manifest.json").exists()
        assert open_trace(folder / S.FIO_RUN / "results.parquet").kind == "fio-results"
    manifest = json.loads((folder / "pipeline.json").read_text())
    assert {"generate", "mrc", "emulate", "ssd", "report"} <= set(manifest)


def test_report_has_every_figure_as_png(tiny_run):
    folder, _ = tiny_run
    report = folder / S.REPORT
    text = (report / "report.md").read_text()
    expected = ["rank_frequency", "mrc", "request_sizes", "swap_traffic", "ssd_bandwidth", "ssd_waf",
                "bandwidth_vs_request_size"]
    if shutil.which("fio") is not None:
        expected.append("fio_bandwidth_vs_written")
    for name in expected:
        png = report / f"{name}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC, name
        assert f"({name}.png)" in text, name
    assert "share < 32 KiB" in text


def test_rerun_skips_unchanged_stages_and_redoes_changed_ones(tiny_run, tmp_path):
    folder = tmp_path / "tiny"  # a copy: the other tests read the fixture's run as it was made
    shutil.copytree(tiny_run[0], folder)
    runner = CliRunner()
    base = ["run", "--preset", "tiny", "--steps", "20", "-o", str(folder), "--no-fio", "--ssd-capacity", "8GiB"]
    again = runner.invoke(cli, base)
    assert again.exit_code == 0, again.output
    assert "generate: up to date" in again.output and "emulate: up to date" in again.output
    changed = runner.invoke(cli, base + ["--memory-fraction", "0.3"])
    assert changed.exit_code == 0, changed.output
    assert "generate: up to date" in changed.output
    assert "emulate: done" in changed.output
    assert open_trace(folder / S.SWAPIO).meta["memory_bytes"] < open_trace(folder / S.ACCESS).meta["footprint_bytes"] * 0.31
    if shutil.which("fio") is None:
        return
    # the fio stages were left out of these reruns: their earlier outputs are kept, byte for byte, and
    # listed as skipped, and the report (of a new swap stream) leaves them out rather than show them
    for name in (S.FIO_RUN, S.MODEL_VS_FIO, S.FITTED_DEVICE):
        assert "an earlier run's" in changed.output and name in changed.output
    assert (folder / S.MODEL_VS_FIO).read_bytes() == (tiny_run[0] / S.MODEL_VS_FIO).read_bytes()
    manifest = json.loads((folder / "pipeline.json").read_text())
    assert manifest["model-vs-fio"]["skipped"] == "--no-fio"
    assert set(manifest["model-vs-fio"]["outputs"]) == {S.FITTED_DEVICE, S.MODEL_VS_FIO}
    text = (folder / S.REPORT / "report.md").read_text()
    assert "against fio on the same stream" not in text and "fio_bandwidth_vs_written.png" not in text
    assert "an earlier run's, left out" in text


@pytest.mark.parametrize(
    "args",
    [["--preset", "no-such-model"], ["--steps", "-3"], ["--memory", "1GiB", "--memory-fraction", "0.5"],
     ["--memory", "lots"]],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args):
    result = CliRunner().invoke(cli, ["run", "-o", str(tmp_path / "x"), "--no-fio", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


# not marked `fio`, which would put it in make test's serial pass (tests/conftest.py) with a second pipeline run
# of its own (a minute, most of it fio's): it reads the run `tiny_run` already made with fio for the tests above,
# and checks the folder against itself, so fio's numbers need no quiet machine
def test_model_vs_fio_stage_fits_the_fio_run_and_replays_the_stream_on_it(tiny_run):
    """The model-vs-fio stage (issue 31): a device fitted to the fio run, the stream replayed on it as fio did.

    Checked against what the folder holds, recomputed here: fio's numbers from the run's rows, the
    model's from a replay of the stream on the written device with the options fio's jobs had
    (depth 1, sequential fill, offsets wrapped), and the report's section naming each job and its time.
    """
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    from swaptrace.fio.results import read_results
    from swaptrace.ssd.config import load_device
    from swaptrace.ssd.run import replay

    folder, _ = tiny_run
    data = json.loads((folder / S.MODEL_VS_FIO).read_text())
    assert "error" not in data, data.get("error")
    cfg = load_device(str(folder / S.FITTED_DEVICE))
    # the fitted drive is the fio target: 32 MiB, up to one row of blocks more (the spare is kept exact)
    row = cfg.dies * cfg.pages_per_block * cfg.page_bytes
    assert 32 << 20 <= cfg.user_bytes + cfg.map_bytes and cfg.user_bytes <= (32 << 20) + row
    rows, _ = read_results(folder / S.FIO_RUN)
    by_job = {r["job"]: r for r in data["replays"]}
    assert set(by_job) == {"replay", "replay_no_stall"}
    for job, timed in (("replay_no_stall", False), ("replay", True)):
        mine = [r for r in rows if r["job"] == job]
        runtime_s = max(r["runtime_ms"] for r in mine) / 1e3
        q = {x["quantity"]: x for x in by_job[job]["quantities"]}
        for r in mine:
            assert q[f"{r['direction']} MB/s"]["measured"] == pytest.approx(r["io_bytes"] / 1e6 / runtime_s)
        s = replay(folder / S.SWAPIO, cfg, iodepth=1, use_timestamps=timed, precondition="seq", fit="modulo").summary
        assert q["write MB/s"]["model"] == pytest.approx(s["write_mb_s"])
        assert q["run time, s"]["model"] == pytest.approx(s["simulated_time_us"] / 1e6)
        for x in q.values():
            if x["error"] is not None:
                assert x["error"] == pytest.approx(x["model"] / x["measured"] - 1.0)
    text = (folder / S.REPORT / "report.md").read_text()
    assert "against fio on the same stream" in text
    for j in data["jobs"]:
        assert f"| {j['job']} | {j['group']} | {j['runtime_s']:.2f} |" in text
